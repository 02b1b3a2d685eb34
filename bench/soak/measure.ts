/**
 * What the soak measures of a run, done the same way for tuneflow and for the floor (bench/floor), so that their
 * ratios compare like with like: when the jobs start (all at once, or at a steady rate with an optional burst), the
 * workers' CPU and memory, one sample a second of memory and runs in flight, and the figures per job read off the
 * histories, the callback-to-reaction latency apart for the steady part and for a burst.
 */
import * as os from 'node:os';
import type { Client } from '@temporalio/client';
import type { MockStats } from '../../src/mock-service';
import type { HeapPeak } from './gc-trace';
import { HISTORY_PARTS, percentile, type History, type HistoryPart, type JobOutcome, type Reaction } from './judge';
import type { SoakJob } from './jobs';
import { usageOf } from './processes';
import { machineCpu, machineCpuMsSince } from '../machine';

/** One sample: seconds since the first start, the live workers' resident memory together, runs open. */
export interface Sample {
  t: number;
  rssMiB: number;
  inFlight: number;
}

/**
 * The workers' CPU for the jobs (what each spent after it was ready, killed ones included) and the peak resident
 * memory of the largest.
 */
export class WorkerUsage {
  private readonly startCpu = new Map<number, { cpuMs: number; mainThreadCpuMs: number }>();
  private deadCpuMs = 0;
  private deadMainThreadCpuMs = 0;
  peakRssBytes = 0;
  /** The resident memory of the largest worker when it was ready: what it holds before any run. */
  baseRssBytes = 0;

  /** A worker is ready: the CPU it spent starting (loading, bundling) is not the jobs'. */
  started(pid: number | undefined): void {
    if (pid === undefined) return;
    const usage = usageOf(pid);
    this.startCpu.set(pid, usage ?? { cpuMs: 0, mainThreadCpuMs: 0 });
    this.baseRssBytes = Math.max(this.baseRssBytes, usage?.rssBytes ?? 0);
  }

  /** A worker is about to be killed: its CPU so far counts. */
  dying(pid: number | undefined): void {
    if (pid === undefined) return;
    const usage = usageOf(pid);
    const start = this.startCpu.get(pid);
    this.deadCpuMs += (usage?.cpuMs ?? 0) - (start?.cpuMs ?? 0);
    this.deadMainThreadCpuMs += (usage?.mainThreadCpuMs ?? 0) - (start?.mainThreadCpuMs ?? 0);
    this.startCpu.delete(pid);
  }

  /** CPU the jobs took so far (all of it, and the main threads' part), and the live workers' resident memory together. */
  sample(pids: ReadonlyArray<number | undefined>): { cpuMs: number; mainThreadCpuMs: number; rssBytes: number } {
    let cpuMs = this.deadCpuMs;
    let mainThreadCpuMs = this.deadMainThreadCpuMs;
    let rssBytes = 0;
    for (const pid of pids) {
      const usage = usageOf(pid);
      if (!usage || pid === undefined) continue;
      this.peakRssBytes = Math.max(this.peakRssBytes, usage.rssBytes);
      rssBytes += usage.rssBytes;
      const start = this.startCpu.get(pid);
      cpuMs += usage.cpuMs - (start?.cpuMs ?? 0);
      mainThreadCpuMs += usage.mainThreadCpuMs - (start?.mainThreadCpuMs ?? 0);
    }
    return { cpuMs, mainThreadCpuMs, rssBytes };
  }
}

/** When the jobs start: all at once without a rate; else `rate` a second, and the last `burst` of them at once. */
export interface StartPlan {
  rate: number;
  burst: number;
}

/** When the starts happened: what tells the steady part of a run from its burst. */
export interface StartTimes {
  /** The last start at the steady rate; undefined without a rate. */
  lastSteadyAt?: number;
  /** When the burst's jobs were started (all at once: the first start of a run without a rate). */
  burstAt?: number;
  burstIds: Set<string>;
}

/**
 * Starts `jobs` as `plan` says: without a rate, all at once (32 starts in flight); with one, at that rate, then the last
 * `plan.burst` jobs all at once right after the last steady start (a burst landing on a run in full flow, apart in
 * time from the steady part).
 *
 * @example
 * const times = await startOnSchedule(jobs, { rate: 10, burst: 100 }, Date.now(), start);
 */
