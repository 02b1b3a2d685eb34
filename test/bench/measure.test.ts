/**
 * What the soak measures the same way for tuneflow and the floor: start schedules, the steady part and the burst
 * told apart, figures per job, ratios, and whether two runs of a job issued the same commands.
 */
import type { SoakJob } from '../../bench/soak/jobs';
import type { JobOutcome } from '../../bench/soak/judge';
import {
  COMPARED,
  medianRatios,
  phaseFigures,
  apiCallsOf,
  ratiosOf,
  roundFigures,
  roundsTable,
  reactionsApart,
  sameShape,
  startOnSchedule,
  type PhaseFigures,
  type Ratios,
  type Sample,
  type StartTimes,
} from '../../bench/soak/measure';
import { FlagError, parseSoakOptions } from '../../bench/soak/options';
import { usageOf, workerNodeFlags } from '../../bench/soak/processes';

const T0 = Date.parse('2026-01-01T00:00:00Z');
const job = (i: number, startedAt = T0): SoakJob => ({
  workflowId: `job-${i}`,
  kind: 'trainThenGenerate',
  prompts: 1,
  startedAt,
});
const outcome = (j: SoakJob, closedAt: number, reactions: Array<[number, number]> = []): JobOutcome => ({
  job: j,
  status: 'completed',
  closedAt,
  events: 40,
  workflowTasks: 6,
  bytes: 10_000,
  bytesByPart: {
    result: 2_000,
    'activity answers': 4_000,
    'activity requests': 1_000,
    'workflow tasks': 2_000,
    'search attributes': 500,
    markers: 300,
    start: 100,
    other: 100,
  },
  reported: { tuneIds: [], promptIds: [] },
  keyInHistory: false,
  signedUrlInHistory: false,
  unmatchedSignals: 0,
  forgedSignals: 0,
  forgedData: false,
  reactions: reactions.map(([sentAt, ms]) => ({ sentAt: T0 + sentAt, ms })),
  commands: { activities: 4, timers: 6, signals: 2 },
  sequence: [],
  activityMs: [10, 30],
  activityRetries: 0,
  touches: { held: { tuneIds: [], promptIds: [] }, requests: [] },
});

describe('startOnSchedule', () => {
  test('without a rate every job starts at once: all of it is the burst', async () => {
    const jobs = [0, 1, 2].map((i) => job(i));
    const started: string[] = [];
    const times = await startOnSchedule(jobs, { rate: 0, burst: 0 }, T0, async (j) => void started.push(j.workflowId));
    expect(started).toEqual(['job-0', 'job-1', 'job-2']);
    expect(times).toEqual({ burstAt: T0, burstIds: new Set(['job-0', 'job-1', 'job-2']) });
  });

  test('at a rate, then the last `burst` jobs together, one interval after the last steady start', async () => {
    const jobs = Array.from({ length: 10 }, (_, i) => job(i));
    const started: Array<{ id: string; at: number }> = [];
    const t0 = Date.now();
    const times = await startOnSchedule(jobs, { rate: 200, burst: 4 }, t0, async (j) => {
      started.push({ id: j.workflowId, at: Date.now() });
    });
    expect(started.map((s) => s.id)).toEqual(jobs.map((j) => j.workflowId));
    expect(times.burstIds).toEqual(new Set(['job-6', 'job-7', 'job-8', 'job-9']));
    // Six steady starts 5 ms apart, the burst 5 ms after the last of them (timers may fire a millisecond early).
    expect(times.lastSteadyAt! - t0).toBeGreaterThanOrEqual(24);
    expect(times.burstAt! - t0).toBeGreaterThanOrEqual(29);
    expect(new Set(started.slice(6).map((s) => s.at)).size).toBeLessThanOrEqual(2);
  });
});

