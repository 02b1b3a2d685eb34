/**
 * Injects a soak run's fault profiles: the mock's own faults (status answers, callbacks lost, repeated, late, tunes
 * that never train), and the harness's: worker processes SIGKILLed, the dev server stopped and started again, the
 * receiver's Temporal connection cut, forged callbacks sent to the receiver.
 *
 * Faults are counted where they land, not when they are meant: a status fault when the mock answered with it, a
 * tune that never trains when the mock made one, a restart once the server was down and is back with the harness's
 * client on the new process, a receiver cut when a callback was refused during it, a forgery when the receiver got
 * it. The process faults are timed by the run's progress (once half the jobs started, while runs wait; a cut while a
 * callback is due), so a short run sees each of them too.
 */
import { request } from 'undici';
import { CallbackSigner } from '../../src/callbacks/signing';
import type { Faults, HeldCallback, InjectedByKind, MockService } from '../../src/mock-service';
import { CallbackKind } from '../../src/contract/messages';
import type { SoakJob } from './jobs';
import { FORGED_DATA_MARK } from './judge';
import type { ProfileName } from './options';

/** How far the run is. */
export interface RunProgress {
  total: number;
  started: number;
  closed: number;
}

/** What the harness lets the faults act on. */
export interface FaultTargets {
  mock: MockService;
  /** SIGKILLs one worker and starts a new one in its place. */
  killWorker(): Promise<void>;
  /**
   * Stops the dev server, waits `downMs`, starts it again on its state file and resolves once the harness's client
   * is answered by the new process; undefined when the server is not ours.
   */
  restartServer?: (downMs: number) => Promise<void>;
  /** Cuts the receiver's Temporal connection until `restore`. */
  cutReceiver(): void;
  restoreReceiver(): void;
  receiverUrl: string;
  secret: string;
  workflowIds: () => string[];
  /** The callback URLs the service holds for the jobs' objects: where a signed URL leaks. */
  heldCallbacks: () => HeldCallback[];
  progress: () => RunProgress;
}

/** Faults that took effect so far. */
export interface FaultCounts {
  status500: number;
  status429: number;
  status504: number;
  /** Tunes the mock made that will never train. */
  neverTrain: number;
  workerKills: number;
  /** Restarts after which the server was back and answering. */
  serverRestarts: number;
  /** Cuts during which at least one callback was refused. */
  receiverCuts: number;
  /**
   * Requests the mock answered 429 because they were over its rate limit (--service-limit), not a profile's; only
   * with a limit, so a run without one reports no fault that never had a chance to happen.
   */
  rateLimited?: number;
}

/**
 * Forged callbacks. With a made-up or replayed signature: those that reached the receiver, those it answered, those it
 * answered 2xx (must stay 0). With a leaked valid URL (the receiver cannot tell them from the service's): those sent,
 * and those it woke a run with (harmless by design: the run reads what they name).
 */
export interface ForgeryCounts {
  sent: number;
  answered: number;
  accepted: number;
  leakedSent: number;
  leakedDelivered: number;
  /** The paced flood: wake-ups about training tunes, a changed body each, every 2.1 s per tune; those delivered. */
  pacedSent: number;
  pacedDelivered: number;
  /** Every id a leaked-URL forgery named, for the judge to tell its signals from the service's. */
  leakedIds: Set<number>;
}

/**
 * 500s and 429s come in bursts: every request in a short window fails, the window taking a share of each period.
 * A retry comes at least 30 s later (the service's backoff) and the period is chosen so that it never lands in the
 * next burst of the same kind: as with a real outage, a burst costs one backoff, not a chain of doubling ones. A
 * burst lasts until it hit at least one request (at most BURST_MAX_MS), so none passes unnoticed.
 */
const BURST_500 = { everyMs: 13_000, share: 0.2 };
const STORM_429 = { everyMs: 17_000, share: 0.2 };
const BURST_MAX_MS = 5_000;

