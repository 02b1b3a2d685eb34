/**
 * Sizing workers from one soak run: what a run in flight costs a worker's memory, what a job costs its CPU and the
 * server's, the cache to choose, and the figure that says the worker was too small. An operator runs the soak on
 * their own machine with their own numbers (`--jobs`, `--training-time`, `--workers`) and reads this table.
 */
import type { PhaseFigures } from './measure';

export interface Sizing {
  /** The most runs open at once, and per worker. */
  peakInFlight: number;
  runsPerWorker: number;
  /** A worker's resident memory when the first job started, and its peak. */
  baseRssMiB: number;
  peakRssMiB: number;
  /** The peak above the base, over the runs each worker held then; null when too few runs were open to tell. */
  mibPerRun: number | null;
  /** Runs in flight a GiB of worker memory holds past its base. */
  runsPerGiB: number | null;
  /** Jobs a second one core does at this run's CPU a job (replays included): the worker's, the server's. */
  jobsPerWorkerCore: number | null;
  jobsPerServerCore: number | null;
  /** TUNEFLOW_MAX_CACHED_WORKFLOWS of the run; undefined for the SDK's default (sized from the heap limit). */
  maxCached?: number;
  /** The SDK's default cache on this machine, when the run used it with Node's default heap limit. */
  defaultCache?: number;
  /** Callback-to-reaction p99, and its part spent waiting for a worker to take the task. */
  reactionP99Ms: number | null;
  waitP99Ms: number | null;
}

/** Fewer runs than this at the peak, and the memory a run is lost in the worker's base. */
const RUNS_TO_TELL = 200;

const round = (n: number, digits = 0) => Math.round(n * 10 ** digits) / 10 ** digits;

/**
 * The sizing figures of a run.
 *
 * @example
 * sizingOf(figures, { workers: 1, maxCached: undefined });
 */
export function sizingOf(
  figures: PhaseFigures,
  run: { workers: number; maxCached?: number; defaultCache?: number },
): Sizing {
  const runsPerWorker = figures.peakInFlight / run.workers;
  const grown = figures.workerRssMiB - figures.workerBaseRssMiB;
  const mibPerRun = runsPerWorker >= RUNS_TO_TELL && grown > 0 ? grown / runsPerWorker : null;
  const parts = [figures.reaction.burst, figures.reaction.steady].find((p) => p?.partsP99Ms)?.partsP99Ms;
  return {
    peakInFlight: figures.peakInFlight,
    runsPerWorker: Math.round(runsPerWorker),
    baseRssMiB: round(figures.workerBaseRssMiB),
    peakRssMiB: round(figures.workerRssMiB),
    mibPerRun: mibPerRun === null ? null : round(mibPerRun, 3),
    runsPerGiB: mibPerRun === null ? null : round(1024 / mibPerRun, -1),
    jobsPerWorkerCore: figures.workerCpuMsPerJob > 0 ? round(1000 / figures.workerCpuMsPerJob, 1) : null,
    jobsPerServerCore: figures.serverCpuMsPerJob ? round(1000 / figures.serverCpuMsPerJob, 1) : null,
    ...(run.maxCached !== undefined && { maxCached: run.maxCached }),
    ...(run.maxCached === undefined && run.defaultCache !== undefined && { defaultCache: run.defaultCache }),
    reactionP99Ms: figures.reactionP99Ms,
    waitP99Ms: parts ? parts.wait : null,
  };
}

/**
 * The sizing table in words, as the soak prints it.
 *
 * @example
 * process.stderr.write(sizingLines(sizingOf(figures, { workers: 1 })).join('\n'));
 */
export function sizingLines(sizing: Sizing): string[] {
  const n = (x: number) => x.toLocaleString('en-US');
  const size = sizing.maxCached ?? sizing.defaultCache;
  const cache =
    (sizing.maxCached === undefined
      ? `the SDK's default (${sizing.defaultCache === undefined ? 'sized from the heap limit' : `${n(sizing.defaultCache)} here, from the heap limit`})`
      : `TUNEFLOW_MAX_CACHED_WORKFLOWS=${n(sizing.maxCached)}`) +
    (size !== undefined && size < sizing.runsPerWorker ? ': smaller, so runs were evicted and replayed' : '');
  const rows: Array<[string, string]> = [
    ['runs in flight, at the peak', `${n(sizing.peakInFlight)}; ${n(sizing.runsPerWorker)} a worker; cache ${cache}`],
    [
      'worker memory',
      sizing.mibPerRun === null
        ? `${n(sizing.baseRssMiB)} MiB at the first start, ${n(sizing.peakRssMiB)} MiB at the peak (too few runs in flight to tell a run's part: ${RUNS_TO_TELL} a worker at least)`
        : `${n(sizing.baseRssMiB)} MiB at the first start + ${sizing.mibPerRun} MiB a run in flight ` +
          `(peak ${n(sizing.peakRssMiB)} MiB): about ${n(sizing.runsPerGiB!)} runs in flight a GiB`,
    ],
    [
      'jobs a second a core',
      `worker ${sizing.jobsPerWorkerCore ?? 'n/a'} (replays included), Temporal server ${sizing.jobsPerServerCore ?? 'n/a'}`,
    ],
    [
      'the cache to choose',
      sizing.mibPerRun === null
        ? 'every run in flight on the worker, if its memory holds them (run more jobs to measure a run)'
        : `every run in flight on the worker while ${n(sizing.baseRssMiB)} MiB + ${sizing.mibPerRun} MiB a run fits ` +
          'its memory; below that, each callback to an evicted run waits for a replay',
    ],
    [
      'too small when',
      `callback-to-reaction p99 grows with the runs in flight (here ${sizing.reactionP99Ms ?? 'n/a'} ms, ` +
        `${sizing.waitP99Ms ?? 'n/a'} ms of it waiting for a worker): watch ` +
        'temporal_workflow_task_schedule_to_start_latency, and temporal_sticky_cache_total_forced_eviction for a cache too small',
    ],
  ];
  const width = Math.max(...rows.map(([name]) => name.length));
  return [
    'sizing, from this run on this machine (docs/scale.md, "Sizing workers"):',
    ...rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`),
  ];
}

/**
 * The SDK's default cache size for a worker whose V8 heap limit is `heapLimitMiB` (@temporalio/worker 1.24's
 * worker-options: 600 runs a GiB above 200 MiB, reusing one V8 context, as tuneflow's worker does).
 *
 * @example
 * sdkDefaultCache(4144); // 2310
 */
export function sdkDefaultCache(heapLimitMiB: number): number {
  return Math.max(Math.floor((Math.max(heapLimitMiB - 200, 0) * 600) / 1024), 10);
}
