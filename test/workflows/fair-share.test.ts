/**
 * A fair share of the service's rate (issue 43) on a real Temporal dev server with fairness on (tuneflow's dev server
 * sets matching.enableFairness and one partition per task queue): every run (its workflow tasks) and every activity
 * carries its tenant as its fairness key; the queue's limit is the server's, set by the plugin at a worker's start, so
 * one tenant's flood delays another's jobs by little; the operator's weights share the queue's dispatches while both
 * tenants' tasks wait; a worker with another limit of its own changes nothing. The mock service holds its rate limit
 * per API key (429 above it) and counts what it refused. Nothing is timed absolutely: latencies are compared as a
 * ratio between two runs of the same shape side by side.
 */
import { temporal } from '@temporalio/proto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { NativeConnection, Worker, type WorkflowBundle } from '@temporalio/worker';
import { Client } from '@temporalio/client';
import { TuneflowClient } from '../../src/client';
import { tenantWorkflowId } from '../../src/contract/tenants';
import { startMockService, type MockService } from '../../src/mock-service';
import { TuneflowPlugin } from '../../src/plugin';
import { queueLimits, setQueueLimits } from '../../src/task-queue-limits';
import { bundleWorkflows } from './bundle';
import { devServerTest, startDevServer, whileRunning } from './environment';

jest.setTimeout(300_000);

const { RateLimitSource, TaskQueueType, TaskQueueKind } = temporal.api.enums.v1;

/**
 * The mock's rate limit per API key, and the queue's, below it: no 429 may come. The worker's own delays on a machine
 * shared with other runs bunch requests the server dispatched apart (at 8 against 10, one 429 in about 500 requests
 * once, under load; at 8 against 12, one in CI): the plugin paces each worker's client at the service rate for that.
 */
const SERVICE_RATE = 12;
const QUEUE_RATE = 8;
/** Polls a second apart: no callbacks here, and jobs that end in seconds. */
const QUICK = {
  pollInterval: '1 second',
  maxPollInterval: '2 seconds',
  trainingTimeout: '1 minute',
  promptTimeout: '2 minutes',
};
const dog = () => ({ name: 'dog', branch: 'fast', image_urls: [`${mock.url}/images/training-1.png`] });
const prompts = (n: number) => Array.from({ length: n }, (_, i) => ({ text: `sks dog ${i}` }));

let env: TestWorkflowEnvironment | undefined;
let bundle: WorkflowBundle;
let connection: NativeConnection;
let mock: MockService;

beforeAll(async () => {
  env = await startDevServer();
  [bundle, connection, mock] = await Promise.all([
    bundleWorkflows(),
    NativeConnection.connect({ address: env.address }),
    startMockService({ trainingTime: '500ms', inferenceTime: '300ms' }),
  ]);
  mock.setFaults({ rateLimitPerSecond: SERVICE_RATE });
}, 180_000);

afterAll(async () => {
  await mock?.close();
  await connection?.close();
  await env?.teardown();
});

/** A worker on `taskQueue` calling the mock with `apiKey`; `serviceRate` as the plugin takes it. */
function worker(taskQueue: string, apiKey: string, own: { serviceRate?: number | false; workerRate?: number } = {}) {
  return Worker.create({
    connection,
    taskQueue,
    workflowBundle: bundle,
    maxTaskQueueActivitiesPerSecond: own.workerRate,
    plugins: [
      new TuneflowPlugin({
        api: { apiKey, baseUrl: mock.url },
        callbacks: false,
        nexus: false,
        serviceRate: own.serviceRate ?? false,
        // The queue's rate as the test gives it: the margin's own test is service-rate.test.ts.
        serviceMargin: 0,
      }),
    ],
  });
}

function starter(taskQueue: string, tenant: string): TuneflowClient {
  return new TuneflowClient({
    client: new Client({ connection: env!.connection, namespace: env!.namespace ?? 'default' }),
    taskQueue,
    tenant,
  });
}

/** Milliseconds from each job's start to its end, the jobs started at once. */
async function latencies(client: TuneflowClient, keys: string[], promptsEach: number): Promise<number[]> {
  const started = performance.now();
  // Each job trains its own tune: a poll of its prompts is one list request (on a base tune shared by hundreds of
  // prompts it also reads those its list page does not reach, several requests for one activity).
  const handles = await Promise.all(
    keys.map((key) => client.trainThenGenerate(key, { tune: dog(), prompts: prompts(promptsEach), options: QUICK })),
  );
  return Promise.all(handles.map((h) => h.result().then(() => performance.now() - started)));
}

