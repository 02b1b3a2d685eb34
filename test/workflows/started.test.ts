/**
 * `started` tells the truth (issue 8), on a real dev server: a first start is a start, a second start of the running
 * job attaches to the same run, and a closed job stays closed. No worker: the runs only need to exist.
 */
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { TuneflowClient } from '../../src/client';
import { startDevServerProcess, type DevServerProcess } from '../../src/temporal-server/dev-server';
import { currentVerdict, devServerExecutable, devServerTest } from './environment';

let server: DevServerProcess | undefined;
let connection: Connection | undefined;
let tuneflow: TuneflowClient;
const input = {
  tune: { name: 'woman', image_urls: ['https://example.com/1.jpg'] },
  prompts: [{ text: 'ohwx woman on a beach' }],
};

beforeAll(async () => {
  if (currentVerdict().devServer.kind === 'unavailable') return;
  server = await startDevServerProcess({ executable: devServerExecutable() });
  connection = await Connection.connect({ address: server.address });
  tuneflow = new TuneflowClient({ client: new Client({ connection }), taskQueue: `started-${randomUUID()}` });
}, 60_000);
afterAll(async () => {
  await connection?.close();
  await server?.stop();
});

devServerTest('first start: started; second start of the running job: the same run, not started', async () => {
  const key = `order-${randomUUID()}`;
  const first = await tuneflow.trainThenGenerate(key, input);
  const second = await tuneflow.trainThenGenerate(key, input);
  expect(first.started).toBe(true);
  expect(second.started).toBe(false);
  const [a, b] = await Promise.all([first.handle.describe(), second.handle.describe()]);
  expect(b.runId).toBe(a.runId);
  expect(b.status.name).toBe('RUNNING');
  // One start in the history, and no work: the second start added nothing.
  const events = (await first.handle.fetchHistory()).events ?? [];
  expect(events.filter((e) => e.workflowExecutionStartedEventAttributes)).toHaveLength(1);
  expect(events.filter((e) => e.activityTaskScheduledEventAttributes)).toEqual([]);
  await first.handle.terminate('test done');
});

devServerTest('a closed job stays closed: a start after it ended is refused, no new run', async () => {
  const key = `order-${randomUUID()}`;
  const first = await tuneflow.trainThenGenerate(key, input);
  await first.handle.terminate('closed by the test');
  const again = await tuneflow.trainThenGenerate(key, input);
  expect(again.started).toBe(false);
  const described = await again.handle.describe();
  expect(described.runId).toBe((await first.handle.describe()).runId);
  expect(described.status.name).toBe('TERMINATED');
  // The run's history ends with the termination: the refused start left no trace in it.
  const events = (await again.handle.fetchHistory()).events ?? [];
  expect(events.filter((e) => e.workflowExecutionStartedEventAttributes)).toHaveLength(1);
  expect(events.at(-1)?.workflowExecutionTerminatedEventAttributes?.reason).toBe('closed by the test');
});
