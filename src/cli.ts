/**
 * `tuneflow <command> [flags]`: a table of commands, each `(argv) => Promise<exit code>`. Adding a command is one
 * row in COMMANDS.
 */
import { mockServiceCommand } from './mock-service/command';

interface Command {
  /** One line for the list of commands. */
  summary: string;
  run(argv: string[]): Promise<number>;
}

const COMMANDS: Record<string, Command> = {
  'mock-service': {
    summary: 'run an in-memory mock of the fine-tuning service (callbacks, faults)',
    run: (argv) => mockServiceCommand(argv),
  },
};

function commandList(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((name) => name.length));
  const rows = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`);
  return `Usage: tuneflow <command> [flags]\n\nCommands:\n${rows.join('\n')}\n\nRun 'tuneflow <command> --help' for its flags.\n`;
}

/**
 * Runs the command named by argv[0]; resolves with the process exit code.
 * @example process.exitCode = await main(process.argv.slice(2));
 */
export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(commandList());
    return 0;
  }
  if (name === undefined) {
    process.stderr.write(commandList());
    return 2;
  }
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!command) {
    process.stderr.write(`tuneflow: unknown command '${name}'\n\n${commandList()}`);
    return 2;
  }
  return command.run(rest);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`tuneflow: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  },
);
