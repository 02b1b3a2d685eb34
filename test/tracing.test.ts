/**
 * One trace per job, piece by piece, with the OpenTelemetry SDK installed as an application does and an in-memory
 * exporter: the span of every request to the (mock) service over real HTTP on loopback, the receiver's span continuing
 * the trace its callback URL names (and nothing a forged `traceparent` can do), the callback URLs an activity hands
 * out on every attempt, every recorded history replayed with OpenTelemetry's workflow interceptors, and the worker's
 * OTEL_* variables. The whole trace of a job on a real Temporal server: test/workflows/tracing.test.ts.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { context, type SpanContext, SpanKind, SpanStatusCode, trace, TraceFlags } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { defaultPayloadConverter, type Headers } from '@temporalio/common';
import { OpenTelemetryPlugin } from '@temporalio/interceptors-opentelemetry';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger, Worker } from '@temporalio/worker';
import { request } from 'undici';
import { createActivities } from '../src/activities';
import { NotFoundError, TunesApi } from '../src/api';
import { startCallbackReceiver, type CallbackReceiver, type Signaler } from '../src/callbacks/receiver';
import { CallbackSigner } from '../src/callbacks/signing';
import {
  callbackParent,
  callbackTraceParams,
  formatTraceparent,
  parseTraceparent,
  rememberScheduledBy,
} from '../src/callbacks/trace-context';
import { ConfigError } from '../src/config';
import { startMockService, type MockService } from '../src/mock-service';
import { loadTracingConfig, TRACING_ENVIRONMENT } from '../src/tracing-environment';
import { historyFromJson } from './workflows/history-json';
import { replayedWorkflowId } from './workflows/history-summary';
import { bundleForStrictReplay, replayStrictly } from './workflows/strict-replay';
import { installQuietRuntime } from './workflows/global-setup';
import { installTestTracing, spansWithSecrets, type TestTracing } from './tracing-sdk';

jest.setTimeout(60_000);

const API_KEY = 'tracing-test-key-0123456789';
const SECRET = 'tracing-test-callback-secret';
const RUN_ID = '0190b7c1-2f7e-7c1a-9d52-5a4f3c2b1a00';
const SCHEDULED: SpanContext = {
  traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
  spanId: '00f067aa0ba902b7',
  traceFlags: TraceFlags.SAMPLED,
};
const SCHEDULED_TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

let tracing: TestTracing;
let mock: MockService;

beforeAll(async () => {
  tracing = installTestTracing();
  mock = await startMockService({ port: 0, trainingTime: '200ms', inferenceTime: '100ms' });
});
afterAll(async () => {
  await mock.close();
  await tracing.uninstall();
});
beforeEach(() => tracing.exporter.reset());
afterEach(() => {
  // Whatever a test did, no span it left carries a secret.
  expect(spansWithSecrets(tracing.exporter.getFinishedSpans(), [API_KEY, SECRET])).toEqual([]);
});

const spans = (): ReadableSpan[] => tracing.exporter.getFinishedSpans();
const tracer = trace.getTracer('tracing-test');

describe('traceparent', () => {
  test('formats and parses W3C version 00, only the sampled flag carried', () => {
    expect(formatTraceparent(SCHEDULED)).toBe(SCHEDULED_TRACEPARENT);
    expect(parseTraceparent(SCHEDULED_TRACEPARENT)).toEqual({ ...SCHEDULED, isRemote: true });
    expect(parseTraceparent(SCHEDULED_TRACEPARENT.replace(/01$/, 'ff'))?.traceFlags).toBe(TraceFlags.SAMPLED);
    expect(parseTraceparent(SCHEDULED_TRACEPARENT.replace(/01$/, '00'))?.traceFlags).toBe(TraceFlags.NONE);
  });

  test.each([
    ['uppercase', SCHEDULED_TRACEPARENT.toUpperCase()],
    ['another version', SCHEDULED_TRACEPARENT.replace(/^00/, '01')],
    ['the invalid version', SCHEDULED_TRACEPARENT.replace(/^00/, 'ff')],
    ['a zero trace id', `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`],
    ['a zero span id', `00-4bf92f3577b34da6a3ce929d0e0e4736-${'0'.repeat(16)}-01`],
    ['too long', `${SCHEDULED_TRACEPARENT}-x`],
    ['too short', SCHEDULED_TRACEPARENT.slice(0, 54)],
    ['not hex', SCHEDULED_TRACEPARENT.replace('4bf9', 'zzzz')],
    ['a list', `${SCHEDULED_TRACEPARENT},${SCHEDULED_TRACEPARENT}`],
    ['empty', ''],
    ['not a string', 42],
  ])('refuses %s', (_name, value) => {
    expect(parseTraceparent(value)).toBeUndefined();
  });

  test("a callback's parent is the span its URL's signed traceparent names; none without a valid one", () => {
    const parent = (params: Record<string, string>) => trace.getSpanContext(callbackParent(params));
    expect(parent({ traceparent: SCHEDULED_TRACEPARENT })).toEqual({ ...SCHEDULED, isRemote: true });
    expect(parent({ key: '0' })).toBeUndefined();
    expect(parent({ traceparent: '00-zz' })).toBeUndefined();
    expect(parent({})).toBeUndefined();
  });
});

describe('service requests', () => {
  test('each request is a client span in the active trace: method, route, server, status; never the key or a URL', async () => {
    const api = new TunesApi({ apiKey: API_KEY, baseUrl: mock.url });
    const signer = new CallbackSigner({ baseUrl: 'http://127.0.0.1:9', secret: SECRET });
    const callback = signer.url('tune', { workflowId: 'job-1', runId: RUN_ID });
    try {
      await tracer.startActiveSpan('job', async (job) => {
        // The service echoes the signed callback URL in its answer; the span must not take it.
        const tune = await api.tunes.create({
          title: 'job-1',
          name: 'dog',
          branch: 'fast',
          image_urls: [`${mock.url}/images/training-1.png`],
          callback,
        });
        expect(tune.callback).toBe(callback);
        await api.tunes.retrieve(tune.id, { attempt: 3 });
        await api.prompts.list(tune.id, { limit: 5 });
        await expect(api.tunes.retrieve(999_999_999)).rejects.toBeInstanceOf(NotFoundError);
        job.end();
      });
    } finally {
      await api.close();
    }
    const job = spans().find((span) => span.name === 'job')!;
    const requests = spans().filter((span) => span.kind === SpanKind.CLIENT);
    expect(requests.map((span) => span.name)).toEqual([
      'POST /tunes',
      'GET /tunes/{id}',
      'GET /tunes/{id}/prompts',
      'GET /tunes/{id}',
    ]);
    const { port, hostname } = new URL(mock.url);
    for (const span of requests) {
      expect(span.parentSpanId).toBe(job.spanContext().spanId);
      expect(span.spanContext().traceId).toBe(job.spanContext().traceId);
      expect(span.attributes).toMatchObject({ 'server.address': hostname, 'server.port': Number(port) });
      expect(span.attributes['url.template']).toBe(span.name.split(' ')[1]);
      expect(span.attributes['http.request.method']).toBe(span.name.split(' ')[0]);
    }
    const [create, retried, list, missing] = requests;
    expect(create.attributes['http.response.status_code']).toBe(201);
    expect(create.status.code).toBe(SpanStatusCode.UNSET);
    expect(create.attributes['http.request.resend_count']).toBeUndefined();
    // Attempt 3 of a retried call: sent twice before.
    expect(retried.attributes).toMatchObject({ 'http.response.status_code': 200, 'http.request.resend_count': 2 });
    expect(list.attributes['http.response.status_code']).toBe(200);
    expect(missing.attributes).toMatchObject({ 'http.response.status_code': 404, 'error.type': '404' });
    expect(missing.status).toEqual({ code: SpanStatusCode.ERROR });
    // Nothing else: no header, no query, no body, no message.
    expect(Object.keys(list.attributes).sort()).toEqual(
      ['http.request.method', 'http.response.status_code', 'server.address', 'server.port', 'url.template'].sort(),
    );
    expect(missing.events).toEqual([]);
  });

  test('a request that never reached the service names its kind of failure', async () => {
    const api = new TunesApi({ apiKey: API_KEY, baseUrl: 'http://127.0.0.1:9' });
    try {
      await expect(api.tunes.retrieve(1)).rejects.toThrow();
    } finally {
      await api.close();
    }
    const [span] = spans();
    expect(span.name).toBe('GET /tunes/{id}');
    expect(span.attributes['error.type']).toBe('ConnectionError');
    expect(span.attributes['http.response.status_code']).toBeUndefined();
    expect(span.status.code).toBe(SpanStatusCode.ERROR);
  });
});

describe('the receiver', () => {
  const signer = new CallbackSigner({ baseUrl: 'https://hooks.example.com', secret: SECRET });
  const quiet = new DefaultLogger('ERROR', () => undefined);
  let receiver: CallbackReceiver;
  /** The span that was active when each signal was sent. */
  let signalledIn: Array<SpanContext | undefined>;
  const signaler: Signaler = {
    async signal() {
      signalledIn.push(trace.getSpanContext(context.active()));
      return 'delivered';
    },
  };

  beforeEach(async () => {
    signalledIn = [];
    receiver = await startCallbackReceiver({ host: '127.0.0.1', signer, signaler, logger: quiet });
  });
  afterEach(() => receiver.close());

  async function post(params: Record<string, string>, workflowId = 'job-1', sig?: string): Promise<number> {
    const url = new URL(signer.url('tune', { workflowId, runId: RUN_ID }, params));
    if (sig !== undefined) url.searchParams.set('sig', sig);
    const { statusCode, body } = await request(`${receiver.url}${url.pathname}${url.search}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: 7 }),
    });
    await body.dump();
    return statusCode;
  }

  test('continues the trace its URL names, and the signal is its child', async () => {
    expect(await post({ traceparent: SCHEDULED_TRACEPARENT })).toBe(200);
    const [span] = spans();
    expect(spans()).toHaveLength(1);
    expect(span.name).toBe('POST /callbacks/tune');
    expect(span.kind).toBe(SpanKind.SERVER);
    expect(span.spanContext().traceId).toBe(SCHEDULED.traceId);
    expect(span.parentSpanId).toBe(SCHEDULED.spanId);
    expect(span.attributes).toEqual({
      'http.request.method': 'POST',
      'http.route': '/callbacks/tune',
      'http.response.status_code': 200,
      'tuneflow.callback.kind': 'tune',
      'tuneflow.callback.outcome': 'delivered',
      temporalWorkflowId: 'job-1',
      run_id: RUN_ID,
    });
    expect(signalledIn).toEqual([span.spanContext()]);
  });

  test('without a traceparent, or with one that is not well formed, a callback starts a trace of its own', async () => {
    const forged = [
      undefined,
      SCHEDULED_TRACEPARENT.toUpperCase(),
      `${SCHEDULED_TRACEPARENT}-${'a'.repeat(2000)}`,
      `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`,
      'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    ];
    for (const [i, traceparent] of forged.entries())
      expect(await post(traceparent === undefined ? {} : { traceparent }, `job-${i}`)).toBe(200);
    expect(spans()).toHaveLength(forged.length);
    for (const span of spans()) {
      expect(span.parentSpanId).toBeUndefined();
      expect(span.spanContext().traceId).not.toBe(SCHEDULED.traceId);
      expect(span.attributes['tuneflow.callback.outcome']).toBe('delivered');
    }
    // Every one still woke its run: a traceparent decides a span's parent, never the wake-up.
    expect(signalledIn).toHaveLength(forged.length);
  });

  test('a URL whose signature does not hold makes no span, whatever trace it names', async () => {
    expect(await post({ traceparent: SCHEDULED_TRACEPARENT }, 'job-1', 'ab'.repeat(32))).toBe(403);
    expect(await post({ traceparent: SCHEDULED_TRACEPARENT }, 'job-1', '')).toBe(403);
    expect(spans()).toEqual([]);
    expect(signalledIn).toEqual([]);
  });

  test('a callback not signalled says why: coalesced repeats, refused bodies', async () => {
    expect(await post({ traceparent: SCHEDULED_TRACEPARENT })).toBe(200);
    expect(await post({ traceparent: SCHEDULED_TRACEPARENT })).toBe(200);
    const url = new URL(signer.url('tune', { workflowId: 'job-2', runId: RUN_ID }));
    const refused = await request(`${receiver.url}${url.pathname}${url.search}`, { method: 'POST', body: '{' });
    await refused.body.dump();
    expect(refused.statusCode).toBe(400);
    expect(
      spans().map((span) => [
        span.attributes['tuneflow.callback.outcome'],
        span.attributes['http.response.status_code'],
      ]),
    ).toEqual([
      ['delivered', 200],
      ['coalesced', 200],
      [undefined, 400],
    ]);
    expect(signalledIn).toHaveLength(1);
  });
});

describe('callback URLs of an activity', () => {
  const signer = new CallbackSigner({ baseUrl: 'http://127.0.0.1:9', secret: SECRET });
  const quiet = new DefaultLogger('ERROR', () => undefined);

  /** Temporal's trace header as OpenTelemetry's workflow interceptor writes it on a scheduled activity. */
  const scheduledBy = (traceparent: string): Headers => ({
    '_tracer-data': defaultPayloadConverter.toPayload({ traceparent }),
  });

  /** Runs `fn` as attempt `attempt` of an activity whose Temporal headers are `headers`, through the interceptor. */
  function asActivity<T>(fn: () => Promise<T>, headers: Headers, attempt = 1): Promise<T> {
    const env = new MockActivityEnvironment(
      { attempt, workflowExecution: { workflowId: 'job-1', runId: RUN_ID }, scheduledTimestampMs: Date.now() - 1000 },
      { logger: quiet },
    );
    const inbound = rememberScheduledBy(env.context).inbound!;
    return env.run(() => inbound.execute!({ args: [], headers }, fn) as Promise<T>) as Promise<T>;
  }

  test('carry the span that scheduled the activity, the same on every attempt', async () => {
    expect(await asActivity(async () => callbackTraceParams(), scheduledBy(SCHEDULED_TRACEPARENT))).toEqual({
      traceparent: SCHEDULED_TRACEPARENT,
    });
    expect(await asActivity(async () => callbackTraceParams(), scheduledBy(SCHEDULED_TRACEPARENT), 4)).toEqual({
      traceparent: SCHEDULED_TRACEPARENT,
    });
    // Untraced workflows, or a header the interceptor cannot read: no parameter.
    expect(await asActivity(async () => callbackTraceParams(), {})).toBeUndefined();
    expect(await asActivity(async () => callbackTraceParams(), scheduledBy('00-zz'))).toBeUndefined();
    expect(callbackTraceParams()).toBeUndefined();
  });

  test("a retried createPrompt finds what its first attempt made: the URL, traceparent and all, is the first's", async () => {
    const api = new TunesApi({ apiKey: `${API_KEY}-retry`, baseUrl: mock.url });
    const activities = createActivities({ api, callbacks: signer });
    const headers = scheduledBy(SCHEDULED_TRACEPARENT);
    try {
      const tune = await api.tunes.create({
        title: 'job-1',
        name: 'dog',
        branch: 'fast',
        image_urls: [`${mock.url}/images/training-1.png`],
      });
      const input = { tuneId: tune.id, prompt: { text: 'sks dog' }, key: 'p0' };
      const first = await asActivity(() => activities.createPrompt(input), headers);
      expect(new URL(first.callback!).searchParams.get('traceparent')).toBe(SCHEDULED_TRACEPARENT);
      // Attempt 2 (the first's answer lost) looks first, and finds it by its considered attributes, callback included.
      const retried = await asActivity(() => activities.createPrompt(input), headers, 2);
      expect(retried.id).toBe(first.id);
      expect(await api.prompts.list(tune.id, { limit: 10 })).toHaveLength(1);
    } finally {
      await api.close();
    }
    const retriedRequests = spans().filter((span) => span.attributes['http.request.resend_count'] === 1);
    expect(retriedRequests.map((span) => span.name)).toEqual(['GET /tunes/{id}/prompts']);
  });
});

describe('recorded histories, replayed with tracing', () => {
  const HISTORIES = path.join(__dirname, 'histories');
  const files = fs
    .readdirSync(HISTORIES, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.json'))
    .sort();
  const readHistory = (file: string) =>
    historyFromJson(JSON.parse(fs.readFileSync(path.join(HISTORIES, file), 'utf8')));
  const OTEL_WORKFLOW_INTERCEPTORS = require.resolve(
    '@temporalio/interceptors-opentelemetry/lib/workflow-interceptors',
  );
  let bundle: Awaited<ReturnType<typeof bundleForStrictReplay>>;
  let otel: OpenTelemetryPlugin;

  beforeAll(async () => {
    installQuietRuntime();
    bundle = await bundleForStrictReplay(undefined, [OTEL_WORKFLOW_INTERCEPTORS]);
    otel = new OpenTelemetryPlugin(tracing.options);
  }, 120_000);

  test('the corpus is here', () => {
    expect(files.length).toBeGreaterThanOrEqual(42);
    expect(bundle.code).toContain('interceptors-opentelemetry');
  });

  test.each(files)(
    "%s replays with OpenTelemetry's workflow interceptors: same commands, activity types and timer durations",
    async (file) => {
      const history = readHistory(file);
      await replayStrictly(bundle, history, replayedWorkflowId(history, path.basename(file, '.json')), [otel]);
    },
  );

  test('a traced TuneflowPlugin, as built, takes the prebuilt traced bundle, and it replays', async () => {
    const lib = path.resolve(__dirname, '..', 'lib');
    if (!fs.existsSync(path.join(lib, 'workflow-bundle-traced.js')))
      throw new Error('lib/ is not built: run `npm run build` (npm test does)');
    const built = (await import(path.join(lib, 'plugin.js'))) as typeof import('../src/plugin');
    expect(built.workflowSource(true)).toEqual({
      workflowBundle: { codePath: path.join(lib, 'workflow-bundle-traced.js') },
    });
    expect(built.workflowSource()).toEqual({ workflowBundle: { codePath: path.join(lib, 'workflow-bundle.js') } });
    const plugin = new built.TuneflowPlugin({ api: { apiKey: API_KEY }, tracing: tracing.options });
    const options = plugin.configureWorker({ taskQueue: 'q' });
    expect(options.workflowBundle).toEqual({ codePath: path.join(lib, 'workflow-bundle-traced.js') });
    // Its interceptors are in the bundle: none to add at start-up (the SDK would warn it ignores them).
    expect(options.interceptors?.workflowModules ?? []).toEqual([]);
    // The callback URLs' interceptor and OpenTelemetry's.
    expect(options.interceptors?.activity).toHaveLength(2);
    expect(options.sinks).toHaveProperty('exporter');
    await Worker.runReplayHistory(
      { plugins: [plugin] },
      readHistory('callbacks-happy-path.json'),
      'callbacks-happy-path',
    );
  });
});

describe("the worker's OTEL_* variables", () => {
  test("docs/tracing.md's table, which the README's configuration links to, holds every one the worker acts on", () => {
    const doc = fs.readFileSync(path.join(__dirname, '..', 'docs', 'tracing.md'), 'utf8');
    for (const variable of Object.keys(TRACING_ENVIRONMENT))
      expect(doc).toMatch(new RegExp(`\\| \`${variable}\` +\\|`));
  });

  test('an endpoint turns traces on; without one, or disabled, nothing is exported', () => {
    expect(loadTracingConfig({})).toBeUndefined();
    expect(loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: '' })).toBeUndefined();
    expect(loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://jaeger:4318' })).toEqual({
      url: 'http://jaeger:4318/v1/traces',
    });
    expect(loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://jaeger:4318/' })?.url).toBe(
      'http://jaeger:4318/v1/traces',
    );
    expect(
      loadTracingConfig({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://jaeger:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://collector.example.com/traces',
      }),
    ).toEqual({ url: 'https://collector.example.com/traces' });
    const on = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://jaeger:4318' };
    expect(loadTracingConfig({ ...on, OTEL_SDK_DISABLED: 'true' })).toBeUndefined();
    expect(loadTracingConfig({ ...on, OTEL_TRACES_EXPORTER: 'none' })).toBeUndefined();
    expect(
      loadTracingConfig({ ...on, OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' }),
    ).toEqual({ url: 'http://jaeger:4318/v1/traces' });
  });

  test.each([
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'jaeger:4318' }, 'OTEL_EXPORTER_OTLP_ENDPOINT'],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'ftp://x' }, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://j:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
      'OTEL_EXPORTER_OTLP_PROTOCOL',
    ],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://j:4318', OTEL_TRACES_EXPORTER: 'zipkin' }, 'OTEL_TRACES_EXPORTER'],
  ])('%j is refused, naming %s', (env, variable) => {
    expect(() => loadTracingConfig(env)).toThrow(ConfigError);
    expect(() => loadTracingConfig(env)).toThrow(new RegExp(`^${variable}: `));
  });
});
