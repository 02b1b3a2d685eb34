/**
 * The image's worker runs a job: the Dockerfile replayed as written (test/deploy/image.ts; test/deploy/image.test.ts
 * checks the build itself), its entrypoint's default command (`worker`) started from the runtime stage as the image's
 * non-root user, configured as compose configures it (environment only), against a dev server and the mock service.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Client } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { TuneflowClient } from '../../src/client';
import { startMockService, type MockService } from '../../src/mock-service';
import { freePort } from '../../src/temporal-server/dev-server';
import { imageCommand, replayImage, type Image } from '../deploy/image';
import { devServerTest, startDevServer } from './environment';
import { summarize } from './history-summary';

jest.setTimeout(180_000);

const API_KEY = 'image-test-key-0123456789';

let env: TestWorkflowEnvironment | undefined;
let mock: MockService;
let image: Image;

beforeAll(async () => {
  // A replay takes about a minute when the unit test's is not there to reuse.
  image = await replayImage();
  env = await startDevServer();
  mock = await startMockService({ port: 0, trainingTime: '1s', inferenceTime: '500ms' });
}, 600_000);

afterAll(async () => {
  await mock?.close();
  await env?.teardown();
});

devServerTest("the image's entrypoint runs a worker that completes a job with callbacks", async () => {
  const callbackPort = await freePort();
  const taskQueue = `tuneflow-image-${process.pid}`;
  const worker: ChildProcess = spawn(
    ...imageCommand(image, image.cmd, {
      TEMPORAL_ADDRESS: env!.address,
      TEMPORAL_NAMESPACE: 'default',
      TUNEFLOW_TASK_QUEUE: taskQueue,
      TUNEFLOW_API_URL: mock.url,
      TUNEFLOW_API_KEY: API_KEY,
      TUNEFLOW_CALLBACK_BASE_URL: `http://127.0.0.1:${callbackPort}`,
      TUNEFLOW_CALLBACK_SECRET: 'image-test-callback-secret',
      TUNEFLOW_CALLBACK_PORT: String(callbackPort),
      TUNEFLOW_CALLBACK_HOST: '127.0.0.1',
      TUNEFLOW_METRICS_ADDRESS: 'off',
    }),
  );
  let log = '';
  const exited = new Promise<number | null>((resolve) => worker.on('exit', resolve));
  try {
    await new Promise<void>((resolve, reject) => {
      createInterface({ input: worker.stderr! }).on('line', (line) => {
        log += `${line}\n`;
        if (line.includes('tuneflow worker started')) resolve();
      });
      void exited.then((code) =>
        reject(new Error(`the image's worker exited with ${code} before it started:\n${log}`)),
      );
    });
    expect(image.cmd).toEqual(['worker']);
    const tuneflow = new TuneflowClient({
      client: new Client({ connection: env!.connection, namespace: env!.namespace }),
      taskQueue,
    });
    const run = await tuneflow.trainThenGenerate(`image-${Date.now()}`, {
      tune: { name: 'dog', branch: 'fast', image_urls: [`${mock.url}/images/training-1.png`] },
      prompts: [{ text: 'sks dog on a beach' }],
    });
    const result = await run.result();
    expect(result.tune.trained_at).toBeTruthy();
    expect(result.prompts[0].images?.length).toBe(1);
    expect((await run.progress()).counts.callbacks).toBeGreaterThanOrEqual(2);
    // By callbacks: one tune and one prompt made, the reads they asked for, no poll timer fired.
    const { 'GET /tunes/:id/prompts': lists, ...rest } = mock.stats().routes;
    expect(rest).toMatchObject({ 'POST /tunes': 1, 'GET /tunes/:id': 1, 'POST /tunes/:id/prompts': 1 });
    const history = summarize(await run.handle.fetchHistory());
    expect(history.activities).toEqual([
      'createTune',
      'retrieveTune',
      'createPrompt',
      ...Array(lists ?? 0).fill('listPrompts'),
    ]);
    expect(history.signals).toEqual(['callback', 'callback']);
    expect(history.timers.filter((t) => t.ended === 'fired')).toEqual([]);
  } finally {
    worker.kill('SIGTERM');
  }
  expect(await exited).toBe(0);
  expect(log).not.toContain(API_KEY);
});
