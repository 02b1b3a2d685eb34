/**
 * The production worker as users run it: `tuneflow worker` as a child process, configured only by environment
 * variables, against the Temporal CLI's dev server (a real server, as in production) and the mock service. A run
 * started through the typed starter completes with callbacks through the worker's own receiver; metrics are served;
 * SIGTERM drains it to exit 0; the API key never reaches its logs.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import * as net from 'node:net';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { Client } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { request } from 'undici';
import { TuneflowClient } from '../../src/client';
import { startMockService, type MockService } from '../../src/mock-service';
import { devServerTest, startDevServer } from './environment';

jest.setTimeout(180_000);

const ROOT = path.resolve(__dirname, '../..');
const API_KEY = 'worker-process-test-key-0123456789';

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

let env: TestWorkflowEnvironment | undefined;
let mock: MockService;

beforeAll(async () => {
  env = await startDevServer();
  mock = await startMockService({ port: 0, trainingTime: '1s', inferenceTime: '500ms' });
}, 120_000);

afterAll(async () => {
  await mock?.close();
  await env?.teardown();
});

devServerTest('tuneflow worker runs a job with callbacks, serves metrics, and stops on SIGTERM', async () => {
  const callbackPort = await freePort();
  const metricsPort = await freePort();
  const taskQueue = `tuneflow-worker-process-${process.pid}`;
  const child: ChildProcessWithoutNullStreams = spawn(
    process.execPath,
    [path.join(ROOT, 'bin', 'tuneflow.js'), 'worker'],
    {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        TEMPORAL_ADDRESS: env!.address,
        TEMPORAL_NAMESPACE: env!.namespace ?? 'default',
        TUNEFLOW_API_KEY: API_KEY,
        TUNEFLOW_API_URL: mock.url,
        TUNEFLOW_CALLBACK_BASE_URL: `http://127.0.0.1:${callbackPort}`,
        TUNEFLOW_CALLBACK_SECRET: 'worker-process-test-secret',
        TUNEFLOW_CALLBACK_PORT: String(callbackPort),
        TUNEFLOW_CALLBACK_HOST: '127.0.0.1',
        TUNEFLOW_TASK_QUEUE: taskQueue,
        TUNEFLOW_METRICS_ADDRESS: `127.0.0.1:${metricsPort}`,
      },
    },
  );
  let stderr = '';
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  const started = new Promise<void>((resolve, reject) => {
    const lines = createInterface({ input: child.stderr });
    lines.on('line', (line) => {
      stderr += `${line}\n`;
      if (line.includes('tuneflow worker started')) resolve();
    });
    void exited.then((code) => reject(new Error(`the worker exited with ${code} before it started:\n${stderr}`)));
  });

  try {
    await started;
    // A plain client: the callbacks, not skipped time, must end the waits.
    const tuneflow = new TuneflowClient({
      client: new Client({ connection: env!.connection, namespace: env!.namespace }),
      taskQueue,
    });
    const run = await tuneflow.trainThenGenerate(`worker-process-${Date.now()}`, {
      tune: { name: 'dog', branch: 'fast', image_urls: [`${mock.url}/images/training-1.png`] },
      prompts: [{ text: 'sks dog on a beach' }, { text: 'sks dog in the snow', num_images: 2 }],
    });
    const result = await run.result();
    expect(result.tune.trained_at).toBeTruthy();
    expect(result.prompts.map((p) => p.images?.length)).toEqual(expect.arrayContaining([1, 2]));
    const progress = await run.progress();
    expect(progress.phase).toBe('completed');
    expect(progress.counts.callbacks).toBeGreaterThanOrEqual(3); // the tune and both prompts, through the receiver
    expect(progress.counts.polls).toBe(0);

    const metrics = await request(`http://127.0.0.1:${metricsPort}/metrics`);
    expect(metrics.statusCode).toBe(200);
    expect(await metrics.body.text()).toMatch(/temporal_/);

    const health = await request(`http://127.0.0.1:${callbackPort}/healthz`);
    expect(health.statusCode).toBe(200);
    await health.body.dump();
  } finally {
    child.kill('SIGTERM');
  }
  expect(await exited).toBe(0);
  expect(stderr).toContain('tuneflow worker stopped');
  expect(stderr).not.toContain(API_KEY);
});
