/**
 * `tuneflow codec-server`: the codec server (src/codec/server.ts) until SIGINT or SIGTERM, so the Web UI and
 * `temporal workflow show --codec-endpoint` show the activity payloads a worker stores compressed
 * (TUNEFLOW_COMPRESS_PAYLOADS=on).
 */
import { ConfigError, readPort } from '../config';
import { DEFAULT_CODEC_PORT, DEFAULT_CORS_ORIGINS, startCodecServer } from '../codec/server';
import { ExitCode, exitCodeForStop, parseFlags, portProblem, runCommand, type CommandIO } from './command-line';
import { listenForStop } from './stop-signal';

const USAGE = `Usage: tuneflow codec-server [--port N] [--host H] [--cors-origin URL]... [--help]

Decodes the activity payloads a tuneflow worker stores compressed (TUNEFLOW_COMPRESS_PAYLOADS=on), for the Web UI
(its codec endpoint setting, or TEMPORAL_CODEC_ENDPOINT) and the CLI:
  temporal workflow show --workflow-id <id> --codec-endpoint http://127.0.0.1:${DEFAULT_CODEC_PORT}
POST /decode and /encode take and answer { "payloads": [...] } (Temporal's remote codec protocol); every payload it did
not compress comes back as it went.

Options:
  --port N          port to listen on (default ${DEFAULT_CODEC_PORT}; 0 picks a free one)
  --host H          address to bind (default 127.0.0.1)
  --cors-origin URL an origin whose pages may call it, the Web UI's address; again for more, * for any
                    (default ${DEFAULT_CORS_ORIGINS.join(' and ')}: the dev server's UI)
  --help            show this help
`;

/**
 * Runs the codec server until SIGINT or SIGTERM; resolves to the exit code (130 Ctrl-C, 0 SIGTERM, 2 a bad flag or
 * a taken port).
 *
 * @example
 * process.exitCode = await codecServerCommand(['--port', '8888']);
 */
export async function codecServerCommand(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const io: CommandIO = { stdout: process.stdout, stderr: process.stderr, env };
  return runCommand('codec-server', io, () => serve(argv, io));
}

async function serve(argv: string[], { stdout }: CommandIO): Promise<ExitCode> {
  const { values } = parseFlags({
    args: argv,
    options: {
      port: { type: 'string' },
      host: { type: 'string' },
      'cors-origin': { type: 'string', multiple: true },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    stdout.write(USAGE);
    return ExitCode.ok;
  }
  const port = values.port === undefined ? DEFAULT_CODEC_PORT : readPort(values.port, '--port');
  const host = values.host ?? '127.0.0.1';
  if (!host.trim()) throw new ConfigError('--host', 'must be an address to bind, such as 127.0.0.1 or 0.0.0.0');
  const corsOrigins = values['cors-origin'] ?? DEFAULT_CORS_ORIGINS;
  for (const origin of corsOrigins) {
    if (origin !== '*' && !isOrigin(origin))
      throw new ConfigError('--cors-origin', `must be an origin such as http://localhost:8233, or * (got ${origin})`);
  }
  const stop = listenForStop();
  let server: Awaited<ReturnType<typeof startCodecServer>>;
  try {
    server = await startCodecServer({ port, host, corsOrigins });
  } catch (err) {
    stop.dispose();
    throw portProblem(err, '--port', `${host}:${port}`) ?? err;
  }
  stdout.write(`codec server listening on ${server.url} (CORS for ${corsOrigins.join(', ')})\n`);
  const signal = await stop.stopped;
  await server.close();
  return exitCodeForStop(signal);
}

/** An origin as a browser sends it: scheme, host and port, nothing after. */
function isOrigin(value: string): boolean {
  try {
    const url = new URL(value);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.origin === value;
  } catch {
    return false;
  }
}
