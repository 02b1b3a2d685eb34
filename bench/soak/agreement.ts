/**
 * --metrics: the workers' and the receiver's `/metrics` read every scrape interval, and at the end set against what
 * the soak itself counted (the mock's journal and stats, the judge's outcomes). A process's counters start at 0 with
 * it and die with it (the worker-kill fault), so each process's last scrape is kept and the figures are summed over
 * every process the run started. What the metrics may miss is what one interval holds: a callback answered as the last
 * scrape was read, and a killed worker's counts since its last scrape. So each figure's bound is its largest rise
 * between two consecutive scrapes, and for each process lost before the last scrape, one interval of its own (its
 * largest rise between two of its scrapes).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { MetricName } from '../../src/metrics';
import type { Charge, MockJournal, MockStats } from '../../src/mock-service';
import { scrape, type Scrape } from './scrape';

/** The figures the metrics and the soak must agree on. */
export const AGREED = ['jobs', 'apiCalls', 'rateLimited', 'callbacks', 'chargedMc'] as const;
export type AgreedFigure = (typeof AGREED)[number];
export type AgreedFigures = Record<AgreedFigure, number>;

/** The figures in words, for the table. */
export const AGREED_NAMES: Record<AgreedFigure, string> = {
  jobs: 'jobs ended',
  apiCalls: 'API calls',
  rateLimited: '429s',
  callbacks: 'callbacks at the receiver',
  chargedMc: 'charged (mc)',
};

/** What the metrics say besides: nothing of the soak's to agree with. */
export interface MetricsOnly {
  /** Callbacks about objects the run had already learned were done from a poll, by kind. */
  lateCallbacks: Record<string, number>;
  /** The polls histogram's sum and count: polls per job ended. */
  polls: number;
  pollsPerJob: number | null;
  activityRetries: number;
}

/** One figure: the metrics' sum, the soak's own count, their difference and what one scrape interval holds. */
export interface Agreement {
  metrics: number;
  soak: number;
  difference: number;
  bound: number;
}

/** The report's `metrics` section. */
export interface MetricsFigures extends MetricsOnly {
  scrapeIntervalSeconds: number;
  /**
   * What the account was charged for objects whose create answered no `cost_mc` (a pack's tune and its prompts; prompt
   * creates under hostile-starters): on no metric, so apart from chargedMc's agreement.
   */
  unpricedMc: number;
  /** Scrapes taken (each reads every live process), and the processes read at least once. */
  scrapes: number;
  processes: number;
  /** Processes gone before the last scrape (killed workers): each one's largest rise is in the bounds. */
  processesLost: number;
  figures: Record<AgreedFigure, Agreement>;
  /** Callbacks at the receiver by outcome (tuneflow_callbacks_total). */
  callbackOutcomes: Record<string, number>;
}

const CALLBACK_OUTCOMES = ['accepted', 'duplicated', 'refused', 'closed_run', 'over_budget', 'failed'];

/** A scrape's agreed figures. */
export function agreedOf(scrape: Scrape): AgreedFigures {
  return {
    jobs: scrape.total(MetricName.jobs),
    apiCalls: scrape.total(MetricName.serviceRequests),
    rateLimited: scrape.total(MetricName.serviceRateLimited),
    callbacks: scrape.total(MetricName.callbacks),
    chargedMc: scrape.total(MetricName.chargedMillicents),
  };
}

/** `pick` of each scrape, summed: the run's figure over every process, the killed ones' last scrapes included. */
function summed<T extends Record<string, number>>(scrapes: Iterable<Scrape>, pick: (s: Scrape) => T, zero: T): T {
  const sum: Record<string, number> = { ...zero };
  for (const s of scrapes) for (const [key, value] of Object.entries(pick(s))) sum[key] = (sum[key] ?? 0) + value;
  return sum as T;
}

/**
 * The agreed figures over every process's last scrape.
 *
 * @example
 * sumOverProcesses(new Map([['worker-1', killedWorkersLast], ['worker-2', scrapeNow]])).jobs;
 */
export function sumOverProcesses(last: ReadonlyMap<string, Scrape>): AgreedFigures {
  const zero = Object.fromEntries(AGREED.map((f) => [f, 0])) as AgreedFigures;
  return summed(last.values(), agreedOf, zero);
}

