/**
 * Every metric tuneflow's alert rules and Grafana dashboard name (deploy/) is on a real worker's /metrics, with the
 * labels they select and group by: `tuneflow worker` runs jobs against the mock service that leave each kind of
 * sample there (a charged job whose first tune create is answered 429 and whose image is inspected, then a job whose
 * first inspection is answered 500 and which its inspection refuses, a forged callback, a job whose tune's callback
 * comes after its poll), then its /metrics is read. `up` alone is Prometheus's own.
 * test/deploy/alerts.test.ts checks the same files with promtool.
 */
import { Client } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { request } from 'undici';
import { TuneflowClient } from '../../src/client';
import { startMockService, type MockService } from '../../src/mock-service';
import { freePort } from '../../src/temporal-server/dev-server';
import { expressions, labelsOf, MADE_BY_PROMETHEUS, metricsUsed, samplesOf } from '../deploy/observability';
import { devServerTest, startDevServer } from './environment';
import { startWorkerProcess } from './worker-process';

jest.setTimeout(300_000);

let env: TestWorkflowEnvironment | undefined;
let mock: MockService;

beforeAll(async () => {
  env = await startDevServer();
  mock = await startMockService({
    port: 0,
    trainingTime: '1s',
    // Long enough that a run still waits for its prompt when its tune's late callback comes (below).
    inferenceTime: '4s',
    // The first tune create answered 429 (a rate of 1, one fault): a retried activity and a rate-limited request.
    faults: { status429Rate: 1, maxFaults: 1, faultRoutes: ['POST /tunes'], status429RetryAfterSeconds: 1 },
  });
}, 120_000);

afterAll(async () => {
  await mock?.close();
  await env?.teardown();
});

devServerTest("every metric and label the rules and the dashboard read is on a worker's /metrics", async () => {
  const callbackPort = await freePort();
  const metricsPort = await freePort();
  const taskQueue = `tuneflow-dashboard-${process.pid}`;
  const worker = await startWorkerProcess({
    temporalAddress: env!.address,
    apiKey: 'dashboard-test-key-0123456789',
    apiUrl: mock.url,
    taskQueue,
    callbackPort,
    metricsPort,
  });
  let text: string;
  try {
    const tuneflow = new TuneflowClient({
      client: new Client({ connection: env!.connection, namespace: env!.namespace }),
      taskQueue,
    });
    const id = `dashboard-${Date.now()}`;
    const charged = await tuneflow.trainThenGenerate(`${id}-charged`, {
      tune: { name: 'dog', branch: 'sd15', image_urls: [`${mock.url}/images/training-1.png`] },
      prompts: [{ text: 'sks dog on a beach' }],
      options: { inspect: {} },
    });
    await charged.result();
    // Then the first inspection answered 500: a failed request, retried.
    mock.setFaults({ status500Rate: 1, maxFaults: 1, faultRoutes: ['POST /images/inspect'] });
    const refused = await tuneflow.trainThenGenerate(`${id}-refused`, {
      tune: { name: 'dog', branch: 'sd15', image_urls: [`${mock.url}/images/dog__blurry__.png`] },
      prompts: [{ text: 'sks dog in the snow' }],
      options: { inspect: { refuse: ['blurry'] } },
    });
    await expect(refused.result()).rejects.toThrow();
    const forged = await request(
      `http://127.0.0.1:${callbackPort}/callbacks/tune?workflowId=w&runId=r&sig=${'0'.repeat(64)}`,
      { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' },
    );
    await forged.body.dump();
    expect(forged.statusCode).toBe(403);
    // Callbacks 2.5 s late, a poll each second: the tune's poll finds it trained first, and its callback comes late
    // while the run generates.
    mock.setFaults({ callbackDelayMs: 2_500 });
    const late = await tuneflow.trainThenGenerate(`${id}-late`, {
      tune: { name: 'dog', branch: 'sd15', image_urls: [`${mock.url}/images/training-2.png`] },
      prompts: [{ text: 'sks dog in the rain' }],
      options: {
        pollInterval: '1 second',
        maxPollInterval: '2 seconds',
        trainingTimeout: '1 minute',
        promptTimeout: '1 minute',
      },
    });
    await late.result();
    text = await (await request(`http://127.0.0.1:${metricsPort}/metrics`)).body.text();
  } finally {
    worker.child.kill('SIGTERM');
  }
  expect(await worker.exited).toBe(0);

  const samples = samplesOf(text);
  const scraped = new Set(samples.map((s) => s.name));
  // Each name, with where it is read: none missing from the scrape.
  const missing = [...metricsUsed()].filter(([name]) => !scraped.has(name) && !MADE_BY_PROMETHEUS.includes(name));
  expect(missing).toEqual([]);
  expect(metricsUsed().size).toBeGreaterThan(10);

  // A selector's label value is one some sample has; a grouping's label is on some sample of the expression's metrics.
  const problems: string[] = [];
  for (const { where, expr } of expressions()) {
    const { matchers, grouping } = labelsOf(expr);
    for (const { name, label, op, value } of matchers) {
      if (MADE_BY_PROMETHEUS.includes(name)) continue;
      const fits = (v: string | undefined) =>
        v !== undefined && (op === '=' ? v === value : new RegExp(`^(?:${value})$`).test(v));
      if (!samples.some((s) => s.name === name && fits(s.labels[label])))
        problems.push(`${where}: no ${name} sample with ${label}${op}"${value}"`);
    }
    const names = [...expr.matchAll(/[a-zA-Z_:][\w:]*/g)].map((m) => m[0]).filter((n) => scraped.has(n));
    for (const label of grouping)
      if (label !== 'le' && !samples.some((s) => names.includes(s.name) && label in s.labels))
        problems.push(`${where}: no sample of ${names.join(', ')} has the label ${label}`);
  }
  expect(problems).toEqual([]);
});
