/**
 * tuneflow's business metrics on `tuneflow worker`'s `/metrics`, each counter against what the mock service's journal
 * (and the runs' histories) say happened. No fault is left to chance: the first two tune creates are answered 429 (a
 * rate of 1 capped by `maxFaults`), every callback is sent twice, one image in two is `__blurry__`. Counters are read
 * as increases between scrapes (a worker's start, its probe included, is not the jobs'): the jobs' increase against
 * the mock's own, then that of callbacks the test posts itself (forgeries, a bad body, replays to closed runs).
 */
import { Client } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { request } from 'undici';
import { TuneflowClient } from '../../src/client';
import { MetricName } from '../../src/metrics';
import { startMockService, type MockService, type MockStats } from '../../src/mock-service';
import { freePort } from '../../src/temporal-server/dev-server';
import { devServerTest, startDevServer } from './environment';
import { rise, scrape as scrapeOf, type Scrape } from './scrape';
import { startWorkerProcess } from './worker-process';
import { PET_PACK_ID } from './scenarios';

jest.setTimeout(300_000);

const API_KEY = 'metrics-test-key-0123456789';
/** Tune creates answered 429, unprocessed, each retried after its Retry-After. */
const RATE_LIMITED = 2;
const FORGED = 3;

let env: TestWorkflowEnvironment | undefined;
let mock: MockService;

beforeAll(async () => {
  env = await startDevServer();
  mock = await startMockService({
    port: 0,
    trainingTime: '1s',
    inferenceTime: '500ms',
    // A rate of 1 draws every time: exactly the first RATE_LIMITED tune creates, whichever job sends them.
    faults: {
      status429Rate: 1,
      maxFaults: RATE_LIMITED,
      faultRoutes: ['POST /tunes'],
      status429RetryAfterSeconds: 1,
      callbackDuplicateRate: 1,
    },
  });
}, 120_000);

afterAll(async () => {
  await mock?.close();
  await env?.teardown();
});

/** Per-route counts of `after` less those of `before`, zeros left out. */
function routeRise(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  return Object.fromEntries(
    Object.entries(after)
      .map(([route, n]): [string, number] => [route, n - (before[route] ?? 0)])
      .filter(([, n]) => n !== 0),
  );
}

const sum = (counts: Record<string, number>) => Object.values(counts).reduce((a, b) => a + b, 0);

/** The mock's route pattern as the metrics name the operation: `GET /tunes/:id` is `GET /tunes/{id}`. */
const operationOf = (route: string) => route.replace(/\/:\w+/g, '/{id}');

/** Resolves once every callback the mock sent has its answer (or failure) in the journal. */
async function callbacksAnswered(): Promise<void> {
  while (mock.journal().callbacks.some((c) => c.status === null && c.failure === null))
    await new Promise((resolve) => setTimeout(resolve, 100));
}

const CALLBACK_OUTCOMES = ['accepted', 'duplicated', 'refused', 'closed_run', 'over_budget', 'failed'] as const;