/** How long the process faults last and how often they come. */
export interface FaultTiming {
  killEveryMs: number;
  restartDownMs: number;
  cutMs: number;
}
const TIMING: FaultTiming = { killEveryMs: 30_000, restartDownMs: 10_000, cutMs: 20_000 };
/** How often progress conditions are checked. */
const TICK_MS = 250;
/** The mock gives up on a callback after 5 s: by then every callback sent during a cut has its answer. */
const CALLBACK_SETTLE_MS = 6_000;

/**
 * In `all`, status faults (500 bursts, 429 storms, 504s) come in the first minute only. The service's backoff doubles
 * with every failed attempt of the same call (30 s, 60 s, 120 s, ...), and mixed faults (a 500, then a worker killed
 * under the retry, then a 429) can chain into minutes; a window bounds that chain, so a job that is still open at the
 * deadline means a bug, not bad luck. (A create hit twice in it, then a tune that never trains: about 190 s.)
 */
const ALL_STATUS_WINDOW_MS = 60_000;

/** Which bursts are on right now. */
export interface Bursts {
  status500: boolean;
  status429: boolean;
  /** False once `all`'s status window is over. */
  statusWindow: boolean;
  /** A 504 was answered already: `all` then takes its lighter rate (until then the first comes soon, in any run). */
  landed504?: boolean;
}

/**
 * The jobs whose tune never trains: every fifth job under `never-train` (a trainThenGenerate and a packTune in each
 * ten), one in ten trainThenGenerate jobs and one in twenty packTune jobs in `all`. Chosen by the harness, so it
 * knows which jobs may fail TuneNeverTrained; the mock's journal confirms which tunes did not train.
 *
 * @example
 * neverTrainIds(planJobs(runId, 20), ['never-train']); // jobs 3, 8, 13, 18
 */
export function neverTrainIds(jobs: readonly SoakJob[], profiles: readonly ProfileName[]): string[] {
  if (!profiles.includes('never-train')) return [];
  const all = profiles.length > 1;
  return jobs
    .filter((_, i) => (all ? i % 10 === 3 || i % 20 === 8 : i % 5 === 3))
    .filter((job) => job.kind !== 'generate')
    .map((job) => job.workflowId);
}