describe('reactionsApart', () => {
  // Runs in flight level off at 20 s (at least 90 % of the most before the last steady start).
  const samples: Sample[] = [10, 20, 30, 40, 50, 60].map((t, i) => ({
    t,
    rssMiB: 100,
    inFlight: [5, 10, 10, 11, 40, 3][i],
  }));

  test('the steady part runs from the level of runs in flight to the last steady start; the burst until its last run closed', () => {
    const steady = [job(0), job(1), job(2)];
    const burst = [job(3)];
    const times: StartTimes = { lastSteadyAt: T0 + 44_000, burstAt: T0 + 45_000, burstIds: new Set(['job-3']) };
    const outcomes = [
      // A short job closes early: the level, not the first close, starts the steady part; before it, the ramp.
      outcome(steady[0], T0 + 15_000, [[12_000, 900]]),
      outcome(steady[1], T0 + 40_000, [
        [21_000, 40],
        [30_000, 60],
      ]),
      // A steady job's callback after the burst started counts for the burst: it waits behind the burst's.
      outcome(steady[2], T0 + 58_000, [[50_000, 700]]),
      outcome(burst[0], T0 + 53_000, [[47_000, 2_000]]),
    ];
    const reactions = outcomes.flatMap((o) => o.reactions);
    const parts = reactionsApart(reactions, times, outcomes, samples, T0);
    expect(parts.steady).toEqual({ p50Ms: 40, p99Ms: 60, count: 2, inFlight: 10, seconds: 24 });
    expect(parts.burst).toEqual({ p50Ms: 700, p99Ms: 2_000, count: 2, inFlight: 40, seconds: 8 });
  });

  test('all at once: only a burst', () => {
    const jobs = [job(0), job(1)];
    const times: StartTimes = { burstAt: T0, burstIds: new Set(['job-0', 'job-1']) };
    const outcomes = [outcome(jobs[0], T0 + 20_000, [[10_000, 300]]), outcome(jobs[1], T0 + 25_000, [[11_000, 500]])];
    const parts = reactionsApart(
      outcomes.flatMap((o) => o.reactions),
      times,
      outcomes,
      samples,
      T0,
    );
    expect(parts.steady).toBeNull();
    expect(parts.burst).toMatchObject({ p50Ms: 300, p99Ms: 500, count: 2, seconds: 25 });
    expect(parts.burst).not.toHaveProperty('partsP99Ms'); // these reactions were not taken apart
  });

  test('where the reactions are taken apart, each part has its own p99: to the server, waiting, the task', () => {
    const jobs = [job(0), job(1)];
    const times: StartTimes = { burstAt: T0, burstIds: new Set(['job-0', 'job-1']) };
    const outcomes = [outcome(jobs[0], T0 + 20_000), outcome(jobs[1], T0 + 25_000)];
    const reactions = [
      { sentAt: T0 + 10_000, ms: 300, parts: { deliveryMs: 20, waitMs: 250, taskMs: 30 } },
      { sentAt: T0 + 11_000, ms: 500, parts: { deliveryMs: 400, waitMs: 40, taskMs: 60 } },
    ];
    const parts = reactionsApart(reactions, times, outcomes, samples, T0);
    expect(parts.burst?.partsP99Ms).toEqual({ delivery: 400, wait: 250, task: 60 });
  });
});

test('phaseFigures: per job, jobs/s over the wall time to the last close', () => {
  const jobs = [job(0), job(1)];
  const outcomes = [outcome(jobs[0], T0 + 8_000, [[5_000, 30]]), outcome(jobs[1], T0 + 10_000, [[6_000, 50]])];
  const figures = phaseFigures({
    jobs,
    outcomes,
    finished: 2,
    workerCpuMs: 300,
    workerMainThreadCpuMs: 120,
    peakRssBytes: 200 * 2 ** 20,
    baseRssBytes: 120 * 2 ** 20,
    serverCpuMs: undefined,
    receiverCpuMs: 100,
    machineCpuMs: 900,
    times: { burstAt: T0, burstIds: new Set(['job-0', 'job-1']) },
    samples: [
      { t: 1, rssMiB: 150, inFlight: 2 },
      { t: 9, rssMiB: 190, inFlight: 1 },
    ],
    t0: T0,
    loadAverage: { start: 1.23, end: 2 },
  });
  expect(figures).toMatchObject({
    jobs: 2,
    workerCpuMsPerJob: 150,
    workerMainThreadCpuMsPerJob: 60,
    receiverCpuMsPerJob: 50,
    workerAndReceiverCpuMsPerJob: 200,
    workerRssMiB: 200,
    workerBaseRssMiB: 120,
    peakInFlight: 2,
    serverCpuMsPerJob: null,
    machineCpuMsPerJob: 450,
    jobsPerSecond: 0.2,
    wallSeconds: 10,
    jobLatencyP50Ms: 8_000,
    reactionP99Ms: 50,
    activityP99Ms: 30,
    historyEventsPerJob: 40,
    historyBytesByPartPerJob: { result: 2_000, 'activity answers': 4_000, markers: 300 },
    activitiesPerJob: 4,
    timersPerJob: 6,
    signalsPerJob: 2,
    loadAverage: { start: 1.2, end: 2 },
  });
});