export async function startOnSchedule(
  jobs: readonly SoakJob[],
  plan: StartPlan,
  t0: number,
  start: (job: SoakJob) => Promise<void>,
): Promise<StartTimes> {
  if (plan.rate <= 0) {
    await eachLimited(jobs, 32, start);
    return { burstAt: t0, burstIds: new Set(jobs.map((j) => j.workflowId)) };
  }
  const steady = jobs.slice(0, jobs.length - plan.burst);
  const burst = jobs.slice(steady.length);
  const times: StartTimes = { burstIds: new Set(burst.map((j) => j.workflowId)) };
  const starts: Promise<void>[] = [];
  for (let i = 0; i < steady.length; i++) {
    const due = t0 + (i * 1000) / plan.rate;
    if (due > Date.now()) await new Promise((resolve) => setTimeout(resolve, due - Date.now()));
    starts.push(start(steady[i]));
    times.lastSteadyAt = Date.now();
  }
  if (burst.length) {
    // One interval after the last steady start, as the next steady one would have come.
    const due = t0 + (steady.length * 1000) / plan.rate;
    if (due > Date.now()) await new Promise((resolve) => setTimeout(resolve, due - Date.now()));
    times.burstAt = Date.now();
    starts.push(...burst.map(start));
  }
  await Promise.all(starts);
  return times;
}

/** What a run's progress loop reads each second. */
export interface Follow {
  client: Client;
  taskQueue: string;
  t0: number;
  deadline: number;
  allStarted: () => boolean;
  /** The workers' process ids right now, and how to take their sample. */
  sample: () => { rssBytes: number };
  /** Told the runs in flight and closed-as-failed each second; returns a progress line every few seconds. */
  progress: (inFlight: number, failed: number) => string;
  log: (line: string) => void;
}

/**
 * Samples the workers and the runs in flight every second until every run is closed (visibility says so) or the
 * deadline; returns the samples.
 */
export async function followRuns(follow: Follow): Promise<Sample[]> {
  // The jobs alone: a job's keyClaim child counts as running until a workflow task ends it, which under a burst can
  // be a while, and would count one job twice.
  const query = `TaskQueue = "${follow.taskQueue}" AND WorkflowType != "keyClaim"`;
  const samples: Sample[] = [];
  let lastLine = 0;
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const { rssBytes } = follow.sample();
    try {
      const running = (await follow.client.workflow.count(`${query} AND ExecutionStatus = "Running"`)).count;
      const failed = (await follow.client.workflow.count(`${query} AND ExecutionStatus = "Failed"`)).count;
      samples.push({ t: (Date.now() - follow.t0) / 1000, rssMiB: rssBytes / 2 ** 20, inFlight: running });
      const line = follow.progress(running, failed);
      const done = follow.allStarted() && running === 0;
      if (Date.now() - lastLine > 5_000 || done) {
        lastLine = Date.now();
        follow.log(line);
      }
      if (done) break;
    } catch (err) {
      if (Date.now() - lastLine > 5_000) {
        lastLine = Date.now();
        follow.log(`progress unavailable: ${(err as Error).message.split('\n')[0]}`);
      }
    }
    if (Date.now() > follow.deadline) {
      follow.log('deadline reached: runs still open are stuck');
      break;
    }
  }
  return samples;
}

/** Runs `work` over `items`, `limit` at a time. */
export async function eachLimited<T>(
  items: readonly T[],
  limit: number,
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) await work(items[next++]);
    }),
  );
}

/**
 * Reads each started job's history (`read` makes its outcome). A job that visibility reported closed but whose history
 * still ends open (visibility leads) is read again until the deadline.
 */
