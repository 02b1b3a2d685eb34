/**
 * The production worker as users run it: `tuneflow worker` as a child process, configured only by environment
 * variables, against the Temporal CLI's dev server (a real server, as in production) and the mock service. A run
 * started through the typed starter completes with callbacks through the worker's own receiver, its result carrying
 * what the mock charged, which `tuneflow status` prints; metrics are served;
 * SIGTERM drains it to exit 0; the API key never reaches its logs. Its one start line says its settings, and with the
 * start-up key check on, a key the service refuses stops it before it polls.
 */
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { Client } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { request } from 'undici';
import { TuneflowClient } from '../../src/client';
import { IMAGE_MC, startMockService, TUNE_TRAINING_MC, type MockService } from '../../src/mock-service';
import { freePort } from '../../src/temporal-server/dev-server';
import { loadWorkerConfig } from '../../src/config';
import { createTuneflowWorker } from '../../src/cli/worker';
import { shutdownOnceRunning } from '../../src/plugin';
import { devServerTest, startDevServer } from './environment';
import { summarize } from './history-summary';
import { startWorkerProcess } from './worker-process';

jest.setTimeout(180_000);

const API_KEY = 'worker-process-test-key-0123456789';

let env: TestWorkflowEnvironment | undefined;
let mock: MockService;

beforeAll(async () => {
  env = await startDevServer();
  mock = await startMockService({ port: 0, trainingTime: '1s', inferenceTime: '500ms' });
}, 120_000);

/** `tuneflow status <id>` as a child process against the dev server. */
function statusOf(workflowId: string, address: string): Promise<{ code: number | null; stdout: string }> {
  const bin = path.resolve(__dirname, '../../bin/tuneflow.js');
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, TEMPORAL_ADDRESS: address };
  return new Promise((resolve, reject) =>
    execFile(process.execPath, [bin, 'status', workflowId], { env }, (error, stdout) =>
      error && typeof error.code !== 'number'
        ? reject(error)
        : resolve({ code: error ? Number(error.code) : 0, stdout }),
    ),
  );
}

afterAll(async () => {
  await mock?.close();
  await env?.teardown();
});

devServerTest('tuneflow worker runs a job with callbacks, serves metrics, and stops on SIGTERM', async () => {
  const callbackPort = await freePort();
  const metricsPort = await freePort();
  const taskQueue = `tuneflow-worker-process-${process.pid}`;
  const worker = await startWorkerProcess({
    temporalAddress: env!.address,
    apiKey: API_KEY,
    apiUrl: mock.url,
    taskQueue,
    callbackPort,
    metricsPort,
  });
  try {
    // A plain client: the callbacks, not skipped time, must end the waits.
    const tuneflow = new TuneflowClient({
      client: new Client({ connection: env!.connection, namespace: env!.namespace }),
      taskQueue,
    });
    const workflowId = `worker-process-${Date.now()}`;
    // A paid branch: the mock charges training and each image, and the result carries what it charged.
    const run = await tuneflow.trainThenGenerate(workflowId, {
      tune: { name: 'dog', branch: 'sd15', image_urls: [`${mock.url}/images/training-1.png`] },
      prompts: [{ text: 'sks dog on a beach' }, { text: 'sks dog in the snow', num_images: 2 }],
    });
    const result = await run.result();
    const ledger = mock.ledger(API_KEY);
    expect(ledger.totalMc).toBe(TUNE_TRAINING_MC + 3 * IMAGE_MC);
    expect(result.cost).toEqual({ mc: ledger.totalMc, usd: ledger.totalMc / 100_000 });
    // `tuneflow status` prints it, while the worker is there to answer the progress query.
    const status = await statusOf(workflowId, env!.address);
    expect(status.code).toBe(0);
    expect(status.stdout).toMatch(new RegExp(`^run: +${workflowId}: COMPLETED after \\d+s `, 'm'));
    expect(status.stdout).toMatch(/^tune: +\d+ "worker-process-\d+#[\w-]+", class dog, branch sd15, trained at /m);
    expect(status.stdout).toMatch(/^prompts: +2 settled$/m);
    expect(status.stdout).toMatch(/^cost: +156000 mc \(\$1\.56\)$/m);
    expect(status.stdout).toMatch(/^counts: +callbacks [3-9]\d*, polls 0, api calls \d+$/m);
    // The results' callback URLs: never with their signature.
    expect(status.stdout).not.toMatch(/sig=(?!redacted)/);
    expect(result.tune.trained_at).toBeTruthy();
    expect(result.prompts.map((p) => p.images?.length)).toEqual(expect.arrayContaining([1, 2]));
    const progress = await run.progress();
    expect(progress.phase).toBe('completed');
    expect(progress.counts.callbacks).toBeGreaterThanOrEqual(3); // the tune and both prompts, through the receiver
    expect(progress.counts.polls).toBe(0);
    // The history: one tune and two prompts created, nothing else created or deleted; the callbacks came in as
    // signals (the tune's and both prompts', at least), and only as callback signals.
    const { activities, signals } = summarize(await run.handle.fetchHistory());
    expect(activities.filter((a) => /^(create|delete)/.test(a))).toEqual([
      'createTune',
      'createPrompt',
      'createPrompt',
    ]);
    expect(signals.length).toBeGreaterThanOrEqual(3);
    const callbackSignals = ['tuneTrained', 'promptSettled', 'packPromptsSettled', 'callback'];
    expect(signals.filter((name) => !callbackSignals.includes(name))).toEqual([]);

    const metrics = await request(`http://127.0.0.1:${metricsPort}/metrics`);
    expect(metrics.statusCode).toBe(200);
    expect(await metrics.body.text()).toMatch(/temporal_/);

    const health = await request(`http://127.0.0.1:${callbackPort}/healthz`);
    expect(health.statusCode).toBe(200);
    await health.body.dump();
  } finally {
    worker.child.kill('SIGTERM');
  }
  expect(await worker.exited).toBe(0);
  expect(worker.log()).toContain('tuneflow worker stopped');
  expect(worker.log()).not.toContain(API_KEY);
});