/** The mock's faults for the profiles in force; `all` takes lighter rates so the mix stays a soak, not an outage. */
export function mockFaults(profiles: readonly ProfileName[], bursts: Bursts, neverTrainTitles: string[] = []): Faults {
  const all = profiles.length > 1;
  const has = (p: ProfileName) => profiles.includes(p);
  const faults: Faults = {};
  const rate504 = has('status-504') && bursts.statusWindow ? (all && bursts.landed504 ? 0.05 : 0.2) : 0;
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
  if (neverTrainTitles.length) faults.neverTrainTitles = neverTrainTitles;
  return faults;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs the profiles until `stop()`.
 *
 * @example
 * const injector = new FaultInjection(['worker-kill'], targets, [], log); injector.start(); ...; await injector.stop();
 */
export class FaultInjection {
  private readonly taken = { workerKills: 0, serverRestarts: 0, receiverCuts: 0 };
  /** Status faults the mock counted before its faults were last set (it counts from each set). */
  private readonly statusBefore: InjectedByKind = { status500: 0, status429: 0, status504: 0, garbled: 0 };
  readonly forgeries: ForgeryCounts = {
    sent: 0,
    answered: 0,
    accepted: 0,
    leakedSent: 0,
    leakedDelivered: 0,
    pacedSent: 0,
    pacedDelivered: 0,
    leakedIds: new Set(),
  };
  private forgeriesMade = 0;
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly running = new Set<Promise<unknown>>();
  private stopped = false;
  private readonly bursts: Bursts = { status500: false, status429: false, statusWindow: true };
  private readonly signer: CallbackSigner;
  private readonly timing: FaultTiming;

  constructor(
    private readonly profiles: readonly ProfileName[],
    private readonly targets: FaultTargets,
    private readonly neverTrainTitles: string[],
    private readonly log: (line: string) => void,
    timing: Partial<FaultTiming> = {},
    /** Faults in force all along, whatever the profiles set meanwhile: the service's rate limit. */
    private readonly standing: Faults = {},
  ) {
    this.timing = { ...TIMING, ...timing };
    this.signer = new CallbackSigner({ baseUrl: targets.receiverUrl, secret: targets.secret });
  }

  private has(profile: ProfileName): boolean {
    return this.profiles.includes(profile);
  }

  private get all(): boolean {
    return this.profiles.length > 1;
  }

  /** Faults that took effect so far. */
  get counts(): FaultCounts {
    const status = this.statusInjected();
    return {
      status500: status.status500,
      status429: status.status429,
      status504: status.status504,
      neverTrain: this.targets.mock.journal().tunes.filter((t) => t.neverTrains).length,
      ...this.taken,
      ...(this.standing.rateLimitPerSecond !== undefined && { rateLimited: this.targets.mock.stats().rateLimited }),
    };
  }

  private statusInjected(): InjectedByKind {
    const now = this.targets.mock.stats().faults.byKind;
    return {
      status500: this.statusBefore.status500 + now.status500,
      status429: this.statusBefore.status429 + now.status429,
      status504: this.statusBefore.status504 + now.status504,
      garbled: this.statusBefore.garbled + now.garbled,
    };
  }

  private setMockFaults(faults = mockFaults(this.profiles, this.bursts, this.neverTrainTitles)): void {
    Object.assign(this.statusBefore, this.statusInjected());
    this.targets.mock.setFaults({ ...faults, ...this.standing });
  }

  /**
   * Keeps a timer for stop() to clear. An action still running when stop() came (a cut that ends early) may schedule
   * one after it: that one is cleared at once, or it would keep the process alive forever.
   */
  private keep(timer: NodeJS.Timeout): void {
    if (this.stopped) clearTimeout(timer);
    else this.timers.push(timer);
  }

  private at(ms: number, action: () => Promise<void> | void): void {
    this.keep(setTimeout(() => this.track(action), ms));
  }

  private every(ms: number, firstMs: number, action: () => Promise<void> | void): void {
    this.at(firstMs, () => {
      this.keep(setInterval(() => this.track(action), ms));
      return action();
    });
  }

  /** Runs `action` once, at the first tick where `ready()` holds. */
  private when(ready: () => boolean, action: () => Promise<void> | void): void {
    const timer = setInterval(() => {
      if (this.stopped || !ready()) return;
      clearInterval(timer);
      this.track(action);
    }, TICK_MS);
    this.keep(timer);
  }

  private track(action: () => Promise<void> | void): void {
    if (this.stopped) return;
    const done = Promise.resolve()
      .then(action)
      .catch((err: unknown) => this.log(`fault injection failed: ${(err as Error).message}`))
      .finally(() => this.running.delete(done));
    this.running.add(done);
  }

  /** Half the jobs started and some run is still waiting: a process fault now hits runs in flight. */
  private runsWaiting(): boolean {
    const { total, started, closed } = this.targets.progress();
    return started >= Math.ceil(total / 2) && started > closed;
  }

  /** The mock is about to send a callback: a tune is training, or a prompt on a trained tune is generating. */
  private callbackDue(): boolean {
    const journal = this.targets.mock.journal();
    const trained = new Set(journal.tunes.filter((t) => t.trainedAt !== null).map((t) => t.id));
    return (
      journal.tunes.some((t) => t.trainedAt === null && !t.neverTrains && t.deletedAt === null) ||
      journal.prompts.some((p) => p.settledAt === null && p.deletedAt === null && trained.has(p.tuneId))
    );
  }

  start(): void {
    this.setMockFaults();
    // In `all` the bursts are shorter (5 % of the time each), so the mix stays a soak.
    const scale = this.all ? 0.25 : 1;
    if (this.has('status-500')) this.burst('status500', BURST_500.everyMs, BURST_500.everyMs * BURST_500.share * scale);
    if (this.has('status-429')) this.burst('status429', STORM_429.everyMs, STORM_429.everyMs * STORM_429.share * scale);
    if (this.all) this.closeStatusWindow();
    if (this.has('worker-kill'))
      this.when(
        () => this.runsWaiting(),
        () => {
          this.every(this.timing.killEveryMs, this.timing.killEveryMs, () =>
            this.runsWaiting() ? this.killWorker() : undefined,
          );
          return this.killWorker();
        },
      );
    // In `all` the cut comes first and the restart after it, so a refused callback is the cut's, not the outage's.
    const cutting = this.has('receiver-cut');
    const restarting = this.has('server-restart') && this.targets.restartServer !== undefined;
    let cutDone = !cutting;
    let restartDone = !restarting;
    const cut = async (): Promise<void> => {
      let taken = false;
      try {
        taken = await this.cutReceiver();
      } finally {
        cutDone = true;
      }
      // A cut no callback came through (the due ones dropped, or late) proves nothing: cut again when callbacks are
      // due, after the restart in `all`, so a refused callback is still the cut's.
      if (!taken) this.when(() => restartDone && this.runsWaiting() && this.callbackDue(), cut);
    };
    if (cutting) this.when(() => this.runsWaiting() && this.callbackDue(), cut);
    if (restarting)
      this.when(
        () => (!this.all || cutDone) && this.runsWaiting(),
        async () => {
          try {
            await this.restartServer();
          } finally {
            restartDone = true;
          }
        },
      );
    if (this.has('forged-callbacks')) {
      const perTick = this.all ? 4 : 20;
      this.every(200, 200, () => {
        for (let i = 0; i < perTick; i++) this.track(() => this.forge());
      });
      // A paced flood: each tune the service will call back about gets a wake-up every 2.1 s, its body changed each
      // time (so the receiver coalesces none of them), for as long as the tune trains.
      this.every(2_100, 2_100, () => {
        for (const held of this.targets.heldCallbacks())
          if (held.kind === 'tune') this.track(() => this.forgePaced(held));
      });
    }
  }

  /** Ends `all`'s status window after a minute; lightens the 504s once the first landed. */
  private closeStatusWindow(): void {
    if (this.has('status-504'))
      this.when(
        () => this.statusInjected().status504 > 0,
        () => {
          this.bursts.landed504 = true;
          if (this.bursts.statusWindow) this.setMockFaults();
        },
      );
    this.at(ALL_STATUS_WINDOW_MS, () => {
      this.bursts.statusWindow = false;
      this.setMockFaults();
    });
  }

  private async killWorker(): Promise<void> {
    await this.targets.killWorker();
    this.taken.workerKills++;
  }

  private async restartServer(): Promise<void> {
    await this.targets.restartServer!(this.timing.restartDownMs);
    this.taken.serverRestarts++;
    this.log('fault: the dev server is back and answering');
  }

  /**
   * Cuts the receiver off Temporal: for `cutMs`, or in `all` until a callback failed during the cut. Counted, and
   * true, when a callback sent during the cut was refused (an error status, or no answer before the mock gave up).
   */
  private async cutReceiver(): Promise<boolean> {
    const { mock } = this.targets;
    const from = Date.now();
    this.targets.cutReceiver();
    const refused = (until: number) =>
      mock
        .journal()
        .callbacks.some(
          (c) => c.sentAt >= from && c.sentAt <= until && (c.failure !== null || (c.status ?? 200) >= 400),
        );
    const { cutMs } = this.timing;
    while (!this.stopped && Date.now() - from < cutMs && !(this.all && refused(Date.now()))) await sleep(TICK_MS);
    const to = Date.now();
    this.targets.restoreReceiver();
    this.log("fault: the receiver's Temporal connection is back");
    // Callbacks sent near the end of the cut get their answer (or none) within the mock's timeout.
    const settled = () =>
      mock.journal().callbacks.every((c) => c.sentAt > to || c.status !== null || c.failure !== null);
    for (const start = Date.now(); Date.now() - start < CALLBACK_SETTLE_MS && !settled(); ) await sleep(TICK_MS);
    if (refused(to)) {
      this.taken.receiverCuts++;
      return true;
    }
    this.log('fault: no callback came during the receiver cut; not counted, cut again when one is due');
    return false;
  }

  private burst(kind: 'status500' | 'status429', everyMs: number, forMs: number): void {
    this.every(everyMs, 1_000, async () => {
      if (!this.bursts.statusWindow) return;
      const before = this.statusInjected()[kind];
      this.bursts[kind] = true;
      this.setMockFaults();
      const start = Date.now();
      await sleep(forMs);
      while (!this.stopped && this.statusInjected()[kind] === before && Date.now() - start < BURST_MAX_MS)
        await sleep(100);
      this.bursts[kind] = false;
      if (!this.stopped) this.setMockFaults();
    });
  }

  /** Sends one forgery, every other one with a leaked valid URL, and counts what the receiver did with it. */
  private async forge(): Promise<void> {
    const n = this.forgeriesMade++;
    const held = n % 2 === 1 ? this.targets.heldCallbacks() : [];
    if (held.length > 0) return this.forgeWithLeakedUrl(n, held);
    const ids = this.targets.workflowIds();
    if (ids.length === 0) return;
    const { url, body } = forgery(n, ids, this.targets.receiverUrl, this.signer);
    try {
      const res = await request(url, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
      this.forgeries.sent++;
      this.forgeries.answered++;
      await res.body.dump();
      if (res.statusCode < 300) {
        this.forgeries.accepted++;
        this.log(`a forged callback was accepted: ${res.statusCode}`);
      }
    } catch (err) {
      // Refused connections never reached the receiver; anything else reached it and got no answer.
      const code = (err as { code?: string }).code;
      if (code !== 'ECONNREFUSED' && code !== 'UND_ERR_CONNECT_TIMEOUT') this.forgeries.sent++;
    }
  }

  private async forgeWithLeakedUrl(n: number, held: readonly HeldCallback[]): Promise<void> {
    const { url, body, ids } = leakedForgery(n, held);
    for (const id of ids) this.forgeries.leakedIds.add(id);
    try {
      const res = await request(url, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
      this.forgeries.leakedSent++;
      const answer = (await res.body.json().catch(() => ({}))) as { outcome?: string };
      if (answer.outcome === 'delivered') this.forgeries.leakedDelivered++;
    } catch {
      // The receiver may be down or cut: a forgery that got no answer did nothing.
    }
  }

  /** One wake-up of the paced flood: the tune not trained, a body no earlier one had. */
  private async forgePaced(held: HeldCallback): Promise<void> {
    const body = JSON.stringify({ id: held.id, trained_at: null, nonce: this.forgeriesMade++ });
    this.forgeries.leakedIds.add(held.id);
    try {
      const res = await request(held.url, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
      this.forgeries.pacedSent++;
      const answer = (await res.body.json().catch(() => ({}))) as { outcome?: string };
      if (answer.outcome === 'delivered') this.forgeries.pacedDelivered++;
    } catch {
      // The receiver may be down or cut: a forgery that got no answer did nothing.
    }
  }

  /** Stops injecting and undoes what lasts: the mock's faults, a cut connection. Waits for actions under way. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers) clearTimeout(timer);
    await Promise.all([...this.running]);
    Object.assign(this.statusBefore, this.statusInjected());
    this.targets.mock.setFaults({});
    this.targets.restoreReceiver();
  }
}

/** Built once: the harness's own work is not what a soak measures. */
let pathological: string[] | undefined;

/** Far in the future: a forged `updated_at` that would win every merge by date. */
const FAR_FUTURE = '2999-01-01T00:00:00.000Z';
const FORGED_URL = `https://${FORGED_DATA_MARK}`;

/**
 * The n-th forgery made with a URL the service holds (a leaked capability): the receiver takes it, the run wakes, and
 * nothing of the body may reach the run. Bodies per object are the same every time (a flood of one forged body is
 * what the receiver coalesces); they vary by kind of attack:
 * - a terminal state: a tune trained in the far future, for nothing, as a LoRA of another base tune, with a model URL;
 *   a prompt settled with an attacker's images, for nothing;
 * - an object the run did not create, in that state;
 * - the terminal state padded to 60 KB (a padded flood);
 * - pathological bodies: a pack list of 170,000 empty objects, 30,000 bad images, nesting 30,000 deep, 4 MB.
 */
export function leakedForgery(n: number, held: readonly HeldCallback[]): { url: string; body: string; ids: number[] } {
  const target = held[Math.floor(n / 2) % held.length];
  const foreign = 990_000_000 + (n % 1_000);
  const forged = (id: number) =>
    target.kind === 'tune'
      ? {
          id,
          trained_at: FAR_FUTURE,
          updated_at: FAR_FUTURE,
          cost_mc: 0,
          model_type: 'lora',
          base_tune_id: 1504944,
          ckpt_url: `${FORGED_URL}/model.safetensors`,
        }
      : { id, images: [`${FORGED_URL}/forged.jpg`], user_error: null, cost_mc: 0, updated_at: FAR_FUTURE };
  pathological ??= [
    `[${'{},'.repeat(170_000)}{}]`,
    JSON.stringify({ id: 1, images: Array(30_000).fill(5) }),
    `{"id": 1, "x": ${'['.repeat(30_000)}${']'.repeat(30_000)}}`,
    JSON.stringify({ id: 1, text: 'y'.repeat(4 << 20) }),
  ];
  const bodies = [
    () => JSON.stringify(forged(target.id)),
    () => JSON.stringify(forged(foreign)),
    () => JSON.stringify({ ...forged(target.id), padding: 'p'.repeat(60_000) }),
    ...(pathological as string[]).map((body) => () => body),
  ];
  const which = Math.floor(n / 2 / Math.max(1, held.length)) % bodies.length;
  return { url: target.url, body: bodies[which](), ids: which === 1 ? [foreign] : which > 2 ? [1] : [target.id] };
}

/** A run ID no job has: forgeries signed for it are refused by the signature, whatever the run. */
const MADE_UP_RUN_ID = '00000000-0000-4000-8000-000000000000';

/**
 * The n-th forged callback against the jobs `ids`: a made-up signature, none, or a real one of another workflow or
 * kind (a replay). The forgeries' content; FaultInjection counts what they do.
 */
export function forgery(
  n: number,
  ids: readonly string[],
  receiverUrl: string,
  signer: CallbackSigner,
): { url: string; body: string } {
  const victim = ids[n % ids.length];
  // Another workflow's ID: the next job's, or a made-up one while only one job has started (a URL signed for the
  // victim itself would be a genuine callback, not a forgery).
  const next = ids[(n + 1) % ids.length];
  const other = next === victim ? `${victim}-other` : next;
  const body = JSON.stringify({ id: 1, title: victim, trained_at: new Date().toISOString(), images: [] });
  switch (n % 4) {
    case 0:
      return {
        url: `${receiverUrl}/callbacks/tune?workflowId=${encodeURIComponent(victim)}&sig=${'ab'.repeat(32)}`,
        body,
      };
    case 1:
      return { url: `${receiverUrl}/callbacks/tune?workflowId=${encodeURIComponent(victim)}`, body };
    case 2: {
      // Signed for another workflow, sent with the victim's ID.
      const signed = new URL(signer.url(CallbackKind.tune, { workflowId: other, runId: MADE_UP_RUN_ID }));
      signed.searchParams.set('workflowId', victim);
      return { url: signed.toString(), body };
    }
    default: {
      // Signed for the victim's prompt callbacks, replayed at the tune route.
      const signed = new URL(signer.url(CallbackKind.prompt, { workflowId: victim, runId: MADE_UP_RUN_ID }));
      return { url: `${receiverUrl}/callbacks/tune${signed.search}`, body };
    }
  }
}
