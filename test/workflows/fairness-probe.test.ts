/**
 * Where the server lacks fairness the worker says so at start (issue 43 item 2): a probe of the server's dispatch
 * order (five workflow tasks of tenant a, then five of b, on a queue of the probe's own) on a dev server with fairness and on
 * one without, and what a worker with a service rate logs on each. The probe leaves no run open.
 */
import { Client, Connection } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker, type WorkflowBundle } from '@temporalio/worker';
import { startMockService, type MockService } from '../../src/mock-service';
import { TuneflowPlugin } from '../../src/plugin';
import { startDevServerProcess, type DevServerChild } from '../../src/temporal-server/dev-server';
import { FAIRNESS_PROBE_WORKFLOW, probeFairness } from '../../src/task-queue-limits';
import { bundleWorkflows } from './bundle';
import { devServerExecutable, devServerTest, startDevServer, whileRunning } from './environment';
import { waitFor } from './harness';
import { recordingLogger } from '../recording-logger';

jest.setTimeout(300_000);

let fair: TestWorkflowEnvironment | undefined;
let line: DevServerChild | undefined;
let lineConnection: Connection;
let bundle: WorkflowBundle;
let mock: MockService;

beforeAll(async () => {
  // The servers alone first: each start has a limit of its own, which bundling beside it can pass on a loaded machine.
  fair = await startDevServer();
  line = await startDevServerProcess({ executable: devServerExecutable(), fairness: false });
  lineConnection = await Connection.connect({ address: line.address });
  [bundle, mock] = await Promise.all([bundleWorkflows(), startMockService({ port: 0 })]);
}, 180_000);

afterAll(async () => {
  await mock?.close();
  await lineConnection?.close();
  await line?.stop();
  await fair?.teardown();
});

/** The probe's runs on a server, by status: none is left running. */
async function probeRuns(connection: Connection): Promise<string[]> {
  const client = new Client({ connection });
  const statuses: string[] = [];
  for await (const run of client.workflow.list({ query: `WorkflowType = '${FAIRNESS_PROBE_WORKFLOW}'` }))
    statuses.push(run.status.name);
  return statuses;
}

devServerTest(
  'the probe finds fairness on a server with it, and none on a server without, leaving no run open',
  async () => {
    const onFair = await probeFairness(fair!.connection, 'default', 'probe-fair');
    const onLine = await probeFairness(lineConnection, 'default', 'probe-line');
    expect(onFair).toEqual({ fairness: 'on' });
    expect(onLine).toEqual({ fairness: 'off' });
    for (const connection of [fair!.connection, lineConnection])
      await waitFor(
        async () => (await probeRuns(connection)).join() === Array(10).fill('COMPLETED').join(),
        () => 'the probe runs, each completed',
      );
  },
);

devServerTest(
  'a worker with a service rate says at start how the server shares its queue: by tenant, or first come first ' +
    'served naming matching.enableFairness',
  async () => {
    const said: Record<string, ReturnType<typeof recordingLogger>> = {};
    for (const [name, address] of [
      ['fair', fair!.address],
      ['line', line!.address],
    ] as const) {
      const logger = recordingLogger();
      said[name] = logger;
      const { NativeConnection } = await import('@temporalio/worker');
      const connection = await NativeConnection.connect({ address });
      try {
        const worker = await Worker.create({
          connection,
          taskQueue: `fairness-word-${name}`,
          workflowBundle: bundle,
          plugins: [
            new TuneflowPlugin({
              api: { apiKey: 'fairness-probe-key', baseUrl: mock.url },
              callbacks: false,
              nexus: false,
              serviceRate: 10,
              logger,
            }),
          ],
        });
        await whileRunning([worker], () =>
          waitFor(
            async () => logger.lines.some((l) => l.meta?.fairness !== undefined),
            () => `${name}: the word on fairness`,
          ),
        );
      } finally {
        await connection.close();
      }
    }
    const word = (name: string) => said[name].lines.find((l) => l.meta?.fairness !== undefined);
    expect(word('fair')).toMatchObject({ level: 'INFO', meta: { fairness: 'on', taskQueue: 'fairness-word-fair' } });
    expect(word('fair')?.message).toContain('shares it by tenant');
    expect(word('line')).toMatchObject({ level: 'WARN', meta: { fairness: 'off', taskQueue: 'fairness-word-line' } });
    expect(word('line')?.message).toContain('matching.enableFairness');
  },
);
