/**
 * Service client throughput: GET /tunes/:id of one tune, with a valid key, against the mock service, through
 * (a) the tuneflow client (validation, error mapping, schema check of the answer), (b) bare undici `Pool.request` with
 * the same pool settings and header (body read and parsed as JSON), (c) global `fetch`, (d) the tuneflow client with
 * the OpenTelemetry SDK installed (`traced`: each request a recorded span, batched to an exporter that drops them, so
 * the cost is the client's, not the network's), (e) `raw`: the bench's ceiling, the least an HTTP/1.1 client can do
 * (one prepared request written to a kept-alive socket, the answer's bytes counted, nothing parsed but the length),
 * which shows how much faster than bare undici any client could be on this mock and machine. Same concurrency, same
 * count.
 * The mock runs in a worker thread (its own event loop, as the real service is another machine).
 *
 * Fairness and stability, and why:
 * - Every run is a fresh worker thread (its own V8 isolate) that builds one client, warms it up, then measures it.
 *   Measured, one process's JIT state moves the tuneflow/undici ratio of all its runs together, anywhere from 0.87 to
 *   1.24 between processes of the same code, and what ran before in the isolate (fetch, with node's own copy of
 *   undici, shares node's streams and sockets) moves it too. Fresh isolates make the runs independent, so medians
 *   over rounds mean something.
 * - Clients take turns in an order that rotates each round; the ratio is also taken round by round (neighbouring
 *   runs share the machine's mood), with its quartiles.
 * - CPU per request is given for the client's thread alone (Linux: /proc/thread-self/schedstat), next to the whole
 *   process's (which includes the mock's thread: the same work for every client).
 * - The machine is shared: before each run the bench waits (up to BENCH_QUIET_WAIT ms) until other processes leave
 *   the cores idle, and it reports how busy they kept the machine during the runs (Linux: /proc/stat).
 *
 * Run alone: `npx tsx bench/client.ts` (env: BENCH_CLIENT_REQUESTS=8000 per run after 3000 to warm up,
 * BENCH_CLIENT_ROUNDS=9, BENCH_CONCURRENCY=32, BENCH_CLIENTS=tuneflow,undici,fetch to pick, BENCH_QUIET_WAIT=5000,
 * BENCH_IN_PROCESS=1 to run the mock on each client's event loop).
 */
import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { Pool } from 'undici';
import { TunesApi, type TuneCreateInput } from '../src/api';
import { DEFAULT_TIMEOUT_MS } from '../src/api/http';
import { startMockService, type MockStats } from '../src/mock-service';
import { machineCpu, othersSince } from './machine';

const API_KEY = 'sk-bench-client-0123456789';
const ROUTE = 'GET /tunes/:id';
const CLIENTS = ['tuneflow', 'undici', 'fetch', 'traced', 'raw'] as const;
type ClientName = (typeof CLIENTS)[number];

interface MockData {
  role: 'client-bench-mock';
}

interface RunData {
  role: 'client-bench-run';
  client: ClientName;
  /** The mock's URL; none to start a mock on the run's own event loop. */
  url?: string;
  warmUp: number;
  count: number;
  concurrency: number;
}

interface RunResult {
  /** Requests per second. */
  rate: number;
  /** Busy time of the client's event loop per request, in microseconds (wall clock: inflated on a busy machine). */
  busyUs: number;
  /** CPU time of the client's thread per request, in microseconds; NaN where the OS does not tell. */
  threadCpuUs: number;
  /** CPU time of the whole process per request, in microseconds: the client's work plus the mock's and the GC's. */
  cpuUs: number;
  /** Cores other processes kept busy during the run, on average; NaN where the OS does not tell. */
  othersCores: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** CPU time of the calling thread in nanoseconds (Linux), or NaN. */
function threadCpuNs(): number {
  try {
    return Number(readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]);
  } catch {
    return NaN;
  }
}

/** Waits until other processes leave the cores idle (under 0.15 of a core over 250 ms), for at most `maxMs`. */
async function quietMachine(maxMs: number): Promise<number> {
  const started = performance.now();
  do {
    const before = machineCpu();
    const cpu = process.cpuUsage();
    await sleep(250);
    const { user, system } = process.cpuUsage(cpu);
    if (!(othersSince(before, (user + system) / 1e6, 0.25) >= 0.15)) break;
  } while (performance.now() - started < maxMs);
  return performance.now() - started;
}

