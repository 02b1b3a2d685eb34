/**
 * tuneflow's business metrics on `tuneflow worker`'s `/metrics`, each counter against what the mock service's journal
 * says happened: jobs that complete (a paid branch, images inspected, one of them flagged) while the service answers
 * some requests 429 and sends some callbacks twice, and forged callbacks posted to the receiver. A worker process of
 * its own, started for this test: its counters start at 0, so the scrape after the jobs is their increase.
 */
import { Client } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { request } from 'undici';
import { TuneflowClient } from '../../src/client';
import { MetricName } from '../../src/metrics';
import { startMockService, type MockService } from '../../src/mock-service';
import { freePort } from '../../src/temporal-server/dev-server';
import { devServerTest, startDevServer } from './environment';
import { startWorkerProcess } from './worker-process';

jest.setTimeout(240_000);

const API_KEY = 'metrics-test-key-0123456789';
const FORGED = 3;

let env: TestWorkflowEnvironment | undefined;
let mock: MockService;

beforeAll(async () => {
  env = await startDevServer();
  mock = await startMockService({
    port: 0,
    trainingTime: '1s',
    inferenceTime: '500ms',
    // Retry-After 1: the activities' retries come a second later.
    faults: { status429Rate: 0.2, status429RetryAfterSeconds: 1, callbackDuplicateRate: 0.5 },
  });
}, 120_000);

afterAll(async () => {
  await mock?.close();
  await env?.teardown();
});

/** A scrape's samples of `name`: each with its labels. */
function samples(text: string, name: string): Array<{ labels: Record<string, string>; value: number }> {
  const found = [];
  for (const line of text.split('\n')) {
    const match = line.match(/^(\w+)(?:\{(.*)\})? (\S+)$/);
    if (!match || match[1] !== name) continue;
    const labels = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    found.push({ labels, value: Number(match[3]) });
  }
  return found;
}

/** The sum of `name`'s samples whose labels include `where`. */
function total(text: string, name: string, where: Record<string, string> = {}): number {
  return samples(text, name)
    .filter((s) => Object.entries(where).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

/** The mock's route pattern as the metrics name the operation: `GET /tunes/:id` is `GET /tunes/{id}`. */
const operationOf = (route: string) => route.replace(/\/:\w+/g, '/{id}');

devServerTest('each counter on /metrics equals what the mock service says happened', async () => {
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
  let scrape: string;
  const histories = [];
  try {
    const tuneflow = new TuneflowClient({
      client: new Client({ connection: env!.connection, namespace: env!.namespace }),
      taskQueue,
    });
    const runs = await Promise.all(
      [1, 2].map((n) =>
        tuneflow.trainThenGenerate(`metrics-${Date.now()}-${n}`, {
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
    await Promise.all(runs.map((run) => run.result()));
    for (const run of runs) histories.push(await run.handle.fetchHistory());
    // Forgeries: a callback URL with a signature the receiver never made.
    for (let i = 0; i < FORGED; i++) {
      const forged = await request(
        `http://127.0.0.1:${callbackPort}/callbacks/tune?workflowId=w&runId=r&sig=${'0'.repeat(64)}`,
        { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"id":1}' },
      );
      expect(forged.statusCode).toBe(403);
      await forged.body.dump();
    }
    const answer = await request(`http://127.0.0.1:${metricsPort}/metrics`);
    scrape = await answer.body.text();
  } finally {
    worker.child.kill('SIGTERM');
  }
  expect(await worker.exited).toBe(0);

  const stats = mock.stats();
  // Requests: every one the service took up answered 2xx, by operation; those it refused, 429 (counted apart too).
  for (const [route, count] of Object.entries(stats.routes))
    expect([
      route,
      total(scrape, MetricName.serviceRequests, { operation: operationOf(route), status_class: '2xx' }),
    ]).toEqual([route, count]);
  const refused = Object.values(stats.refused).reduce((a, b) => a + b, 0);
  expect(refused).toBeGreaterThan(0);
  expect(total(scrape, MetricName.serviceRequests, { status_class: '4xx' })).toBe(refused);
  expect(total(scrape, MetricName.serviceRateLimited)).toBe(refused);
  expect(total(scrape, MetricName.serviceRequests)).toBe(
    Object.values(stats.routes).reduce((a, b) => a + b, 0) + refused,
  );
  // Retries: an activity's last attempt is in its history (ActivityTaskStarted), the ones before it are its retries.
  const retries = histories
    .flatMap((h) => h.events ?? [])
    .reduce((sum, e) => sum + Math.max(0, (e.activityTaskStartedEventAttributes?.attempt ?? 1) - 1), 0);
  expect(retries).toBeGreaterThan(0);
  expect(total(scrape, MetricName.activityRetries)).toBe(retries);
  // What the service charged, all of it the default tenant's.
  expect(total(scrape, MetricName.chargedMillicents, { tenant: 'default' })).toBe(mock.ledger(API_KEY).totalMc);
  expect(total(scrape, MetricName.chargedMillicents)).toBe(mock.ledger(API_KEY).totalMc);
  // Images: each inspected once, by the journal's route count; one in two flagged blurry.
  expect(total(scrape, MetricName.imagesInspected)).toBe(stats.routes['POST /images/inspect']);
  expect(total(scrape, MetricName.imagesInspected, { flagged: 'true' })).toBe(2);
  expect(total(scrape, MetricName.imageFlags, { flag: 'blurry' })).toBe(2);
  // Callbacks: every POST the mock made that was answered, by outcome, and the forgeries refused.
  const answered = stats.callbacks.sent - stats.callbacks.failed;
  expect(stats.callbacks.duplicated).toBeGreaterThan(0);
  const outcomes = ['accepted', 'duplicated', 'closed_run', 'over_budget'];
  expect(outcomes.reduce((sum, outcome) => sum + total(scrape, MetricName.callbacks, { outcome }), 0)).toBe(answered);
  expect(total(scrape, MetricName.callbacks, { outcome: 'duplicated' })).toBeGreaterThan(0);
  expect(total(scrape, MetricName.callbacks, { outcome: 'refused' })).toBe(FORGED);
  // Labels stay bounded: no job ID (the key's timestamp), tune id or URL in any tuneflow sample.
  const ours = scrape.split('\n').filter((line) => line.startsWith('tuneflow_'));
  expect(ours.filter((line) => /metrics-\d{13}|127\.0\.0\.1|\/\d/.test(line))).toEqual([]);
});