/** A flood of 40 jobs of 5 prompts by `flooder`, then 3 jobs of one prompt by `ordinary`: the ordinary latencies. */
async function floodThenOrdinary(taskQueue: string, flooder: TuneflowClient, ordinary: TuneflowClient) {
  const flood = latencies(
    flooder,
    Array.from({ length: 40 }, (_, i) => `${taskQueue}-flood-${i}`),
    5,
  );
  // The flood's tasks are queued before the ordinary jobs start.
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const ordinaryLatencies = await latencies(
    ordinary,
    [0, 1, 2].map((i) => `${taskQueue}-ordinary-${i}`),
    1,
  );
  return { ordinary: ordinaryLatencies, flood: await flood };
}

/** Waits until the server holds a queue limit for `taskQueue` (the worker sets it as it starts). */
async function untilHeld(taskQueue: string): Promise<void> {
  const target = { service: env!.client.workflowService, namespace: env!.namespace ?? 'default', taskQueue };
  while ((await queueLimits(target)).queueRate === undefined) await new Promise((resolve) => setTimeout(resolve, 100));
}

const historyOf = (tenant: string, key: string) =>
  env!.client.workflow.getHandle(tenantWorkflowId(tenant, key)).fetchHistory();

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

devServerTest(
  "one tenant's flood delays another's jobs by little: with fairness the ordinary tenant's jobs end far sooner than " +
    'in one first-come line, every activity carries its tenant, and no request goes over the service rate',
  async () => {
    const stamp = Date.now();
    const fairQueue = `fair-${stamp}`;
    const lineQueue = `line-${stamp}`;
    const rateLimitedBefore = mock.stats().rateLimited;
    // Each side its own API key (the mock's limit is per key) and its own queue, the queue's limit set by the plugin.
    const workers = await Promise.all([
      worker(fairQueue, 'fair-key', { serviceRate: QUEUE_RATE }),
      worker(lineQueue, 'line-key', { serviceRate: QUEUE_RATE }),
    ]);
    const [fair, line] = await whileRunning(workers, () =>
      Promise.all([
        // Two tenants: the shop floods, the studio's jobs are ordinary.
        floodThenOrdinary(fairQueue, starter(fairQueue, 'shop'), starter(fairQueue, 'studio')),
        // The same jobs under one tenant, one fairness key: a first-come line.
        floodThenOrdinary(lineQueue, starter(lineQueue, 'shop'), starter(lineQueue, 'shop')),
      ]),
    );
    const seconds = (xs: number[]) => xs.map((x) => Math.round(x / 100) / 10);
    process.stderr.write(
      `fair share: the ordinary tenant's jobs took ${seconds(fair.ordinary)} s with fairness, ` +
        `${seconds(line.ordinary)} s in one line; the flood's median ${seconds([median(fair.flood)])} s and ` +
        `${seconds([median(line.flood)])} s; 429s ${mock.stats().rateLimited - rateLimitedBefore}\n`,
    );
    // In one line each of the ordinary job's tasks waits behind the flood's backlog (about 400 activities at 8/s); with
    // fairness behind about one task of the flood's. Measured 3.2x to 3.7x apart, 2.0x with a whole unit test run on
    // the same two cores (the fair side is then bound by the worker's CPU, the line by the queue's rate): 1.5x.
    expect(median(line.ordinary)).toBeGreaterThan(1.5 * median(fair.ordinary));
    // The queue's limit (8/s) is under the service's (12/s): not one 429.
    expect(mock.stats().rateLimited - rateLimitedBefore).toBe(0);

    // Every activity of a run carries its tenant, weight 1, and no eager dispatch (the server's matching holds it).
    const history = await historyOf('studio', `${fairQueue}-ordinary-0`);
    const scheduled = (history.events ?? []).flatMap((e) => e.activityTaskScheduledEventAttributes ?? []);
    expect(scheduled.length).toBeGreaterThanOrEqual(2);
    for (const activity of scheduled) {
      expect(activity.priority).toMatchObject({ fairnessKey: 'studio', fairnessWeight: 1 });
    }
    // The run itself carries its tenant from its start, so its workflow tasks share the queue by tenant too.
    const started = history.events?.[0]?.workflowExecutionStartedEventAttributes;
    expect(started?.priority).toMatchObject({ fairnessKey: 'studio', fairnessWeight: 1 });
    const described = await env!.client.workflow
      .getHandle(tenantWorkflowId('studio', `${fairQueue}-ordinary-0`))
      .describe();
    expect(described.priority).toMatchObject({ fairnessKey: 'studio', fairnessWeight: 1 });
    const shopHistory = await historyOf('shop', `${fairQueue}-flood-0`);
    expect(shopHistory.events?.[0]?.workflowExecutionStartedEventAttributes?.priority?.fairnessKey).toBe('shop');
    const shopKeys = new Set(
      (shopHistory.events ?? []).flatMap((e) => e.activityTaskScheduledEventAttributes?.priority?.fairnessKey ?? []),
    );
    expect([...shopKeys]).toEqual(['shop']);
  },
);

