/**
 * `tuneflow <command> [flags]`: a table of commands, each `(argv) => Promise<exit code>`. Adding a command is one
 * row in COMMANDS. Each command's module loads only when it runs, so `--help` does not load Temporal's worker.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ExitCode } from './exit-codes';
import { toleratePipeClosed } from './stop-signal';

interface Command {
  /** One line for the list of commands. */
  summary: string;
  run(argv: string[]): Promise<number>;
}

const COMMANDS: Record<string, Command> = {
  demo: {
    summary: 'train a tune and generate images through a durable workflow, all in this process',
    run: async (argv) => (await import('./demo')).demoCommand(argv),
  },
  worker: {
    summary: 'run the production worker: workflows, activities and the callback receiver',
    run: async (argv) => (await import('./worker')).workerCommand(argv),
  },
  callbacks: {
    summary: 'run the callback receiver alone (callbacks -> workflow signals)',
    run: async (argv) => (await import('./callbacks')).callbacksCommand(argv),
  },
  start: {
    summary: 'start a train-then-generate run (--wait to follow it)',
    run: async (argv) => (await import('./start')).startCommand(argv),
  },
  status: {
    summary: "show a run's status, progress and result",
    run: async (argv) => (await import('./status')).statusCommand(argv),
  },
  cancel: {
    summary: 'cancel a run',
    run: async (argv) => (await import('./status')).cancelCommand(argv),
  },
  packs: {
    summary: "list the service's packs and their classes",
    run: async (argv) => (await import('./packs')).packsCommand(argv),
  },
  schema: {
    summary: "print the JSON Schema of a workflow's input, for callers in any language",
    run: async (argv) => (await import('./schema')).schemaCommand(argv),
  },
  'search-attributes': {
    summary: "register tuneflow's search attributes in the namespace, so runs can be found by phase, tune and cost",
    run: async (argv) => (await import('./search-attributes')).searchAttributesCommand(argv),
  },
  'queue-limits': {
    summary: "the service's rate held by the server for every worker on the task queue, and each tenant's share",
    run: async (argv) => (await import('./queue-limits')).queueLimitsCommand(argv),
  },
  spend: {
    summary: "a tenant's spend in its budget's window: the ceiling, committed and reserved",
    run: async (argv) => (await import('./spend')).spendCommand(argv),
  },
  images: {
    summary:
      "check a job's or a tenant's stored images against their digests; list (or --copy) those only at the service",
    run: async (argv) => (await import('./images')).imagesCommand(argv),
  },
  replay: {
    summary: "before a deploy: replay the namespace's recent runs the new build would take, and name any that break",
    run: async (argv) => (await import('./replay')).replayCommand(argv),
  },
  'codec-server': {
    summary: 'decode the activity payloads a worker stores compressed, for the Web UI and `temporal --codec-endpoint`',
    run: async (argv) => (await import('./codec-server')).codecServerCommand(argv),
  },
  'dev-server': {
    summary: 'run a Temporal dev server with its Web UI (localhost:7233, UI on :8233), for a worker of your own',
    run: async (argv) => (await import('./dev-server')).devServerCommand(argv),
  },
  'mock-service': {
    summary: 'run an in-memory mock of the fine-tuning service (callbacks, faults)',
    run: async (argv) => (await import('./mock-service')).mockServiceCommand(argv),
  },
};

function commandList(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((name) => name.length));
  const rows = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`);
  return `Usage: tuneflow <command> [flags]\n\nCommands:\n${rows.join('\n')}\n\nRun 'tuneflow <command> --help' for its flags; 'tuneflow --version' for the version.\n`;
}

/** `tuneflow 0.1.0 (tuneflow-temporal)`: from the package's manifest, beside lib/ and src/ alike. */
function version(): string {
  const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8')) as {
    name: string;
    version: string;
  };
  return `tuneflow ${manifest.version} (${manifest.name})\n`;
}

/**
 * Runs the command named by argv[0]; resolves with the process exit code.
 * @example process.exitCode = await main(process.argv.slice(2));
 */
export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(commandList());
    return ExitCode.ok;
  }
  if (name === '--version' || name === '-V') {
    process.stdout.write(version());
    return ExitCode.ok;
  }
  if (name === undefined) {
    process.stderr.write(commandList());
    return ExitCode.usage;
  }
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!command) {
    const known = Object.keys(COMMANDS).join(', ');
    process.stderr.write(`tuneflow: unknown command '${name}' (known: ${known}; see tuneflow --help)\n`);
    return ExitCode.usage;
  }
  return command.run(rest);
}

/** The `tuneflow` executable (bin/tuneflow.js) and `node lib/cli/index.js`. */
export function run(): void {
  toleratePipeClosed(process.stdout);
  toleratePipeClosed(process.stderr);
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      process.stderr.write(`tuneflow: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exitCode = ExitCode.failed;
    },
  );
}

if (require.main === module) run();
