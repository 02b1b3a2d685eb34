/**
 * --metrics (bench/soak/agreement.ts): its flags, the figures summed over every process's last scrape (a killed
 * worker's included), the soak's own counts of the same things, and the judge that holds each pair within what one
 * scrape interval holds, each rule seeded with its defect (a difference past the bound); and its lines in the table.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  agree,
  AGREED,
  MetricsScrapes,
  metricsOnlyOf,
  soakCountsOf,
  sumOverProcesses,
  type AgreedFigures,
} from '../../bench/soak/agreement';
import { FlagError, parseSoakOptions } from '../../bench/soak/options';
import { metricsCostLines, refusalLines } from '../../bench/soak/report';
import { Scrape } from '../../bench/soak/scrape';
import type { RoundFigures } from '../../bench/soak/measure';

/** A worker's `/metrics` as the SDK's Runtime writes it (the SDK's own labels included). */
const workerText = (jobs: number, requests: number, chargedMc: number) =>
  [
    '# HELP tuneflow_jobs_total Jobs that ended',
    '# TYPE tuneflow_jobs_total counter',
    `tuneflow_jobs_total{namespace="default",taskQueue="q",outcome="completed",failure_type="none",workflowType="generate"} ${jobs - 1}`,
    `tuneflow_jobs_total{namespace="default",taskQueue="q",outcome="failed",failure_type="TuneNeverTrained",workflowType="trainThenGenerate"} 1`,
    `tuneflow_service_requests_total{operation="POST /tunes",status_class="2xx"} ${requests - 2}`,
    'tuneflow_service_requests_total{operation="POST /tunes",status_class="4xx"} 2',
    'tuneflow_service_rate_limited_total{operation="POST /tunes"} 2',
    `tuneflow_charged_millicents_total{tenant="default"} ${chargedMc}`,
    'tuneflow_callbacks_late_total{kind="tune"} 3',
    `tuneflow_job_polls_sum{outcome="completed"} ${2 * jobs}`,
    `tuneflow_job_polls_count{outcome="completed"} ${jobs}`,
    'tuneflow_activity_retries_total{activityType="createTune"} 2',
  ].join('\n');
const receiverText = 'tuneflow_callbacks_total{outcome="accepted"} 40\ntuneflow_callbacks_total{outcome="refused"} 5\n';

const figures = (f: Partial<AgreedFigures>): AgreedFigures => ({
  jobs: 0,
  apiCalls: 0,
  rateLimited: 0,
  callbacks: 0,
  chargedMc: 0,
  ...f,
});

describe('the flags', () => {
  test('--metrics scrapes every 5 s unless --scrape-interval says; --compare-metrics takes --rounds', () => {
    expect(parseSoakOptions(['--metrics'])).toMatchObject({ metrics: true, scrapeIntervalSeconds: 5 });
    expect(parseSoakOptions(['--metrics', '--scrape-interval', '2'])).toMatchObject({ scrapeIntervalSeconds: 2 });
    expect(parseSoakOptions([])).toMatchObject({ metrics: false, compareMetrics: false });
    expect(parseSoakOptions(['--compare-metrics', '--rounds', '3'])).toMatchObject({
      compareMetrics: true,
      metrics: false,
      rounds: 3,
    });
  });

  test.each([
    [['--metrics', '--scrape-interval', '0'], '--scrape-interval: must be a whole number from 1 to 60'],
    [['--metrics', '--scrape-interval', '61'], '--scrape-interval: must be a whole number from 1 to 60'],
    [['--metrics', '--scrape-interval', '2.5'], '--scrape-interval: must be a whole number from 1 to 60'],
    [['--scrape-interval', '2'], '--scrape-interval: needs --metrics or --compare-metrics'],
    [['--compare-metrics', '--metrics'], '--metrics: --compare-metrics already runs one side with metrics'],
    [['--compare-metrics', '--compare-floor'], '--compare-metrics: one comparison a run'],
    [['--compare-metrics', '--cluster'], '--compare-metrics: runs on dev servers'],
    [['--rounds', '2'], 'or --compare-metrics (rounds with metrics and without)'],
  ])('%j is refused: %s', (argv, message) => {
    expect(() => parseSoakOptions(argv)).toThrow(FlagError);
    expect(() => parseSoakOptions(argv)).toThrow(message);
  });
});

