/**
 * The progress stream (issue 47) on a real Temporal server (the CLI's dev server: the Java test server holds no
 * history long poll), with the mock service and real HTTP on loopback: viewers of a train-then-generate
 * job get its phases in order with their times, its images as they settle and its end; twenty viewers of one job cost
 * the Temporal calls of one (counted by a gRPC interceptor on the stream's own connection, not by the stream); a
 * viewer that reconnects with Last-Event-ID gets only what it had not, and a closed job's last event once, then 204;
 * the fetch shape streams the same events; tokens for another job, expired, forged, missing or of another tenant read
 * nothing, and no job of the stream's is watched for them.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { InterceptingCall, type Interceptor } from '@grpc/grpc-js';
import { Client, Connection, defaultGrpcRetryOptions, makeGrpcRetryInterceptor } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { NativeConnection, Worker, type WorkflowBundle } from '@temporalio/worker';
import { TuneflowClient } from '../../src/client';
import { startMockService, type MockService } from '../../src/mock-service';
import { TuneflowPlugin } from '../../src/plugin';
import { progressStream } from '../../src/progress/stream';
import { mintProgressToken } from '../../src/progress/tokens';
import type { ProgressView } from '../../src/progress/watch';
import { listen } from '../../src/listening';
import { watch, type Viewer } from '../progress/sse';
import { bundleWorkflows } from './bundle';
import { devServerTest, startDevServer } from './environment';

jest.setTimeout(120_000);

let env: TestWorkflowEnvironment | undefined;
let bundle: WorkflowBundle;
let connection: NativeConnection;
let mock: MockService;

beforeAll(async () => {
  env = await startDevServer();
  [bundle, connection, mock] = await Promise.all([
    bundleWorkflows(),
    NativeConnection.connect({ address: env.address }),
    startMockService({ trainingTime: '2s', inferenceTime: '1s' }),
  ]);
}, 240_000);

afterAll(async () => {
  await mock?.close();
  await connection?.close();
  await env?.teardown();
});

/** A worker of its own task queue while `body` runs, and a starter for it. */
async function withWorker<T>(body: (tuneflow: TuneflowClient) => Promise<T>): Promise<T> {
  const taskQueue = `progress-${randomUUID()}`;
  const worker = await Worker.create({
    connection,
    taskQueue,
    workflowBundle: bundle,
    plugins: [
      new TuneflowPlugin({
        api: { apiKey: 'progress-test-key-0123456789', baseUrl: mock.url },
        callbacks: false,
        nexus: false,
        serviceRate: false,
        startReport: false,
      }),
    ],
  });
  const client = new Client({ connection: env!.connection });
  return worker.runUntil(() => body(new TuneflowClient({ client, taskQueue })));
}
const SECRET = 'progress-stream-test-secret-0123';
const ORDER = ['creating-tune', 'training', 'creating-prompts', 'generating', 'completed'];
const input = {
  tune: { name: 'dog', branch: 'fast', image_urls: ['https://example.com/training/1.jpg'] },
  prompts: [
    { text: 'sks dog on a beach', num_images: 2 },
    { text: 'sks dog in the snow', num_images: 1 },
  ],
  options: {
    pollInterval: '1 second',
    maxPollInterval: '2 seconds',
    trainingTimeout: '1 minute',
    promptTimeout: '2 minutes',
  },
};

/** A stream on its own connection, whose every call to Temporal an interceptor counts, served on loopback. */
async function servedStream(options: { tenant?: string } = {}) {
  const calls: Record<string, number> = {};
  const counting: Interceptor = (call, next) =>
    new InterceptingCall(next(call), {
      start(metadata, listener, proceed) {
        const method = call.method_definition.path.split('/').pop()!;
        calls[method] = (calls[method] ?? 0) + 1;
        proceed(metadata, listener);
      },
    });
  const connection = await Connection.connect({
    address: env!.address,
    interceptors: [makeGrpcRetryInterceptor(defaultGrpcRetryOptions()), counting],
  });
  const client = new Client({ connection });
  const stream = progressStream({ client, secret: SECRET, linger: '1 second', ...options });
  const server: Server = createServer((req, res) => stream.node(req, res));
  await listen(server, 0, '127.0.0.1');
  const base = `http://127.0.0.1:${(server.address() as { port: number }).port}/progress`;
  return {
    stream,
    calls,
    url: (workflowId: string, ttl: number = 60_000) =>
      `${base}?token=${encodeURIComponent(mintProgressToken({ secret: SECRET, workflowId, ttl }))}`,
    base,
    async close() {
      stream.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await connection.close();
    },
  };
}

