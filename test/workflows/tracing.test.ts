/**
 * One trace per job, on a real Temporal dev server with the mock service over real HTTP: TuneflowClient and
 * TuneflowPlugin with tracing, the OpenTelemetry SDK installed as an application does, an in-memory exporter. The
 * trace holds the start, the workflow, each activity, each request to the service, each callback the service sent and
 * the signal it became, each parented as it happened, and no secret. Then `tuneflow worker` as a child process,
 * configured by OTEL_* variables, sends its spans to a collector over OTLP/HTTP.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SpanKind } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { Client } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Worker } from '@temporalio/worker';
import { TuneflowClient } from '../../src/client';
import { startMockService, type MockService } from '../../src/mock-service';
import { TuneflowPlugin } from '../../src/plugin';
import { freePort } from '../../src/temporal-server/dev-server';
import { installTestTracing, SIGNATURE, spansWithSecrets, type TestTracing } from '../tracing-sdk';
import { devServerTest, startDevServer } from './environment';
import { waitFor } from './harness';
import { startWorkerProcess } from './worker-process';

jest.setTimeout(180_000);

const API_KEY = 'tracing-workflow-test-key-0123456789';
const SECRET = 'tracing-workflow-test-callback-secret';

let env: TestWorkflowEnvironment | undefined;
let mock: MockService;
let tracing: TestTracing;

beforeAll(async () => {
  tracing = installTestTracing();
  env = await startDevServer();
  mock = await startMockService({ port: 0, trainingTime: '1s', inferenceTime: '500ms' });
}, 120_000);

afterAll(async () => {
  await mock?.close();
  await env?.teardown();
  await tracing?.uninstall();
});

const JOB = {
  tune: { name: 'dog', branch: 'sd15', image_urls: [] as string[] },
  prompts: [{ text: 'sks dog on a beach' }, { text: 'sks dog in the snow', num_images: 2 }],
};

/** The mock's API requests per route, as the client's spans name them (`/tunes/:tune_id` is `/tunes/{id}`). */
function requestsByRoute(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const [route, count] of Object.entries(mock.stats().routes)) {
    if (/ \/(images|files|__mock)\b/.test(route)) continue;
    const name = route.replace(/:\w+/g, '{id}');
    counts[name] = (counts[name] ?? 0) + count;
  }
  return counts;
}