devServerTest(
  "a worker with another limit of its own changes nothing once the server holds the queue's: not one 429",
  async () => {
    const taskQueue = `limit-${Date.now()}`;
    const rateLimitedBefore = mock.stats().rateLimited;
    // One worker sets the server's limit at its start, and stops; then a worker that asks for 50/s for itself, and
    // none from the server, runs every job (one process holds one worker per task queue).
    const holder = await worker(taskQueue, 'limit-key', { serviceRate: QUEUE_RATE });
    await whileRunning([holder], () => untilHeld(taskQueue));
    const greedy = await worker(taskQueue, 'limit-key', { workerRate: 50 });
    expect(greedy.options.maxTaskQueueActivitiesPerSecond).toBe(50);
    await whileRunning([greedy], async () => {
      const done = await latencies(
        starter(taskQueue, 'shop'),
        Array.from({ length: 15 }, (_, i) => `${taskQueue}-${i}`),
        5,
      );
      expect(done).toHaveLength(15);
      const described = await env!.client.workflowService.describeTaskQueue({
        namespace: env!.namespace ?? 'default',
        taskQueue: { name: taskQueue, kind: TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
        taskQueueType: TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
        reportConfig: true,
      });
      // The server's limit, whose source is the API, not a worker's poll.
      expect(described.effectiveRateLimit?.requestsPerSecond).toBeCloseTo(QUEUE_RATE);
      expect(RateLimitSource[described.effectiveRateLimit?.rateLimitSource ?? 0]).toBe('RATE_LIMIT_SOURCE_API');
    });
    const held = await queueLimits({
      service: env!.client.workflowService,
      namespace: env!.namespace ?? 'default',
      taskQueue,
    });
    expect(held.queueRate).toBeCloseTo(QUEUE_RATE);
    process.stderr.write(`limit held: 15 jobs of 5 prompts, 429s ${mock.stats().rateLimited - rateLimitedBefore}\n`);
    expect(mock.stats().rateLimited - rateLimitedBefore).toBe(0);
  },
);

/** Each tenant's ActivityTaskStarted times (server clock, ms) over the runs of `keys`. */
async function startTimes(tenant: string, keys: string[]): Promise<number[]> {
  const histories = await Promise.all(keys.map((key) => historyOf(tenant, key)));
  return histories.flatMap((h) =>
    (h.events ?? [])
      .filter((e) => e.activityTaskStartedEventAttributes)
      .map((e) => Number(e.eventTime!.seconds) * 1000 + Math.floor((e.eventTime!.nanos ?? 0) / 1e6)),
  );
}

devServerTest(
  "weights set by tuneflow queue-limits are honoured: while both tenants' tasks wait, the server dispatches them 3 to 1",
  async () => {
    const taskQueue = `weights-${Date.now()}`;
    const target = { service: env!.client.workflowService, namespace: env!.namespace ?? 'default', taskQueue };
    // The operator's weights and the queue's limit, on the server before any task comes (no worker sets a limit).
    await setQueueLimits(target, { queueRate: QUEUE_RATE, weights: { heavy: 3, light: 1 } });
    const keys = (tenant: string) => Array.from({ length: 12 }, (_, i) => `${taskQueue}-${tenant}-${i}`);
    const w = await worker(taskQueue, 'weights-key');
    await whileRunning([w], () =>
      // Both floods at once: each job's five prompts are five tasks at a time, so both tenants keep a backlog.
      Promise.all([
        latencies(starter(taskQueue, 'heavy'), keys('heavy'), 5),
        latencies(starter(taskQueue, 'light'), keys('light'), 5),
      ]),
    );
    const [heavy, light] = await Promise.all([startTimes('heavy', keys('heavy')), startTimes('light', keys('light'))]);
    // Both are backlogged until the first of them has nothing left to start: the share is counted up to then.
    const until = Math.min(Math.max(...heavy), Math.max(...light));
    const heavyIn = heavy.filter((t) => t <= until).length;
    const lightIn = light.filter((t) => t <= until).length;
    const share = heavyIn / (heavyIn + lightIn);
    process.stderr.write(
      `weights 3:1: ${heavyIn} heavy and ${lightIn} light activities started in the ${(until - Math.min(...heavy, ...light)) / 1000} s ` +
        `both were backlogged (heavy's share ${share.toFixed(3)}; of all: ${heavy.length} and ${light.length})\n`,
    );
    // 3:1 is 0.75 of the dispatches; measured 0.71, and 0.50 with weights 1:1. Past the midpoint of the two, under 0.85.
    expect(share).toBeGreaterThan(0.63);
    expect(share).toBeLessThan(0.85);
  },
);
