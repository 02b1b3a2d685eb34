/**
 * The fair-share profile (issue 43): one tenant's flood and another tenant's ordinary jobs on a rate-limited task
 * queue, on a dev server with fairness on and on one without it. Each run has two stages on the same server and
 * workers: the ordinary tenant's jobs alone, then the flood with the same ordinary jobs (other keys) started once the
 * flood's backlog waits in the queue: once the flood is admitted (its first workflow tasks, and its key claims', have
 * run: the workflow task queue's backlog is gone), its calls waiting on the rate limit. Started sooner, the ordinary
 * jobs would measure this machine's two cores admitting 2,000 workflows at once (the server, the workers, the mock
 * share them), not how the queue is shared. The figure is the ordinary jobs' p90 with the flood over their p90 alone,
 * from the same run (absolute times across runs on a shared machine say little). Pure functions of the runs' outcomes,
 * tested in test/bench/fair-share.test.ts; `npm run soak` (./index.ts) runs the rounds.
 */
import { DEFAULT_TENANT } from '../../src/contract/tenants';
import { SECOND_TENANT } from './hostile';
import { planJobs, type SoakJob } from './jobs';
import { percentile, type JobOutcome } from './judge';
import { eachLimited } from './measure';

/** The tenant that floods, and the tenant whose ordinary jobs are measured. */
export const FLOOD_TENANT = DEFAULT_TENANT;
export const ORDINARY_TENANT = SECOND_TENANT;

/** With fairness, the ordinary tenant's p90 with the flood may be at most this times its p90 alone. */
export const FAIR_RATIO_LIMIT = 1.5;

/** How long the flood's tasks queue before the ordinary jobs start beside it, at least: the backlog is there. */
export const BACKLOG_MS = 2_000;

/** How long the ordinary jobs wait for the flood's admission at most (then they start, and the log says so). */
export const ADMISSION_LIMIT_MS = 180_000;

/** A run's jobs by stage: the ordinary tenant's alone, the flood, the ordinary tenant's beside the flood. */
export interface FairSharePlan {
  alone: SoakJob[];
  flood: SoakJob[];
  beside: SoakJob[];
}

/**
 * The jobs of a fair-share run: `flood` jobs of the flood tenant, and `ordinary` jobs of the other tenant twice, the
 * same kinds and prompts each time (planJobs: job i's shape follows from i), under keys of their own.
 *
 * @example
 * const { alone, flood, beside } = planFairShare('r1', 1000, 20);
 */
export function planFairShare(runId: string, flood: number, ordinary: number): FairSharePlan {
  return {
    alone: planJobs(`${runId}-alone`, ordinary, [ORDINARY_TENANT]),
    flood: planJobs(`${runId}-flood`, flood, [FLOOD_TENANT]),
    beside: planJobs(`${runId}-beside`, ordinary, [ORDINARY_TENANT]),
  };
}

/** Every job of the plan, in the order they start. */
export const planned = (plan: FairSharePlan): SoakJob[] => [...plan.alone, ...plan.flood, ...plan.beside];

/**
 * Starts the stages in turn: the ordinary jobs alone, all at once, then (once each has closed) the flood, then after
 * BACKLOG_MS and once `admitted` resolves (the flood's workflow tasks have run) the ordinary jobs again, all at once.
 * `closed` resolves once a started job's run has closed, whatever its ending; `log` says when each stage starts.
 * Resolves to how long the ordinary jobs waited for the flood's admission, from its last start.
 */
export async function startFairShare(
  plan: FairSharePlan,
  start: (job: SoakJob) => Promise<void>,
  closed: (job: SoakJob) => Promise<void>,
  log: (line: string) => void,
  admitted: () => Promise<void> = async () => undefined,
  backlogMs = BACKLOG_MS,
): Promise<number> {
  log(`fair share: ${plan.alone.length} jobs of ${ORDINARY_TENANT.slice(0, 12)}... alone`);
  await eachLimited(plan.alone, 32, start);
  await Promise.all(plan.alone.filter((job) => job.handle).map(closed));
  log(`fair share: the flood, ${plan.flood.length} jobs of ${FLOOD_TENANT}`);
  await eachLimited(plan.flood, 32, start);
  const startedAt = Date.now();
  await Promise.all([new Promise((resolve) => setTimeout(resolve, backlogMs)), admitted()]);
  const waitedMs = Date.now() - startedAt;
  log(
    `fair share: ${plan.beside.length} jobs of ${ORDINARY_TENANT.slice(0, 12)}... beside the flood, ` +
      `${(waitedMs / 1000).toFixed(1)} s after its last start`,
  );
  await eachLimited(plan.beside, 32, start);
  return waitedMs;
}

