/**
 * Mock service throughput: requests per second for GET /tunes/:id (the route polling hammers), GET /tunes?limit=20
 * and POST /tunes, over keep-alive connections with bare undici. The mock runs in a worker thread (its own event
 * loop, as a separate process would be); the load comes from the main thread. Two cores are shared by both.
 *
 * Run alone: `npx tsx bench/mock-service.ts` (env: BENCH_MOCK_REQUESTS=20000 per route, BENCH_CONCURRENCY=32,
 * BENCH_IN_PROCESS=1 to run mock and load on one event loop).
 */
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { Pool } from 'undici';
import { startMockService } from '../src/mock-service';

const KEY = 'sk-bench-mock-service';
const REQUESTS = Number(process.env.BENCH_MOCK_REQUESTS ?? 20_000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);

async function startMock(inProcess: boolean): Promise<{ url: string; stop(): Promise<void> }> {
  if (inProcess) {
    const mock = await startMockService({ trainingTime: '1h' });
    return { url: mock.url, stop: () => mock.close() };
  }
  // eval: a worker cannot start from a .ts file; tsx/cjs compiles this file again inside the worker.
  const worker = new Worker(`require('tsx/cjs'); require(${JSON.stringify(__filename)});`, {
    eval: true,
    workerData: { role: 'mock-service-bench' },
  });
  const url = await new Promise<string>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  return {
    url,
    async stop() {
      worker.postMessage('stop');
      await new Promise((resolve) => worker.once('exit', resolve));
    },
  };
}

async function measure(count: number, send: (i: number) => Promise<number>): Promise<number> {
  let next = 0;
  let failures = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < count) {
        const status = await send(next++);
        if (status >= 300) failures++;
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (failures) throw new Error(`${failures} requests failed`);
  return count / seconds;
}

/** Prints the mock's requests per second for the routes polling and creating hit. */
export async function benchMockService(): Promise<void> {
  const inProcess = process.env.BENCH_IN_PROCESS === '1';
  const mock = await startMock(inProcess);
  const pool = new Pool(mock.url, { connections: CONCURRENCY, pipelining: 1 });
  const headers = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
  const get = async (path: string) => {
    const res = await pool.request({ method: 'GET', path, headers });
    await res.body.arrayBuffer();
    return res.statusCode;
  };
  const post = async (i: number) => {
    const body = JSON.stringify({
      tune: { title: `bench-${i}`, name: 'man', image_urls: ['https://images.test/1.jpg'] },
    });
    const res = await pool.request({ method: 'POST', path: '/tunes', headers, body });
    await res.body.arrayBuffer();
    return res.statusCode;
  };
  try {
    const created = await pool.request({
      method: 'POST',
      path: '/tunes',
      headers,
      body: JSON.stringify({ tune: { title: 'bench', name: 'man', image_urls: ['https://images.test/1.jpg'] } }),
    });
    const { id } = (await created.body.json()) as { id: number };
    await measure(2_000, () => get(`/tunes/${id}`)); // warm-up
    const results: Record<string, number> = {};
    results['GET /tunes/:id'] = await measure(REQUESTS, () => get(`/tunes/${id}`));
    results['POST /tunes'] = await measure(Math.min(REQUESTS, 5_000), post);
    results['GET /tunes?limit=20'] = await measure(Math.min(REQUESTS, 5_000), () => get('/tunes?limit=20'));
    console.log(
      `mock service (${inProcess ? 'same event loop as the load' : 'worker thread'}, ${CONCURRENCY} keep-alive connections)`,
    );
    for (const [route, rate] of Object.entries(results)) console.log(`  ${route.padEnd(22)} ${Math.round(rate)} req/s`);
  } finally {
    await pool.close();
    await mock.stop();
  }
}

if (!isMainThread && (workerData as { role?: string } | undefined)?.role === 'mock-service-bench') {
  void startMockService({ trainingTime: '1h' }).then((mock) => {
    parentPort!.postMessage(mock.url);
    parentPort!.once('message', () => void mock.close().then(() => process.exit(0)));
  });
} else if (require.main === module) {
  benchMockService().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
