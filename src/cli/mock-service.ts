/**
 * `tuneflow mock-service`: runs the mock service in the foreground, logging requests briefly, until SIGINT or
 * SIGTERM. Its first line of output is `listening on http://HOST:PORT`, for scripts that start it and wait.
 */
import { readPort } from '../config';
import { durationToMs, type Duration } from '../duration';
import { ExitCode, exitCodeForStop, parseFlags, portProblem, runCommand, UsageError } from './command-line';
import { listenForStop } from './stop-signal';
import { startMockService } from '../mock-service';

export const MOCK_SERVICE_USAGE = `Usage: tuneflow mock-service [flags]

Runs an in-memory mock of the fine-tuning service (tunes, prompts, packs, callbacks) until Ctrl-C (exit 130)
or SIGTERM (exit 0).

Flags:
  --port N                 port to listen on; 0 picks a free one (default 0)
  --host H                 interface to listen on (default 127.0.0.1)
  --training-time D        how long a tune trains, e.g. '30s' or '2 minutes' (default 2s)
  --inference-time D       how long a prompt takes once its tune is trained (default 1s)
  --idempotency on|off     the accounts' idempotency setting (default off)
  --api-key KEY            accept only this key (repeatable); by default every key is its own account
  --rate-limit N           the service's rate limit: at most N requests a second per API key, 429 with
                           Retry-After above it (default none; POST /__mock/faults {"rateLimitPerSecond": N}
                           changes it)
  --help                   show this help
`;

/** Where the command writes; tests pass their own streams and abort signal. */
export interface MockServiceCommandIO {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  /** Stops the service like SIGINT/SIGTERM do. */
  signal?: AbortSignal;
}

function readFlags(argv: string[]) {
  const { values } = parseFlags({
    args: argv,
    options: {
      port: { type: 'string' },
      host: { type: 'string' },
      'training-time': { type: 'string' },
      'inference-time': { type: 'string' },
      idempotency: { type: 'string' },
      'api-key': { type: 'string', multiple: true },
      'rate-limit': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const port = values.port === undefined ? 0 : readPort(values.port, '--port');
  const duration = (flag: 'training-time' | 'inference-time') => {
    const value = values[flag];
    if (value === undefined) return undefined;
    try {
      durationToMs(value, `--${flag}`);
    } catch (error) {
      throw new UsageError((error as Error).message);
    }
    return value;
  };
  const idempotency = values.idempotency ?? 'off';
  if (idempotency !== 'on' && idempotency !== 'off')
    throw new UsageError(`--idempotency: must be on or off (got ${JSON.stringify(idempotency)})`);
  if (values.host !== undefined && values.host.trim() === '') throw new UsageError('--host: must not be empty');
  const rateLimit = values['rate-limit'];
  if (rateLimit !== undefined && !(/^\d+(\.\d+)?$/.test(rateLimit) && Number(rateLimit) > 0))
    throw new UsageError(
      `--rate-limit: must be a positive number of requests per second (got ${JSON.stringify(rateLimit)})`,
    );
  return {
    help: values.help ?? false,
    port,
    host: values.host ?? '127.0.0.1',
    trainingTime: duration('training-time'),
    inferenceTime: duration('inference-time'),
    idempotency: idempotency === 'on',
    apiKeys: values['api-key'],
    rateLimitPerSecond: rateLimit === undefined ? undefined : Number(rateLimit),
  };
}

/**
 * Runs the mock service until SIGINT/SIGTERM (or `io.signal`); resolves with the exit code: 130 after Ctrl-C, 0
 * after SIGTERM or `io.signal`.
 * @example process.exitCode = await mockServiceCommand(['--port', '8080', '--training-time', '10s']);
 */
export async function mockServiceCommand(
  argv: string[],
  io: MockServiceCommandIO = { stdout: process.stdout, stderr: process.stderr },
): Promise<number> {
  return runCommand('mock-service', { ...io, env: process.env }, async () => {
    const flags = readFlags(argv);
    if (flags.help) {
      io.stdout.write(MOCK_SERVICE_USAGE);
      return ExitCode.ok;
    }

    let mock;
    try {
      mock = await startMockService({
        port: flags.port,
        host: flags.host,
        // Checked by durationToMs above.
        trainingTime: flags.trainingTime as Duration | undefined,
        inferenceTime: flags.inferenceTime as Duration | undefined,
        idempotency: flags.idempotency,
        apiKeys: flags.apiKeys,
        faults: flags.rateLimitPerSecond === undefined ? undefined : { rateLimitPerSecond: flags.rateLimitPerSecond },
        log: (line) => io.stdout.write(`${line}\n`),
      });
    } catch (error) {
      // A taken or forbidden port: exit 2, naming the flag.
      const problem = portProblem(error, '--port', `${flags.host}:${flags.port}`);
      if (problem) throw problem;
      io.stderr.write(`tuneflow mock-service: could not start: ${(error as Error).message}\n`);
      return ExitCode.failed;
    }
    const stop = listenForStop(io.signal);
    io.stdout.write(`listening on ${mock.url}\n`);
    const stoppedBy = await stop.stopped;
    await mock.close();
    io.stdout.write('stopped\n');
    return exitCodeForStop(stoppedBy);
  });
}
