/**
 * The sizing table the soak prints for a run: memory a run in flight from the peak over the base, jobs a second a
 * core from CPU a job, and the figures that tell a worker too small.
 */
import type { PhaseFigures } from '../../bench/soak/measure';
import { sdkDefaultCache, sizingLines, sizingOf } from '../../bench/soak/sizing';

const figures = (over: Partial<PhaseFigures>): PhaseFigures =>
  ({
    workerRssMiB: 1205,
    workerBaseRssMiB: 330,
    peakInFlight: 3000,
    workerCpuMsPerJob: 78.2,
    serverCpuMsPerJob: 143.7,
    reactionP99Ms: 3745,
    reaction: {
      steady: null,
      burst: {
        p50Ms: 488,
        p99Ms: 3745,
        count: 9000,
        inFlight: 2400,
        seconds: 600,
        partsP99Ms: { delivery: 40, wait: 3600, task: 348 },
      },
    },
    ...over,
  }) as PhaseFigures;

test('one worker: MiB a run is the peak over the base, shared by the runs in flight; jobs a core from CPU a job', () => {
  const sizing = sizingOf(figures({}), { workers: 1 });
  expect(sizing).toEqual({
    peakInFlight: 3000,
    runsPerWorker: 3000,
    baseRssMiB: 330,
    peakRssMiB: 1205,
    mibPerRun: 0.292,
    runsPerGiB: 3510,
    jobsPerWorkerCore: 12.8,
    jobsPerServerCore: 7,
    reactionP99Ms: 3745,
    waitP99Ms: 3600,
  });
  const lines = sizingLines(sizing);
  expect(lines[0]).toMatch(/^sizing, from this run/);
  expect(lines.join('\n')).toContain("3,000; 3,000 a worker; cache the SDK's default");
  expect(lines.join('\n')).toContain(
    '330 MiB at the first start + 0.292 MiB a run in flight (peak 1,205 MiB): about 3,510 runs',
  );
  expect(lines.join('\n')).toContain('worker 12.8 (replays included), Temporal server 7');
  expect(lines.join('\n')).toContain('here 3745 ms, 3600 ms of it waiting for a worker');
});

test('three workers share the runs in flight; the cache the run set is named', () => {
  const sizing = sizingOf(figures({ workerRssMiB: 630 }), { workers: 3, maxCached: 500 });
  expect(sizing.runsPerWorker).toBe(1000);
  expect(sizing.mibPerRun).toBe(0.3);
  expect(sizingLines(sizing).join('\n')).toContain('cache TUNEFLOW_MAX_CACHED_WORKFLOWS=500');
});

test('too few runs in flight to tell a run from the base: said so, no figure made up', () => {
  const sizing = sizingOf(figures({ peakInFlight: 100, workerRssMiB: 400 }), { workers: 1 });
  expect(sizing.mibPerRun).toBeNull();
  expect(sizing.runsPerGiB).toBeNull();
  expect(sizingLines(sizing).join('\n')).toContain("too few runs in flight to tell a run's part");
});

test("the SDK's default cache, from the heap limit: named, and said to evict when smaller than the runs a worker held", () => {
  // Node 20's default heap limit on this 24 GiB machine, and the SDK's formula (600 runs a GiB above 200 MiB).
  expect(sdkDefaultCache(4144)).toBe(2310);
  expect(sdkDefaultCache(100)).toBe(10);
  const evicting = sizingLines(sizingOf(figures({}), { workers: 1, defaultCache: 2310 })).join('\n');
  expect(evicting).toContain(
    "cache the SDK's default (2,310 here, from the heap limit): smaller, so runs were evicted",
  );
  const holding = sizingLines(sizingOf(figures({}), { workers: 1, maxCached: 10_000, defaultCache: 2310 })).join('\n');
  expect(holding).toContain('cache TUNEFLOW_MAX_CACHED_WORKFLOWS=10,000');
  expect(holding).not.toContain('smaller, so runs were evicted');
});