const viewOf = (viewer: Viewer, i = -1) => JSON.parse(viewer.events.at(i)!.data) as ProgressView;

/** The phases a view names are in the job's order, each with a time no earlier than the one before. */
function expectPhasesInOrder(view: ProgressView) {
  const names = view.phases.map((p) => p.phase);
  expect(names.length).toBeGreaterThanOrEqual(3);
  expect(names).toEqual([...names].sort((a, b) => ORDER.indexOf(a) - ORDER.indexOf(b)));
  const times = view.phases.map((p) => Date.parse(p.since));
  for (const [i, t] of times.entries()) {
    expect(Number.isFinite(t)).toBe(true);
    if (i > 0) expect(t).toBeGreaterThanOrEqual(times[i - 1]!);
  }
}

async function twoJobs(tuneflow: TuneflowClient) {
  const key = randomUUID().slice(0, 8);
  const one = await tuneflow.trainThenGenerate(`progress-one-${key}`, input as never);
  const two = await tuneflow.trainThenGenerate(`progress-two-${key}`, input as never);
  return { one, two };
}

devServerTest(
  'viewers get the phases in order with their times, the images as they settle and the end; 20 viewers of one job ' +
    'cost the Temporal calls of one',
  async () => {
    await withWorker(async (tuneflow) => {
      const alone = await servedStream();
      const crowd = await servedStream();
      try {
        const { one, two } = await twoJobs(tuneflow);
        const single = await watch(alone.url(one.workflowId));
        const many = await Promise.all(Array.from({ length: 20 }, () => watch(crowd.url(two.workflowId))));
        const [ended] = await Promise.all([single.ended, ...many.map((v) => v.ended)]);
        await Promise.all([one.result(), two.result()]);

        for (const viewer of [single, ...many]) {
          expect(viewer.status).toBe(200);
          const last = viewer.events.at(-1)!;
          expect(last.event).toBe('end');
          const view = viewOf(viewer);
          expect(view).toMatchObject({ status: 'completed', phase: 'completed' });
          expectPhasesInOrder(view);
          expect(view.images).toHaveLength(3);
          for (const image of view.images) {
            expect(image.src).toBe(image.url);
            expect(image.url.startsWith(mock.url)).toBe(true);
          }
          // Every event carries the whole state, in order of the history; none after the end.
          const ids = viewer.events.map((e) => Number(e.id));
          expect(ids).toEqual([...ids].sort((a, b) => a - b));
          expect(viewer.events.filter((e) => e.event === 'end')).toHaveLength(1);
        }
        // The images appear as prompts settle: some event before the end shows fewer than all, or a running phase.
        const running = ended!.filter((e) => e.event === 'progress').map((e) => JSON.parse(e.data) as ProgressView);
        expect(running.length).toBeGreaterThanOrEqual(2);
        expect(running.some((v) => v.status === 'running' && v.waitingFor)).toBe(true);
        expect(running.some((v) => v.images.length < 3)).toBe(true);

        // Twenty viewers, one long poll and one query per workflow task: the job's calls, not the viewers'.
        const a = alone.calls;
        const b = crowd.calls;
        expect(a.GetWorkflowExecutionHistory).toBeGreaterThan(0);
        expect(b.GetWorkflowExecutionHistory).toBeLessThanOrEqual(2 * a.GetWorkflowExecutionHistory! + 4);
        expect(b.QueryWorkflow).toBeLessThanOrEqual(2 * a.QueryWorkflow! + 4);
        expect(b.QueryWorkflow).toBeLessThan(20);
        // The stream's own count (what the benchmark reports) is the interceptor's (a result is read from the history).
        const own = crowd.stream.stats().temporalCalls;
        expect(own.history + own.result).toBe(b.GetWorkflowExecutionHistory);
        expect(own.query).toBe(b.QueryWorkflow);

        // Resumed: after its last event, 204 (an EventSource stops); from an earlier one, the end at once.
        const endId = single.events.at(-1)!.id!;
        const after = await watch(alone.url(one.workflowId), { lastEventId: endId });
        expect(after.status).toBe(204);
        const before = await watch(alone.url(one.workflowId), { lastEventId: '1' });
        const resumed = await before.ended;
        expect(resumed.map((e) => [e.event, e.id])).toEqual([['end', endId]]);

        // A viewer who comes back after the end, to a stream that no longer watches the job, gets every phase and
        // image in the end event: one query of the closed run (a worker replays it), beside the history and result.
        const later = await servedStream();
        try {
          const back = await watch(later.url(one.workflowId));
          await back.ended;
          expect(back.events.map((e) => e.event)).toEqual(['end']);
          const view = viewOf(back);
          expect(view).toMatchObject({ status: 'completed', phase: 'completed' });
          expectPhasesInOrder(view);
          // As the run itself recorded them (the live end's last phase is dated by the close event, a few ms on).
          expect(view.phases.slice(0, -1)).toEqual(viewOf(single).phases.slice(0, -1));
          expect(view.images).toHaveLength(3);
          expect(later.stream.stats().temporalCalls).toMatchObject({ query: 1, result: 1 });
        } finally {
          await later.close();
        }
        // One who had the end, back to a stream that must read the job anew: let go when the end is read, not held.
        const fresh = await servedStream();
        try {
          const had = await watch(fresh.url(one.workflowId), { lastEventId: endId });
          expect(await had.ended).toEqual([]);
          expect(fresh.stream.stats().viewers).toBe(0);
        } finally {
          await fresh.close();
        }

        // The fetch shape streams the same last event.
        const response = await alone.stream.fetch(new Request(alone.url(one.workflowId)));
        expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
        const text = await response.text();
        expect(text).toContain(`id: ${endId}\nevent: end\ndata: `);
        expect(JSON.parse(text.split('data: ')[1]!.split('\n')[0]!)).toMatchObject({ status: 'completed' });
      } finally {
        await alone.close();
        await crowd.close();
      }
    });
  },
);

