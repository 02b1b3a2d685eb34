/**
 * The callback URL proven at start, as a worker says it: the plugin's start report (`callbackProbe`) for each outcome
 * (arrived at the worker's own receiver, a redirect, an auth wall's 401, a closed port, plain http to a public host),
 * and `tuneflow worker`'s start line for a redirect. The worker starts whatever the probe found; the signed URL is in
 * no line.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LogMetadata } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker, type WorkflowBundle } from '@temporalio/worker';
import { startMockService, type MockService } from '../../src/mock-service';
import { TuneflowPlugin } from '../../src/plugin';
import { freePort } from '../../src/temporal-server/dev-server';
import { bundleWorkflows } from './bundle';
import { devServerTest, startDevServer } from './environment';
import { startWorkerProcess } from './worker-process';
import { recordingLogger } from '../recording-logger';

// Generous: five workers start one after another, each on a loaded machine; nothing here is timed.
jest.setTimeout(300_000);

const SECRET = 'callback-probe-test-secret-0123';
const API_KEY = 'callback-probe-test-key-0123456789';

let env: TestWorkflowEnvironment | undefined;
let bundle: WorkflowBundle;
let mock: MockService;
/** A server on loopback answering 302 to a login page, and one answering 401. */
let redirecting: Server;
let walled: Server;

const urlOf = (server: Server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
async function serving(status: number, headers: Record<string, string>): Promise<Server> {
  const server = createServer((req, res) => {
    req.resume();
    res.writeHead(status, headers);
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

beforeAll(async () => {
  // The server alone first: its start has a limit of its own, which bundling beside it can pass on a loaded machine.
  env = await startDevServer();
  [bundle, mock, redirecting, walled] = await Promise.all([
    bundleWorkflows(),
    startMockService({ port: 0 }),
    serving(302, { location: 'https://login.example.com/sso?next=%2Fcallbacks%2Fprobe' }),
    serving(401, { 'www-authenticate': 'Basic realm="hooks"' }),
  ]);
}, 120_000);

afterAll(async () => {
  await Promise.all([redirecting, walled].map((s) => s && new Promise((resolve) => s.close(resolve))));
  await mock?.close();
  await env?.teardown();
});

/** Resolves once the worker logged its start line: after the probe answered, the worker running meanwhile. */
async function saidStart(logger: ReturnType<typeof recordingLogger>): Promise<void> {
  while (!logger.lines.some((l) => l.message === 'tuneflow worker started'))
    await new Promise((resolve) => setTimeout(resolve, 50));
}

/** The start report of a worker with the plugin whose callbacks' public base URL is `baseUrl`, its receiver on a port of its own. */
async function startReport(baseUrl: (receiverPort: number) => string): Promise<LogMetadata> {
  const logger = recordingLogger();
  const port = await freePort();
  const worker = await Worker.create({
    connection: env!.nativeConnection,
    taskQueue: `callback-probe-${port}`,
    workflowBundle: bundle,
    plugins: [
      new TuneflowPlugin({
        api: { apiKey: API_KEY, baseUrl: mock.url },
        callbacks: { baseUrl: baseUrl(port), secret: SECRET, port, host: '127.0.0.1' },
        nexus: false,
        serviceRate: false,
        logger,
      }),
    ],
  });
  await worker.runUntil(() => saidStart(logger));
  const line = logger.lines.find((l) => l.message === 'tuneflow worker started');
  expect(JSON.stringify(logger.lines)).not.toMatch(/sig=/);
  return line!.meta!;
}

devServerTest(
  "the plugin's start report says what the probe found, and the worker runs whatever it found",
  async () => {
    const closed = await freePort();
    const cases: Array<[string, (port: number) => string, string]> = [
      ["the worker's own receiver", (port) => `http://127.0.0.1:${port}`, 'arrived'],
      ['a redirect', () => urlOf(redirecting), 'redirected (302 to login.example.com)'],
      ['an auth wall', () => `${urlOf(walled)}/hooks`, 'refused (401)'],
      ['a closed port', () => `http://127.0.0.1:${closed}`, 'unreachable (ECONNREFUSED)'],
      ['plain http to a public host', () => 'http://hooks.example.com', 'not https (nothing sent)'],
    ];
    const found: Record<string, unknown> = {};
    for (const [what, baseUrl] of cases) {
      const report = await startReport(baseUrl);
      found[what] = report.callbackProbe;
      // The base URL is said as it is: it carries no signature.
      expect(report.callbacks).toBe(baseUrl(Number(String(report.receiver).split(':')[1])));
    }
    expect(found).toEqual(Object.fromEntries(cases.map(([what, , said]) => [what, said])));
    // A worker without callbacks sends no probe and says none.
    const logger = recordingLogger();
    const worker = await Worker.create({
      connection: env!.nativeConnection,
      taskQueue: 'callback-probe-off',
      workflowBundle: bundle,
      plugins: [
        new TuneflowPlugin({ api: { apiKey: API_KEY, baseUrl: mock.url }, callbacks: false, nexus: false, logger }),
      ],
    });
    await worker.runUntil(() => saidStart(logger));
    expect(logger.lines.find((l) => l.message === 'tuneflow worker started')!.meta).not.toHaveProperty('callbackProbe');
  },
);

devServerTest("tuneflow worker's start line says a redirected callback URL, and the worker runs", async () => {
  const callbackPort = await freePort();
  const worker = await startWorkerProcess({
    temporalAddress: env!.address,
    apiKey: API_KEY,
    apiUrl: mock.url,
    taskQueue: `callback-probe-process-${process.pid}`,
    env: {
      TUNEFLOW_CALLBACK_BASE_URL: urlOf(redirecting),
      TUNEFLOW_CALLBACK_SECRET: SECRET,
      TUNEFLOW_CALLBACK_PORT: String(callbackPort),
      TUNEFLOW_CALLBACK_HOST: '127.0.0.1',
    },
  });
  try {
    const started = worker
      .log()
      .split('\n')
      .find((line) => line.includes('"tuneflow worker started"'));
    expect(JSON.parse(started!).meta).toMatchObject({
      callbacks: urlOf(redirecting),
      callbackProbe: 'redirected (302 to login.example.com)',
    });
    expect(worker.log()).not.toMatch(/sig=/);
  } finally {
    worker.child.kill('SIGTERM');
  }
  expect(await worker.exited).toBe(0);
});
