/**
 * What every `tuneflow` command shares: exit codes scripts can rely on, usage errors that say what to fix, and the
 * Temporal connection from the standard environment.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { CancelledFailure, Client, Connection, TerminatedFailure, WorkflowFailedError } from '@temporalio/client';
import { ErrorKind, InvalidInputError, TunesError, type InputIssue } from '../api/errors';
import { ConfigError, loadTemporalConfig, temporalAddressOf } from '../config';
import { durationToMs } from '../duration';
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

/** What a command says when it fails: one line on stderr, or with `--json` this object (`{ "error": ... }`). */
export interface CommandError {
  /** The command (`status`, `start`...). */
  command: string;
  exitCode: ExitCode;
  /** What went wrong, in a word a script can branch on. */
  kind: 'usage' | 'input' | 'setting' | 'unreachable' | 'not-found' | 'cancelled' | 'failed' | 'unexpected';
  /** The line a person reads (the same words as without `--json`). */
  message: string;
  /** The variable or flag at fault (kind `setting`). */
  setting?: string;
  /** Each field at fault and its rule (kind `input`). */
  issues?: readonly InputIssue[];
  /** The run's failure type, the innermost typed one (kind `failed`): `TuneNeverTrained`, `OverBudget`... */
  failure?: string;
}

/** A duration flag (`2m`, '90 seconds'), or `fallback` when absent. */
export function durationFlag(flag: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  try {
    const ms = durationToMs(value, flag);
    if (ms > 0) return ms;
  } catch {
    // said below
  }
  throw new UsageError(`${flag}: must be a duration such as '2m' or '90 seconds' (got ${JSON.stringify(value)})`);
}

/**
 * Runs a command body and turns what it throws into one line on stderr (or, with `json`, one JSON object) and an exit
 * code: every command's one way. A wrong flag gets its line and a pointer to --help, not the whole usage.
 *
 * @example
 * return runCommand('status', io, async () => { ... return ExitCode.ok; }, { json: argv.includes('--json') });
 */
export async function runCommand(
  name: string,
  io: CommandIO,
  body: () => Promise<ExitCode>,
  { json = false }: { json?: boolean } = {},
): Promise<ExitCode> {
  try {
    return await body();
  } catch (err) {
    const error = commandError(name, err, io.env);
    io.stderr.write(json ? `${JSON.stringify({ error })}\n` : `tuneflow ${name}: ${error.message}\n`);
    return error.exitCode;
  }
}

/**
 * What a command's error means: its exit code (the README's table), its kind and its one line.
 * @example commandError('status', new ConfigError('TEMPORAL_ADDRESS', 'must be host:port'), {}).exitCode // 2
 */
export function commandError(command: string, err: unknown, env: NodeJS.ProcessEnv): CommandError {
  const error = (exitCode: ExitCode, kind: CommandError['kind'], message: string, more: Partial<CommandError> = {}) =>
    ({ command, exitCode, kind, message, ...more }) satisfies CommandError;
  if (err instanceof UsageError)
    return error(ExitCode.usage, 'usage', `${err.message} (see tuneflow ${command} --help)`);
  if (err instanceof ExitError) return error(err.exitCode, err.kind, err.message, err.more);
  const setting = temporalSettingError(err, env);
  if (setting) return error(ExitCode.usage, 'setting', setting.message, { setting: setting.variable });
  if (err instanceof ConfigError) return error(ExitCode.usage, 'setting', err.message, { setting: err.variable });
  if (err instanceof InvalidInputError)
    return error(ExitCode.usage, 'input', err.message, {
      issues: err.issues.map(({ field, rule }) => ({ field, rule })),
    });
  if (err instanceof TunesError && (err.kind === ErrorKind.connection || err.kind === ErrorKind.timeout))
    // The message names the request and the service's origin: `GET /packs could not reach the service at ...`.
    return error(ExitCode.unavailable, 'unreachable', `${err.message}. Check TUNEFLOW_API_URL.`, {
      setting: 'TUNEFLOW_API_URL',
    });
  if (err instanceof TunesError && err.kind === ErrorKind.unauthorized)
    // The message says the key was refused and names TUNEFLOW_API_KEY (never the key).
    return error(ExitCode.usage, 'setting', err.message, { setting: 'TUNEFLOW_API_KEY' });
  if (err instanceof WorkflowFailedError && err.cause instanceof CancelledFailure)
    return error(ExitCode.cancelled, 'cancelled', 'the run was cancelled');
  if (err instanceof WorkflowFailedError) {
    const how = err.cause instanceof TerminatedFailure ? 'was terminated' : 'failed';
    const failure = failureTypeOf(err);
    return error(ExitCode.failed, 'failed', `the run ${how}: ${describeFailure(err)}`, failure ? { failure } : {});
  }
  if (isUnavailable(err))
    return error(ExitCode.unavailable, 'unreachable', unreachableTemporal(env, err), { setting: 'TEMPORAL_ADDRESS' });
  if ((err as Error)?.name === 'WorkflowNotFoundError')
    return error(ExitCode.notFound, 'not-found', (err as Error).message);
  return error(ExitCode.failed, 'unexpected', err instanceof Error ? err.message : String(err));
}

/**
 * An error a command throws with its exit code already decided (the service unreachable while a run is followed).
 * @example throw new ExitError(ExitCode.unavailable, 'unreachable', 'the service ... : stopped following')
 */
export class ExitError extends Error {
  override name = 'ExitError';
  constructor(
    readonly exitCode: ExitCode,
    readonly kind: CommandError['kind'],
    message: string,
    readonly more: Partial<CommandError> = {},
  ) {
    super(message);
  }
}

/**
 * A Temporal setting the server or the SDK refused: an address the SDK cannot parse, or a namespace the server does
 * not have. Named by its variable (exit 2), not taken for an unreachable server.
 */
function temporalSettingError(err: unknown, env: NodeJS.ProcessEnv): ConfigError | undefined {
  const e = err as { name?: string; code?: number; message?: string } | undefined;
  const message = e?.message ?? '';
  const { address, namespace } = temporalAddressOf(env);
  if (/Invalid address for Temporal gRPC endpoint|Could not parse target name/.test(message))
    return new ConfigError('TEMPORAL_ADDRESS', `must be host:port, such as localhost:7233 (${message.split('\n')[0]})`);
  if (e?.name === 'NamespaceNotFoundError' || /Namespace (not found|\S+ is not found)/i.test(message))
    return new ConfigError(
      'TEMPORAL_NAMESPACE',
      `Temporal at ${address ?? 'localhost:7233'} has no namespace ${namespace}: create it ` +
        `(temporal operator namespace create --namespace ${namespace}), or set TEMPORAL_NAMESPACE to one it has`,
    );
  return undefined;
}

/** The innermost failure type in a failed run's chain (`TuneNeverTrained`, `OverBudget`...), if it has one. */
function failureTypeOf(err: unknown): string | undefined {
  let type: string | undefined;
  for (let at = (err as Error).cause; at instanceof Error; at = at.cause) type = (at as { type?: string }).type ?? type;
  return type;
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