export async function readOutcomes(
  client: Client,
  started: readonly SoakJob[],
  deadline: number,
  read: (job: SoakJob, history: History) => JobOutcome,
): Promise<JobOutcome[]> {
  const outcomes = new Map<string, JobOutcome>();
  const open = (job: SoakJob) => (outcomes.get(job.workflowId)?.status ?? 'open') === 'open';
  for (;;) {
    await eachLimited(started.filter(open), 16, async (job) => {
      for (let attempt = 1; ; attempt++) {
        try {
          const history = (await client.workflow.getHandle(job.workflowId, job.runId).fetchHistory()) as History;
          outcomes.set(job.workflowId, read(job, history));
          return;
        } catch (err) {
          if (attempt >= 5) throw err;
          await new Promise((resolve) => setTimeout(resolve, 1_000));
        }
      }
    });
    if (!started.some(open) || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 2_000));
  }
  return [...outcomes.values()];
}

/** Callback-to-reaction latency in one part of a run. */
export interface ReactionFigures {
  p50Ms: number;
  p99Ms: number;
  count: number;
  /** Runs in flight meanwhile (the median of the samples). */
  inFlight: number;
  /** How long the part lasted. */
  seconds: number;
  /**
   * The p99 of each part of a reaction (where the histories tell them): the callback to its signal in history
   * (receiver and server), the signal to the task that took it starting (waiting for the worker), that task to its
   * command (the worker's turn).
   */
  partsP99Ms?: { delivery: number; wait: number; task: number };
}

/**
 * The reactions of the steady part and of the burst, apart, by when their callback was sent. The steady part runs from
 * when the runs in flight reach their level (90 % of the most seen before the last steady start: short jobs close
 * long before the long ones, so the first close says nothing) to the last start at the rate; the burst from its starts
 * until its last run closed (every run's callbacks then count for it: they wait behind the burst's). Null for a part
 * the run did not have (no rate: all of it is a burst; too few jobs: no level part).
 *
 * @example
 * reactionsApart(reactions, times, outcomes, samples, t0); // { steady: { p99Ms: 80, inFlight: 990, ... }, burst: null }
 */
export function reactionsApart(
  reactions: readonly Reaction[],
  times: StartTimes,
  outcomes: readonly JobOutcome[],
  samples: readonly Sample[],
  t0: number,
): { steady: ReactionFigures | null; burst: ReactionFigures | null } {
  const burstCloses = outcomes
    .filter((o) => o.closedAt !== undefined && times.burstIds.has(o.job.workflowId))
    .map((o) => o.closedAt as number);
  const burstWindow =
    times.burstAt === undefined ? undefined : ([times.burstAt, Math.max(times.burstAt, ...burstCloses)] as const);
  const beforeLastStart = samples.filter(
    (s) => times.lastSteadyAt !== undefined && t0 + s.t * 1000 <= times.lastSteadyAt,
  );
  const level = 0.9 * Math.max(0, ...beforeLastStart.map((s) => s.inFlight));
  const levelAt = beforeLastStart.find((s) => s.inFlight > 0 && s.inFlight >= level);
  const steadyWindow =
    levelAt !== undefined && t0 + levelAt.t * 1000 < times.lastSteadyAt!
      ? ([t0 + levelAt.t * 1000, times.lastSteadyAt!] as const)
      : undefined;
  const within = (at: number, window: readonly [number, number] | undefined) =>
    window !== undefined && at >= window[0] && at <= window[1];
  const figures = (window: readonly [number, number] | undefined, picked: readonly Reaction[]) => {
    if (!window || picked.length === 0) return null;
    const ms = picked.map((r) => r.ms);
    const inFlight = samples
      .filter((s) => within(t0 + s.t * 1000, window))
      .map((s) => s.inFlight)
      .sort((a, b) => a - b);
    const parts = picked.every((r) => r.parts) ? picked.map((r) => r.parts!) : undefined;
    const p99 = (values: number[]) => Math.round(percentile(values, 99) as number);
    return {
      p50Ms: Math.round(percentile(ms, 50) as number),
      p99Ms: p99(ms),
      count: picked.length,
      inFlight: inFlight.length ? inFlight[Math.floor(inFlight.length / 2)] : 0,
      seconds: Math.round((window[1] - window[0]) / 100) / 10,
      ...(parts && {
        partsP99Ms: {
          delivery: p99(parts.map((p) => p.deliveryMs)),
          wait: p99(parts.map((p) => p.waitMs)),
          task: p99(parts.map((p) => p.taskMs)),
        },
      }),
    };
  };
  const burst = reactions.filter((r) => within(r.sentAt, burstWindow));
  const steady = reactions.filter((r) => within(r.sentAt, steadyWindow) && !within(r.sentAt, burstWindow));
  return { steady: figures(steadyWindow, steady), burst: figures(burstWindow, burst) };
}

