/**
 * The progress stream's cost (issue 47): 100 train-then-generate jobs on a dev server with the mock service, watched
 * by 1 viewer each (100 viewers) and by 10 each (1,000 viewers), side by side in one run. Reports the stream's calls
 * to Temporal per second and per job, the p99 from a run's change (its newest history event's time) to a viewer's
 * event, and the heap the stream holds at its peak.
 *
 * Run alone: `npx tsx bench/progress-stream.ts [jobs] [viewers per job]`.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { Agent } from 'undici';
import { TuneflowClient } from '../src/client';
import { listen } from '../src/listening';
import { startMockService } from '../src/mock-service';
import { TuneflowPlugin } from '../src/plugin';
import { progressStream } from '../src/progress/stream';
import { mintProgressToken } from '../src/progress/tokens';
import type { ProgressView } from '../src/progress/watch';
import { provisionTemporal } from '../src/temporal-server';
import { startDevServerProcess } from '../src/temporal-server/dev-server';
import { watch } from '../test/progress/sse';

const INPUT = {
  tune: { name: 'dog', branch: 'fast', image_urls: ['https://example.com/training/1.jpg'] },
  prompts: [{ text: 'sks dog on a beach', num_images: 2 }],
  options: {
    pollInterval: '1 second',
    maxPollInterval: '2 seconds',
    trainingTimeout: '2 minutes',
    promptTimeout: '2 minutes',
  },
};

interface Side {
  viewers: number;
  seconds: number;
  calls: { history: number; query: number; result: number };
  callsPerSecond: number;
  callsPerJob: number;
  events: number;
  p50Ms: number;
  p99Ms: number;
  heapMiB: number;
}

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

async function side(address: string, tuneflow: TuneflowClient, jobs: number, perJob: number): Promise<Side> {
  const connection = await Connection.connect({ address });
  const secret = randomBytes(32).toString('base64url');
  const stream = progressStream({ client: new Client({ connection }), secret, linger: '1 second' });
  const server = createServer((req, res) => stream.node(req, res));
  await listen(server, 0, '127.0.0.1');
  const base = `http://127.0.0.1:${(server.address() as { port: number }).port}/progress`;
  const dispatcher = new Agent({ connections: null, pipelining: 0 });
  global.gc?.();
  const heapBefore = process.memoryUsage().heapUsed;
  let heapPeak = heapBefore;
  const sampler = setInterval(() => (heapPeak = Math.max(heapPeak, process.memoryUsage().heapUsed)), 200);
  const started = Date.now();
  const key = randomUUID().slice(0, 8);
  const handles = await Promise.all(
    Array.from({ length: jobs }, (_, i) => tuneflow.trainThenGenerate(`bench-${key}-${i}`, INPUT as never)),
  );
  const viewers = await Promise.all(
    handles.flatMap((handle) =>
      Array.from({ length: perJob }, () =>
        watch(`${base}?token=${encodeURIComponent(mintProgressToken({ secret, workflowId: handle.workflowId }))}`, {
          dispatcher,
        }),
      ),
    ),
  );
  await Promise.all(viewers.map((v) => v.ended));
  const seconds = (Date.now() - started) / 1000;
  clearInterval(sampler);
  const calls = stream.stats().temporalCalls;
  const lags = viewers
    .flatMap((v) => v.events.map((e) => e.at - (JSON.parse(e.data) as ProgressView).changedAt))
    .sort((a, b) => a - b);
  stream.close();
  server.closeAllConnections();
  server.close();
  await dispatcher.close();
  await connection.close();
  const total = calls.history + calls.query + calls.result;
  return {
    viewers: jobs * perJob,
    seconds: Math.round(seconds * 10) / 10,
    calls,
    callsPerSecond: Math.round((total / seconds) * 10) / 10,
    callsPerJob: Math.round((total / jobs) * 10) / 10,
    events: lags.length,
    p50Ms: quantile(lags, 0.5),
    p99Ms: quantile(lags, 0.99),
    heapMiB: Math.round(((heapPeak - heapBefore) / 2 ** 20) * 10) / 10,
  };
}

export async function benchProgressStream(jobs = 100, perJob = 10): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const provisioned = await provisionTemporal('dev-server', { strict: true, acceptAddress: false });
  if (provisioned.kind !== 'dev-server' || provisioned.executable.type !== 'existing-path') {
    console.log('progress stream: not measured (no Temporal dev server executable)');
    return;
  }
  const server = await startDevServerProcess({ executable: provisioned.executable.path });
  const mock = await startMockService({ trainingTime: '3s', inferenceTime: '1s' });
  try {
    const native = await NativeConnection.connect({ address: server.address });
    const taskQueue = `bench-progress-${randomUUID()}`;
    const worker = await Worker.create({
      connection: native,
      taskQueue,
      workflowBundle: { codePath: require.resolve('../lib/workflow-bundle.js') },
      plugins: [
        new TuneflowPlugin({
          api: { apiKey: 'bench-progress-key-0123456789', baseUrl: mock.url },
          callbacks: false,
          nexus: false,
          serviceRate: false,
          startReport: false,
        }),
      ],
    });
    const client = new Client({ connection: await Connection.connect({ address: server.address }) });
    const tuneflow = new TuneflowClient({ client, taskQueue });
    const [one, many] = await worker.runUntil(async () => [
      await side(server.address, tuneflow, jobs, 1),
      await side(server.address, tuneflow, jobs, perJob),
    ]);
    console.log(`progress stream: ${jobs} jobs, 1 viewer each and ${perJob} each, one run`);
    for (const s of [one!, many!])
      console.log(
        `  ${String(s.viewers).padStart(5)} viewers: ${s.callsPerSecond} Temporal calls/s (${s.callsPerJob} a job: ` +
          `${s.calls.history} history, ${s.calls.query} queries, ${s.calls.result} results) over ${s.seconds} s; ` +
          `${s.events} events, change to viewer p50 ${s.p50Ms} ms, p99 ${s.p99Ms} ms; stream heap +${s.heapMiB} MiB`,
      );
    console.log(
      `  calls per job, ${many!.viewers} viewers / ${one!.viewers}: ${(many!.callsPerJob / one!.callsPerJob).toFixed(2)}x`,
    );
    await native.close();
  } finally {
    await mock.close();
    await server.stop();
  }
}

if (require.main === module)
  benchProgressStream(Number(process.argv[2] ?? 100), Number(process.argv[3] ?? 10)).catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