devServerTest(
  'a job is one trace: start, workflow, activities, service requests, callbacks and their signals',
  async () => {
    const callbackPort = await freePort();
    const taskQueue = `tuneflow-tracing-${process.pid}`;
    const quiet = new DefaultLogger('WARN');
    const plugin = new TuneflowPlugin({
      api: { apiKey: API_KEY, baseUrl: mock.url },
      callbacks: {
        baseUrl: `http://127.0.0.1:${callbackPort}`,
        secret: SECRET,
        port: callbackPort,
        host: '127.0.0.1',
        // A client of its own, as `tuneflow worker` gives it: the plugin makes it trace its signals.
        client: new Client({ connection: env!.connection, namespace: env!.namespace }),
      },
      logger: quiet,
      tracing: tracing.options,
    });
    const worker = await Worker.create({
      connection: env!.nativeConnection,
      namespace: env!.namespace ?? 'default',
      taskQueue,
      plugins: [plugin],
    });
    const tuneflow = new TuneflowClient({
      client: new Client({ connection: env!.connection, namespace: env!.namespace }),
      taskQueue,
      tracing: true,
    });
    const workflowId = `tracing-${Date.now()}`;
    const job = { ...JOB, tune: { ...JOB.tune, image_urls: [`${mock.url}/images/training-1.png`] } };
    const progress = await worker.runUntil(async () => {
      const run = await tuneflow.trainThenGenerate(workflowId, job);
      await run.result();
      return run.progress();
    });
    await waitFor(
      async () => tracing.exporter.getFinishedSpans().some((s) => s.name === 'RunWorkflow:trainThenGenerate'),
      () => "the workflow's span",
    );

    // A read is its caller's, not the job's: the progress read after the run (the query, and the describe that says
    // what is retrying) is a trace of its own.
    const all = tracing.exporter.getFinishedSpans();
    const queries = all.filter((span) => /^((QueryWorkflow|HandleQuery):progress|DescribeWorkflow)$/.test(span.name));
    expect(queries.map((span) => span.name)).toEqual(
      expect.arrayContaining(['QueryWorkflow:progress', 'DescribeWorkflow']),
    );
    const spans = all.filter((span) => !queries.includes(span));
    const byId = new Map(spans.map((span) => [span.spanContext().spanId, span]));
    const parentOf = (span: ReadableSpan) => (span.parentSpanId ? byId.get(span.parentSpanId) : undefined);
    const named = (name: string | RegExp) =>
      spans.filter((span) => (typeof name === 'string' ? span.name === name : name.test(span.name)));
    const describe = (span: ReadableSpan | undefined) => span?.name ?? 'none';

    // One trace, every span in it, none an orphan but the start.
    const start = named('StartWorkflow:trainThenGenerate');
    expect(start).toHaveLength(1);
    const traceId = start[0].spanContext().traceId;
    expect(spans.filter((span) => span.spanContext().traceId !== traceId).map((span) => span.name)).toEqual([]);
    expect(spans.filter((span) => span !== start[0] && !parentOf(span)).map((span) => span.name)).toEqual([]);
    expect(start[0].parentSpanId).toBeUndefined();

    // The workflow, under the start.
    const [workflow] = named('RunWorkflow:trainThenGenerate');
    expect(describe(parentOf(workflow))).toBe('StartWorkflow:trainThenGenerate');

    // Each activity: scheduled by the workflow, run under its scheduling.
    const scheduled = named(/^StartActivity:/);
    const ran = named(/^RunActivity:/);
    expect(scheduled.map((span) => span.name)).toEqual(
      expect.arrayContaining(['StartActivity:createTune', 'StartActivity:createPrompt']),
    );
    for (const span of scheduled) expect(describe(parentOf(span))).toBe('RunWorkflow:trainThenGenerate');
    expect(ran).toHaveLength(scheduled.length);
    for (const span of ran) expect(describe(parentOf(span))).toBe(span.name.replace('RunActivity', 'StartActivity'));

    // Each request to the service: one span per request the mock counted, each under the activity that made it.
    const requests = spans.filter((span) => span.kind === SpanKind.CLIENT && span.attributes['http.request.method']);
    const counted: Record<string, number> = {};
    for (const span of requests) {
      counted[span.name] = (counted[span.name] ?? 0) + 1;
      expect(describe(parentOf(span))).toMatch(/^RunActivity:/);
    }
    expect(counted).toEqual(requestsByRoute());
    expect(counted['POST /tunes']).toBe(1);
    expect(counted['POST /tunes/{id}/prompts']).toBe(2);
    expect(requests.find((span) => span.name === 'POST /tunes')!.parentSpanId).toBe(
      named('RunActivity:createTune')[0].spanContext().spanId,
    );

    // Each callback the service sent: a receiver span under the scheduling of the activity that asked for it.
    const callbacks = spans.filter((span) => span.kind === SpanKind.SERVER);
    expect(callbacks).toHaveLength(mock.stats().callbacks.sent);
    expect(callbacks.length).toBeGreaterThanOrEqual(3); // the tune's and both prompts'
    for (const span of callbacks) {
      const asker = span.attributes['tuneflow.callback.kind'] === 'tune' ? 'createTune' : 'createPrompt';
      expect(describe(parentOf(span))).toBe(`StartActivity:${asker}`);
      expect(span.attributes).toMatchObject({ temporalWorkflowId: workflowId, 'http.response.status_code': 200 });
    }
    // ... and the signal each delivered one sent, handled by the run, under it.
    const delivered = callbacks.filter((span) => span.attributes['tuneflow.callback.outcome'] === 'delivered');
    expect(delivered.length).toBe(progress.counts.callbacks);
    const signals = named('SignalWorkflow:callback');
    expect(signals).toHaveLength(delivered.length);
    for (const signal of signals) expect(delivered).toContain(parentOf(signal));
    const handled = named('HandleSignal:callback');
    expect(handled).toHaveLength(signals.length);
    for (const span of handled) expect(signals).toContain(parentOf(span));

    // No secret in any attribute of any span: the API key, the callback secret, a signed URL.
    expect(spansWithSecrets(spans, [API_KEY, SECRET])).toEqual([]);
  },
);

devServerTest('`tuneflow worker` sends its spans to the collector OTEL_EXPORTER_OTLP_ENDPOINT names', async () => {
  // A collector's OTLP/HTTP endpoint: what it was sent, as bytes (protobuf keeps strings as they are).
  const received: Buffer[] = [];
  const collector: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/v1/traces') received.push(Buffer.concat(chunks));
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
  const callbackPort = await freePort();
  const taskQueue = `tuneflow-tracing-worker-${process.pid}`;
  const worker = await startWorkerProcess({
    temporalAddress: env!.address,
    apiKey: API_KEY,
    apiUrl: mock.url,
    taskQueue,
    callbackPort,
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(collector.address() as AddressInfo).port}`,
      OTEL_SERVICE_NAME: 'tuneflow-worker-under-test',
    },
  });
  try {
    const tuneflow = new TuneflowClient({
      client: new Client({ connection: env!.connection, namespace: env!.namespace }),
      taskQueue,
      tracing: true,
    });
    const job = { ...JOB, tune: { ...JOB.tune, image_urls: [`${mock.url}/images/training-1.png`] } };
    await (await tuneflow.trainThenGenerate(`tracing-worker-${Date.now()}`, job)).result();
  } finally {
    worker.child.kill('SIGTERM');
  }
  // Stopping sends the spans still batched.
  expect(await worker.exited).toBe(0);
  await new Promise<void>((resolve) => collector.close(() => resolve()));
  expect(worker.log()).toMatch(/"traces":"http:\/\/127\.0\.0\.1:\d+"/);
  const sent = Buffer.concat(received).toString('latin1');
  for (const name of [
    'tuneflow-worker-under-test',
    'RunWorkflow:trainThenGenerate',
    'StartActivity:createTune',
    'RunActivity:createPrompt',
    'POST /tunes',
    'POST /tunes/{id}/prompts',
    'POST /callbacks/tune',
    'SignalWorkflow:callback',
    'HandleSignal:callback',
  ])
    expect(sent).toContain(name);
  expect(sent).not.toContain(API_KEY);
  expect(sent).not.toContain('worker-process-test-secret');
  expect(sent).not.toMatch(SIGNATURE);
});
