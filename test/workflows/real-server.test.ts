/**
 * What only a real Temporal server can show (DESIGN.md tier 5), on the Temporal CLI's dev server run as a process of
 * its own, with `tuneflow worker` processes and the mock service:
 *
 * - a worker SIGKILLed while its run waits for training: the run's sticky workflow task goes back to the normal task
 *   queue after the sticky schedule-to-start timeout, a new worker finishes the run, and exactly one tune is made
 *   (the Java test server never hands the task back);
 * - the server itself stopped and started again on its SQLite file, left down until the tunes' callbacks were lost
 *   (the service got no answer, the receiver answered 503): the waiting runs finish on a poll after the restart,
 *   as their histories show, nothing lost, no duplicate create;
 * - a bind refused on a port chosen free is another port, unless the caller gave the port.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { TuneflowClient, type TuneflowHandle } from '../../src/client';
import { startMockService, type MockService } from '../../src/mock-service';
import { freePort, startDevServerProcess, type DevServerProcess } from '../../src/temporal-server/dev-server';
import type { TrainThenGenerateInput, TrainThenGenerateResult } from '../../src/contract/inputs';
import { devServerExecutable, devServerTest } from './environment';
import { waitFor } from './harness';
import { summarize } from './history-summary';
import { startWorkerProcess, type WorkerProcess } from './worker-process';

jest.setTimeout(240_000);

const API_KEY = 'real-server-test-key-0123456789';

/** Polls every 2 s: a callback the dead worker's receiver could not take is made up for quickly. */
const job = (mock: MockService): TrainThenGenerateInput => ({
  tune: { name: 'dog', branch: 'fast', image_urls: [`${mock.url}/images/training-1.png`] },
  prompts: [{ text: 'sks dog on a beach' }, { text: 'sks dog in the snow', num_images: 2 }],
  options: {
    pollInterval: '2 seconds',
    maxPollInterval: '2 seconds',
    trainingTimeout: '3 minutes',
    promptTimeout: '3 minutes',
  },
});

let dir: string;
let mock: MockService;
let server: DevServerProcess | undefined;
const workers: WorkerProcess[] = [];
const connections: Connection[] = [];

beforeEach(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-real-server-'));
  mock = await startMockService({ port: 0, trainingTime: '8s', inferenceTime: '1s' });
});