devServerTest('each counter on /metrics rises by what the mock service says happened', async () => {
  const callbackPort = await freePort();
  const metricsPort = await freePort();
  const taskQueue = `tuneflow-metrics-${process.pid}`;
  const worker = await startWorkerProcess({
    temporalAddress: env!.address,
    apiKey: API_KEY,
    apiUrl: mock.url,
    taskQueue,
    callbackPort,
    metricsPort,
  });
  const scrape = () => scrapeOf(metricsPort);
  const post = async (url: string, body: string) => {
    const answer = await request(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    await answer.body.dump();
    return answer.statusCode;
  };
  const client = new Client({ connection: env!.connection, namespace: env!.namespace });
  let start: Scrape, jobsDone: Scrape, posted: Scrape;
  let before: { stats: MockStats; callbacks: number; chargedMc: number };
  let after: typeof before;
  const histories = [];
  const packId = `metrics-${Date.now()}-pack`;
  const workflowIds = [`metrics-${Date.now()}-1`, `metrics-${Date.now()}-2`, packId];
  let replayed = 0;
  try {
    start = await scrape();
    before = {
      stats: mock.stats(),
      callbacks: mock.journal().callbacks.length,
      chargedMc: mock.ledger(API_KEY).totalMc,
    };
    const tuneflow = new TuneflowClient({ client, taskQueue });
    const runs = await Promise.all(
      workflowIds.slice(0, 2).map((workflowId, n) =>
        tuneflow.trainThenGenerate(workflowId, {
          tune: {
            name: 'dog',
            branch: 'sd15',
            image_urls: [`${mock.url}/images/training-${n}.png`, `${mock.url}/images/dog-${n}__blurry__.png`],
          },
          prompts: [{ text: 'sks dog on a beach' }, { text: 'sks dog in the snow', num_images: 2 }],
          options: { inspect: {} },
        }),
      ),
    );
    // A pack: its answers name no price (the run counts the pack's charges at its end).
    const pack = await tuneflow.packTune(packId, {
      packId: PET_PACK_ID,
      tune: { name: 'dog', image_urls: [`${mock.url}/images/training-9.png`] },
    });
    await Promise.all([...runs, pack].map((run) => run.result()));
    await callbacksAnswered();
    // Every run the mock's callbacks name (the jobs, and any child of theirs), each closed by now.
    const named = new Set(mock.journal().callbacks.flatMap((c) => (c.workflowId ? [c.workflowId] : [])));
    for (const workflowId of new Set([...workflowIds, ...named])) {
      const handle = client.workflow.getHandle(workflowId);
      const described = await handle.describe();
      expect([workflowId, described.status.name]).toEqual([workflowId, 'COMPLETED']);
      histories.push(await handle.fetchHistory());
    }
    after = {
      stats: mock.stats(),
      callbacks: mock.journal().callbacks.length,
      chargedMc: mock.ledger(API_KEY).totalMc,
    };
    jobsDone = await scrape();

    // Callbacks the test posts itself: forgeries, a signed URL with a bad body, signed URLs of closed runs.
    for (let i = 0; i < FORGED; i++)
      expect(
        await post(`http://127.0.0.1:${callbackPort}/callbacks/tune?workflowId=w&runId=r&sig=${'0'.repeat(64)}`, '{}'),
      ).toBe(403);
    const held = mock.heldCallbacks(API_KEY);
    expect(held.length).toBeGreaterThan(0);
    expect(await post(held[0].url, '{"id":"not an id"}')).toBe(422);
    for (const { url, id } of held) {
      expect(await post(url, JSON.stringify({ id }))).toBe(200);
      replayed++;
    }
    posted = await scrape();
  } finally {
    worker.child.kill('SIGTERM');
  }
  expect(await worker.exited).toBe(0);

  // Requests, by the mock's counts: each route it took up answered 2xx, by operation; those it refused, 429.
  const taken = routeRise(before.stats.routes, after.stats.routes);
  const refused = routeRise(before.stats.refused, after.stats.refused);
  expect(refused).toEqual({ 'POST /tunes': RATE_LIMITED });
  const served = Object.fromEntries(
    Object.keys(taken).map((route) => [
      route,
      rise(start, jobsDone, MetricName.serviceRequests, { operation: operationOf(route), status_class: '2xx' }),
    ]),
  );
  expect(served).toEqual(taken);
  expect(rise(start, jobsDone, MetricName.serviceRequests, { status_class: '4xx' })).toBe(RATE_LIMITED);
  expect(rise(start, jobsDone, MetricName.serviceRequests)).toBe(sum(taken) + RATE_LIMITED);
  expect(rise(start, jobsDone, MetricName.serviceRateLimited, { operation: 'POST /tunes' })).toBe(RATE_LIMITED);
  expect(rise(start, jobsDone, MetricName.serviceRateLimited)).toBe(RATE_LIMITED);
  // Retries: an activity's last attempt is in its history (ActivityTaskStarted), the ones before it are its retries;
  // the 429s' among them.
  const retries = histories
    .flatMap((h) => h.events ?? [])
    .reduce((n, e) => n + Math.max(0, (e.activityTaskStartedEventAttributes?.attempt ?? 1) - 1), 0);
  expect(retries).toBeGreaterThanOrEqual(RATE_LIMITED);
  expect(rise(start, jobsDone, MetricName.activityRetries)).toBe(retries);
  // What the service charged, all of it the default tenant's.
  const charged = after.chargedMc - before.chargedMc;
  expect(charged).toBeGreaterThan(0);
  expect(rise(start, jobsDone, MetricName.chargedMillicents, { tenant: 'default' })).toBe(charged);
  expect(rise(start, jobsDone, MetricName.chargedMillicents)).toBe(charged);
  // Images: each inspected once (the mock's count of inspections), the two __blurry__ ones flagged.
  expect(taken['POST /images/inspect']).toBe(4);
  expect(rise(start, jobsDone, MetricName.imagesInspected, { flagged: 'false' })).toBe(2);
  expect(rise(start, jobsDone, MetricName.imagesInspected, { flagged: 'true' })).toBe(2);
  expect(rise(start, jobsDone, MetricName.imageFlags)).toBe(2);
  expect(rise(start, jobsDone, MetricName.imageFlags, { flag: 'blurry' })).toBe(2);

  // Callbacks the mock sent, every one twice: each answered POST is one outcome, by its status in the journal.
  const sent = mock.journal().callbacks.slice(before.callbacks, after.callbacks);
  const pairs = after.stats.callbacks.duplicated - before.stats.callbacks.duplicated;
  expect(sent.length).toBe(2 * pairs);
  expect(pairs).toBeGreaterThan(0);
  const answered = (from: number, to: number) =>
    sent.filter((c) => c.status !== null && c.status >= from && c.status < to);
  const outcomes = Object.fromEntries(
    CALLBACK_OUTCOMES.map((o) => [o, rise(start, jobsDone, MetricName.callbacks, { outcome: o })]),
  );
  expect(outcomes.accepted + outcomes.duplicated + outcomes.closed_run + outcomes.over_budget).toBe(
    answered(200, 300).length,
  );
  expect(outcomes.refused).toBe(answered(400, 500).length);
  expect(outcomes.failed).toBe(answered(500, 600).length);
  expect(outcomes.over_budget).toBe(0);
  // Accepted: each one signal in its run's history, and one of a pair at most; the copy that came second is
  // `duplicated`, or `closed_run` when its run had closed by then.
  const signals = histories
    .flatMap((h) => h.events ?? [])
    .filter((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'callback').length;
  expect(outcomes.accepted).toBe(signals);
  expect(outcomes.accepted).toBeLessThanOrEqual(pairs);
  expect(outcomes.duplicated).toBeLessThanOrEqual(pairs);
  expect(outcomes.accepted + outcomes.closed_run).toBeGreaterThanOrEqual(pairs);

  // The test's own callbacks: each outcome exactly, and no request to the service for any of them.
  expect(
    Object.fromEntries(CALLBACK_OUTCOMES.map((o) => [o, rise(jobsDone, posted, MetricName.callbacks, { outcome: o })])),
  ).toEqual({
    accepted: 0,
    duplicated: 0,
    refused: FORGED + 1,
    closed_run: replayed,
    over_budget: 0,
    failed: 0,
  });
  expect(rise(jobsDone, posted, MetricName.serviceRequests)).toBe(0);
  expect(routeRise(after.stats.routes, mock.stats().routes)).toEqual({});

  // Labels stay bounded: no job ID (the key's timestamp), tune id or URL in any tuneflow sample.
  const ours = posted.text.split('\n').filter((line) => line.startsWith('tuneflow_'));
  expect(ours.length).toBeGreaterThan(0);
  expect(ours.filter((line) => /metrics-\d{13}|127\.0\.0\.1|\/\d/.test(line))).toEqual([]);
});