/** The figures of one run that tuneflow and the floor are compared on, and what the report shows of both. */
export interface PhaseFigures {
  jobs: number;
  /** Runs that closed as the job allows (tuneflow: completed or failed as the faults allow; the floor: completed). */
  finished: number;
  workerRssMiB: number;
  /** The largest worker's resident memory when it was ready, before any run. */
  workerBaseRssMiB: number;
  /** The most runs open at once (the samples' peak). */
  peakInFlight: number;
  workerCpuMsPerJob: number;
  /** The part of workerCpuMsPerJob the workers' main threads took: activities, and the SDK's side of the core. */
  workerMainThreadCpuMsPerJob: number;
  /** The callback receiver's CPU per job (its own process), and the workers' and its together: the app's side. */
  receiverCpuMsPerJob: number | null;
  workerAndReceiverCpuMsPerJob: number;
  serverCpuMsPerJob: number | null;
  /**
   * CPU of every process on the machine per job, from the first start to the last close (Linux: /proc/stat): server,
   * workers, receiver, mock and harness together. On a machine that runs nothing else, jobs/s follows it once the run
   * is CPU-bound.
   */
  machineCpuMsPerJob: number | null;
  jobsPerSecond: number;
  wallSeconds: number;
  jobLatencyP50Ms: number | null;
  jobLatencyP99Ms: number | null;
  reactionP50Ms: number | null;
  reactionP99Ms: number | null;
  reactions: number;
  /** Activities from scheduled to completed: what a read or create takes, queueing on the worker included. */
  activityP50Ms: number | null;
  activityP99Ms: number | null;
  /** Callback-to-reaction at the steady rate and in the burst, apart. */
  reaction: { steady: ReactionFigures | null; burst: ReactionFigures | null };
  historyEventsPerJob: number;
  historyBytesPerJob: number;
  /** historyBytesPerJob by what the bytes carry (each event's own encoding, without the list's framing). */
  historyBytesByPartPerJob: Record<HistoryPart, number>;
  workflowTasksPerJob: number;
  /** The run's Temporal shape: activities scheduled, timers started and signals taken, per job. */
  activitiesPerJob: number;
  timersPerJob: number;
  signalsPerJob: number;
  /** The machine's 1-minute load average at the first start and when the last run closed: others' work shows here. */
  loadAverage: { start: number; end: number };
  /** With --trace-gc: the first worker's V8 heaps (its main thread's, then its workflow thread's). */
  heaps?: HeapPeak[];
}

const round = (n: number, digits = 0) => Math.round(n * 10 ** digits) / 10 ** digits;
/** `n` to `digits` decimals; null for no figure. */
export const orNull = (n: number | undefined, digits = 0) => (n === undefined ? null : round(n, digits));

/** What a phase's processes used while its jobs ran: `phaseFigures` takes it as it is, with the workers' memory. */
export interface PhaseUsage {
  workerCpuMs: number;
  workerMainThreadCpuMs: number;
  serverCpuMs: number | undefined;
  receiverCpuMs: number | undefined;
  machineCpuMs: number | undefined;
  loadAverage: { start: number; end: number };
}

/**
 * The moment a phase's jobs start, tuneflow's or the floor's: what its figures are measured from, and until when its
 * runs may take (`deadline`).
 *
 * @example
 * const clock = new PhaseClock(options.durationMs); // ... start, follow ...; const used = clock.usage(workers, server.pid, receiver.pid);
 */
export class PhaseClock {
  readonly t0 = Date.now();
  readonly deadline: number;
  private readonly loadAtStart = os.loadavg()[0];
  private readonly machineAtStart = machineCpu();

  constructor(durationMs: number) {
    this.deadline = this.t0 + durationMs;
  }

