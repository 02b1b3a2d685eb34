/**
 * What every `tuneflow` command shares: exit codes scripts can rely on, usage errors that say what to fix, and the
 * Temporal connection from the standard environment.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { CancelledFailure, Client, Connection, TerminatedFailure, WorkflowFailedError } from '@temporalio/client';
import { ErrorKind, InvalidInputError, TunesError } from '../api/errors';
import { ConfigError, loadTemporalConfig, temporalAddressOf } from '../config';
import { ExitCode } from './exit-codes';

export { portProblem, portTaken } from '../config';
export { ExitCode, exitCodeForInterrupt, exitCodeForStop } from './exit-codes';

/** A mistake in how the command was called. */
export class UsageError extends Error {
  override name = 'UsageError';
}

export interface CommandIO {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  env: NodeJS.ProcessEnv;
}

export const processIO = (): CommandIO => ({ stdout: process.stdout, stderr: process.stderr, env: process.env });

/** parseArgs (strict unless told otherwise), with its errors turned into UsageErrors that name the flag. */
export function parseFlags<T extends ParseArgsConfig>(config: T): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (err) {
    throw new UsageError((err as Error).message.replace(/\. To specify a positional.*$/s, ''));
  }
}

/**
 * Runs a command body and turns what it throws into a message on stderr and an exit code: every command's one way.
 * `usage` is printed after a UsageError so the fix is on screen; `usageOnError: 'hint'` points at --help instead, for
 * a service's command whose one-line errors go to a log.
 */
export async function runCommand(
  name: string,
  usage: string,
  io: CommandIO,
  body: () => Promise<ExitCode>,
  { usageOnError = 'usage' }: { usageOnError?: 'usage' | 'hint' } = {},
): Promise<ExitCode> {
  try {
    return await body();
  } catch (err) {
    const say = (line: string) => io.stderr.write(`tuneflow ${name}: ${line}\n`);
    if (err instanceof UsageError && usageOnError === 'hint') {
      say(`${err.message} (see tuneflow ${name} --help)`);
      return ExitCode.usage;
    }
    if (err instanceof UsageError) {
      say(err.message);
      io.stderr.write(`\n${usage}`);
      return ExitCode.usage;
    }
    if (err instanceof ConfigError || err instanceof InvalidInputError) {
      say(err.message);
      return ExitCode.usage;
    }
    if (err instanceof TunesError && (err.kind === ErrorKind.connection || err.kind === ErrorKind.timeout)) {
      // The message names the request and the service's origin: `GET /packs could not reach the service at ...`.
      say(`${err.message}. Check TUNEFLOW_API_URL.`);
      return ExitCode.unavailable;
    }
    if (err instanceof TunesError && err.kind === ErrorKind.unauthorized) {
      // The message says the key was refused and names TUNEFLOW_API_KEY (never the key).
      say(err.message);
      return ExitCode.usage;
    }
    if (err instanceof WorkflowFailedError && err.cause instanceof CancelledFailure) {
      say('the run was cancelled');
      return ExitCode.cancelled;
    }
    if (err instanceof WorkflowFailedError) {
      say(`the run ${err.cause instanceof TerminatedFailure ? 'was terminated' : 'failed'}: ${describeFailure(err)}`);
      return ExitCode.failed;
    }
    if (isUnavailable(err)) {
      say(unreachableTemporal(io.env, err));
      return ExitCode.unavailable;
    }
    if ((err as Error)?.name === 'WorkflowNotFoundError') {
      say((err as Error).message);
      return ExitCode.notFound;
    }
    say(err instanceof Error ? err.message : String(err));
    return ExitCode.failed;
  }
}

/** A Temporal that did not answer: gRPC UNAVAILABLE or DEADLINE_EXCEEDED, or a failed first connect. */
export function isUnavailable(err: unknown): boolean {
  const e = err as { name?: string; code?: number; message?: string } | undefined;
  if (!e) return false;
  // gRPC UNAVAILABLE (14) and DEADLINE_EXCEEDED (4), or a failed first connect.
  return (
    e.name === 'TransportError' ||
    e.code === 14 ||
    e.code === 4 ||
    /Failed to connect|UNAVAILABLE|ECONNREFUSED|connect timeout/i.test(e.message ?? '')
  );
}

/**
 * One line for a Temporal that does not answer: where it was looked for, the variable that says so, and how to get one.
 * @example unreachableTemporal({}, err) // "cannot reach Temporal at localhost:7233 (TEMPORAL_ADDRESS unset): ..."
 */
export function unreachableTemporal(env: NodeJS.ProcessEnv, err: unknown): string {
  const named = temporalAddressOf(env).address;
  const address = named ? `${named} (TEMPORAL_ADDRESS)` : 'localhost:7233 (TEMPORAL_ADDRESS unset)';
  const message = (err as Error)?.message ?? String(err);
  // The core's transport errors wrap the reason in Rust debug output: `... message: "Connection refused" }`.
  const why = (/(?:message|error): "([^"]+)"/.exec(message)?.[1] ?? message.split('\n')[0]).replace(/\.$/, '');
  return `cannot reach Temporal at ${address}: ${why}. Start one with \`tuneflow dev-server\`, or set TEMPORAL_ADDRESS.`;
}

/** A Temporal client from TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TLS and API key variables (or the profile file). */
export async function connectTemporal(env: NodeJS.ProcessEnv): Promise<{ client: Client; close(): Promise<void> }> {
  const { connectionOptions, namespace } = loadTemporalConfig(env);
  const connection = await Connection.connect({
    ...(connectionOptions as Parameters<typeof Connection.connect>[0]),
    connectTimeout: '5 seconds',
  });
  return { client: new Client({ connection, namespace }), close: () => connection.close() };
}

/**
 * The chain of causes of a failed run, down to the typed error the workflow raised (TuneNeverTrained, Validation...),
 * each message once: a workflow that fails with its activity's failure repeats that message.
 */
export function describeFailure(err: unknown): string {
  if (!(err instanceof WorkflowFailedError)) return err instanceof Error ? err.message : String(err);
  let cause: unknown = err.cause;
  const chain: string[] = [];
  const said = new Set<string>();
  while (cause instanceof Error) {
    const type = (cause as { type?: string }).type;
    // The SDK's wrappers ("Activity task failed") say nothing their cause does not.
    if (
      cause.message &&
      !said.has(cause.message) &&
      !/^(Activity task|Child Workflow execution) failed$/.test(cause.message)
    ) {
      said.add(cause.message);
      chain.push(type ? `${type}: ${cause.message}` : cause.message);
    }
    cause = cause.cause;
  }
  return chain.join(' <- ') || err.message;
}
