/**
 * Callback receiver throughput and latency: N signed prompt callbacks at a fixed concurrency through an undici Pool,
 * timed from the start of each request to the receiver's call of the signaler. The receiver runs in a worker thread
 * (its own event loop, as in production where the service is another machine); both threads write their clock
 * readings into shared memory, as epoch milliseconds (`performance.timeOrigin + performance.now()`).
 *
 * Next to the receiver, in the same thread, runs a baseline: a bare node:http server that reads the body, parses it
 * and calls the same signaler (no signature, no validation, no log). Whatever tail the baseline has is the machine's
 * and the harness's, not the receiver's.
 *
 * Runs: as fast as the receiver answers (throughput), then paced at the goal's 2,000/s (latency at that load),
 * alternating baseline and receiver. Each run reports where a tail could come from: how many slow callbacks (over
 * 5 ms) overlapped a garbage collection of the server's thread or of the client's, how long the server's thread
 * waited for a core while it had work (Linux: /proc/thread-self/schedstat), and how busy other processes kept the
 * machine.
 * Run alone: `npx tsx bench/callbacks.ts` (env: BENCH_CALLBACKS=20000 per run, BENCH_CONCURRENCY=16,
 * BENCH_RATE=2000, BENCH_CALLBACK_ROUNDS=2 paced runs per server, BENCH_IN_PROCESS=1 to run servers and client on one
 * event loop).
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PerformanceObserver } from 'node:perf_hooks';
import { Writable } from 'node:stream';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { Pool } from 'undici';
import { startCallbackReceiver, type Signaler } from '../src/callbacks/receiver';
import { CallbackSigner } from '../src/callbacks/signing';
import { createJsonLogger } from '../src/logging';
import { CallbackKind } from '../src/contract/messages';
import { machineCpu, othersSince } from './machine';

const SECRET = 'bench-callback-secret-0123456789';
const BENCH_RUN_ID = '0190b7c1-2f7e-7c1a-9d52-5a4f3c2b1a00';
const WARM_UP = 2_000;
/** The goal's bound on request-to-signal latency, in milliseconds. */
const SLOW_MS = 5;

interface ServerData {
  role: 'callbacks-servers';
  signalAt: SharedArrayBuffer;
}

/** Garbage collections, as [start (epoch ms), duration (ms)] pairs. */
type Pauses = [number, number][];

/** What a thread did since the last sample. */
interface ThreadSample {
  pauses: Pauses;
  /** Milliseconds it ran, and waited for a core while it could have run (Linux: /proc/thread-self/schedstat); NaN elsewhere. */
  cpuMs: number;
  waitMs: number;
}

interface Servers {
  /** The callback receiver and the bare baseline. */
  urls: Record<Target, string>;
  /** What the servers' thread did since the last call. */
  sample(): Promise<ThreadSample>;
  stop(): Promise<void>;
}

type Target = 'receiver' | 'baseline';

const now = (): number => performance.timeOrigin + performance.now();

/** A prompt as the service sends it when it is done: about 1 KB of JSON. */
function promptBody(id: number): string {
  return JSON.stringify({
    id,
    callback: `https://hooks.example.com/callbacks/prompt?workflowId=bench-${id}&sig=${'0'.repeat(64)}&key=p${id % 8}`,
    text: '<lora:1504944:1> ohwx woman, studio portrait, soft window light, 85mm, film grain, detailed skin',
    negative_prompt: 'blurry, lowres, deformed hands, watermark, text',
    cfg_scale: 7.5,
    steps: 30,
    seed: 1234567 + id,
    trained_at: '2025-03-01T10:07:00.000Z',
    started_training_at: '2025-03-01T10:06:00.000Z',
    created_at: '2025-03-01T10:05:30.000Z',
    updated_at: '2025-03-01T10:07:00.000Z',
    tune_id: 1504944,
    url: `https://api.example.com/tunes/1504944/prompts/${id}.json`,
    images: [1, 2, 3, 4].map((n) => `https://cdn.example.com/prompts/${id}/${n}-2b7c9f0e4d1a.jpg`),
    user_error: null,
    cost_mc: 1200,
    aspect_ratio: '1:1',
    content_types: ['image/jpeg', 'image/jpeg', 'image/jpeg', 'image/jpeg'],
  });
}

/** CPU and run-queue time of the calling thread so far, in milliseconds (Linux), or NaN. */
function schedstat(): { cpuMs: number; waitMs: number } {
  try {
    const [cpu, wait] = readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ').map(Number);
    return { cpuMs: cpu / 1e6, waitMs: wait / 1e6 };
  } catch {
    return { cpuMs: NaN, waitMs: NaN };
  }
}

