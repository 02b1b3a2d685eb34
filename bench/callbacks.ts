/**
 * Callback receiver throughput and latency: N signed prompt callbacks at a fixed concurrency through an undici Pool,
 * timed from the start of each request to the receiver's call of the signaler. The receiver runs in a worker thread
 * (its own event loop, as in production where the service is another machine); both threads write their clock
 * readings into shared memory, as epoch milliseconds (`performance.timeOrigin + performance.now()`).
 *
 * Two runs: as fast as the receiver answers (throughput), then paced at the goal's 2,000/s (latency at that load).
 * Run alone: `npx tsx bench/callbacks.ts` (env: BENCH_CALLBACKS=20000 per run, BENCH_CONCURRENCY=16,
 * BENCH_RATE=2000, BENCH_IN_PROCESS=1 to run receiver and client on one event loop).
 */
import { Writable } from 'node:stream';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { Pool } from 'undici';
import { startCallbackReceiver, type CallbackReceiver, type Signaler } from '../src/callbacks/receiver';
import { CallbackSigner } from '../src/callbacks/signing';
import { createJsonLogger } from '../src/logging';

const SECRET = 'bench-callback-secret-0123456789';
const WARM_UP = 2_000;

interface ReceiverData {
  role: 'callbacks-receiver';
  signalAt: SharedArrayBuffer;
}

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

/** Starts a receiver whose signaler records when it is called, by prompt id. */
function startRecordingReceiver(signalAt: Float64Array): Promise<CallbackReceiver> {
  const signaler: Signaler = {
    async signal(_workflowId, _kind, payload) {
      signalAt[(payload as { id: number }).id] = now();
      return 'delivered';
    },
  };
  // Logs as in production (a JSON line per callback), written nowhere.
  const sink = new Writable({ write: (_chunk, _enc, done) => done() });
  return startCallbackReceiver({
    host: '127.0.0.1',
    signer: new CallbackSigner({ baseUrl: 'http://127.0.0.1', secret: SECRET }),
    signaler,
    logger: createJsonLogger(sink, 'INFO'),
  });
}

async function startReceiverThread(signalAt: SharedArrayBuffer): Promise<{ url: string; stop(): Promise<void> }> {
  // eval: a worker cannot start from a .ts file; tsx/cjs compiles this file again inside the worker.
  const worker = new Worker(`require('tsx/cjs'); require(${JSON.stringify(__filename)});`, {
    eval: true,
    workerData: { role: 'callbacks-receiver', signalAt } satisfies ReceiverData,
  });
  const [url] = await Promise.race([
    new Promise<[string]>((resolve) => worker.once('message', (m: string) => resolve([m]))),
    new Promise<never>((_, reject) => worker.once('error', reject)),
  ]);
  return {
    url,
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
    const url = new URL(signer.url('prompt', `bench-${first + i}`, { key: `p${(first + i) % 8}` }));
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
 * Measures the callback receiver: callbacks per second and latency from request start to the signal call.
 *
 * @example
 * await benchCallbacks(); // prints "callbacks, concurrency 16, ...: 20000 in 3.49 s = 5729/s; request->signal p50 ..."
 */
export async function benchCallbacks(): Promise<void> {
  const total = Number(process.env.BENCH_CALLBACKS ?? 20_000);
  const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 16);
  const rate = Number(process.env.BENCH_RATE ?? 2_000);
  const inProcess = process.env.BENCH_IN_PROCESS === '1';
  const ids = WARM_UP + 2 * total + 1;
  const shared = new SharedArrayBuffer(Float64Array.BYTES_PER_ELEMENT * ids);
  const signalAt = new Float64Array(shared);
  const sentAt = new Float64Array(ids);

  const receiver = inProcess
    ? await startRecordingReceiver(signalAt).then((r) => ({ url: r.url, stop: () => r.close() }))
    : await startReceiverThread(shared);
  const pool = new Pool(receiver.url, { connections: concurrency });
  const signer = new CallbackSigner({ baseUrl: receiver.url, secret: SECRET });
  const where = inProcess ? 'receiver and client on one thread' : 'receiver in a worker thread';
  const report = (label: string, first: number, elapsedMs: number): void => {
    const latencies = new Float64Array(total);
    for (let i = 0; i < total; i++) {
      const id = first + i;
      if (!signalAt[id]) throw new Error(`callback ${id} was answered but never signalled`);
      latencies[i] = signalAt[id] - sentAt[id];
    }
    latencies.sort();
    const fmt = (ms: number) => `${ms.toFixed(2)} ms`;
    console.log(
      `callbacks, ${label} (${where}): ${total} in ${(elapsedMs / 1000).toFixed(2)} s = ` +
        `${Math.round(total / (elapsedMs / 1000))}/s; request->signal p50 ${fmt(percentile(latencies, 50))}, ` +
        `p99 ${fmt(percentile(latencies, 99))}, max ${fmt(latencies[total - 1])}`,
    );
  };
  try {
    await send(pool, signer, { first: 1, count: WARM_UP }, { concurrency }, sentAt);
    const saturatedFirst = WARM_UP + 1;
    const saturated = await send(pool, signer, { first: saturatedFirst, count: total }, { concurrency }, sentAt);
    report(`concurrency ${concurrency}, as fast as answered`, saturatedFirst, saturated);
    const pacedFirst = saturatedFirst + total;
    const paced = await send(pool, signer, { first: pacedFirst, count: total }, { concurrency, rate }, sentAt);
    report(`concurrency up to ${concurrency}, paced at ${rate}/s`, pacedFirst, paced);
  } finally {
    await pool.close();
    await receiver.stop();
  }
}

if (!isMainThread && (workerData as ReceiverData | undefined)?.role === 'callbacks-receiver') {
  const data = workerData as ReceiverData;
  void startRecordingReceiver(new Float64Array(data.signalAt)).then((receiver) => {
    parentPort!.postMessage(receiver.url);
    parentPort!.once('message', () => void receiver.close().then(() => parentPort!.close()));
  });
} else if (require.main === module) {
  benchCallbacks().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