/** Job latencies (start to close) of a group of jobs: p50 and p90, and how many closed. */
export interface Latencies {
  count: number;
  closed: number;
  p50Ms: number | null;
  p90Ms: number | null;
}

/** One run of the profile: fairness on or off, the two tenants' latencies, the ratio, the 429s. */
export interface FairShareRun {
  fairness: boolean;
  /** The ordinary tenant's jobs with no flood, and beside the flood. */
  alone: Latencies;
  beside: Latencies;
  /** The flood tenant's jobs. */
  flood: Latencies;
  /** beside.p90Ms / alone.p90Ms; null when either is missing. */
  ratioP90: number | null;
  /** Requests the mock answered 429 for being over its rate limit in this run. */
  rateLimited: number;
  /** How long the ordinary jobs waited, after the flood's last start, for the flood's admission (startFairShare). */
  admissionSeconds: number;
  wallSeconds: number;
  loadAverage: { start: number; end: number };
}

/** Two runs of one round, fairness on and off, and which ran first. */
export interface FairShareRound {
  order: 'fair first' | 'line first';
  fair: FairShareRun;
  line: FairShareRun;
}

/** The profile's figures over its rounds: each round, the median ratios, and the limit the fair ratio is judged by. */
export interface FairShareFigures {
  flood: number;
  ordinary: number;
  rounds: FairShareRound[];
  medianRatioP90: { fair: number | null; line: number | null };
  ratioLimit: number;
}

const twoDigits = (n: number) => Math.round(n * 100) / 100;

/** p50 and p90 of the groups' start-to-close latencies, from the runs' outcomes. */
export function latenciesOf(jobs: readonly SoakJob[], outcomes: readonly JobOutcome[]): Latencies {
  const ids = new Set(jobs.map((job) => job.workflowId));
  const ms = outcomes.flatMap(({ job, closedAt, status }) =>
    ids.has(job.workflowId) && status !== 'open' && closedAt !== undefined && job.startedAt !== undefined
      ? [closedAt - job.startedAt]
      : [],
  );
  return {
    count: jobs.length,
    closed: ms.length,
    p50Ms: percentile(ms, 50) ?? null,
    p90Ms: percentile(ms, 90) ?? null,
  };
}

/**
 * One run's figures.
 *
 * @example
 * const figures = { fairness: true, rateLimited: 0, admissionSeconds: 40, wallSeconds: 300, loadAverage };
 * const run = fairShareRun(plan, outcomes, figures);
 */
export function fairShareRun(
  plan: FairSharePlan,
  outcomes: readonly JobOutcome[],
  run: Pick<FairShareRun, 'fairness' | 'rateLimited' | 'admissionSeconds' | 'wallSeconds' | 'loadAverage'>,
): FairShareRun {
  const alone = latenciesOf(plan.alone, outcomes);
  const beside = latenciesOf(plan.beside, outcomes);
  const ratioP90 = alone.p90Ms && beside.p90Ms !== null ? twoDigits(beside.p90Ms / alone.p90Ms) : null;
  return { ...run, alone, beside, flood: latenciesOf(plan.flood, outcomes), ratioP90 };
}

function median(values: Array<number | null>): number | null {
  const known = values.filter((v): v is number => v !== null).sort((a, b) => a - b);
  if (known.length !== values.length || !known.length) return null;
  const mid = known.length >> 1;
  return twoDigits(known.length % 2 ? known[mid] : (known[mid - 1] + known[mid]) / 2);
}

