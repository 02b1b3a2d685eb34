/**
 * The mock's simulated time runs on real timers. Every timer goes through one Clock so that `close()` can clear
 * them all and a closed mock never keeps a process (or jest) alive.
 */
export class Clock {
  private readonly timers = new Set<NodeJS.Timeout>();
  private stopped = false;

  /** Milliseconds since the epoch. */
  now(): number {
    return Date.now();
  }

  /**
   * Runs `fn` after `ms` milliseconds unless the clock is stopped first.
   * @example clock.after(200, () => settle(prompt));
   */
  after(ms: number, fn: () => void): NodeJS.Timeout | undefined {
    if (this.stopped) return undefined;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      fn();
    }, ms);
    this.timers.add(timer);
    return timer;
  }

  /**
   * Cancels one timer (a deleted tune's training, a deleted prompt's inference).
   * @example clock.cancel(tune.timer);
   */
  cancel(timer: NodeJS.Timeout | undefined): void {
    if (timer === undefined) return;
    clearTimeout(timer);
    this.timers.delete(timer);
  }

  /**
   * Clears every pending timer and refuses new ones.
   * @example clock.stop();
   */
  stop(): void {
    this.stopped = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
  }

  /** How many timers are pending (tests check that close() leaves none). */
  get pending(): number {
    return this.timers.size;
  }
}

/** ISO 8601 UTC with milliseconds, as the service writes timestamps. */
export function isoTime(ms: number): string {
  return new Date(ms).toISOString();
}
