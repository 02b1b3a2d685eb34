/**
 * How the foreground commands (`mock-service`, `callbacks`, `dev-server`, `worker`, `demo`, `start --wait`) wait to
 * be stopped. They listen for SIGINT/SIGTERM before they print their first line: a script may signal as soon as it
 * reads that line, and a signal that comes before any listener kills the process instead of stopping it cleanly.
 * The commands whose output is the point (`demo`, `start --wait`) also stop when that output is closed
 * (`| head -2`): Node ignores SIGPIPE, so a closed pipe shows as EPIPE on the next write.
 */

/**
 * How long after the signal that stops a command a repeat of SIGINT or SIGTERM is taken for the same stop. Under
 * npx one Ctrl-C comes twice, milliseconds apart: the terminal sends it to the whole process group, tuneflow
 * included, and npm forwards its own copy to its child. Where npm's shell hands its place to tuneflow (bash as
 * `sh`, as on macOS), that copy reached a tuneflow with no listener left and killed it halfway through stopping.
 * After the window a signal does what Node does by default: a second Ctrl-C ends a stop that hangs.
 */
export const REPEAT_WINDOW_MS = 1000;

const STOP_SIGNALS = ['SIGINT', 'SIGTERM'] as const;

/** Ignores SIGINT and SIGTERM for REPEAT_WINDOW_MS (the timer does not keep the process up). */
function absorbRepeats(): void {
  const ignore = () => {};
  for (const signal of STOP_SIGNALS) process.on(signal, ignore);
  setTimeout(() => {
    for (const signal of STOP_SIGNALS) process.off(signal, ignore);
  }, REPEAT_WINDOW_MS).unref();
}

export interface StopSignal {
  /**
   * Resolves with what stopped the command: a signal's name, 'SIGPIPE' for the output closed, or 'abort' for the
   * AbortSignal.
   */
  readonly stopped: Promise<NodeJS.Signals | 'abort'>;
  /** Stops listening (for a command that ends without being stopped). */
  dispose(): void;
}

/**
 * Starts listening for SIGINT, SIGTERM and, when given, an AbortSignal (tests stop commands in process with one) and
 * the command's `output` closed under it. The first signal stops the command; a repeat within REPEAT_WINDOW_MS is the
 * same stop.
 *
 * @example
 * const stop = listenForStop(undefined, { output: process.stdout });
 * process.stdout.write('listening on ...\n');
 * await stop.stopped;
 */
export function listenForStop(abort?: AbortSignal, { output }: { output?: NodeJS.WritableStream } = {}): StopSignal {
  let dispose = () => {};
  const stopped = new Promise<NodeJS.Signals | 'abort'>((resolve) => {
    const onSignal = (name: NodeJS.Signals) => {
      // Before this listener goes: with none at all for a moment, Node restores the default, which kills.
      absorbRepeats();
      dispose();
      resolve(name);
    };
    const onAbort = () => {
      dispose();
      resolve('abort');
    };
    const onOutputError = (err: NodeJS.ErrnoException) => {
      if (!isClosedOutput(err)) return;
      dispose();
      resolve('SIGPIPE');
    };
    dispose = () => {
      for (const signal of STOP_SIGNALS) process.off(signal, onSignal);
      abort?.removeEventListener('abort', onAbort);
      output?.off('error', onOutputError);
    };
    for (const signal of STOP_SIGNALS) process.on(signal, onSignal);
    output?.on('error', onOutputError);
    if (abort?.aborted) onAbort();
    else abort?.addEventListener('abort', onAbort);
  });
  return { stopped, dispose: () => dispose() };
}

/** An output whose reader went away (`| head`): EPIPE, or a write after the stream was destroyed by it. */
export function isClosedOutput(err: NodeJS.ErrnoException | undefined): boolean {
  return err?.code === 'EPIPE' || err?.code === 'ERR_STREAM_DESTROYED';
}

/**
 * Keeps a closed output from crashing the process: Node throws an unhandled 'error' event for a write to a pipe whose
 * reader is gone. Each command then ends as it would have (the demo and `start --wait` stop, see listenForStop); any
 * other error still throws.
 */
export function toleratePipeClosed(stream: NodeJS.WritableStream): void {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (!isClosedOutput(err)) throw err;
  });
}