  /**
   * What every process used since the start, read at once when the runs closed: the judge's reads must not count.
   * `workers` are sampled now (the killed ones' CPU included).
   */
  usage(
    workers: { sample(): { cpuMs: number; mainThreadCpuMs: number } },
    serverPid: number | undefined,
    receiverPid: number | undefined,
  ): PhaseUsage {
    const loadAverage = { start: this.loadAtStart, end: os.loadavg()[0] };
    const machineCpuMs = machineCpuMsSince(this.machineAtStart);
    const { cpuMs, mainThreadCpuMs } = workers.sample();
    return {
      workerCpuMs: cpuMs,
      workerMainThreadCpuMs: mainThreadCpuMs,
      serverCpuMs: usageOf(serverPid)?.cpuMs,
      receiverCpuMs: usageOf(receiverPid)?.cpuMs,
      machineCpuMs,
      loadAverage,
    };
  }
}

/** What a phase leaves for the charts and the floor's shape: every reaction, and each planned job's commands. */
export function phaseDetail(
  jobs: readonly SoakJob[],
  outcomes: readonly JobOutcome[],
): { reactionMs: number[]; sequences: string[][] } {
  return {
    reactionMs: outcomes.flatMap((o) => o.reactions.map((r) => r.ms)),
    sequences: jobs.map((job) => outcomes.find((o) => o.job === job)?.sequence ?? []),
  };
}

/**
 * A run's figures from its outcomes (one per started job) and what was measured meanwhile.
 *
 * @example
 * const figures = phaseFigures({ jobs, outcomes, finished, workerCpuMs, peakRssBytes, serverCpuMs, times, samples, ... });
 */
export function phaseFigures(
  run: PhaseUsage & {
    peakRssBytes: number;
    baseRssBytes: number;
    jobs: readonly SoakJob[];
    outcomes: readonly JobOutcome[];
    finished: number;
    times: StartTimes;
    samples: readonly Sample[];
    t0: number;
  },
): PhaseFigures {
  const { jobs, outcomes, t0 } = run;
  const count = jobs.length;
  const sum = (pick: (o: JobOutcome) => number) => outcomes.reduce((total, o) => total + pick(o), 0);
  const reactions = outcomes.flatMap((o) => o.reactions);
  const latencies = outcomes.flatMap((o) =>
    o.closedAt !== undefined && o.job.startedAt !== undefined ? [o.closedAt - o.job.startedAt] : [],
  );
  const lastClose = Math.max(t0, ...outcomes.map((o) => o.closedAt ?? t0));
  const wall = Math.max(1, (lastClose - t0) / 1000);
  const ms = reactions.map((r) => r.ms);
  const activityMs = outcomes.flatMap((o) => o.activityMs);
  return {
    jobs: count,
    finished: run.finished,
    workerRssMiB: round(run.peakRssBytes / 2 ** 20, 1),
    workerBaseRssMiB: round(run.baseRssBytes / 2 ** 20, 1),
    peakInFlight: Math.max(0, ...run.samples.map((s) => s.inFlight)),
    workerCpuMsPerJob: round(run.workerCpuMs / count, 1),
    workerMainThreadCpuMsPerJob: round(run.workerMainThreadCpuMs / count, 1),
    receiverCpuMsPerJob: orNull(run.receiverCpuMs && run.receiverCpuMs / count, 1),
    workerAndReceiverCpuMsPerJob: round((run.workerCpuMs + (run.receiverCpuMs ?? 0)) / count, 1),
    serverCpuMsPerJob: orNull(run.serverCpuMs && run.serverCpuMs / count, 1),
    machineCpuMsPerJob: orNull(run.machineCpuMs && run.machineCpuMs / count, 1),
    jobsPerSecond: round(run.finished / wall, 2),
    wallSeconds: round(wall, 1),
    jobLatencyP50Ms: orNull(percentile(latencies, 50)),
    jobLatencyP99Ms: orNull(percentile(latencies, 99)),
    reactionP50Ms: orNull(percentile(ms, 50)),
    reactionP99Ms: orNull(percentile(ms, 99)),
    reactions: reactions.length,
    activityP50Ms: orNull(percentile(activityMs, 50)),
    activityP99Ms: orNull(percentile(activityMs, 99)),
    reaction: reactionsApart(reactions, run.times, outcomes, run.samples, t0),
    historyEventsPerJob: round(sum((o) => o.events) / count, 1),
    historyBytesPerJob: round(sum((o) => o.bytes) / count),
    historyBytesByPartPerJob: Object.fromEntries(
      HISTORY_PARTS.map((part) => [part, round(sum((o) => o.bytesByPart[part]) / count)]),
    ) as Record<HistoryPart, number>,
    workflowTasksPerJob: round(sum((o) => o.workflowTasks) / count, 1),
    activitiesPerJob: round(sum((o) => o.commands.activities) / count, 2),
    timersPerJob: round(sum((o) => o.commands.timers) / count, 2),
    signalsPerJob: round(sum((o) => o.commands.signals) / count, 2),
    loadAverage: { start: round(run.loadAverage.start, 1), end: round(run.loadAverage.end, 1) },
  };
}