/** Records this thread's garbage collections and scheduling; each call returns what happened since the last. */
function recordThread(): () => ThreadSample {
  let pauses: Pauses = [];
  let last = schedstat();
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) pauses.push([performance.timeOrigin + entry.startTime, entry.duration]);
  }).observe({ entryTypes: ['gc'] });
  return () => {
    const now = schedstat();
    const sample = { pauses, cpuMs: now.cpuMs - last.cpuMs, waitMs: now.waitMs - last.waitMs };
    pauses = [];
    last = now;
    return sample;
  };
}

/** The receiver, whose signaler records when it is called (by prompt id), and the bare baseline next to it. */
async function startServers(signalAt: Float64Array): Promise<{ urls: Record<Target, string>; stop(): Promise<void> }> {
  const signaler: Signaler = {
    async signal(_run, wakeUp) {
      signalAt[wakeUp.ids[0]] = now();
      return 'delivered';
    },
  };
  // Logs as in production (a JSON line per callback), written nowhere.
  const sink = new Writable({ write: (_chunk, _enc, done) => done() });
  const receiver = await startCallbackReceiver({
    host: '127.0.0.1',
    signer: new CallbackSigner({ secret: SECRET }),
    signaler,
    logger: createJsonLogger(sink, 'INFO'),
  });
  const delivered = JSON.stringify({ outcome: 'delivered' });
  // The receiver's server options, and the least a server must do: read, parse, signal, answer.
  const baseline: Server = createServer({ requestTimeout: 30_000, headersTimeout: 10_000 }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const payload = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: number };
      const run = { workflowId: '', runId: '' };
      void signaler.signal(run, { kind: CallbackKind.prompt, ids: [payload.id] }).then(() => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': delivered.length });
        res.end(delivered);
      });
    });
  });
  await new Promise<void>((resolve) => baseline.listen(0, '127.0.0.1', resolve));
  const { port } = baseline.address() as AddressInfo;
  return {
    urls: { receiver: receiver.url, baseline: `http://127.0.0.1:${port}` },
    async stop() {
      baseline.closeAllConnections();
      await Promise.all([receiver.close(), new Promise((resolve) => baseline.close(resolve))]);
    },
  };
}

async function startServerThread(signalAt: SharedArrayBuffer): Promise<Servers> {
  // eval: a worker cannot start from a .ts file; tsx/cjs compiles this file again inside the worker.
  const worker = new Worker(`require('tsx/cjs'); require(${JSON.stringify(__filename)});`, {
    eval: true,
    workerData: { role: 'callbacks-servers', signalAt } satisfies ServerData,
  });
  const urls = await Promise.race([
    new Promise<Record<Target, string>>((resolve) => worker.once('message', resolve)),
    new Promise<never>((_, reject) => worker.once('error', reject)),
  ]);
  return {
    urls,
    sample() {
      worker.postMessage('sample');
      return new Promise((resolve) => worker.once('message', resolve));
    },
    async stop() {
      worker.postMessage('stop');
      await new Promise((resolve) => worker.once('exit', resolve));
    },
  };
}