describe('the metrics over every process', () => {
  test("each process's last scrape counts, a killed worker's too: its counters died with it, not its jobs", () => {
    const killed = new Scrape(workerText(30, 100, 150_000));
    const restarted = new Scrape(workerText(20, 70, 50_000));
    const receiver = new Scrape(receiverText);
    const last = new Map([
      ['worker-1', killed],
      ['worker-2', restarted],
      ['receiver', receiver],
    ]);
    expect(sumOverProcesses(last)).toEqual({
      jobs: 50,
      apiCalls: 170,
      rateLimited: 4,
      callbacks: 45,
      chargedMc: 200_000,
    });
    expect(metricsOnlyOf(last)).toEqual({
      lateCallbacks: { tune: 6 },
      polls: 100,
      pollsPerJob: 2,
      activityRetries: 4,
      callbackOutcomes: { accepted: 40, duplicated: 0, refused: 5, closed_run: 0, over_budget: 0, failed: 0 },
    });
  });

  test('the scrapes: a worker killed keeps its last scrape in the sums, and its largest rise goes to the bounds', async () => {
    /** A process's /metrics, its text as the test sets it. */
    const serve = async (text: () => string) => {
      const server: Server = createServer((_, res) => res.end(text()));
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      return { server, port: (server.address() as AddressInfo).port, running: true };
    };
    let jobs = [0, 0];
    const workers = await Promise.all([0, 1].map((i) => serve(() => workerText(jobs[i], 10 * jobs[i], 0))));
    const scrapes = new MetricsScrapes(
      () => workers.map((w, i) => ({ name: `worker-${i + 1}`, port: w.port, running: () => w.running })),
      60_000,
    );
    try {
      await scrapes.start();
      jobs = [5, 3];
      await scrapes.stop();
      jobs = [12, 9];
      // worker-1 is killed before the last scrape: what it counted since is gone with it.
      workers[0].running = false;
      await scrapes.stop();
      const { agreed, lost, processes } = scrapes.figures();
      expect(processes).toBe(2);
      expect(agreed).toMatchObject({ jobs: 5 + 9, apiCalls: 50 + 90 });
      expect(scrapes.sums.map((sum) => sum.jobs)).toEqual([0, 8, 14]);
      expect(lost).toEqual([expect.objectContaining({ jobs: 5, apiCalls: 50 })]);
      // 12 + 9 ended: 7 counts lost with worker-1, within the largest rise (8) and one of the lost worker's own (5).
      const { figures: agreedJobs, violations } = agree(agreed, figures({ ...agreed, jobs: 21 }), scrapes.sums, lost);
      expect(agreedJobs.jobs).toEqual({ metrics: 14, soak: 21, difference: -7, bound: 13 });
      expect(violations).toEqual([]);
    } finally {
      await Promise.all(workers.map((w) => new Promise((resolve) => w.server.close(resolve))));
    }
  });

  test('no scrape yet: every figure 0, polls per job unknown', () => {
    expect(sumOverProcesses(new Map())).toEqual(figures({}));
    expect(metricsOnlyOf(new Map()).pollsPerJob).toBeNull();
  });
});

test("the soak's own counts: API routes with their 429s, the images and files aside; callbacks that reached", () => {
  const callback = { path: '/callbacks/tune', workflowId: 'w', ids: [1], sentAt: 0, status: 200, failure: null };
  const journal = {
    callbacks: [
      callback,
      { ...callback, status: null, failure: 'timeout' },
      { ...callback, status: null, failure: 'connect ECONNREFUSED 127.0.0.1:4000' },
    ],
    tunes: [
      { id: 1, packId: null },
      { id: 2, packId: 261 },
    ],
    prompts: [
      { id: 3, packId: null },
      { id: 4, packId: 261 },
    ],
  } as Parameters<typeof soakCountsOf>[1];
  const charges = [
    { object: 'tune', id: 1, mc: 1000 },
    { object: 'tune', id: 2, mc: 150_000 },
    { object: 'prompt', id: 3, mc: 200 },
    { object: 'prompt', id: 4, mc: 30 },
  ] as const;
  const stats = {
    routes: { 'POST /tunes': 10, 'GET /tunes/:id': 30, 'POST /images/inspect': 4, 'GET /images/:name': 12 },
    refused: { 'POST /tunes': 3 },
  };
  expect(soakCountsOf(stats, journal, charges, 7, false)).toEqual({
    apiCalls: 47,
    rateLimited: 3,
    callbacks: 9,
    // A pack's create answers its tune without a price: its run counts the pack's charges at its end.
    chargedMc: 151_230,
    unpricedMc: 0,
  });
  // Prompt creates answered and read without their price (hostile-starters): on no metric; a pack's still are.
  expect(soakCountsOf(stats, journal, charges, 7, true)).toMatchObject({ chargedMc: 151_030, unpricedMc: 200 });
});