export interface FloorShape {
  /** Jobs that scheduled the same activities in the same order as the floor's run of the same job. */
  sameActivities: number;
  /** Of those, jobs whose whole sequence (timers, cancels, callbacks) is the floor's too. */
  sameSequence: number;
  compared: number;
  /** The first few jobs whose activities differ, with both sequences. */
  differing: Array<{ job: number; tuneflow: string; floor: string }>;
}

/**
 * How many jobs issued the floor's commands: the same activities in the same order, and the same whole sequence
 * (timing may part those: callbacks taken in one workflow task or in two start and cancel a different number of
 * gathering timers).
 */
export function sameShape(tuneflow: string[][], floor: string[][]): FloorShape {
  const timersAside = (sequence: string[]) =>
    sequence.filter((step) => !/^(timer |cancel$|fired$|callback$)/.test(step)).join(' ');
  const shape: FloorShape = { sameActivities: 0, sameSequence: 0, compared: tuneflow.length, differing: [] };
  tuneflow.forEach((sequence, job) => {
    const other = floor[job] ?? [];
    if (timersAside(sequence) !== timersAside(other)) {
      if (shape.differing.length < 5)
        shape.differing.push({ job, tuneflow: sequence.join(' '), floor: other.join(' ') });
      return;
    }
    shape.sameActivities++;
    if (sequence.join(' ') === other.join(' ')) shape.sameSequence++;
  });
  return shape;
}

/** The figures tuneflow is held to against the floor: tuneflow's divided by the floor's. */
export const COMPARED = [
  'workerAndReceiverCpuMsPerJob',
  'workerCpuMsPerJob',
  'workerMainThreadCpuMsPerJob',
  'receiverCpuMsPerJob',
  'workerRssMiB',
  'serverCpuMsPerJob',
  'machineCpuMsPerJob',
  'historyEventsPerJob',
  'workflowTasksPerJob',
  'historyBytesPerJob',
  'jobsPerSecond',
  'activitiesPerJob',
  'timersPerJob',
  'signalsPerJob',
] as const;
export type Ratios = Record<(typeof COMPARED)[number], number | null>;

/** The compared figures' names in the report. */
export const COMPARED_NAMES: Record<(typeof COMPARED)[number], string> = {
  workerAndReceiverCpuMsPerJob: 'worker and receiver CPU per job',
  workerCpuMsPerJob: '  the worker',
  workerMainThreadCpuMsPerJob: '    its main thread (activities)',
  receiverCpuMsPerJob: '  the receiver',
  workerRssMiB: 'worker RSS peak',
  jobsPerSecond: 'jobs/s',
  serverCpuMsPerJob: 'server CPU per job',
  machineCpuMsPerJob: 'machine CPU per job (all processes)',
  historyEventsPerJob: 'history events per job',
  workflowTasksPerJob: 'workflow tasks per job',
  historyBytesPerJob: 'history bytes per job',
  activitiesPerJob: 'activities per job',
  timersPerJob: 'timers per job',
  signalsPerJob: 'signals per job',
};