interface MockHandle {
  url: string;
  stats(): Promise<MockStats>;
  /** Milliseconds the mock's event loop has been busy so far. */
  busyMs(): number;
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
    busyMs: () => worker.performance.eventLoopUtilization().active,
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

/** Runs one client in a fresh worker thread: warm-up, then the measured run. */
async function runInWorker(data: RunData): Promise<RunResult> {
  const worker = new Worker(`require('tsx/cjs'); require(${JSON.stringify(__filename)});`, {
    eval: true,
    workerData: data,
  });
  const exited = new Promise((resolve) => worker.once('exit', resolve));
  const result = await Promise.race([
    new Promise<RunResult>((resolve) => worker.once('message', resolve)),
    new Promise<never>((_, reject) => worker.once('error', reject)),
    exited.then(() => Promise.reject(new Error(`the ${data.client} run ended without a result`))),
  ]);
  await exited;
  return result;
}

const TUNE: TuneCreateInput = {
  title: 'bench-tune',
  name: 'woman',
  branch: 'fast',
  image_urls: ['https://example.com/train/1.jpg', 'https://example.com/train/2.jpg'],
};

/** The client's way of reading the tune: it returns the id it read, so nothing can be optimised away. */
function clientFor(
  name: ClientName,
  url: string,
  tuneId: number,
  connections: number,
): { read(): Promise<number>; close(): Promise<void> } {
  const headers = { authorization: `Bearer ${API_KEY}` };
  const path = `/tunes/${tuneId}`;
  switch (name) {
    case 'tuneflow': {
      const api = new TunesApi({ apiKey: API_KEY, baseUrl: url, connections });
      return { read: async () => (await api.tunes.retrieve(tuneId)).id, close: () => api.close() };
    }
    case 'traced': {
      // The SDK as an application installs it (this thread's own globals); spans exported to nowhere.
      const spanProcessor = new BatchSpanProcessor({
        export: (_spans, done) => done({ code: 0 }),
        shutdown: async () => {},
      });
      const provider = new BasicTracerProvider({ spanProcessors: [spanProcessor] });
      provider.register({ contextManager: new AsyncLocalStorageContextManager().enable() });
      const api = new TunesApi({ apiKey: API_KEY, baseUrl: url, connections });
      return {
        read: async () => (await api.tunes.retrieve(tuneId)).id,
        close: async () => {
          await api.close();
          await provider.shutdown();
          trace.disable();
          context.disable();
          propagation.disable();
        },
      };
    }
    case 'undici': {
      // The client's own pool settings.
      const pool = new Pool(url, {
        connections,
        headersTimeout: DEFAULT_TIMEOUT_MS,
        bodyTimeout: DEFAULT_TIMEOUT_MS,
      });
      return {
        read: async () => {
          const res = await pool.request({ method: 'GET', path, headers });
          const body = (await res.body.json()) as { id: number };
          if (res.statusCode !== 200) throw new Error(`undici: ${res.statusCode}`);
          return body.id;
        },
        close: () => pool.close(),
      };
    }
    case 'raw':
      return rawClient(url, path, headers.authorization, tuneId, connections);
    case 'fetch':
      return {
        read: async () => {
          const res = await fetch(url + path, { headers });
          const body = (await res.json()) as { id: number };
          if (res.status !== 200) throw new Error(`fetch: ${res.status}`);
          return body.id;
        },
        close: async () => {},
      };
  }
}

/**
 * The ceiling: `connections` kept-alive sockets, each with one prepared GET in flight; an answer is done when its
 * header block and `content-length` bytes have arrived. Nothing is checked or decoded, so no client that reads the
 * answer can be cheaper.
 */
function rawClient(
  url: string,
  path: string,
  authorization: string,
  tuneId: number,
  connections: number,
): { read(): Promise<number>; close(): Promise<void> } {
  const { hostname, port, host } = new URL(url);
  const request = Buffer.from(`GET ${path} HTTP/1.1\r\nhost: ${host}\r\nauthorization: ${authorization}\r\n\r\n`);
  const idle: Socket[] = [];
  const waiting: Array<(socket: Socket) => void> = [];
  const sockets: Socket[] = [];
  const release = (socket: Socket) => {
    const next = waiting.shift();
    if (next) next(socket);
    else idle.push(socket);
  };
  for (let i = 0; i < connections; i++) {
    const socket = connect({ host: hostname, port: Number(port), noDelay: true });
    sockets.push(socket);
    idle.push(socket);
  }
  const exchange = (socket: Socket) =>
    new Promise<void>((resolve, reject) => {
      let head = '';
      let remaining = -1;
      const done = (err?: Error) => {
        socket.off('data', onData);
        socket.off('error', done);
        if (err) reject(err);
        else resolve();
      };
      const onData = (chunk: Buffer) => {
        if (remaining < 0) {
          head += chunk.toString('latin1');
          const end = head.indexOf('\r\n\r\n');
          if (end < 0) return;
          const length = /content-length: *(\d+)/i.exec(head.slice(0, end));
          if (!length) return done(new Error('raw: no content-length'));
          remaining = Number(length[1]) - (head.length - end - 4);
        } else remaining -= chunk.length;
        if (remaining <= 0) done();
      };
      socket.on('data', onData);
      socket.on('error', done);
      socket.write(request);
    });
  return {
    async read() {
      const socket = idle.pop() ?? (await new Promise<Socket>((resolve) => waiting.push(resolve)));
      try {
        await exchange(socket);
      } finally {
        release(socket);
      }
      return tuneId;
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
    },
  };
}

/** Reads the tune `count` times with `concurrency` in flight and measures it. */
async function measure(read: () => Promise<number>, count: number, concurrency: number): Promise<RunResult> {
  let next = 0;
  let checksum = 0;
  const lane = async (): Promise<void> => {
    while (next < count) {
      next++;
      checksum += await read();
    }
  };
  const machine = machineCpu();
  const loop = performance.eventLoopUtilization();
  const thread = threadCpuNs();
  const cpu = process.cpuUsage();
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, lane));
  const elapsed = performance.now() - started;
  const { user, system } = process.cpuUsage(cpu);
  const threadNs = threadCpuNs() - thread;
  const { active } = performance.eventLoopUtilization(loop);
  if (checksum === 0) throw new Error('no tune was read');
  return {
    rate: count / (elapsed / 1000),
    busyUs: (active * 1000) / count,
    threadCpuUs: threadNs / 1000 / count,
    cpuUs: (user + system) / count,
    othersCores: othersSince(machine, (user + system) / 1e6, elapsed / 1000),
  };
}