test('ratiosOf: tuneflow divided by the floor, null where either is unknown', () => {
  const figures = (over: Partial<PhaseFigures>) =>
    ({
      workerAndReceiverCpuMsPerJob: 36,
      workerCpuMsPerJob: 30,
      workerMainThreadCpuMsPerJob: 12,
      workerRssMiB: 500,
      serverCpuMsPerJob: 40,
      machineCpuMsPerJob: 100,
      historyEventsPerJob: 46,
      workflowTasksPerJob: 6,
      historyBytesPerJob: 18_000,
      jobsPerSecond: 15,
      activitiesPerJob: 4.8,
      timersPerJob: 6,
      signalsPerJob: 5,
      ...over,
    }) as PhaseFigures;
  const ratios = ratiosOf(
    figures({}),
    figures({
      workerAndReceiverCpuMsPerJob: 24,
      workerCpuMsPerJob: 20,
      workerMainThreadCpuMsPerJob: 8,
      jobsPerSecond: 30,
      serverCpuMsPerJob: null,
      machineCpuMsPerJob: 80,
    }),
  );
  expect(ratios).toMatchObject({
    workerAndReceiverCpuMsPerJob: 1.5,
    workerCpuMsPerJob: 1.5,
    workerMainThreadCpuMsPerJob: 1.5,
    jobsPerSecond: 0.5,
    serverCpuMsPerJob: null,
    machineCpuMsPerJob: 1.25,
    workerRssMiB: 1,
  });
});

test("roundFigures: a round keeps each side's compared figures, its wall time and load, nothing else", () => {
  const figures = { workerCpuMsPerJob: 30, wallSeconds: 12, loadAverage: { start: 1, end: 2 }, heaps: [] };
  const kept = roundFigures(figures as unknown as PhaseFigures);
  expect(kept).toMatchObject({ workerCpuMsPerJob: 30, wallSeconds: 12, loadAverage: { start: 1, end: 2 } });
  expect(Object.keys(kept).sort()).toEqual([...COMPARED, 'loadAverage', 'wallSeconds'].sort());
});

test('medianRatios: the middle round of each ratio (the mean of the middle two), nulls left out; roundsTable shows them', () => {
  const ratios = (workerCpuMsPerJob: number | null, jobsPerSecond: number | null) =>
    ({ ...Object.fromEntries(COMPARED.map((key) => [key, null])), workerCpuMsPerJob, jobsPerSecond }) as Ratios;
  const three = [ratios(1.29, 0.78), ratios(1.13, null), ratios(1.21, 0.9)];
  expect(medianRatios(three)).toMatchObject({ workerCpuMsPerJob: 1.21, jobsPerSecond: 0.84, workerRssMiB: null });
  expect(medianRatios([ratios(1.1, 0.8), ratios(1.3, 1)])).toMatchObject({
    workerCpuMsPerJob: 1.2,
    jobsPerSecond: 0.9,
  });
  const lines = roundsTable(
    three.map((r, i) => ({ order: i % 2 ? 'floor first' : 'tuneflow first', ratios: r })),
    medianRatios(three),
  );
  expect(lines[1]).toMatch(/^tuneflow \/ floor\s+1: tuneflow first\s+2: floor first\s+3: tuneflow first\s+median$/);
  expect(lines.find((line) => line.startsWith('  the worker'))).toMatch(/1\.29x\s+1\.13x\s+1\.21x\s+1\.21x$/);
  expect(lines.find((line) => line.startsWith('jobs/s'))).toMatch(/0\.78x\s+n\/a\s+0\.9x\s+0\.84x$/);
  const together = roundsTable([{ order: 'together', ratios: three[0] }], three[0]);
  expect(together[0]).toBe("by round (both sides at once each round; the figures above are round 1's)");
  expect(together[1]).toMatch(/^tuneflow \/ floor\s+1: together\s+median$/);
});

test('sameShape: activities in order decide; a gathering timer more or less only parts the whole sequence', () => {
  const tuneflow = [
    ['createTune', 'timer 90s', 'callback', 'cancel', 'retrieveTune', 'createPrompt'],
    ['retrieveTune', 'createPrompt', 'timer 2s', 'callback', 'callback', 'cancel', 'listPrompts'],
    ['createPackTune', 'listPrompts'],
  ];
  const floor = [
    ['createTune', 'timer 90s', 'callback', 'cancel', 'retrieveTune', 'createPrompt'],
    ['retrieveTune', 'createPrompt', 'timer 2s', 'callback', 'cancel', 'timer 1s', 'callback', 'cancel', 'listPrompts'],
    ['createPackTune', 'retrieveTune', 'listPrompts'],
  ];
  const shape = sameShape(tuneflow, floor);
  expect(shape).toMatchObject({ sameActivities: 2, sameSequence: 1, compared: 3 });
  expect(shape.differing).toEqual([
    { job: 2, tuneflow: 'createPackTune listPrompts', floor: 'createPackTune retrieveTune listPrompts' },
  ]);
});