devServerTest('a token for another job, expired, forged, missing or of another tenant reads nothing', async () => {
  await withWorker(async (tuneflow) => {
    const served = await servedStream();
    const shop = await servedStream({ tenant: 'shop' });
    try {
      const { one, two } = await twoJobs(tuneflow);
      const token = new URL(served.url(one.workflowId)).searchParams.get('token')!;
      const [version, , expires, mac] = token.split('.');
      const otherJob = [version, Buffer.from(two.workflowId).toString('base64url'), expires, mac].join('.');
      const stranger = mintProgressToken({ secret: 'not-the-stream-secret-123', workflowId: one.workflowId });
      const expired = mintProgressToken({
        secret: SECRET,
        workflowId: one.workflowId,
        ttl: 60_000,
        now: Date.now() - 120_000,
      });
      const tokenUrl = (t: string) => `${served.base}?token=${encodeURIComponent(t)}`;
      const refused = await Promise.all([
        watch(tokenUrl(otherJob)),
        watch(tokenUrl(stranger)),
        watch(tokenUrl(expired)),
        watch(served.base),
        watch(shop.url(one.workflowId)),
        watch(served.url('no-such-job')),
        watch(served.url('tuneflow:claim:one')),
      ]);
      expect(refused.map((v) => [v.status, v.body?.trim()])).toEqual([
        [401, 'the token was not minted with this stream'],
        [401, 'the token was not minted with this stream'],
        [401, 'the token has expired: ask the app for a new one'],
        [401, 'a token is required (?token=, a Bearer header or the tuneflow_progress cookie)'],
        [403, "the token names another tenant's job"],
        [404, 'no such job'],
        [403, 'the token names no tuneflow job'],
      ]);
      for (const v of refused) expect(v.events).toEqual([]);
      // Nothing was watched for them but the job that does not exist, and that only until it was found missing.
      expect(served.stream.stats()).toMatchObject({ viewers: 0, jobs: 0, refused: 6 });
      expect(shop.stream.stats()).toMatchObject({ jobs: 0, refused: 1 });
      expect(shop.calls.GetWorkflowExecutionHistory ?? 0).toBe(0);
      // The right token, as a cookie or a Bearer header, reads the job.
      const cookie = await watch(served.base, { headers: { cookie: `a=b; tuneflow_progress=${token}` } });
      const bearer = await watch(served.base, { headers: { authorization: `Bearer ${token}` } });
      expect([cookie.status, bearer.status]).toEqual([200, 200]);
      await Promise.all([cookie.ended, bearer.ended, one.result(), two.result()]);
      expect(viewOf(cookie)).toMatchObject({ workflowId: one.workflowId, status: 'completed' });
      const post = await fetch(served.url(one.workflowId), { method: 'POST' });
      expect(post.status).toBe(405);
    } finally {
      await served.close();
      await shop.close();
    }
  });
});