/** The body of a run's worker thread. */
async function clientRun(data: RunData): Promise<RunResult> {
  const mock = data.url === undefined ? await startMockService() : undefined;
  const url = data.url ?? mock!.url;
  const setup = new TunesApi({ apiKey: API_KEY, baseUrl: url });
  const tune = await setup.tunes.create(TUNE);
  await setup.close();
  const client = clientFor(data.client, url, tune.id, data.concurrency);
  try {
    await measure(client.read, data.warmUp, data.concurrency);
    return await measure(client.read, data.count, data.concurrency);
  } finally {
    await client.close();
    await mock?.close();
  }
}

const quantile = (values: number[], q: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (sorted.length - 1) * q;
  const low = Math.floor(at);
  return sorted[low] + (sorted[Math.ceil(at)] - sorted[low]) * (at - low);
};
const median = (values: number[]): number => quantile(values, 0.5);

/**
 * Measures the client against bare undici and global fetch on the same endpoint and prints a table.
 *
 * @example
 * await benchClient(); // prints req/s and CPU per request of tuneflow, undici, fetch, the ratios, the mock's own rate
 */
export async function benchClient(): Promise<void> {
  const count = Number(process.env.BENCH_CLIENT_REQUESTS ?? 8_000);
  const rounds = Number(process.env.BENCH_CLIENT_ROUNDS ?? 9);
  const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 32);
  const quietWaitMs = Number(process.env.BENCH_QUIET_WAIT ?? 5_000);
  const oneLoop = process.env.BENCH_IN_PROCESS === '1';
  const names = (process.env.BENCH_CLIENTS ?? CLIENTS.join(','))
    .split(',')
    .filter((n): n is ClientName => (CLIENTS as readonly string[]).includes(n));
  const mock = oneLoop ? undefined : await startMockThread();

  const results: Record<string, RunResult[]> = Object.fromEntries(names.map((n) => [n, []]));
  let waitedMs = 0;
  try {
    const servedBefore = (await mock?.stats())?.routes[ROUTE] ?? 0;
    const busyBefore = mock?.busyMs() ?? 0;
    for (let round = 0; round < rounds; round++) {
      for (let i = 0; i < names.length; i++) {
        const client = names[(round + i) % names.length];
        waitedMs += await quietMachine(quietWaitMs);
        const run: RunData = { role: 'client-bench-run', client, url: mock?.url, warmUp: 3_000, count, concurrency };
        results[client].push(await runInWorker(run));
      }
    }

    const of = (name: string, key: keyof RunResult) => results[name].map((r) => r[key]);
    const pad = (s: string, n: number) => s.padStart(n);
    console.log(
      `client bench: ${ROUTE} of one tune, ${count} requests x ${rounds} rounds per client (each run a fresh ` +
        `worker thread, warmed up), ${concurrency} in flight, mock ${oneLoop ? "on the client's event loop" : 'in a worker thread'}`,
    );
    console.log(
      `${'client'.padEnd(10)}${pad('median req/s', 14)}${pad('min', 9)}${pad('max', 9)}` +
        `${pad('client cpu us/req', 19)}${pad('process cpu us/req', 20)}${pad('loop us/req', 13)}`,
    );
    for (const n of names) {
      const rates = of(n, 'rate');
      const cells = [median(rates), Math.min(...rates), Math.max(...rates)].map((x, i) =>
        pad(x.toFixed(0), i === 0 ? 14 : 9),
      );
      const costs = [
        pad(median(of(n, 'threadCpuUs')).toFixed(1), 19),
        pad(median(of(n, 'cpuUs')).toFixed(1), 20),
        pad(median(of(n, 'busyUs')).toFixed(1), 13),
      ];
      console.log(`${n.padEnd(10)}${cells.join('')}${costs.join('')}`);
    }
    // Round by round too: the runs of a round are neighbours in time, so they share the machine's mood.
    for (const other of ['undici', 'fetch', 'traced', 'raw'].filter((n) => results.tuneflow && results[n])) {
      const perRound = results.tuneflow.map((r, i) => r.rate / results[other][i].rate);
      const cpuMore = results.tuneflow.map((r, i) => r.threadCpuUs - results[other][i].threadCpuUs);
      const q = (x: number) => quantile(perRound, x).toFixed(3);
      console.log(
        `tuneflow/${other} req/s: ratio of medians ${(median(of('tuneflow', 'rate')) / median(of(other, 'rate'))).toFixed(3)}` +
          `, per round median ${q(0.5)} (quartiles ${q(0.25)}-${q(0.75)})` +
          (Number.isNaN(cpuMore[0])
            ? ''
            : `; client cpu per request ${median(cpuMore) >= 0 ? '+' : ''}${median(cpuMore).toFixed(1)} us (median per round)`),
      );
    }
    if (results.raw && results.undici) {
      const ceiling = results.raw.map((r, i) => r.rate / results.undici[i].rate);
      console.log(
        `ceiling: raw/undici req/s per round median ${median(ceiling).toFixed(3)} (quartiles ` +
          `${quantile(ceiling, 0.25).toFixed(3)}-${quantile(ceiling, 0.75).toFixed(3)}): no client that reads the ` +
          'answer can pass bare undici by more than this here',
      );
    }
    const others = names.flatMap((n) => of(n, 'othersCores'));
    if (!Number.isNaN(others[0]))
      console.log(
        `machine: other processes kept ${median(others).toFixed(2)} cores busy during a run (median; max ` +
          `${Math.max(...others).toFixed(2)}); ${(waitedMs / 1000).toFixed(1)} s spent waiting for quiet`,
      );
    if (mock) {
      // The mock's own rate: requests served per second of its busy event loop (its capacity on one core).
      const served = ((await mock.stats()).routes[ROUTE] ?? 0) - servedBefore;
      const busySeconds = (mock.busyMs() - busyBefore) / 1000;
      console.log(
        `mock: served ${served} requests (warm-ups included); ${(served / busySeconds).toFixed(0)} per second of busy loop`,
      );
    }
  } finally {
    await mock?.stop();
  }
}

const role = isMainThread ? undefined : (workerData as MockData | RunData | undefined)?.role;
if (role === 'client-bench-mock') {
  void startMockService().then((mock) => {
    parentPort!.postMessage(mock.url);
    parentPort!.on('message', (message: string) => {
      if (message === 'stats') parentPort!.postMessage(mock.stats());
      else void mock.close().then(() => parentPort!.close());
    });
  });
} else if (role === 'client-bench-run') {
  void clientRun(workerData as RunData).then((result) => parentPort!.postMessage(result));
} else if (require.main === module) {
  benchClient().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
