/**
 * Service client throughput: GET /tunes/:id of one tune, with a valid key, against the mock service, through
 * (a) the tuneflow client (validation, error mapping, zod parse of the answer), (b) bare undici `Pool.request` with
 * the same pool settings and header (body read as JSON), (c) global `fetch`. Same concurrency, same count, after a
 * warm-up; rounds interleave the three in a rotating order and the medians are reported, to even out noise.
 * The mock runs in a worker thread (its own event loop, as the real service is another machine).
 *
 * Run alone: `npx tsx bench/client.ts` (env: BENCH_CLIENT_REQUESTS=8000 per run, BENCH_CLIENT_ROUNDS=7,
 * BENCH_CONCURRENCY=32, BENCH_CLIENTS=tuneflow,undici,fetch to pick, BENCH_IN_PROCESS=1 to run the mock and the
 * clients on one event loop).
 */
import type { EventLoopUtilization } from 'node:perf_hooks';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { Pool } from 'undici';
import { TunesApi } from '../src/api';
import { DEFAULT_TIMEOUT_MS } from '../src/api/http';
import { startMockService, type MockService, type MockStats } from '../src/mock-service';

const API_KEY = 'sk-bench-client-0123456789';
const ROUTE = 'GET /tunes/:id';

interface MockData {
  role: 'client-bench-mock';
}

interface MockHandle {
  url: string;
  stats(): Promise<MockStats>;
  /** The mock's event loop utilization (since `since`), when it has a loop of its own. */
  loop?(since?: EventLoopUtilization): EventLoopUtilization;
  stop(): Promise<void>;
}

async function startMockThread(): Promise<MockHandle> {
  // eval: a worker cannot start from a .ts file; tsx/cjs compiles this file again inside the worker.
  const worker = new Worker(`require('tsx/cjs'); require(${JSON.stringify(__filename)});`, {
    eval: true,
    workerData: { role: 'client-bench-mock' } satisfies MockData,
  });
  const url = await Promise.race([
    new Promise<string>((resolve) => worker.once('message', resolve)),
    new Promise<never>((_, reject) => worker.once('error', reject)),
  ]);
  return {
    url,
    loop: (since) => worker.performance.eventLoopUtilization(since),
    stats() {
      worker.postMessage('stats');
      return new Promise((resolve) => worker.once('message', resolve));
    },
    async stop() {
      worker.postMessage('stop');
      await new Promise((resolve) => worker.once('exit', resolve));
    },
  };
}

function inProcess(mock: MockService): MockHandle {
  return { url: mock.url, stats: async () => mock.stats(), stop: () => mock.close() };
}

/** One way of fetching the tune; returns the tune id it read, so nothing can be optimised away. */
type Fetcher = () => Promise<number>;

interface RunResult {
  /** Requests per second. */
  rate: number;
  /** Busy time of this thread's event loop per request, in microseconds (wall clock: inflated when the machine is busy). */
  busyUs: number;
  /**
   * CPU time of the whole process per request, in microseconds: the client's work plus the mock's (the same for every
   * client), so the difference between two clients is the difference of their own costs.
   */
  cpuUs: number;
}

/** Runs `count` fetches with `concurrency` in flight. */
async function run(fetchTune: Fetcher, count: number, concurrency: number): Promise<RunResult> {
  let next = 0;
  let checksum = 0;
  const lane = async (): Promise<void> => {
    while (next < count) {
      next++;
      checksum += await fetchTune();
    }
  };
  const loop = performance.eventLoopUtilization();
  const cpu = process.cpuUsage();
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, lane));
  const elapsed = performance.now() - started;
  const { active } = performance.eventLoopUtilization(loop);
  const { user, system } = process.cpuUsage(cpu);
  if (checksum === 0) throw new Error('no tune was read');
  return { rate: count / (elapsed / 1000), busyUs: (active * 1000) / count, cpuUs: (user + system) / count };
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

/**
 * Measures the client against bare undici and global fetch on the same endpoint and prints a table.
 *
 * @example
 * await benchClient(); // prints req/s of tuneflow, undici, fetch, the ratios, and the mock's own rate
 */