describe('the agreement', () => {
  const sums = [figures({}), figures({ jobs: 30, apiCalls: 200 }), figures({ jobs: 45, apiCalls: 260 })];

  test('within the largest rise between two scrapes, either way: no violation', () => {
    const { figures: agreed, violations } = agree(
      figures({ jobs: 45, apiCalls: 260 }),
      figures({ jobs: 75, apiCalls: 60 }),
      sums,
    );
    expect(violations).toEqual([]);
    expect(agreed.jobs).toEqual({ metrics: 45, soak: 75, difference: -30, bound: 30 });
    expect(agreed.apiCalls).toEqual({ metrics: 260, soak: 60, difference: 200, bound: 200 });
    expect(agreed.callbacks).toEqual({ metrics: 0, soak: 0, difference: 0, bound: 0 });
  });

  test('one past it is a violation naming the figure, both counts and the bound', () => {
    const { violations } = agree(figures({ jobs: 45 }), figures({ jobs: 76, rateLimited: 1 }), sums);
    expect(violations).toEqual([
      'metrics: jobs ended 45 on /metrics, 76 by the soak: -31 apart, more than one scrape interval holds (30)',
      'metrics: 429s 0 on /metrics, 1 by the soak: -1 apart, more than one scrape interval holds (0)',
    ]);
  });

  test("a process lost before the last scrape widens the bound by its own largest rise, in the violation's words", () => {
    const lost = [figures({ jobs: 4 })];
    expect(agree(figures({ jobs: 45 }), figures({ jobs: 79 }), sums, lost).violations).toEqual([]);
    expect(agree(figures({ jobs: 45 }), figures({ jobs: 80 }), sums, lost).violations).toEqual([
      'metrics: jobs ended 45 on /metrics, 80 by the soak: -35 apart, more than one scrape interval, and one of ' +
        'each of the 1 processes lost, hold (34)',
    ]);
  });

  test('every figure is judged', () => {
    const { figures: agreed } = agree(figures({}), figures({}), []);
    expect(Object.keys(agreed)).toEqual([...AGREED]);
  });
});

test('--compare-metrics in the table: each side and on / off by round, and the median', () => {
  const side = (cpu: number) =>
    ({
      workerAndReceiverCpuMsPerJob: cpu,
      workerCpuMsPerJob: cpu - 2,
      receiverCpuMsPerJob: 2,
      workerRssMiB: 300,
      jobsPerSecond: 4,
    }) as RoundFigures;
  const ratios = {
    workerAndReceiverCpuMsPerJob: 1.05,
    workerCpuMsPerJob: 1.06,
    receiverCpuMsPerJob: 1,
    workerRssMiB: 1,
    jobsPerSecond: null,
  };
  const lines = metricsCostLines({
    rounds: [{ on: side(42), off: side(40), ratios: ratios as never }],
    medianRatios: ratios as never,
  });
  expect(lines[1]).toMatch(/^metrics on \/ off +1: on +1: off +1: on \/ off +median on \/ off$/);
  expect(lines[2]).toMatch(/^worker and receiver CPU per job +42 +40 +1.05x +1.05x$/);
  expect(lines.find((line) => line.startsWith('jobs/s'))).toMatch(/4 +4 +n\/a +n\/a$/);
});

test("the 429s' lines: by the second they came in from the run's start, their routes, and how bunched", () => {
  const t0 = 1_000_000;
  const at = (ms: number, route: string, inLast100Ms: number, inLastSecond: number) => ({
    at: t0 + ms,
    route,
    inLast100Ms,
    inLastSecond,
  });
  expect(
    refusalLines(
      [
        at(317_200, 'GET /tunes/:id', 9, 31),
        at(317_900, 'POST /tunes/:id/prompts', 12, 30),
        at(317_950, 'GET /tunes/:id', 3, 33),
        at(320_000, 'POST /tunes', 1, 26),
      ],
      t0,
    ),
  ).toEqual([
    '317 s: 3 (GET /tunes/:id 2, POST /tunes/:id/prompts 1); at most 12 requests in 100 ms, 33 in 1 s',
    '320 s: 1 (POST /tunes 1); at most 1 requests in 100 ms, 26 in 1 s',
  ]);
  expect(refusalLines([], t0)).toEqual([]);
});
