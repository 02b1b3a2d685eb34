/**
 * TuneflowPlugin with its options left out reads the variables `tuneflow worker` reads: one configuration, not two.
 * Its activities run in MockActivityEnvironment over the real client against the mock service on loopback.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { WorkerOptions } from '@temporalio/worker';
import type { TuneflowActivities } from '../../src/activities';
import { TuneflowPlugin } from '../../src/plugin';
import { startMockService, type MockService } from '../../src/mock-service';

const VARIABLES = ['TUNEFLOW_API_KEY', 'TUNEFLOW_API_URL', 'TUNEFLOW_CALLBACK_BASE_URL', 'TUNEFLOW_CALLBACK_SECRET'];
const OTHERS = ['TUNEFLOW_UPLOAD_DIR', 'TUNEFLOW_SERVICE_RATE', 'TUNEFLOW_SERVICE_MARGIN'];
const saved = Object.fromEntries([...VARIABLES, ...OTHERS].map((name) => [name, process.env[name]]));
let mock: MockService;
let uploads: string;

beforeAll(async () => {
  mock = await startMockService({ apiKeys: ['key-from-the-environment'] });
  uploads = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-uploads-'));
  fs.writeFileSync(path.join(uploads, 'face.png'), 'not really a png');
});

afterEach(() => {
  for (const [name, value] of Object.entries(saved))
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
});

afterAll(async () => {
  await mock.close();
  fs.rmSync(uploads, { recursive: true, force: true });
});

function activitiesOf(plugin: TuneflowPlugin): TuneflowActivities {
  return plugin.configureWorker({ taskQueue: 'tuneflow' } as WorkerOptions).activities as TuneflowActivities;
}

function run<K extends keyof TuneflowActivities>(
  activities: TuneflowActivities,
  name: K,
  input: Parameters<TuneflowActivities[K]>[0],
): ReturnType<TuneflowActivities[K]> {
  const env = new MockActivityEnvironment(
    { workflowExecution: { workflowId: 'order-1', runId: 'run-1' } },
    { logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} } },
  );
  const fn = activities[name] as (arg: typeof input) => ReturnType<TuneflowActivities[K]>;
  return env.run(fn, input) as ReturnType<TuneflowActivities[K]>;
}

test('with no options, the service, its key, the callbacks and the upload directory come from the environment', async () => {
  Object.assign(process.env, {
    TUNEFLOW_API_KEY: 'key-from-the-environment',
    TUNEFLOW_API_URL: mock.url,
    TUNEFLOW_CALLBACK_BASE_URL: 'https://hooks.example.com',
    TUNEFLOW_CALLBACK_SECRET: 'a-secret-of-16-characters-or-more',
    TUNEFLOW_UPLOAD_DIR: uploads,
  });
  const activities = activitiesOf(new TuneflowPlugin());
  const tune = await run(activities, 'createTune', {
    tune: { title: 'order-1', name: 'woman', branch: 'fast', image_urls: ['https://img.example.com/1.png'] },
  });
  // The mock takes only that key, at that URL; the callback URL is signed for the base URL.
  expect(mock.ledger('key-from-the-environment').charges).toHaveLength(1);
  expect(tune.callback).toMatch(/^https:\/\/hooks\.example\.com\/callbacks\/tune\?.*sig=redacted/);
  await expect(
    run(activities, 'checkUploads', { paths: [{ field: 'tune.images[0]', path: 'face.png' }] }),
  ).resolves.toBeUndefined();
  await expect(
    run(activities, 'checkUploads', { paths: [{ field: 'tune.images[0]', path: '/etc/passwd' }] }),
  ).rejects.toThrow(/tune\.images\[0\]/);
});

test('options given win over the environment, and `callbacks: false` asks for none', async () => {
  Object.assign(process.env, {
    TUNEFLOW_API_KEY: 'a-key-the-mock-refuses',
    TUNEFLOW_API_URL: 'http://127.0.0.1:1',
    TUNEFLOW_CALLBACK_BASE_URL: 'https://hooks.example.com',
    TUNEFLOW_CALLBACK_SECRET: 'a-secret-of-16-characters-or-more',
  });
  const plugin = new TuneflowPlugin({
    api: { apiKey: 'key-from-the-environment', baseUrl: mock.url },
    callbacks: false,
  });
  const tune = await run(activitiesOf(plugin), 'createTune', {
    tune: { title: 'order-2', name: 'woman', branch: 'fast', image_urls: ['https://img.example.com/1.png'] },
  });
  expect(tune.callback ?? null).toBeNull();
});

test.each([
  [{}, 'TUNEFLOW_API_KEY: is required: the service API key'],
  [{ TUNEFLOW_API_KEY: 'k', TUNEFLOW_API_URL: 'ftp://x' }, 'TUNEFLOW_API_URL: must be an http(s) URL'],
  [
    { TUNEFLOW_API_KEY: 'k', TUNEFLOW_CALLBACK_BASE_URL: 'https://hooks.example.com' },
    'TUNEFLOW_CALLBACK_SECRET: is required',
  ],
  [
    { TUNEFLOW_API_KEY: 'k', TUNEFLOW_UPLOAD_DIR: '/no/such/dir' },
    'TUNEFLOW_UPLOAD_DIR: must be a directory that exists',
  ],
  [{ TUNEFLOW_API_KEY: 'k', TUNEFLOW_SERVICE_RATE: '0' }, 'TUNEFLOW_SERVICE_RATE: must be a positive number'],
  [
    { TUNEFLOW_API_KEY: 'k', TUNEFLOW_SERVICE_MARGIN: '0.6' },
    'TUNEFLOW_SERVICE_MARGIN: must be a number from 0 to 0.5',
  ],
  [
    { TUNEFLOW_API_KEY: 'k', TUNEFLOW_SERVICE_MARGIN: '-0.1' },
    'TUNEFLOW_SERVICE_MARGIN: must be a number from 0 to 0.5',
  ],
])('a missing or bad variable is named at construction: %j', (variables, message) => {
  for (const name of [...VARIABLES, ...OTHERS]) delete process.env[name];
  Object.assign(process.env, variables);
  expect(() => new TuneflowPlugin()).toThrow(message);
});

describe("the service rate: the task queue's activity limit on every worker the plugin is on", () => {
  const api = { apiKey: 'k', baseUrl: 'http://127.0.0.1:1' };
  const limitOf = (plugin: TuneflowPlugin, own: Partial<WorkerOptions> = {}) =>
    plugin.configureWorker({ taskQueue: 'tuneflow', ...own } as WorkerOptions).maxTaskQueueActivitiesPerSecond;

  test('from TUNEFLOW_SERVICE_RATE when the option is left out; none when it is unset', () => {
    delete process.env.TUNEFLOW_SERVICE_RATE;
    expect(limitOf(new TuneflowPlugin({ api, callbacks: false }))).toBeUndefined();
    process.env.TUNEFLOW_SERVICE_RATE = '18';
    expect(limitOf(new TuneflowPlugin({ api, callbacks: false }))).toBe(16.2);
  });

  test('the queue leaves the margin unused: a tenth unless TUNEFLOW_SERVICE_MARGIN or the option says otherwise', () => {
    delete process.env.TUNEFLOW_SERVICE_MARGIN;
    expect(limitOf(new TuneflowPlugin({ api, callbacks: false, serviceRate: 25 }))).toBe(22.5);
    process.env.TUNEFLOW_SERVICE_MARGIN = '0.2';
    expect(limitOf(new TuneflowPlugin({ api, callbacks: false, serviceRate: 25 }))).toBe(20);
    expect(limitOf(new TuneflowPlugin({ api, callbacks: false, serviceRate: 25, serviceMargin: 0 }))).toBe(25);
    delete process.env.TUNEFLOW_SERVICE_MARGIN;
  });

  test.each([-0.1, 0.51, Number.NaN])('a bad margin option is refused at construction: %p', (margin) => {
    expect(() => new TuneflowPlugin({ api, callbacks: false, serviceRate: 25, serviceMargin: margin })).toThrow(
      'TuneflowPlugin: serviceMargin must be a number from 0 to 0.5',
    );
  });

  test('the option wins over the variable, and false asks for no limit', () => {
    process.env.TUNEFLOW_SERVICE_RATE = '18';
    expect(limitOf(new TuneflowPlugin({ api, callbacks: false, serviceRate: 4.5 }))).toBe(4.05);
    expect(limitOf(new TuneflowPlugin({ api, callbacks: false, serviceRate: false }))).toBeUndefined();
  });

  test("a worker that sets its own limit keeps the lower of the two; without the plugin's, its own", () => {
    const plugin = new TuneflowPlugin({ api, callbacks: false, serviceRate: 20 });
    expect(limitOf(plugin, { maxTaskQueueActivitiesPerSecond: 5 })).toBe(5);
    expect(limitOf(plugin, { maxTaskQueueActivitiesPerSecond: 50 })).toBe(18);
    const none = new TuneflowPlugin({ api, callbacks: false, serviceRate: false });
    expect(limitOf(none, { maxTaskQueueActivitiesPerSecond: 50 })).toBe(50);
  });

  test('the per-worker limit is left alone: it would not hold across workers', () => {
    const plugin = new TuneflowPlugin({ api, callbacks: false, serviceRate: 20 });
    const options = plugin.configureWorker({ taskQueue: 'tuneflow' } as WorkerOptions);
    expect(options.maxActivitiesPerSecond).toBeUndefined();
  });

  test("the worker's own requests keep to the service rate: what waited through a held event loop meets no 429", async () => {
    // A key of its own: the mock's limit is per key, and the other tests' requests share theirs.
    const limited = await startMockService();
    try {
      limited.setFaults({ rateLimitPerSecond: 10 });
      const key = (i: number) => ({ apiKey: `sk-paced-${i}`, baseUrl: limited.url });
      /** 30 activities the server dispatched while the worker's event loop was held 1.5 s, run together after. */
      const heldThenRun = async (plugin: TuneflowPlugin) => {
        const activities = activitiesOf(plugin);
        const before = limited.stats().rateLimited;
        const reads = Promise.allSettled(
          Array.from({ length: 30 }, (_, i) =>
            run(activities, 'createTune', {
              tune: { title: `paced-${i}`, name: 'dog', branch: 'fast', image_urls: ['https://img.example.com/1.png'] },
            }),
          ),
        );
        const until = Date.now() + 1_500;
        while (Date.now() < until); // a worker's event loop busy with workflow activations
        await reads;
        return limited.stats().rateLimited - before;
      };
      expect(
        await heldThenRun(new TuneflowPlugin({ api: key(1), callbacks: false, serviceRate: false })),
      ).toBeGreaterThan(0);
      expect(await heldThenRun(new TuneflowPlugin({ api: key(2), callbacks: false, serviceRate: 10 }))).toBe(0);
    } finally {
      await limited.close();
    }
  }, 20_000);

  test.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY])('a bad option is refused at construction: %p', (rate) => {
    expect(() => new TuneflowPlugin({ api, callbacks: false, serviceRate: rate })).toThrow(
      'TuneflowPlugin: serviceRate must be a positive number of requests per second or false',
    );
  });
});