devServerTest(
  'one start line says its settings; with TUNEFLOW_CHECK_API_KEY=on a key the service refuses stops it, naming the variable',
  async () => {
    const strict = await startMockService({ port: 0, apiKeys: [API_KEY] });
    const taskQueue = `tuneflow-start-report-${process.pid}`;
    const callbackPort = await freePort();
    const settings = { temporalAddress: env!.address, apiUrl: strict.url, taskQueue };
    const checked = { TUNEFLOW_CHECK_API_KEY: 'on', TUNEFLOW_SERVICE_RATE: '5' };
    try {
      const worker = await startWorkerProcess({ ...settings, apiKey: API_KEY, callbackPort, env: checked });
      try {
        const started = worker
          .log()
          .split('\n')
          .find((line) => line.includes('"tuneflow worker started"'));
        expect(JSON.parse(started!).meta).toEqual({
          taskQueue,
          bookkeeping: `${taskQueue}.bookkeeping`,
          namespace: 'default',
          apiUrl: strict.url,
          callbacks: `http://127.0.0.1:${callbackPort}`,
          receiver: `127.0.0.1:${callbackPort}`,
          uploadDir: 'off (image URLs only)',
          storage: 'off (the service keeps the images)',
          serviceRate: '5/s, the task queue at 4.5/s',
          nexus: 'on',
          tracing: 'off',
          compressPayloads: 'off (decoded all the same)',
          metrics: 'off',
          traces: 'off',
          apiKeyCheck: 'accepted',
          versioning: 'off (unversioned: patches keep running jobs replaying)',
          // The signed probe came back to the worker's own receiver (test/workflows/callback-probe.test.ts: the rest).
          callbackProbe: 'arrived',
        });
        // The check is one read of the service, made before the worker polled.
        expect(strict.stats().routes).toEqual({ 'GET /tunes': 1 });
      } finally {
        worker.child.kill('SIGTERM');
        expect(await worker.exited).toBe(0);
      }
      // A key the service refuses: the worker stops before it polls, in one line naming the variable, exit 2.
      const refused = await startWorkerProcess({ ...settings, apiKey: 'a-key-the-service-refuses', env: checked }).then(
        () => 'it started',
        (err: Error) => err.message,
      );
      expect(refused).toMatch(/^the worker exited with 2 before it started:\n/);
      expect(refused).toMatch(/^tuneflow worker: TUNEFLOW_API_KEY: the service refused it at start \(401: [^\n]+\)$/m);
      expect(refused).not.toContain('a-key-the-service-refuses');
    } finally {
      await strict.close();
    }
  },
);

devServerTest("TUNEFLOW_MAX_CACHED_WORKFLOWS bounds the worker's cache of runs; unset, the SDK sizes it", async () => {
  const settings = { TUNEFLOW_API_KEY: API_KEY, TUNEFLOW_API_URL: mock.url, TEMPORAL_ADDRESS: env!.address };
  const cacheOf = async (extra: Record<string, string>) => {
    const { worker, run } = await createTuneflowWorker(
      loadWorkerConfig({ ...settings, TUNEFLOW_TASK_QUEUE: `cache-${Date.now()}`, ...extra }),
    );
    const running = run();
    // The plugin starts its bookkeeper (and more) before the worker polls: shutdown() would throw until then.
    await shutdownOnceRunning(worker, running);
    await running;
    return worker.options.maxCachedWorkflows;
  };
  expect(await cacheOf({ TUNEFLOW_MAX_CACHED_WORKFLOWS: '150' })).toBe(150);
  expect(await cacheOf({})).toBeGreaterThan(0);
});
