/**
 * The fair-share profile (bench/soak/fair-share.ts): its flags, its plan of two tenants' jobs, the stages' order, the
 * latencies it reads from the runs' outcomes, and its judge, each rule seeded with its defect (a ratio over the limit,
 * a 429 under the queue's limit, an ordinary job that never closed); and its rows of the report's table.
 */
import {
  FAIR_RATIO_LIMIT,
  fairShareRows,
  fairShareRun,
  FLOOD_TENANT,
  judgeFairShare,
  ORDINARY_TENANT,
  planFairShare,
  planned,
  startFairShare,
  type FairShareRound,
  type FairShareRun,
} from '../../bench/soak/fair-share';
import { tenantOf, type SoakJob } from '../../bench/soak/jobs';
import type { JobOutcome } from '../../bench/soak/judge';
import { FlagError, parseSoakOptions } from '../../bench/soak/options';
import type { SoakReport } from '../../bench/soak/report';

const T0 = Date.parse('2026-01-01T00:00:00Z');
const LIMITS = ['--service-limit', '30', '--service-rate', '20'];

/** A run's outcome as the judge reads it; only the job, its status and its close matter here. */
const outcome = (job: SoakJob, tookMs: number, status: JobOutcome['status'] = 'completed'): JobOutcome =>
  ({ job: { ...job, startedAt: T0 }, status, closedAt: T0 + tookMs }) as JobOutcome;

/** The outcomes of a plan whose jobs took: the alone ones `alone(i)`, the flood's 60 s, those beside `beside(i)`. */
function outcomes(
  plan: ReturnType<typeof planFairShare>,
  alone: (i: number) => number,
  beside: (i: number) => number,
): JobOutcome[] {
  return [
    ...plan.alone.map((j, i) => outcome(j, alone(i))),
    ...plan.flood.map((j) => outcome(j, 60_000)),
    ...plan.beside.map((j, i) => outcome(j, beside(i))),
  ];
}

const RUN = { rateLimited: 0, admissionSeconds: 30, wallSeconds: 120, loadAverage: { start: 1.5, end: 2 } };

function round(fairRatio: number, lineRatio: number, changes: Partial<FairShareRun> = {}): FairShareRound {
  const plan = planFairShare('r', 10, 10);
  const fair = fairShareRun(
    plan,
    outcomes(
      plan,
      () => 10_000,
      () => 10_000 * fairRatio,
    ),
    { ...RUN, fairness: true },
  );
  const line = fairShareRun(
    plan,
    outcomes(
      plan,
      () => 10_000,
      () => 10_000 * lineRatio,
    ),
    { ...RUN, fairness: false },
  );
  return { order: 'fair first', fair: { ...fair, ...changes }, line };
}

describe('the flags', () => {
  test('fair-share takes --rounds without the floor, --ordinary (20 by default) and the two rates', () => {
    expect(parseSoakOptions(['--profile', 'fair-share', '--jobs', '1000', '--rounds', '3', ...LIMITS])).toMatchObject({
      profiles: ['fair-share'],
      jobs: 1000,
      ordinaryJobs: 20,
      rounds: 3,
      compareFloor: false,
      serviceLimit: 30,
      serviceRate: 20,
    });
    expect(parseSoakOptions(['--profile', 'fair-share', '--ordinary', '5', ...LIMITS])).toMatchObject({
      ordinaryJobs: 5,
    });
  });

  test('all is every fault at once: fair-share, no fault but runs of its own, is not among them', () => {
    const all = parseSoakOptions(['--profile', 'all'])!.profiles;
    expect(all).toContain('hostile-starters');
    expect(all).not.toContain('fair-share');
  });

  test.each([
    [['--profile', 'fair-share'], 'fair-share: needs --service-limit and --service-rate'],
    [['--profile', 'fair-share', '--service-rate', '20'], 'fair-share: needs --service-limit and --service-rate'],
    [['--profile', 'fair-share,status-500', ...LIMITS], '--profile: fair-share runs alone'],
    [['--profile', 'fair-share', '--rate', '5', ...LIMITS], '--rate: fair-share starts each of its stages all at once'],
    [['--profile', 'fair-share', '--cluster', ...LIMITS], 'fair-share: runs on dev servers it starts'],
    [['--profile', 'fair-share', '--ordinary', '0', ...LIMITS], '--ordinary: must be a whole number from 1'],
    [['--ordinary', '5'], '--ordinary: needs --profile fair-share'],
    [['--rounds', '3'], '--rounds: needs --compare-floor (rounds of tuneflow and the floor) or --profile fair-share'],
  ])('%j is refused: %s', (argv, message) => {
    expect(() => parseSoakOptions(argv)).toThrow(FlagError);
    expect(() => parseSoakOptions(argv)).toThrow(message);
  });
});