function percentile(sorted: Float64Array, p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Sends prompt callbacks `first..first+count-1` with up to `concurrency` in flight, paced at `rate` per second when
 * given (else as fast as answers come); returns the elapsed milliseconds. Each request's start goes to `sentAt[id]`.
 */
async function send(
  pool: Pool,
  signer: CallbackSigner,
  range: { first: number; count: number },
  load: { concurrency: number; rate?: number },
  sentAt: Float64Array,
): Promise<number> {
  const { first, count } = range;
  // URLs and bodies are made before the clock starts: the client's work is not what is measured.
  const requests = Array.from({ length: count }, (_, i) => {
    const run = { workflowId: `bench-${first + i}`, runId: BENCH_RUN_ID };
    const url = new URL(signer.url('prompt', run, { key: `p${(first + i) % 8}` }));
    return { path: url.pathname + url.search, body: promptBody(first + i) };
  });
  const interval = load.rate ? 1000 / load.rate : 0;
  let next = 0;
  const started = performance.now();
  const lane = async (): Promise<void> => {
    while (next < count) {
      const i = next++;
      const wait = started + i * interval - performance.now();
      if (wait >= 1) await sleep(wait);
      const { path, body } = requests[i];
      sentAt[first + i] = now();
      const res = await pool.request({ path, method: 'POST', body, headers: { 'content-type': 'application/json' } });
      await res.body.dump();
      if (res.statusCode !== 200) throw new Error(`callback ${first + i} answered ${res.statusCode}`);
    }
  };
  await Promise.all(Array.from({ length: load.concurrency }, lane));
  return performance.now() - started;
}

/**
 * Measures the callback receiver: callbacks per second and latency from request start to the signal call, next to
 * a bare node:http baseline under the same load.
 *
 * @example
 * await benchCallbacks(); // prints callbacks/s, then p50/p99/max of receiver and baseline runs paced at 2,000/s
 */
export async function benchCallbacks(): Promise<void> {
  const total = Number(process.env.BENCH_CALLBACKS ?? 20_000);
  const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 16);
  const rate = Number(process.env.BENCH_RATE ?? 2_000);
  const rounds = Number(process.env.BENCH_CALLBACK_ROUNDS ?? 2);
  const inProcess = process.env.BENCH_IN_PROCESS === '1';
  const targets: Target[] = ['baseline', 'receiver'];
  const ids = 1 + targets.length * (WARM_UP + total * (1 + rounds));
  const shared = new SharedArrayBuffer(Float64Array.BYTES_PER_ELEMENT * ids);
  const signalAt = new Float64Array(shared);
  const sentAt = new Float64Array(ids);

  const clientThread = recordThread();
  let servers: Servers;
  if (inProcess) {
    const local = await startServers(signalAt);
    servers = { ...local, sample: async () => clientThread() };
  } else {
    servers = await startServerThread(shared);
  }
  const pools = Object.fromEntries(
    targets.map((t) => [t, new Pool(servers.urls[t], { connections: concurrency })]),
  ) as Record<Target, Pool>;
  const signers = Object.fromEntries(
    targets.map((t) => [t, new CallbackSigner({ baseUrl: servers.urls[t], secret: SECRET })]),
  ) as Record<Target, CallbackSigner>;
  const where = inProcess ? 'servers and client on one thread' : 'servers in a worker thread';
  let nextId = 1;
  const measure = async (target: Target, count: number, paced: boolean) => {
    const first = nextId;
    nextId += count;
    await servers.sample();
    if (!inProcess) clientThread();
    const machine = machineCpu();
    const cpu = process.cpuUsage();
    const load = paced ? { concurrency, rate } : { concurrency };
    const elapsed = await send(pools[target], signers[target], { first, count }, load, sentAt);
    const { user, system } = process.cpuUsage(cpu);
    const others = othersSince(machine, (user + system) / 1e6, elapsed / 1000);
    const latencies = new Float64Array(count);
    for (let i = 0; i < count; i++) {
      const id = first + i;
      if (!signalAt[id]) throw new Error(`callback ${id} was answered but never signalled`);
      latencies[i] = signalAt[id] - sentAt[id];
    }
    return { first, elapsed, latencies, server: await servers.sample(), client: clientThread(), others };
  };
  const report = (label: string, run: Awaited<ReturnType<typeof measure>>): void => {
    const { first, elapsed, latencies, server, client, others } = run;
    // Slow callbacks that a collection overlapped: of the server's thread (which it stops), or of the client's (which
    // competes with the server for the two cores, with its helper threads).
    let slow = 0;
    let inServerGc = 0;
    let inClientGc = 0;
    const overlaps = (list: Pauses, from: number, to: number) => list.some(([at, ms]) => at < to && at + ms > from);
    for (let i = 0; i < latencies.length; i++) {
      if (latencies[i] <= SLOW_MS) continue;
      slow++;
      if (overlaps(server.pauses, sentAt[first + i], signalAt[first + i])) inServerGc++;
      if (overlaps(client.pauses, sentAt[first + i], signalAt[first + i])) inClientGc++;
    }
    const sorted = latencies.slice().sort();
    const fmt = (ms: number) => `${ms.toFixed(2)} ms`;
    const gc = (list: Pauses) =>
      `${list.length}x (longest ${list.reduce((max, [, ms]) => Math.max(max, ms), 0).toFixed(1)} ms)`;
    console.log(
      `${label}: ${latencies.length} in ${(elapsed / 1000).toFixed(2)} s = ` +
        `${Math.round(latencies.length / (elapsed / 1000))}/s; request->signal p50 ${fmt(percentile(sorted, 50))}, ` +
        `p99 ${fmt(percentile(sorted, 99))}, p99.9 ${fmt(percentile(sorted, 99.9))}, max ${fmt(sorted[sorted.length - 1])}`,
    );
    console.log(
      `  over ${SLOW_MS} ms: ${slow}, ${inServerGc} during a GC of the server's thread, ${inClientGc} during one of ` +
        `the client's; GC: server ${gc(server.pauses)}, client ${inProcess ? 'the same' : gc(client.pauses)}` +
        (Number.isNaN(others) ? '' : `; other processes kept ${others.toFixed(2)} cores busy`),
    );
    if (!Number.isNaN(server.waitMs))
      console.log(
        `  server thread: ran ${server.cpuMs.toFixed(0)} ms (${((1000 * server.cpuMs) / latencies.length).toFixed(0)} us ` +
          `per callback), waited ${server.waitMs.toFixed(0)} ms for a core while runnable` +
          (inProcess
            ? ''
            : `; client thread: ran ${client.cpuMs.toFixed(0)} ms, waited ${client.waitMs.toFixed(0)} ms`),
      );
  };
  try {
    console.log(`callback bench (${where}), concurrency ${concurrency}`);
    await pathological(pools.receiver, signers.receiver);
    for (const target of targets) await measure(target, WARM_UP, false);
    for (const target of targets)
      report(`${target.padEnd(8)} as fast as answered`, await measure(target, total, false));
    for (let round = 0; round < rounds; round++) {
      for (const target of round % 2 === 0 ? targets : [...targets].reverse())
        report(`${target.padEnd(8)} paced at ${rate}/s`, await measure(target, total, true));
    }
  } finally {
    await Promise.all(targets.map((t) => pools[t].close()));
    await servers.stop();
  }
}