/** What the metrics say besides the agreed figures, over every process's last scrape. */
export function metricsOnlyOf(
  last: ReadonlyMap<string, Scrape>,
): MetricsOnly & { callbackOutcomes: Record<string, number> } {
  const scrapes = [...last.values()];
  const kinds = [...new Set(scrapes.flatMap((s) => s.values(MetricName.lateCallbacks, 'kind')))];
  const byLabel = (name: string, label: string, values: readonly string[]) =>
    summed(scrapes, (s) => Object.fromEntries(values.map((v) => [v, s.total(name, { [label]: v })])), {});
  const total = (name: string) => scrapes.reduce((sum, s) => sum + s.total(name), 0);
  const polls = total(`${MetricName.jobPolls}_sum`);
  const counted = total(`${MetricName.jobPolls}_count`);
  return {
    lateCallbacks: byLabel(MetricName.lateCallbacks, 'kind', kinds),
    polls,
    pollsPerJob: counted ? Math.round((polls / counted) * 100) / 100 : null,
    activityRetries: total(MetricName.activityRetries),
    callbackOutcomes: byLabel(MetricName.callbacks, 'outcome', CALLBACK_OUTCOMES),
  };
}

/**
 * Each figure's metrics against the soak's, bounded by its largest rise between two consecutive scrapes (`sums`: the
 * figures over every process at each scrape, in order) and, for each process lost before the last scrape (`lost`), its
 * own largest rise between two of its scrapes: the counts it may have taken with it. A violation for each difference
 * past its bound.
 *
 * @example
 * agree({ jobs: 98, ... }, { jobs: 100, ... }, [{ jobs: 0, ... }, { jobs: 60, ... }, { jobs: 98, ... }]);
 * // { figures: { jobs: { metrics: 98, soak: 100, difference: -2, bound: 60 }, ... }, violations: [] }
 */
export function agree(
  metrics: AgreedFigures,
  soak: AgreedFigures,
  sums: readonly AgreedFigures[],
  lost: readonly AgreedFigures[] = [],
): { figures: Record<AgreedFigure, Agreement>; violations: string[] } {
  const violations: string[] = [];
  const figures = Object.fromEntries(
    AGREED.map((figure) => {
      let bound = 0;
      for (let i = 1; i < sums.length; i++) bound = Math.max(bound, sums[i][figure] - sums[i - 1][figure]);
      bound += lost.reduce((total, process) => total + process[figure], 0);
      const difference = metrics[figure] - soak[figure];
      const holds = lost.length
        ? `one scrape interval, and one of each of the ${lost.length} processes lost, hold`
        : 'one scrape interval holds';
      if (Math.abs(difference) > bound)
        violations.push(
          `metrics: ${AGREED_NAMES[figure]} ${metrics[figure]} on /metrics, ${soak[figure]} by the soak: ` +
            `${difference} apart, more than ${holds} (${bound})`,
        );
      return [figure, { metrics: metrics[figure], soak: soak[figure], difference, bound }];
    }),
  ) as Record<AgreedFigure, Agreement>;
  return { figures, violations };
}

/** The mock's routes that are no API call: its generated images and the files it keeps, which no worker requests. */
const PUBLIC_ROUTES = /^GET \/(images|files)\/:name$/;

/** The soak's own counts, and what the account was charged for objects no answer priced. */
export type SoakCounts = Omit<AgreedFigures, 'jobs'> & { unpricedMc: number };

/**
 * The soak's own counts of what the metrics count, the jobs aside (the judge's): API requests the mock took up or
 * refused with a 429 (every route the workers call: an image's inspection too, which the report's apiCalls leaves
 * out), the 429s (the rate limit's and a fault's), the callbacks that reached the receiver (the mock's, but those
 * whose connection it refused, and the forgeries), and the account's charges but those no answer priced: the metric
 * counts `cost_mc` from the creates' answers and, at a job's end, what its cost holds beyond them (a pack's tune and
 * prompts, priced by reads); prompts under `unpricedPromptCreates` (hostile-starters) are answered and read without a
 * price, so no one can count them (`unpricedMc`).
 *
 * @example
 * soakCountsOf(mock.stats(), mock.journal(), mock.ledger(apiKey).charges, forgeries.sent, false).chargedMc;
 */