/**
 * The rounds' figures, and every rule they break in words: with fairness the median over the rounds of the ordinary
 * tenant's p90 ratio within FAIR_RATIO_LIMIT; every ordinary job measured; no 429 in any run while the workers'
 * TUNEFLOW_SERVICE_RATE (the queue's limit held by the server, less its margin) is at or below the service's. Duplicates, lost and stuck
 * jobs are each run's own judge's (judge.ts).
 *
 * @example
 * const { figures, violations } = judgeFairShare(rounds, { flood: 1000, ordinary: 20, serviceLimit: 30, serviceRate: 20 });
 */
export function judgeFairShare(
  rounds: readonly FairShareRound[],
  settings: { flood: number; ordinary: number; serviceLimit: number; serviceRate: number },
): { figures: FairShareFigures; violations: string[] } {
  const figures: FairShareFigures = {
    flood: settings.flood,
    ordinary: settings.ordinary,
    rounds: [...rounds],
    medianRatioP90: {
      fair: median(rounds.map((r) => r.fair.ratioP90)),
      line: median(rounds.map((r) => r.line.ratioP90)),
    },
    ratioLimit: FAIR_RATIO_LIMIT,
  };
  const violations: string[] = [];
  rounds.forEach((round, i) => {
    for (const run of [round.fair, round.line]) {
      const where = `fair share round ${i + 1}, fairness ${run.fairness ? 'on' : 'off'}`;
      for (const stage of ['alone', 'beside'] as const)
        if (run[stage].closed < run[stage].count)
          violations.push(
            `${where}: ${run[stage].count - run[stage].closed} of the ordinary tenant's ${run[stage].count} jobs ` +
              `${stage === 'alone' ? 'alone' : 'beside the flood'} never closed`,
          );
      if (run.rateLimited && settings.serviceRate <= settings.serviceLimit)
        violations.push(
          `${where}: ${run.rateLimited} requests answered 429, TUNEFLOW_SERVICE_RATE (${settings.serviceRate}/s, the ` +
            `queue's limit less its margin) at or below the service's (${settings.serviceLimit}/s)`,
        );
    }
  });
  const fair = figures.medianRatioP90.fair;
  if (fair === null) violations.push("fair share: no ratio of the ordinary tenant's p90 with fairness to judge");
  else if (fair > FAIR_RATIO_LIMIT)
    violations.push(
      `fair share: with fairness the ordinary tenant's p90 with the flood is ${fair}x its p90 alone (median of ` +
        `${rounds.length} rounds), over ${FAIR_RATIO_LIMIT}x`,
    );
  return { figures, violations };
}

const seconds = (ms: number | null) => (ms === null ? 'n/a' : `${(ms / 1000).toFixed(1)} s`);
const pair = (l: Latencies) =>
  `${seconds(l.p50Ms)} / ${seconds(l.p90Ms)}${l.closed < l.count ? ` (${l.closed} of ${l.count} closed)` : ''}`;

/** The profile's rows of the report's table: per round and fairness, both tenants' p50 / p90, the ratio, the 429s. */
export function fairShareRows(figures: FairShareFigures): Array<[string, string]> {
  const rows: Array<[string, string]> = [
    [
      'fair share: jobs of the flood / the ordinary tenant',
      `${figures.flood} / ${figures.ordinary} (alone, then again beside the flood)`,
    ],
  ];
  figures.rounds.forEach((round, i) => {
    for (const run of [round.fair, round.line])
      rows.push(
        [
          `  round ${i + 1} (${round.order}), fairness ${run.fairness ? 'on ' : 'off'}: ordinary p50 / p90 alone`,
          pair(run.alone),
        ],
        ['    with the flood; p90 ratio', `${pair(run.beside)}; ${run.ratioP90 === null ? 'n/a' : `${run.ratioP90}x`}`],
        [
          "    the flood's p50 / p90; 429s; its admission; wall; load",
          `${pair(run.flood)}; ${run.rateLimited}; ${run.admissionSeconds} s; ${run.wallSeconds} s; ` +
            `${run.loadAverage.start} / ${run.loadAverage.end}`,
        ],
      );
  });
  const show = (n: number | null) => (n === null ? 'n/a' : `${n}x`);
  rows.push([
    'fair share: median p90 ratio, fairness on / off',
    `${show(figures.medianRatioP90.fair)} / ${show(figures.medianRatioP90.line)} (at most ${figures.ratioLimit}x with fairness)`,
  ]);
  return rows;
}
