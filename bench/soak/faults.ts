/**
 * Injects a soak run's fault profiles: the mock's own faults (status answers, callbacks lost, repeated, late, tunes
 * that never train), and the harness's: worker processes SIGKILLed, the dev server stopped and started again, the
 * receiver's Temporal connection cut, forged callbacks sent to the receiver.
 */
import { request } from 'undici';
import { CallbackSigner } from '../../src/callbacks/signing';
import type { Faults, MockService } from '../../src/mock-service';
import { CallbackKind } from '../../src/workflows/messages';
import type { ProfileName } from './options';

/** What the harness lets the faults act on. */
export interface FaultTargets {
  mock: MockService;
  /** SIGKILLs one worker and starts a new one in its place. */
  killWorker(): Promise<void>;
  /** Stops the dev server, waits `downMs`, starts it again on its state file; undefined when the server is not ours. */
  restartServer?: (downMs: number) => Promise<void>;
  /** Cuts the receiver's Temporal connection until `restore`. */
  cutReceiver(): void;
  restoreReceiver(): void;
  receiverUrl: string;
  secret: string;
  workflowIds: () => string[];
}

/** Faults injected so far. */
export interface FaultCounts {
  status: number;
  workerKills: number;
  serverRestarts: number;
  receiverCuts: number;
  forgedSent: number;
  /** Forged callbacks the receiver answered 2xx: must stay 0. */
  forgedAccepted: number;
}

/**
 * 500s and 429s come in bursts: every request in a short window fails, the window taking a share of each period.
 * A retry comes at least 30 s later (the service's backoff) and the period is chosen so that it never lands in the
 * next burst of the same kind: as with a real outage, a burst costs one backoff, not a chain of doubling ones.
 */
const BURST_500 = { everyMs: 13_000, share: 0.2 };
const STORM_429 = { everyMs: 17_000, share: 0.2 };
const KILL_EVERY_MS = 30_000;

/**
 * In `all`, status faults (500 bursts, 429 storms, 504s) come in the first minute only. The service's backoff doubles
 * with every failed attempt of the same call (30 s, 60 s, 120 s, ...), and mixed faults (a 500, then a worker killed
 * under the retry, then a 429) can chain into minutes; a window bounds that chain at 90 s, so a job that is still open
 * at the deadline means a bug, not bad luck.
 */
const ALL_STATUS_WINDOW_MS = 60_000;

/** Which bursts are on right now. */
export interface Bursts {
  status500: boolean;
  status429: boolean;
  /** False once `all`'s status window is over. */
  statusWindow: boolean;
}

/** The mock's faults for the profiles in force; `all` takes lighter rates so the mix stays a soak, not an outage. */
export function mockFaults(profiles: readonly ProfileName[], bursts: Bursts): Faults {
  const all = profiles.length > 1;
  const has = (p: ProfileName) => profiles.includes(p);
  const faults: Faults = {};
  const rate504 = has('status-504') && bursts.statusWindow ? (all ? 0.05 : 0.2) : 0;
  if (rate504) Object.assign(faults, { status504Rate: rate504, status504DelayMs: 1_000 });
  // Inside a burst every request not picked for a 504 fails; two bursts at once share the rest.
  const in500 = has('status-500') && bursts.status500 && bursts.statusWindow;
  const in429 = has('status-429') && bursts.status429 && bursts.statusWindow;
  const rest = 1 - rate504;
  if (in500) faults.status500Rate = in429 ? rest / 2 : rest;
  if (in429) faults.status429Rate = in500 ? rest / 2 : rest;
  if (has('callbacks-lost')) faults.callbackDropRate = all ? 0.3 : 1;
  if (has('callbacks-disordered'))
    Object.assign(faults, { callbackDuplicateRate: all ? 0.3 : 0.5, callbackDelayMs: 500, callbackJitterMs: 5_500 });
  if (has('never-train')) faults.neverTrainRate = all ? 0.1 : 0.2;
  return faults;
}

/**
 * Runs the profiles until `stop()`.
 *
 * @example
 * const injector = new FaultInjection(['worker-kill'], targets, log); injector.start(); ...; await injector.stop();
 */
export class FaultInjection {
  readonly counts: FaultCounts = {
    status: 0,
    workerKills: 0,
    serverRestarts: 0,
    receiverCuts: 0,
    forgedSent: 0,
    forgedAccepted: 0,
  };
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly running = new Set<Promise<unknown>>();
  private stopped = false;
  private readonly bursts: Bursts = { status500: false, status429: false, statusWindow: true };
  private readonly signer: CallbackSigner;

  constructor(
    private readonly profiles: readonly ProfileName[],
    private readonly targets: FaultTargets,
    private readonly log: (line: string) => void,
  ) {
    this.signer = new CallbackSigner({ baseUrl: targets.receiverUrl, secret: targets.secret });
  }

  private has(profile: ProfileName): boolean {
    return this.profiles.includes(profile);
  }

  private get all(): boolean {
    return this.profiles.length > 1;
  }