export function soakCountsOf(
  stats: Pick<MockStats, 'routes' | 'refused'>,
  journal: Pick<MockJournal, 'callbacks' | 'tunes' | 'prompts'>,
  charges: readonly Charge[],
  forgedAtReceiver: number,
  unpricedPromptCreates: boolean,
): SoakCounts {
  const sum = (counts: Record<string, number>) => Object.values(counts).reduce((a, b) => a + b, 0);
  const taken = Object.entries(stats.routes).filter(([route]) => !PUBLIC_ROUTES.test(route));
  const rateLimited = sum(stats.refused);
  const unpricedPrompts = new Set(
    journal.prompts.filter((p) => unpricedPromptCreates && p.packId === null).map((p) => p.id),
  );
  const unpriced = (c: Charge) => c.object === 'prompt' && unpricedPrompts.has(c.id);
  const unpricedMc = charges.filter(unpriced).reduce((total, c) => total + c.mc, 0);
  return {
    apiCalls: taken.reduce((total, [, n]) => total + n, 0) + rateLimited,
    rateLimited,
    callbacks: journal.callbacks.filter((c) => !/ECONNREFUSED/.test(c.failure ?? '')).length + forgedAtReceiver,
    chargedMc: charges.reduce((total, c) => total + c.mc, 0) - unpricedMc,
    unpricedMc,
  };
}

/** A process whose `/metrics` the soak reads: a worker (each one started, the killed ones too) or the receiver. */
export interface MetricsTarget {
  name: string;
  port: number;
  /** False once it exited: its port may be another process's by then. */
  running: () => boolean;
}

/**
 * The run's scrapes: every `intervalMs`, each live target read, its last scrape kept (a process that does not answer
 * keeps its last), and the figures summed over them.
 *
 * @example
 * const scrapes = new MetricsScrapes(() => [...workers.metricsTargets(), receiver], 5_000);
 * scrapes.start(); ...; await scrapes.stop(); // a last scrape
 */
export class MetricsScrapes {
  private readonly last = new Map<string, Scrape>();
  /** Each process's largest rise between two of its scrapes (its first from 0: its counters start with it). */
  private readonly largestRise = new Map<string, AgreedFigures>();
  /** The processes the latest scrape read. */
  private read = new Set<string>();
  /** The figures over every process at each scrape, in order. */
  readonly sums: AgreedFigures[] = [];
  private timer: NodeJS.Timeout | undefined;
  private scraping: Promise<void> = Promise.resolve();

  constructor(
    private readonly targets: () => readonly MetricsTarget[],
    readonly intervalMs: number,
  ) {}

  /** A first scrape now (before the jobs), then one every interval. */
  async start(): Promise<void> {
    await this.scrapeAll();
    this.timer = setInterval(() => {
      this.scraping = this.scraping.then(() => this.scrapeAll());
    }, this.intervalMs);
  }

  /** Stops the interval and takes the last scrape: the processes must still run. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.scraping;
    await this.scrapeAll();
  }

  /** Each process's last scrape as it read, `<name>.metrics` in `dir`: the run's logs keep them. */
  writeLast(dir: string): void {
    for (const [name, last] of this.last) fs.writeFileSync(path.join(dir, `${name}.metrics`), last.text);
  }

  /** The metrics' figures over every process's last scrape, and the rest they say. */
  figures(): {
    agreed: AgreedFigures;
    only: ReturnType<typeof metricsOnlyOf>;
    processes: number;
    /** The largest rise of each process the latest scrape did not read: gone, its last counts with it. */
    lost: AgreedFigures[];
  } {
    const lost = [...this.largestRise].filter(([name]) => !this.read.has(name)).map(([, rise]) => rise);
    return { agreed: sumOverProcesses(this.last), only: metricsOnlyOf(this.last), processes: this.last.size, lost };
  }

  private async scrapeAll(): Promise<void> {
    const read = new Set<string>();
    await Promise.all(
      this.targets()
        .filter((target) => target.running())
        .map(async (target) => {
          try {
            const now = await scrape(target.port);
            const before = this.last.get(target.name);
            const rise = largestRise(this.largestRise.get(target.name), agreedOf(now), before && agreedOf(before));
            this.largestRise.set(target.name, rise);
            this.last.set(target.name, now);
            read.add(target.name);
          } catch {
            // Killed or restarting under a fault: its last scrape stands.
          }
        }),
    );
    this.read = read;
    this.sums.push(sumOverProcesses(this.last));
  }
}

/** The larger of `largest` and the rise from `before` (0 when none) to `now`, figure by figure. */
function largestRise(
  largest: AgreedFigures | undefined,
  now: AgreedFigures,
  before: AgreedFigures | undefined,
): AgreedFigures {
  return Object.fromEntries(
    AGREED.map((f) => [f, Math.max(largest?.[f] ?? 0, now[f] - (before?.[f] ?? 0))]),
  ) as AgreedFigures;
}
