/**
 * The exit codes of every command, and the two ways a signal ends one: the one table (the README lists it). No
 * imports: `tuneflow --help` reads it without loading Temporal.
 */

/** Exit codes of every command (documented in the README). */
export const ExitCode = {
  ok: 0,
  /** The job failed, was cancelled or terminated, or something unexpected broke. */
  failed: 1,
  /** A wrong flag, bad input or a missing setting: nothing was started. */
  usage: 2,
  /** Temporal or the service could not be reached. */
  unavailable: 3,
  /** No workflow with that ID. */
  notFound: 4,
  /** The run was cancelled (followed with --wait). */
  cancelled: 5,
  /** Stopped by Ctrl-C (SIGINT), after cleaning up: 128 + 2, as shells (and npx) report it. */
  interrupted: 130,
  /** Its output was closed (`| head`), after cleaning up: 128 + 13, as a shell reports a writer killed by SIGPIPE. */
  outputClosed: 141,
  /** Stopped by SIGTERM, after cleaning up: 128 + 15. */
  terminated: 143,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/**
 * The exit code of a server or worker that ran until told to stop, and stopped cleanly: 130 after Ctrl-C (SIGINT),
 * as a shell reports an interrupted command, and as npx reports a Ctrl-C whatever its command does (npm's shell
 * dies of the same Ctrl-C); 0 after SIGTERM, a service manager's stop (docker stop, systemd, Kubernetes), or after
 * the AbortSignal tests stop commands in process with.
 *
 * @example return exitCodeForStop(await stop.stopped); // 130 after Ctrl-C
 */
export function exitCodeForStop(stoppedBy: NodeJS.Signals | 'abort'): ExitCode {
  return stoppedBy === 'SIGINT' ? ExitCode.interrupted : ExitCode.ok;
}

/**
 * The exit code of a command stopped before its work was done (a run followed, a demo): 130 after Ctrl-C (SIGINT),
 * 143 after SIGTERM, 141 when its output was closed, as a shell reports a command a signal ended.
 *
 * @example return exitCodeForInterrupt(following.signal.reason); // 143 after SIGTERM
 */
export function exitCodeForInterrupt(signal: NodeJS.Signals | 'abort'): ExitCode {
  if (signal === 'SIGPIPE') return ExitCode.outputClosed;
  return signal === 'SIGTERM' ? ExitCode.terminated : ExitCode.interrupted;
}