test("the plan: the flood is one tenant's, the ordinary jobs the other's, alone and beside the same kinds", () => {
  const plan = planFairShare('r', 30, 4);
  expect(plan.flood).toHaveLength(30);
  expect(new Set(plan.flood.map((j) => tenantOf(j).tenant))).toEqual(new Set([FLOOD_TENANT]));
  for (const stage of [plan.alone, plan.beside]) {
    expect(stage).toHaveLength(4);
    expect(new Set(stage.map((j) => tenantOf(j).tenant))).toEqual(new Set([ORDINARY_TENANT]));
  }
  expect(plan.beside.map((j) => [j.kind, j.prompts])).toEqual(plan.alone.map((j) => [j.kind, j.prompts]));
  const ids = planned(plan).map((j) => j.workflowId);
  expect(new Set(ids).size).toBe(38);
});

test('the stages in turn: the ordinary jobs alone until each closed, the flood, its admission, the ordinary beside it', async () => {
  const plan = planFairShare('r', 3, 2);
  const events: string[] = [];
  const start = async (job: SoakJob) => {
    job.handle = {} as SoakJob['handle'];
    events.push(`start ${tenantOf(job).key}`);
  };
  const closed = async (job: SoakJob) => {
    events.push(`closed ${tenantOf(job).key}`);
  };
  const admitted = async () => {
    await new Promise((resolve) => setTimeout(resolve, 30));
    events.push('the flood admitted');
  };
  const waitedMs = await startFairShare(plan, start, closed, () => undefined, admitted, 0);
  expect(waitedMs).toBeGreaterThanOrEqual(25);
  expect(events).toEqual([
    'start soak-r-alone-0',
    'start soak-r-alone-1',
    'closed soak-r-alone-0',
    'closed soak-r-alone-1',
    'start soak-r-flood-0',
    'start soak-r-flood-1',
    'start soak-r-flood-2',
    'the flood admitted',
    'start soak-r-beside-0',
    'start soak-r-beside-1',
  ]);
});

test("a run's figures: each group's p50 and p90 from start to close, and the ordinary tenant's p90 ratio", () => {
  const plan = planFairShare('r', 10, 10);
  const run = fairShareRun(
    plan,
    outcomes(
      plan,
      (i) => (i + 1) * 1_000,
      (i) => (i + 1) * 1_500,
    ),
    { ...RUN, fairness: true },
  );
  expect(run.alone).toEqual({ count: 10, closed: 10, p50Ms: 5_000, p90Ms: 9_000 });
  expect(run.beside).toEqual({ count: 10, closed: 10, p50Ms: 7_500, p90Ms: 13_500 });
  expect(run.flood).toEqual({ count: 10, closed: 10, p50Ms: 60_000, p90Ms: 60_000 });
  expect(run.ratioP90).toBe(1.5);
  // A run left open is no latency: it is counted as not closed, and stuck by the run's own judge.
  const open = fairShareRun(
    plan,
    outcomes(
      plan,
      () => 1_000,
      () => 1_000,
    ).map((o, i) => (i === 0 ? { ...o, status: 'open' as const } : o)),
    { ...RUN, fairness: true },
  );
  expect(open.alone).toMatchObject({ count: 10, closed: 9 });
});