describe('the flags of the floor, the burst and the report', () => {
  test('--compare-floor, --rate with --burst, --report', () => {
    const options = parseSoakOptions([
      '--jobs',
      '50',
      '--rate',
      '5',
      '--burst',
      '10',
      '--compare-floor',
      '--report',
      'out',
    ]);
    expect(options).toMatchObject({ jobs: 50, rate: 5, burst: 10, compareFloor: true, reportDir: 'out' });
    expect(parseSoakOptions([])).toMatchObject({ burst: 0, compareFloor: false, reportDir: undefined, rounds: 1 });
    expect(parseSoakOptions(['--compare-floor', '--rounds', '3'])).toMatchObject({ compareFloor: true, rounds: 3 });
    expect(parseSoakOptions(['--compare-floor', '--together'])).toMatchObject({ together: true });
    expect(parseSoakOptions([])).toMatchObject({ together: false });
    expect(parseSoakOptions([])).toMatchObject({ serviceLimit: undefined, serviceRate: undefined });
    expect(parseSoakOptions(['--service-limit', '20', '--service-rate', '18.5'])).toMatchObject({
      serviceLimit: 20,
      serviceRate: 18.5,
    });
  });

  test('--trace-gc gives each worker node --trace-gc, beside the other worker flags', () => {
    const options = parseSoakOptions(['--trace-gc', '--worker-heap', '512'])!;
    expect(options.traceGc).toBe(true);
    expect(workerNodeFlags(options)).toEqual(['--max-old-space-size=512', '--trace-gc']);
    expect(workerNodeFlags(parseSoakOptions([])!)).toEqual([]);
  });

  test.each([
    [['--burst', '5'], '--burst: needs --rate'],
    [['--jobs', '10', '--rate', '2', '--burst', '10'], '--burst: must leave jobs for the steady rate (at most 9)'],
    [
      ['--compare-floor', '--profile', 'all'],
      "--compare-floor: the floor takes no faults; run it with --profile none, got 'all'",
    ],
    [['--compare-floor', '--cluster'], '--compare-floor: runs on the dev server'],
    [['--report', ' '], '--report: must be a directory'],
    [['--rounds', '3'], '--rounds: needs --compare-floor'],
    [['--together'], '--together: needs --compare-floor'],
    [['--compare-floor', '--rounds', '10'], "--rounds: must be a whole number from 1 to 9, got '10'"],
    [['--compare-floor', '--floor-http'], "--floor-http: gone; the floor always makes tuneflow's requests now"],
    [['--service-limit', '0'], "--service-limit: must be a positive number of requests per second, got '0'"],
    [['--service-rate', 'fast'], "--service-rate: must be a positive number of requests per second, got 'fast'"],
    [['--compare-floor', '--service-rate', '18'], '--service-limit, --service-rate: the floor has no service rate'],
  ])('%j is refused: %s', (argv, message) => {
    expect(() => parseSoakOptions(argv)).toThrow(FlagError);
    expect(() => parseSoakOptions(argv)).toThrow(message);
  });
});

const linux = process.platform === 'linux' ? test : test.skip;

linux("usageOf: the main thread's CPU apart from the whole process's (/proc/<pid>/task/<pid>)", () => {
  const before = usageOf(process.pid)!;
  // Work on this thread until its CPU shows 250 ms more (ticks are 10 ms), for at most 20 s of a busy machine.
  const giveUpAt = performance.now() + 20_000;
  let after = before;
  while (after.mainThreadCpuMs - before.mainThreadCpuMs < 250 && performance.now() < giveUpAt) {
    for (let i = 0; i < 1e6; i++) Math.sqrt(i);
    after = usageOf(process.pid)!;
  }
  expect(after.mainThreadCpuMs - before.mainThreadCpuMs).toBeGreaterThanOrEqual(250);
  // The process's file and the thread's are read a moment apart: a 10 ms tick may land between the two reads.
  expect(after.cpuMs - before.cpuMs).toBeGreaterThanOrEqual(after.mainThreadCpuMs - before.mainThreadCpuMs - 10);
  expect(usageOf(2 ** 22 + 12_345)).toBeUndefined();
});

test("apiCallsOf: the service's API by route and in all, image and file downloads left out", () => {
  const routes = { 'POST /tunes': 3, 'GET /tunes/:id': 2, 'GET /images/:name': 9, 'GET /files/:name': 4 };
  expect(apiCallsOf({ routes } as never)).toEqual({ total: 5, routes: { 'POST /tunes': 3, 'GET /tunes/:id': 2 } });
});