afterEach(async () => {
  for (const worker of workers.splice(0)) {
    worker.child.kill('SIGKILL');
    await worker.exited;
  }
  for (const connection of connections.splice(0)) await connection.close();
  await server?.stop('SIGKILL');
  await mock.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

async function tuneflowOn(address: string, taskQueue: string): Promise<TuneflowClient> {
  const connection = await Connection.connect({ address });
  connections.push(connection);
  return new TuneflowClient({ client: new Client({ connection }), taskQueue });
}

async function worker(taskQueue: string, callbackPort: number): Promise<WorkerProcess> {
  const started = await startWorkerProcess({
    temporalAddress: server!.address,
    apiKey: API_KEY,
    apiUrl: mock.url,
    taskQueue,
    callbackPort,
  });
  workers.push(started);
  return started;
}

function untilTraining(run: TuneflowHandle<TrainThenGenerateResult>): Promise<void> {
  return waitFor(
    async () => (await run.progress()).phase === 'training',
    () => `${run.workflowId} to wait for training`,
  );
}

devServerTest('a worker SIGKILLed while its run waits for training: a new worker finishes it, one tune', async () => {
  server = await startDevServerProcess({ executable: devServerExecutable() });
  const taskQueue = 'tuneflow-sigkill';
  const callbackPort = await freePort();
  const first = await worker(taskQueue, callbackPort);
  const tuneflow = await tuneflowOn(server.address, taskQueue);
  const run = await tuneflow.trainThenGenerate(`sigkill-${Date.now()}`, job(mock));
  await untilTraining(run);

  first.child.kill('SIGKILL');
  expect(await first.exited).toBeNull(); // killed, not drained
  await worker(taskQueue, callbackPort);

  const result = await run.result();
  expect(result.prompts.map((p) => p.images?.length)).toEqual([1, 2]);
  expect(mock.stats().routes['POST /tunes']).toBe(1);
  expect(mock.stats().routes['POST /tunes/:id/prompts']).toBe(2);
  const history = await run.handle.fetchHistory();
  const identities = new Set(
    history.events?.flatMap((e) => e.workflowTaskCompletedEventAttributes?.identity ?? []).filter(Boolean),
  );
  expect(identities.size).toBe(2); // the killed worker's tasks, then the new one's
  expect(summarize(history).activities.filter((a) => a === 'createTune')).toEqual(['createTune']);
});

devServerTest(
  'the dev server stopped and started again on its state file: polls make up for the lost callbacks',
  async () => {
    const dbFilename = path.join(dir, 'temporal.db');
    const port = await freePort();
    server = await startDevServerProcess({ executable: devServerExecutable(), port, dbFilename });
    const taskQueue = 'tuneflow-server-restart';
    const receiving = await worker(taskQueue, await freePort());
    const tuneflow = await tuneflowOn(server.address, taskQueue);
    const runs = await Promise.all(
      [1, 2, 3].map((i) => tuneflow.trainThenGenerate(`server-restart-${i}-${Date.now()}`, job(mock))),
    );
    for (const run of runs) await untilTraining(run);
    const tuneIds = await Promise.all(runs.map(async (run) => (await run.progress()).tuneId as number));

    await server.stop('SIGTERM');
    const downAt = Date.now();
    // Down until every tune's callback was lost: the service got no answer (it never retries) and the receiver gave up
    // signalling (503). Waited for as events, not for a time.
    const failedDuringOutage = (tuneId: number) =>
      mock
        .journal()
        .callbacks.some(
          (c) => c.ids.includes(tuneId) && c.sentAt >= downAt && (c.failure !== null || (c.status ?? 0) >= 400),
        );
    await waitFor(
      async () => tuneIds.every(failedDuringOutage),
      () => `the tunes' callbacks to fail while the server is down: ${JSON.stringify(mock.journal().callbacks)}`,
      60_000,
    );
    const refusedBy = (workflowId: string) =>
      receiving
        .log()
        .split('\n')
        .some((line) => line.includes(workflowId) && line.includes('"status":503'));
    await waitFor(
      async () => runs.every((run) => refusedBy(run.workflowId)),
      () => `the receiver to answer 503 for every run:\n${receiving.log().slice(-3000)}`,
      60_000,
    );
    // Nothing can be scheduled before the new process exists.
    const restartedAt = Date.now();
    server = await startDevServerProcess({ executable: devServerExecutable(), port, dbFilename });

    const results = await Promise.all(runs.map((run) => run.result()));
    for (const result of results) expect(result.prompts.map((p) => p.images?.length)).toEqual([1, 2]);
    expect(results.map((r) => r.tune.id)).toEqual(tuneIds);
    expect(mock.stats().routes['POST /tunes']).toBe(3);
    expect(mock.stats().routes['POST /tunes/:id/prompts']).toBe(6);

    // Each history: the tune's callback never reached the run; a poll after the restart found the tune trained and the
    // prompts were created after it.
    for (const [i, run] of runs.entries()) {
      const events = (await run.handle.fetchHistory()).events ?? [];
      const signalled = events.flatMap((e) => {
        const data = e.workflowExecutionSignaledEventAttributes?.input?.payloads?.[0]?.data;
        return data ? [JSON.parse(Buffer.from(data).toString('utf8')) as unknown] : [];
      });
      const namesTune = (payload: unknown) => {
        const p = payload as { id?: unknown; ids?: unknown[] } | null;
        return p?.id === tuneIds[i] || (Array.isArray(p?.ids) && p.ids.includes(tuneIds[i]));
      };
      expect(signalled.filter(namesTune)).toEqual([]);
      const scheduled = events.flatMap((e) => {
        const name = e.activityTaskScheduledEventAttributes?.activityType?.name;
        return name ? [{ name, at: eventMs(e.eventTime) }] : [];
      });
      const firstPrompt = scheduled.findIndex((a) => a.name === 'createPrompt');
      expect(scheduled[0].name).toBe('createTune');
      const recovering = scheduled[firstPrompt - 1];
      expect(recovering.name).toBe('retrieveTune');
      expect(recovering.at).toBeGreaterThanOrEqual(restartedAt);
      // Then its two prompts (and, where a prompt's callback came after the next poll was due, that poll).
      const after = scheduled.slice(firstPrompt).map((a) => a.name);
      expect(after.filter((name) => name !== 'listPrompts')).toEqual(['createPrompt', 'createPrompt']);
    }
  },
);

/** Milliseconds of a history event's time. */
function eventMs(time: { seconds?: unknown; nanos?: number | null } | null | undefined): number {
  const seconds = time?.seconds as number | { toNumber(): number } | null | undefined;
  return (
    (typeof seconds === 'number' ? seconds : (seconds?.toNumber() ?? 0)) * 1000 + Math.floor((time?.nanos ?? 0) / 1e6)
  );
}

devServerTest('a port taken before the dev server binds it is another port, when the port was left to it', async () => {
  // A server that refuses its first start as a bind conflict does, then runs the real one.
  const starts = path.join(dir, 'starts');
  const executable = path.join(dir, 'temporal');
  fs.writeFileSync(
    executable,
    `#!/bin/sh\necho "$@" >> '${starts}'\n` +
      `if [ "$(wc -l < '${starts}')" -eq 1 ]; then echo "listen tcp: bind: address already in use" >&2; exit 1; fi\n` +
      `exec '${devServerExecutable()}' "$@"\n`,
    { mode: 0o755 },
  );
  server = await startDevServerProcess({ executable });
  const ports = fs
    .readFileSync(starts, 'utf8')
    .trim()
    .split('\n')
    .map((line) => /--port (\d+)/.exec(line)?.[1]);
  expect(ports).toHaveLength(2);
  expect(ports[1]).not.toBe(ports[0]);
  expect(server.address).toBe(`127.0.0.1:${ports[1]}`);
  const connection = await Connection.connect({ address: server.address });
  connections.push(connection);
  await connection.workflowService.getSystemInfo({});
  // A port the caller gave is the caller's: the same refusal is its error, not another port.
  fs.writeFileSync(starts, '');
  const given = await freePort();
  await expect(startDevServerProcess({ executable, port: given })).rejects.toThrow(/address already in use/);
  expect(fs.readFileSync(starts, 'utf8').trim().split('\n')).toHaveLength(1);
});