/**
 * The bodies of the attacks a signed URL allows (issue 14's probe), each sent 40 times to the receiver: how long each
 * answer took, what it was, and how the process's memory moved. Before callbacks became wake-ups, the first took the
 * receiver 22.7 s and 2 GiB, the second 3.1 s and 900 MiB.
 */
async function pathological(pool: Pool, signer: CallbackSigner): Promise<void> {
  const bodies: Array<[string, CallbackKind, string]> = [
    ['pack list of 170,000 empty objects (510 KB)', CallbackKind.packPrompts, `[${'{},'.repeat(170_000)}{}]`],
    [
      'prompt with 30,000 bad images (60 KB)',
      CallbackKind.prompt,
      JSON.stringify({ id: 7, images: Array(30_000).fill(5) }),
    ],
    [
      'prompt nested 30,000 deep (60 KB)',
      CallbackKind.prompt,
      `{"id": 8, "x": ${'['.repeat(30_000)}${']'.repeat(30_000)}}`,
    ],
    ['tune padded to 60 KB', CallbackKind.tune, JSON.stringify({ id: 9, padding: 'z'.repeat(60_000) })],
    ['prompt of 4 MB', CallbackKind.prompt, JSON.stringify({ id: 10, text: 'y'.repeat(4 << 20) })],
  ];
  let n = 0;
  for (const [label, kind, body] of bodies) {
    const rssBefore = process.memoryUsage().rss;
    const times: number[] = [];
    const statuses = new Map<string, number>();
    for (let i = 0; i < 40; i++) {
      const url = new URL(signer.url(kind, { workflowId: `attack-${n++}`, runId: BENCH_RUN_ID }));
      const started = performance.now();
      // A body far over the limit is answered 413 and its connection cut once enough of it was read: a reset here.
      const status = await pool
        .request({
          path: url.pathname + url.search,
          method: 'POST',
          body,
          headers: { 'content-type': 'application/json' },
        })
        .then(
          async (res) => {
            await res.body.dump();
            return String(res.statusCode);
          },
          (err: { code?: string }) => err.code ?? 'error',
        );
      times.push(performance.now() - started);
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
    }
    const sorted = Float64Array.from(times).sort();
    const grew = (process.memoryUsage().rss - rssBefore) / 2 ** 20;
    console.log(
      `attack: ${label}: answered ${[...statuses].map(([status, count]) => `${count}x ${status}`).join(', ')}; ` +
        `p50 ${percentile(sorted, 50).toFixed(1)} ms, max ${sorted[sorted.length - 1].toFixed(1)} ms; ` +
        `process RSS ${grew >= 0 ? '+' : ''}${grew.toFixed(0)} MiB`,
    );
  }
}

if (!isMainThread && (workerData as ServerData | undefined)?.role === 'callbacks-servers') {
  const data = workerData as ServerData;
  const thread = recordThread();
  void startServers(new Float64Array(data.signalAt)).then((servers) => {
    parentPort!.postMessage(servers.urls);
    parentPort!.on('message', (message: string) => {
      if (message === 'sample') parentPort!.postMessage(thread());
      else void servers.stop().then(() => parentPort!.close());
    });
  });
} else if (require.main === module) {
  benchCallbacks().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
