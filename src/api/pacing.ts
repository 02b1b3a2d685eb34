/**
 * A client's own pace under the service's rate limit: requests leave at most `perSecond` a second, with a burst of a
 * tenth of a second's worth, in the order they asked, however late the process's timers fire. For code that calls the
 * service outside a rate-limited task queue (a script's bulk reads), and for a worker's own client at the service's
 * rate (the plugin's `serviceRate`): the queue's limit on the Temporal server spaces all workers' calls together, which
 * one process's pace cannot, and the pace keeps what one worker's held event loop bunched from leaving at once.
 */

/** The longest timeout Node keeps (2^31 - 1 ms). */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** One request waiting for its turn. */
interface Turn {
  go: () => void;
  stop: (reason: unknown) => void;
  signal?: AbortSignal;
  onAbort?: () => void;
}

/**
 * Requests' turns at `perSecond` a second: a token bucket holding `burst` (at least 1), full at the start.
 *
 * @example
 * const pace = new RequestPace(20); // burst 2
 * await pace.turn(signal); // then send
 */
export class RequestPace {
  readonly perSecond: number;
  readonly burst: number;
  #tokens: number;
  #at: number;
  readonly #waiting: Turn[] = [];
  #timer: NodeJS.Timeout | undefined;
  /** Told once no request waits (idle()). */
  #onIdle: Array<() => void> = [];

  constructor(
    perSecond: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    if (!(Number.isFinite(perSecond) && perSecond > 0))
      throw new RangeError(`requestsPerSecond: must be a positive number, got ${String(perSecond)}`);
    this.perSecond = perSecond;
    this.burst = Math.max(1, Math.ceil(perSecond / 10));
    this.#tokens = this.burst;
    this.#at = this.now();
  }

  /** Requests waiting for their turn. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /** Resolves once no request waits its turn (at once when none does): a client closing lets them go first. */
  idle(): Promise<void> {
    if (this.#waiting.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.#onIdle.push(resolve));
  }

  /**
   * Resolves when this request may leave; rejects with the signal's reason if it is aborted first (it then takes no
   * turn).
   */
  turn(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    this.#refill();
    if (this.#waiting.length === 0 && this.#tokens >= 1) {
      this.#tokens -= 1;
      return Promise.resolve();
    }
    return new Promise<void>((go, stop) => {
      const turn: Turn = { go, stop, signal };
      if (signal) {
        turn.onAbort = () => {
          const i = this.#waiting.indexOf(turn);
          if (i !== -1) this.#waiting.splice(i, 1);
          stop(signal.reason);
          // The last one gone: no timer left to hold the process, and a closing client hears it.
          if (this.#waiting.length === 0) {
            clearTimeout(this.#timer);
            this.#timer = undefined;
            this.#idle();
          }
        };
        signal.addEventListener('abort', turn.onAbort, { once: true });
      }
      this.#waiting.push(turn);
      this.#schedule();
    });
  }

  #refill(): void {
    const now = this.now();
    this.#tokens = Math.min(this.burst, this.#tokens + ((now - this.#at) / 1000) * this.perSecond);
    this.#at = now;
  }

  #schedule(): void {
    if (this.#timer !== undefined || this.#waiting.length === 0) return;
    const ms = Math.max(0, ((1 - this.#tokens) / this.perSecond) * 1000);
    // Node fires a longer timeout at once: a rate below one in 24.8 days waits in steps of the longest.
    this.#timer = setTimeout(() => this.#release(), Math.min(Math.ceil(ms), MAX_TIMEOUT_MS));
  }

  #release(): void {
    this.#timer = undefined;
    this.#refill();
    // However late the timer fired, the bucket holds at most `burst`: no more leave at once.
    while (this.#waiting.length > 0 && this.#tokens >= 1) {
      this.#tokens -= 1;
      const turn = this.#waiting.shift()!;
      if (turn.onAbort) turn.signal!.removeEventListener('abort', turn.onAbort);
      turn.go();
    }
    if (this.#waiting.length === 0) this.#idle();
    this.#schedule();
  }

  #idle(): void {
    const told = this.#onIdle;
    this.#onIdle = [];
    for (const resolve of told) resolve();
  }
}