describe('the judge', () => {
  test('passes within the limit with fairness, whatever the line does; the ratio judged is the median of the rounds', () => {
    const { figures, violations } = judgeFairShare([round(1.2, 8), round(1.9, 9), round(1.1, 7)], {
      flood: 10,
      ordinary: 10,
      serviceLimit: 30,
      serviceRate: 20,
    });
    expect(violations).toEqual([]);
    expect(figures.medianRatioP90).toEqual({ fair: 1.2, line: 8 });
    expect(figures.ratioLimit).toBe(FAIR_RATIO_LIMIT);
  });

  test('fails a median ratio over 1.5x with fairness, naming it', () => {
    const { violations } = judgeFairShare([round(1.6, 8), round(1.7, 8), round(1.2, 8)], {
      flood: 10,
      ordinary: 10,
      serviceLimit: 30,
      serviceRate: 20,
    });
    expect(violations).toEqual([
      "fair share: with fairness the ordinary tenant's p90 with the flood is 1.6x its p90 alone (median of 3 rounds), over 1.5x",
    ]);
  });

  test("fails a 429 while the queue's limit is at or below the service's, and not above it", () => {
    const rounds = [round(1.1, 8, { rateLimited: 3 })];
    expect(judgeFairShare(rounds, { flood: 10, ordinary: 10, serviceLimit: 20, serviceRate: 20 }).violations).toEqual([
      "fair share round 1, fairness on: 3 requests answered 429, TUNEFLOW_SERVICE_RATE (20/s, the queue's limit less its margin) at or below the service's (20/s)",
    ]);
    expect(judgeFairShare(rounds, { flood: 10, ordinary: 10, serviceLimit: 20, serviceRate: 25 }).violations).toEqual(
      [],
    );
  });

  test('fails an ordinary job that never closed, and a run with no ratio to judge', () => {
    const { violations } = judgeFairShare(
      [round(1.1, 8, { beside: { count: 10, closed: 0, p50Ms: null, p90Ms: null }, ratioP90: null })],
      { flood: 10, ordinary: 10, serviceLimit: 30, serviceRate: 20 },
    );
    expect(violations).toEqual([
      "fair share round 1, fairness on: 10 of the ordinary tenant's 10 jobs beside the flood never closed",
      "fair share: no ratio of the ordinary tenant's p90 with fairness to judge",
    ]);
  });
});

test("the report's table gives each round's latencies of both tenants with and without fairness, and the medians", () => {
  const { figures } = judgeFairShare([round(1.2, 8)], { flood: 10, ordinary: 10, serviceLimit: 30, serviceRate: 20 });
  const rows = fairShareRows(figures);
  expect(rows).toEqual([
    ['fair share: jobs of the flood / the ordinary tenant', '10 / 10 (alone, then again beside the flood)'],
    ['  round 1 (fair first), fairness on : ordinary p50 / p90 alone', '10.0 s / 10.0 s'],
    ['    with the flood; p90 ratio', '12.0 s / 12.0 s; 1.2x'],
    ["    the flood's p50 / p90; 429s; its admission; wall; load", '60.0 s / 60.0 s; 0; 30 s; 120 s; 1.5 / 2'],
    ['  round 1 (fair first), fairness off: ordinary p50 / p90 alone', '10.0 s / 10.0 s'],
    ['    with the flood; p90 ratio', '80.0 s / 80.0 s; 8x'],
    ["    the flood's p50 / p90; 429s; its admission; wall; load", '60.0 s / 60.0 s; 0; 30 s; 120 s; 1.5 / 2'],
    ['fair share: median p90 ratio, fairness on / off', '1.2x / 8x (at most 1.5x with fairness)'],
  ]);
  // The JSON line carries the same figures the table shows.
  const json = JSON.parse(JSON.stringify({ fairShare: figures })) as Pick<SoakReport, 'fairShare'>;
  expect(json.fairShare?.rounds[0].line.beside.p90Ms).toBe(80_000);
  expect(json.fairShare?.medianRatioP90).toEqual({ fair: 1.2, line: 8 });
});