/** One round of `--rounds`: which side ran first, and tuneflow / floor. */
export interface Round {
  order: 'tuneflow first' | 'floor first' | 'together';
  ratios: Ratios;
  /** Each side's own figures in the round (the JSON report's; what a ratio moved with). */
  tuneflow?: RoundFigures;
  floor?: RoundFigures;
}

export type RoundFigures = Pick<PhaseFigures, (typeof COMPARED)[number] | 'loadAverage' | 'wallSeconds'>;

/**
 * The figures a round keeps of one side: the compared ones, its wall time and the load average around it.
 *
 * @example
 * roundFigures(floor.figures).serverCpuMsPerJob;
 */
export function roundFigures(figures: PhaseFigures): RoundFigures {
  const kept = Object.fromEntries(COMPARED.map((key) => [key, figures[key]]));
  return { ...kept, loadAverage: figures.loadAverage, wallSeconds: figures.wallSeconds } as RoundFigures;
}

/**
 * tuneflow / floor for each compared figure (null where either is unknown or the floor's is 0).
 *
 * @example
 * ratiosOf({ workerCpuMsPerJob: 30, ... }, { workerCpuMsPerJob: 20, ... }).workerCpuMsPerJob; // 1.5
 */
export function ratiosOf(tuneflow: PhaseFigures, floor: PhaseFigures): Ratios {
  return Object.fromEntries(
    COMPARED.map((key) => {
      const [a, b] = [tuneflow[key], floor[key]];
      return [key, a === null || b === null || b === 0 ? null : round(a / b, 2)];
    }),
  ) as Ratios;
}

/**
 * The median of each ratio over rounds (the mean of the middle two for an even count; null where no round has one):
 * one round's machine mood moves it less than it moves that round.
 *
 * @example
 * medianRatios([{ workerCpuMsPerJob: 1.3, ... }, { workerCpuMsPerJob: 1.1, ... }, { workerCpuMsPerJob: 1.2, ... }]).workerCpuMsPerJob; // 1.2
 */
export function medianRatios(rounds: readonly Ratios[]): Ratios {
  return Object.fromEntries(
    COMPARED.map((key) => {
      const values = rounds
        .map((r) => r[key])
        .filter((v): v is number => v !== null)
        .sort((a, b) => a - b);
      if (values.length === 0) return [key, null];
      const mid = values.length >> 1;
      return [key, round(values.length % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2, 2)];
    }),
  ) as Ratios;
}

/**
 * Each compared figure's tuneflow / floor round by round, and the median, as lines of a table:
 * `worker CPU per job  1.13x  1.29x  1.21x  1.21x`.
 */
export function roundsTable(rounds: readonly Round[], median: Ratios): string[] {
  const rows = [
    ['tuneflow / floor', ...rounds.map((round, i) => `${i + 1}: ${round.order}`), 'median'],
    ...COMPARED.map((key) => {
      const show = (ratio: number | null) => (ratio === null ? 'n/a' : `${ratio}x`);
      return [COMPARED_NAMES[key], ...rounds.map((round) => show(round.ratios[key])), show(median[key])];
    }),
  ];
  const widths = rows[0].map((_, i) => Math.max(...rows.map((row) => row[i].length)));
  return [
    rounds[0]?.order === 'together'
      ? "by round (both sides at once each round; the figures above are round 1's)"
      : "by round (the order turned each round; the figures above are round 1's)",
    ...rows.map((row) =>
      row
        .map((cell, i) => cell.padEnd(widths[i]))
        .join('  ')
        .trimEnd(),
    ),
  ];
}

/**
 * The requests a run made to its mock by route, and their total: the service's API, its image and file downloads aside.
 * Requests the mock refused with a 429 count too: they are calls the run made.
 *
 * @example
 * apiCallsOf(mock.stats()).routes['POST /tunes'];
 */
export function apiCallsOf(stats: MockStats): { total: number; routes: Record<string, number> } {
  const routes: Record<string, number> = {};
  for (const counts of [stats.routes, stats.refused ?? {}])
    for (const [route, n] of Object.entries(counts))
      if (!/ \/(images|files)\//.test(route)) routes[route] = (routes[route] ?? 0) + n;
  return { total: Object.values(routes).reduce((a, b) => a + b, 0), routes };
}