describe("a value no payload can carry fails tuneflow's runs (ValueError), not their workflow tasks", () => {
  const plugin = new TuneflowPlugin({ api: { apiKey: 'k', baseUrl: 'http://127.0.0.1:1' }, callbacks: false });
  const typesOf = (own: Partial<WorkerOptions> = {}) =>
    plugin.configureWorker({ taskQueue: 'tuneflow', ...own } as WorkerOptions).workflowFailureErrorTypes;

  test("for tuneflow's workflow types only, the worker's own choices kept beside", () => {
    expect(typesOf()).toEqual({
      trainThenGenerate: ['ValueError'],
      generate: ['ValueError'],
      packTune: ['ValueError'],
      keyClaim: ['ValueError'],
    });
    const own = typesOf({ workflowFailureErrorTypes: { '*': ['MyError'], generate: ['NondeterminismError'] } });
    expect(own).toMatchObject({ '*': ['MyError'], generate: ['NondeterminismError', 'ValueError'] });
    expect(own?.myOwnWorkflow).toBeUndefined();
  });

  test('the replay worker gets the same, so such a run replays as it ran', () => {
    const replay = plugin.configureReplayWorker({});
    expect(replay.workflowFailureErrorTypes?.packTune).toEqual(['ValueError']);
  });
});
