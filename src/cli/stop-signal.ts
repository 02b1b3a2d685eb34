/**
 * How the foreground commands (`mock-service`, `callbacks`) wait to be stopped. They listen for SIGINT/SIGTERM
 * before they print their first line: a script may signal as soon as it reads that line, and a signal that comes
 * before any listener kills the process instead of stopping it cleanly.
 */

export interface StopSignal {
  /** Resolves with what stopped the command: a signal's name, or 'abort' for the AbortSignal. */
  readonly stopped: Promise<NodeJS.Signals | 'abort'>;
  /** Stops listening (for a command that ends without being stopped). */
  dispose(): void;
}

/**
 * Starts listening for SIGINT, SIGTERM and, when given, an AbortSignal (tests stop commands in process with one).
 *
 * @example
 * const stop = listenForStop();
 * process.stdout.write('listening on ...\n');
 * await stop.stopped;
 */
export function listenForStop(abort?: AbortSignal): StopSignal {
  let dispose = () => {};
  const stopped = new Promise<NodeJS.Signals | 'abort'>((resolve) => {
    const onSignal = (name: NodeJS.Signals) => {
      dispose();
      resolve(name);
    };
    const onAbort = () => {
      dispose();
      resolve('abort');
    };
    dispose = () => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      abort?.removeEventListener('abort', onAbort);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    if (abort?.aborted) onAbort();
    else abort?.addEventListener('abort', onAbort);
  });
  return { stopped, dispose: () => dispose() };
}