  /** Status faults injected, including those counted by the mock since its faults were last set. */
  get statusFaults(): number {
    return this.counts.status + this.targets.mock.stats().faults.injected;
  }

  private setMockFaults(): void {
    this.counts.status += this.targets.mock.stats().faults.injected;
    this.targets.mock.setFaults(mockFaults(this.profiles, this.bursts));
  }

  private at(ms: number, action: () => Promise<void> | void): void {
    this.timers.push(setTimeout(() => this.track(action), ms));
  }

  private every(ms: number, firstMs: number, action: () => Promise<void> | void): void {
    this.at(firstMs, () => {
      this.timers.push(setInterval(() => this.track(action), ms));
      return action();
    });
  }

  private track(action: () => Promise<void> | void): void {
    if (this.stopped) return;
    const done = Promise.resolve()
      .then(action)
      .catch((err: unknown) => this.log(`fault injection failed: ${(err as Error).message}`))
      .finally(() => this.running.delete(done));
    this.running.add(done);
  }

  start(): void {
    this.setMockFaults();
    // In `all` the bursts are shorter (5 % of requests each), so the mix stays a soak.
    const scale = this.all ? 0.25 : 1;
    if (this.has('status-500')) this.burst('status500', BURST_500.everyMs, BURST_500.everyMs * BURST_500.share * scale);
    if (this.has('status-429')) this.burst('status429', STORM_429.everyMs, STORM_429.everyMs * STORM_429.share * scale);
    if (this.all)
      this.at(ALL_STATUS_WINDOW_MS, () => {
        this.bursts.statusWindow = false;
        this.setMockFaults();
      });
    if (this.has('worker-kill'))
      this.every(KILL_EVERY_MS, 15_000, async () => {
        this.counts.workerKills++;
        await this.targets.killWorker();
      });
    if (this.has('server-restart') && this.targets.restartServer)
      this.at(this.all ? 40_000 : 20_000, async () => {
        this.counts.serverRestarts++;
        await this.targets.restartServer!(10_000);
      });
    if (this.has('receiver-cut'))
      this.at(this.all ? 60_000 : 15_000, async () => {
        this.counts.receiverCuts++;
        this.targets.cutReceiver();
        await new Promise((resolve) => setTimeout(resolve, 20_000));
        this.targets.restoreReceiver();
      });
    if (this.has('forged-callbacks')) {
      const perTick = this.all ? 4 : 20;
      this.every(200, 200, () => {
        for (let i = 0; i < perTick; i++) this.track(() => this.forge());
      });
    }
  }

  private burst(kind: 'status500' | 'status429', everyMs: number, forMs: number): void {
    this.every(everyMs, 1_000, async () => {
      this.bursts[kind] = true;
      this.setMockFaults();
      await new Promise((resolve) => setTimeout(resolve, forMs));
      this.bursts[kind] = false;
      if (!this.stopped) this.setMockFaults();
    });
  }

  /** One forged callback: a made-up signature, none, or a real one of another workflow or kind (a replay). */
  private async forge(): Promise<void> {
    const ids = this.targets.workflowIds();
    if (ids.length === 0) return;
    const n = this.counts.forgedSent++;
    const victim = ids[n % ids.length];
    // Another workflow's ID: the next job's, or a made-up one while only one job has started (a URL signed for the
    // victim itself would be a genuine callback, not a forgery).
    const next = ids[(n + 1) % ids.length];
    const other = next === victim ? `${victim}-other` : next;
    const body = JSON.stringify({ id: 1, title: victim, trained_at: new Date().toISOString(), images: [] });
    let url: string;
    switch (n % 4) {
      case 0:
        url = `${this.targets.receiverUrl}/callbacks/tune?workflowId=${encodeURIComponent(victim)}&sig=${'ab'.repeat(32)}`;
        break;
      case 1:
        url = `${this.targets.receiverUrl}/callbacks/tune?workflowId=${encodeURIComponent(victim)}`;
        break;
      case 2: {
        // Signed for another workflow, sent with the victim's ID.
        const signed = new URL(this.signer.url(CallbackKind.tune, other));
        signed.searchParams.set('workflowId', victim);
        url = signed.toString();
        break;
      }
      default: {
        // Signed for the victim's prompt callbacks, replayed at the tune route.
        const signed = new URL(this.signer.url(CallbackKind.prompt, victim));
        url = `${this.targets.receiverUrl}/callbacks/tune${signed.search}`;
      }
    }
    try {
      const res = await request(url, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
      await res.body.dump();
      if (res.statusCode < 300) {
        this.counts.forgedAccepted++;
        this.log(`a forged callback was accepted: ${res.statusCode}`);
      }
    } catch {
      // The receiver may be busy or restarting: a forgery that got no answer did no harm.
    }
  }

  /** Stops injecting and undoes what lasts: the mock's faults, a cut connection. Waits for actions under way. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers) clearTimeout(timer);
    await Promise.all([...this.running]);
    this.counts.status += this.targets.mock.stats().faults.injected;
    this.targets.mock.setFaults({});
    this.targets.restoreReceiver();
  }
}