export async function benchClient(): Promise<void> {
  const count = Number(process.env.BENCH_CLIENT_REQUESTS ?? 8_000);
  const rounds = Number(process.env.BENCH_CLIENT_ROUNDS ?? 7);
  const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 32);
  const oneLoop = process.env.BENCH_IN_PROCESS === '1';
  const mock = oneLoop ? inProcess(await startMockService()) : await startMockThread();

  const api = new TunesApi({ apiKey: API_KEY, baseUrl: mock.url, connections: concurrency });
  const pool = new Pool(mock.url, {
    connections: concurrency,
    headersTimeout: DEFAULT_TIMEOUT_MS,
    bodyTimeout: DEFAULT_TIMEOUT_MS,
  });
  const headers = { authorization: `Bearer ${API_KEY}` };
  try {
    const tune = await api.tunes.create({
      title: 'bench-tune',
      name: 'woman',
      branch: 'fast',
      image_urls: ['https://example.com/train/1.jpg', 'https://example.com/train/2.jpg'],
    });
    const path = `/tunes/${tune.id}`;
    const url = `${mock.url}${path}`;
    const fetchers: Record<string, Fetcher> = {
      tuneflow: async () => (await api.tunes.retrieve(tune.id)).id,
      undici: async () => {
        const res = await pool.request({ method: 'GET', path, headers });
        const body = (await res.body.json()) as { id: number };
        if (res.statusCode !== 200) throw new Error(`undici: ${res.statusCode}`);
        return body.id;
      },
      fetch: async () => {
        const res = await fetch(url, { headers });
        const body = (await res.json()) as { id: number };
        if (res.status !== 200) throw new Error(`fetch: ${res.status}`);
        return body.id;
      },
    };
    const names = (process.env.BENCH_CLIENTS ?? 'tuneflow,undici,fetch').split(',').filter((n) => n in fetchers);

    for (const name of names) await run(fetchers[name], Math.min(2_000, count), concurrency);

    const rates: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
    const busy: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
    const cpu: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
    const servedBefore = (await mock.stats()).routes[ROUTE] ?? 0;
    const mockLoop = mock.loop?.();
    let measuredSeconds = 0;
    for (let round = 0; round < rounds; round++) {
      // Rotate the order each round, so no client always runs first (or after the same one).
      for (let i = 0; i < names.length; i++) {
        const name = names[(round + i) % names.length];
        // A pause, so the garbage of one run (fetch makes a lot) is collected before the next starts.
        await new Promise((resolve) => setTimeout(resolve, 200));
        const { rate, busyUs, cpuUs } = await run(fetchers[name], count, concurrency);
        rates[name].push(rate);
        busy[name].push(busyUs);
        cpu[name].push(cpuUs);
        measuredSeconds += count / rate;
      }
    }
    const mockBusy = mock.loop && mockLoop ? mock.loop(mockLoop) : undefined;
    const served = ((await mock.stats()).routes[ROUTE] ?? 0) - servedBefore;

    const med = Object.fromEntries(names.map((n) => [n, median(rates[n])]));
    const pad = (s: string, n: number) => s.padStart(n);
    console.log(
      `client bench: ${ROUTE} of one tune, ${count} requests x ${rounds} rounds per client, ` +
        `${concurrency} in flight, mock ${oneLoop ? 'on the same event loop' : 'in a worker thread'}`,
    );
    console.log(
      `${'client'.padEnd(10)}${pad('median req/s', 14)}${pad('min', 9)}${pad('max', 9)}${pad('loop us/req', 13)}${pad('cpu us/req', 12)}`,
    );
    for (const n of names) {
      const r = rates[n];
      const cells = [med[n], Math.min(...r), Math.max(...r)].map((x, i) => pad(x.toFixed(0), i === 0 ? 14 : 9));
      const costs = `${pad(median(busy[n]).toFixed(1), 13)}${pad(median(cpu[n]).toFixed(1), 12)}`;
      console.log(`${n.padEnd(10)}${cells.join('')}${costs}`);
    }
    // Ratios round by round too: each round's runs are close in time, so they share the machine's mood.
    const perRound = (a: string, b: string) => median(rates[a].map((r, i) => r / rates[b][i]));
    const ratios = ['undici', 'fetch']
      .filter((other) => rates.tuneflow && rates[other])
      .map(
        (other) =>
          `client/${other} ${(med.tuneflow / med[other]).toFixed(3)} ` +
          `(median of per-round ratios ${perRound('tuneflow', other).toFixed(3)})`,
      );
    if (ratios.length) console.log(ratios.join('; '));
    // The mock's own rate: requests it served per second of its event loop's busy time (its capacity on one core).
    const own = mockBusy
      ? `its own rate ${(served / ((mockBusy.active || 1) / 1000)).toFixed(0)} req/s of busy loop ` +
        `(loop ${(mockBusy.utilization * 100).toFixed(0)}% busy over the runs)`
      : 'its own rate not separable (same event loop as the clients)';
    console.log(
      `mock: served ${served} of ${count * rounds * names.length} measured requests ` +
        `(${(served / measuredSeconds).toFixed(0)} req/s over all runs); ${own}`,
    );
  } finally {
    await api.close();
    await pool.close();
    await mock.stop();
  }
}

if (!isMainThread && (workerData as MockData | undefined)?.role === 'client-bench-mock') {
  void startMockService().then((mock) => {
    parentPort!.postMessage(mock.url);
    parentPort!.on('message', (message: string) => {
      if (message === 'stats') parentPort!.postMessage(mock.stats());
      else void mock.close().then(() => parentPort!.close());
    });
  });
} else if (require.main === module) {
  benchClient().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
