/**
 * TUNEFLOW_SERVICE_RATE on a real server (the Temporal CLI's dev server): the worker sets it at start as the task
 * queue's limit on the server (DescribeTaskQueue reports it, its source the API), which a worker without the setting
 * does not lift; the worker's own option keeps it as the fallback where a server holds no queue limit. A user's own
 * worker with the plugin gets it the same way.
 * Nothing is timed: the server is asked until it reports what the polls told it.
 */
import { temporal } from '@temporalio/proto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { NativeConnection, Worker } from '@temporalio/worker';
import { createTuneflowWorker } from '../../src/cli/worker';
import { loadWorkerConfig } from '../../src/config';
import { TuneflowPlugin } from '../../src/plugin';
import { devServerTest, startDevServer, whileRunning } from './environment';

jest.setTimeout(180_000);

const { RateLimitSource, TaskQueueType, TaskQueueKind } = temporal.api.enums.v1;

let env: TestWorkflowEnvironment | undefined;
const saved = process.env.TUNEFLOW_SERVICE_RATE;

beforeAll(async () => {
  env = await startDevServer();
}, 120_000);

afterAll(async () => {
  if (saved === undefined) delete process.env.TUNEFLOW_SERVICE_RATE;
  else process.env.TUNEFLOW_SERVICE_RATE = saved;
  await env?.teardown();
});

/** The activity limit the server applies to `taskQueue`, and whose it is (a worker's, the API's, the system's). */
async function effectiveLimit(taskQueue: string): Promise<{ perSecond: number; source: string }> {
  const described = await env!.client.workflowService.describeTaskQueue({
    namespace: env!.namespace ?? 'default',
    taskQueue: { name: taskQueue, kind: TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
    taskQueueType: TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
    reportConfig: true,
  });
  const limit = described.effectiveRateLimit;
  return {
    perSecond: limit?.requestsPerSecond ?? NaN,
    source: RateLimitSource[limit?.rateLimitSource ?? RateLimitSource.RATE_LIMIT_SOURCE_UNSPECIFIED],
  };
}

/** Asks the server until `done` holds (its polls reach it in their own time); fails naming the last answer. */
async function until(taskQueue: string, done: (limit: { perSecond: number; source: string }) => boolean) {
  let last: { perSecond: number; source: string } | undefined;
  for (const giveUpAt = Date.now() + 60_000; Date.now() < giveUpAt; ) {
    last = await effectiveLimit(taskQueue);
    if (done(last)) return last;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`the server never reported the limit asked for; last: ${JSON.stringify(last)}`);
}

devServerTest(
  "TUNEFLOW_SERVICE_RATE: the task queue's limit, set on the server at a worker's start; a worker without it lifts nothing",
  async () => {
    const taskQueue = `service-rate-${Date.now()}`;
    const settings = { TUNEFLOW_API_KEY: 'k', TEMPORAL_ADDRESS: env!.address, TUNEFLOW_TASK_QUEUE: taskQueue };
    const limited = await createTuneflowWorker(loadWorkerConfig({ ...settings, TUNEFLOW_SERVICE_RATE: '7' }));
    // 7 less the margin's tenth.
    expect(limited.worker.options.maxTaskQueueActivitiesPerSecond).toBe(6.3);
    const seen = await whileRunning(
      [limited.worker],
      () => until(taskQueue, (limit) => limit.source === 'RATE_LIMIT_SOURCE_API'),
      limited.run,
    );
    expect(seen.perSecond).toBeCloseTo(6.3);

    // Unset, no limit reaches the worker, and its polls lift nothing: the server's limit holds for every worker.
    const unlimited = await createTuneflowWorker(loadWorkerConfig(settings));
    expect(unlimited.worker.options.maxTaskQueueActivitiesPerSecond).toBeUndefined();
    const after = await whileRunning(
      [unlimited.worker],
      async () => {
        // Its polls reach the server within a second or two: one that lifted the limit would show by then.
        await new Promise((resolve) => setTimeout(resolve, 3_000));
        return effectiveLimit(taskQueue);
      },
      unlimited.run,
    );
    expect(after.source).toBe('RATE_LIMIT_SOURCE_API');
    expect(after.perSecond).toBeCloseTo(6.3);
  },
);

devServerTest("a user's own worker with new TuneflowPlugin() takes the limit from TUNEFLOW_SERVICE_RATE", async () => {
  const taskQueue = `service-rate-own-${Date.now()}`;
  process.env.TUNEFLOW_SERVICE_RATE = '2.5';
  const connection = await NativeConnection.connect({ address: env!.address });
  try {
    const worker = await Worker.create({
      connection,
      taskQueue,
      plugins: [new TuneflowPlugin({ api: { apiKey: 'k', baseUrl: 'http://127.0.0.1:1' }, callbacks: false })],
    });
    expect(worker.options.maxTaskQueueActivitiesPerSecond).toBe(2.25);
    const seen = await whileRunning([worker], () =>
      until(taskQueue, (limit) => limit.source === 'RATE_LIMIT_SOURCE_API'),
    );
    expect(seen.perSecond).toBeCloseTo(2.25);
  } finally {
    await connection.close();
  }
});
