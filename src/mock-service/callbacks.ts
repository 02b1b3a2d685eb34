/**
 * Callbacks as the service sends them: a POST of the entity JSON (flat) to the URL as given, query string and all;
 * never retried; failures only logged and counted. Faults may drop, repeat or delay them.
 */
import { Agent, request } from 'undici';
import type { Clock } from './clock';
import type { FaultInjector } from './faults';
import type { Journal } from './journal';

/** What happened to callbacks so far. */
export interface CallbackStats {
  /** POSTs made (a duplicated callback counts twice). */
  sent: number;
  /** Callbacks sent twice by the `callbackDuplicateRate` fault. */
  duplicated: number;
  /** Callbacks never sent, by the `callbackDropRate` fault. */
  dropped: number;
  /** POSTs that failed: no answer, or a status of 400 or more. Never retried. */
  failed: number;
}

/** A short timeout: a receiver that hangs must not hold the mock's resources. */
const CALLBACK_TIMEOUT_MS = 5_000;

export class CallbackSender {
  readonly stats: CallbackStats = { sent: 0, duplicated: 0, dropped: 0, failed: 0 };
  private readonly agent = new Agent({
    connectTimeout: CALLBACK_TIMEOUT_MS,
    headersTimeout: CALLBACK_TIMEOUT_MS,
    bodyTimeout: CALLBACK_TIMEOUT_MS,
  });
  private closed = false;

  constructor(
    private readonly clock: Clock,
    private readonly faults: FaultInjector,
    private readonly log: (line: string) => void,
    /** How bodies are rendered (the answer style). */
    private readonly render: (body: unknown) => unknown = (body) => body,
    private readonly journal?: Journal,
  ) {}

  /**
   * Sends `body` to `url` now (or after `callbackDelayMs`), unless a fault drops it.
   * @example callbacks.send(tune.callback, renderTune(store.baseUrl, tune));
   */
  send(url: string, body: unknown): void {
    if (this.closed) return;
    if (this.faults.chance('callbackDropRate')) {
      this.stats.dropped++;
      this.log(`callback to ${describe(url)} dropped (fault)`);
      return;
    }
    const times = this.faults.chance('callbackDuplicateRate') ? 2 : 1;
    if (times === 2) this.stats.duplicated++;
    // The body is taken now: a callback reports the object as it was when the event happened.
    const payload = JSON.stringify(this.render(body));
    const delay = this.faults.current.callbackDelayMs ?? 0;
    const jitter = this.faults.current.callbackJitterMs ?? 0;
    for (let i = 0; i < times; i++) {
      // Each copy draws its own jitter: callbacks arrive out of order, a duplicate well after the first.
      const wait = delay + (jitter > 0 ? Math.floor(this.faults.random() * jitter) : 0);
      if (wait > 0) this.clock.after(wait, () => this.post(url, payload, body));
      else this.post(url, payload, body);
    }
  }

  private post(url: string, payload: string, body: unknown): void {
    if (this.closed) return;
    this.stats.sent++;
    const entry = this.journal?.callbackSent(url, body);
    request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': 'tuneflow-mock-service' },
      body: payload,
      dispatcher: this.agent,
    }).then(
      async (res) => {
        entry?.answered(res.statusCode);
        await res.body.dump();
        if (res.statusCode >= 400) {
          this.stats.failed++;
          this.log(`callback to ${describe(url)} answered ${res.statusCode} (not retried)`);
        }
      },
      (error: unknown) => {
        if (this.closed) return;
        this.stats.failed++;
        const reason = error instanceof Error ? error.message : String(error);
        entry?.failed(reason);
        this.log(`callback to ${describe(url)} failed: ${reason} (not retried)`);
      },
    );
  }

  /**
   * Stops sending and closes the connections to receivers.
   * @example await callbacks.close();
   */
  async close(): Promise<void> {
    this.closed = true;
    await this.agent.destroy();
  }
}

/** Origin and path only: the query string may carry the receiver's secret. */
function describe(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`;
  } catch {
    return 'an invalid URL';
  }
}
