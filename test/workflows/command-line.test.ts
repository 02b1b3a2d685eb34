/**
 * `start`, `status` and `cancel` as a user runs them, real child processes of the built command against a real dev
 * server: a run nobody serves is reported as such within seconds (by `start`, `start --wait` and `status`, which never
 * waits on a query), Ctrl-C under `--wait` stops following and leaves the run going (exit 130), `cancel` says when a
 * run had already ended, and a run cancelled under `--wait` is reported as cancelled (exit 5). With a worker
 * (`tuneflow worker`, polling only, on the mock service), `start --wait` says what the run waits for and when the
 * next poll comes.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { Client, Connection, WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { TuneflowClient } from '../../src/client';
import { startMockService, type MockService } from '../../src/mock-service';
import { startDevServerProcess, type DevServerChild } from '../../src/temporal-server/dev-server';
import { devServerExecutable, devServerTest, currentVerdict } from './environment';
import { BLURRY_URL, INSPECTED_URLS } from './scenarios';
import { startWorkerProcess, type WorkerProcess } from './worker-process';

jest.setTimeout(120_000);

const BIN = path.resolve(__dirname, '../../bin/tuneflow.js');

let server: DevServerChild | undefined;
let mock: MockService | undefined;

beforeAll(async () => {
  if (currentVerdict().devServer.kind === 'unavailable') return;
  server = await startDevServerProcess({ executable: devServerExecutable() });
  // Slow enough to cancel a run while it trains.
  mock = await startMockService({ port: 0, trainingTime: '20s', inferenceTime: '1s' });
}, 120_000);

afterAll(async () => {
  await mock?.close();
  await server?.stop();
});

interface Command {
  child: ChildProcessWithoutNullStreams;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
  /** Resolves with the first line (stdout or stderr) matching `pattern`, and when it came. */
  line(pattern: RegExp): Promise<{ match: RegExpExecArray; at: number }>;
}

function tuneflow(...args: string[]): Command {
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, TEMPORAL_ADDRESS: server!.address };
  const child = spawn(process.execPath, [BIN, ...args], { env });
  let stdout = '';
  let stderr = '';
  const seen: string[] = [];
  const waiting: Array<{ pattern: RegExp; resolve: (found: { match: RegExpExecArray; at: number }) => void }> = [];
  const take = (line: string) => {
    seen.push(line);
    for (const w of [...waiting]) {
      const match = w.pattern.exec(line);
      if (match) {
        waiting.splice(waiting.indexOf(w), 1);
        w.resolve({ match, at: Date.now() });
      }
    }
  };
  child.stdout.on('data', (c: Buffer) => (stdout += c));
  child.stderr.on('data', (c: Buffer) => (stderr += c));
  createInterface({ input: child.stdout }).on('line', take);
  createInterface({ input: child.stderr }).on('line', take);
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    line: (pattern) =>
      Promise.race([
        new Promise<{ match: RegExpExecArray; at: number }>((resolve) => {
          const match = seen.map((l) => pattern.exec(l)).find(Boolean);
          if (match) resolve({ match, at: Date.now() });
          else waiting.push({ pattern, resolve });
        }),
        exited.then((code): never => {
          throw new Error(
            `tuneflow ${args.join(' ')} exited ${code} before printing ${pattern}:\n${stdout}\n${stderr}`,
          );
        }),
      ]),
  };
}

/** A job's start; its training image is served by `service` (the shared mock unless a test runs its own). */
const job = (id: string, queue: string, service = mock!.url) => [
  'start',
  '--id',
  id,
  '--task-queue',
  queue,
  '--name',
  'woman',
  '--branch',
  'fast',
  '--images',
  `${service}/images/training-1.png`,
  '--prompt',
  'ohwx woman, watercolor painting',
];

/**
 * A `tuneflow worker` on `queue` against the shared mock (or `apiUrl`), stopped after `body` whatever it did; then
 * `closing` (a mock of the test's own, a connection) closed in order.
 */
async function withWorker<T>(
  queue: string,
  settings: { apiUrl?: string; apiKey?: string },
  body: (worker: WorkerProcess) => Promise<T>,
  ...closing: Array<{ close(): Promise<unknown> }>
): Promise<T> {
  let worker: WorkerProcess | undefined;
  try {
    worker = await startWorkerProcess({
      temporalAddress: server!.address,
      apiKey: settings.apiKey ?? 'command-line-test-key',
      apiUrl: settings.apiUrl ?? mock!.url,
      taskQueue: queue,
    });
    return await body(worker);
  } finally {
    worker?.child.kill('SIGTERM');
    await worker?.exited;
    for (const part of closing) await part.close();
  }
}

devServerTest(
  'a run no worker serves: start, start --wait and status say so within seconds; Ctrl-C; cancel',
  async () => {
    const queue = `nobody-${Date.now()}`;
    const started = Date.now();
    const plain = tuneflow(...job(`${queue}-a`, queue));
    expect(await plain.exited).toBe(0);
    expect(plain.stdout()).toBe(`started ${queue}-a\n`);
    expect(plain.stderr()).toBe(`tuneflow start: no worker polls task queue ${queue}: the run waits until one does\n`);

    const spawned = Date.now();
    const waiting = tuneflow(...job(`${queue}-b`, queue), '--wait');
    const { at } = await waiting.line(new RegExp(`^no worker polls task queue ${queue}: the run waits until one does`));
    const noticed = at - spawned;
    expect(noticed).toBeLessThan(5_000);
    await waiting.line(/^started {2}elapsed \d+s {2}no worker polls task queue /);
    // Ctrl-C: stops following, says how to go on, exit 130; the run goes on.
    waiting.child.kill('SIGINT');
    expect(await waiting.exited).toBe(130);
    expect(waiting.stderr()).toBe(
      `tuneflow start: stopped following ${queue}-b; the run goes on (tuneflow status ${queue}-b, tuneflow cancel ${queue}-b)\n`,
    );
    expect(waiting.stderr() + waiting.stdout()).not.toMatch(/Error|^\s+at /m);

    const asked = Date.now();
    const status = tuneflow('status', `${queue}-b`);
    expect(await status.exited).toBe(0);
    const statusTook = Date.now() - asked;
    expect(statusTook).toBeLessThan(5_000);
    expect(status.stdout()).toMatch(new RegExp(`^run: +${queue}-b: RUNNING for \\d+s$`, 'm'));
    expect(status.stdout()).toMatch(
      new RegExp(`^now: +no worker polls task queue ${queue}: the run waits until one does`, 'm'),
    );

    const cancel = tuneflow('cancel', `${queue}-b`);
    expect(await cancel.exited).toBe(0);
    expect(cancel.stdout()).toBe(`cancellation requested for ${queue}-b\n`);
    // status says the run was asked to cancel, and that no worker has taken the request.
    const cancelling = tuneflow('status', `${queue}-b`);
    expect(await cancelling.exited).toBe(0);
    expect(cancelling.stdout()).toMatch(
      new RegExp(`^run: +${queue}-b: RUNNING for \\d+s \\(cancellation requested\\)$`, 'm'),
    );
    expect(cancelling.stdout()).toMatch(/^cancel: +requested \d+s ago: no worker has taken it yet$/m);
    const cancellingJson = tuneflow('status', `${queue}-b`, '--json');
    expect(await cancellingJson.exited).toBe(0);
    expect(JSON.parse(cancellingJson.stdout())).toMatchObject({
      status: 'RUNNING',
      cancelRequestedAt: expect.any(String),
    });
    // With no worker the cancellation waits for one, and the run stays open: asking again is still a request.
    const again = tuneflow('cancel', `${queue}-b`);
    expect(await again.exited).toBe(0);
    expect(again.stdout()).toBe(`cancellation requested for ${queue}-b\n`);
    console.info(
      `no worker noticed by start --wait in ${noticed} ms; status answered in ${statusTook} ms; ` +
        `plain start in ${spawned - started} ms`,
    );
  },
);

devServerTest(
  'with a worker polling only: what the run waits for and the next poll; cancelled under --wait: exit 5, then cancel says it ended',
  async () => {
    const queue = `polling-${Date.now()}`;
    await withWorker(queue, {}, async () => {
      const id = `${queue}-run`;
      const waiting = tuneflow(...job(id, queue), '--wait');
      // Training takes 20 s on this mock and the worker polls only: the line names the wait and the next poll.
      const { match } = await waiting.line(
        /^training {2}elapsed \d+s {2}waiting for training \(polling only\), next poll in (\d+m\d\ds|\d+s) {2}0\/1 prompts {2}tune \d+ /,
      );
      // Polling only: the first poll 1 s after the eta (20 s), not the callback schedule's 2 minutes after it.
      expect(match[1]).toMatch(/^(1\d|2[01])s$/);
      const status = tuneflow('status', id);
      expect(await status.exited).toBe(0);
      expect(status.stdout()).toMatch(/^now: +training: waiting for training \(polling only\), next poll in \S+$/m);
      expect(status.stdout()).toMatch(/^counts: +callbacks 0, polls 0, api calls 1$/m);

      const cancel = tuneflow('cancel', id);
      expect(await cancel.exited).toBe(0);
      expect(await waiting.exited).toBe(5);
      expect(waiting.stderr()).toBe('tuneflow start: the run was cancelled\n');
      expect(waiting.stdout()).toMatch(/^cancelled {2}elapsed \d+s /m);

      const again = tuneflow('cancel', id);
      expect(await again.exited).toBe(0);
      expect(again.stdout()).toMatch(new RegExp(`^${id} already ended: CANCELLED at \\S+; nothing to cancel\\n$`));
      const after = tuneflow('status', id);
      expect(await after.exited).toBe(5);
      expect(after.stdout()).toMatch(new RegExp(`^run: +${id}: CANCELLED after \\d+s `, 'm'));
      const json = tuneflow('status', id, '--json');
      expect(await json.exited).toBe(5);
      expect(JSON.parse(json.stdout())).toMatchObject({ workflowId: id, status: 'CANCELLED', taskQueue: queue });
    });
  },
);

devServerTest(
  'a service the worker cannot reach: start --wait says what is retrying, why (the URL) and when within 5 s; status and status --json too',
  async () => {
    const queue = `unreachable-${Date.now()}`;
    // Nothing listens on port 1: every create fails to connect, and Temporal retries it.
    await withWorker(queue, { apiUrl: 'http://127.0.0.1:1' }, async () => {
      const id = `${queue}-run`;
      const started = Date.now();
      const waiting = tuneflow(...job(id, queue), '--wait');
      const { match, at } = await waiting.line(
        /^creating-tune {2}elapsed \d+s {2}createTune failed \(attempt (\d+) next, in \S+\): POST \/tunes could not reach the service at http:\/\/127\.0\.0\.1:1: /,
      );
      console.info(`unreachable service: start --wait said why after ${at - started} ms`);
      expect(at - started).toBeLessThan(5_000);
      expect(Number(match[1])).toBeGreaterThanOrEqual(2);
      const status = tuneflow('status', id);
      expect(await status.exited).toBe(0);
      expect(status.stdout()).toMatch(
        /^now: +creating-tune: createTune failed \(attempt \d+ next, in \S+\): POST \/tunes could not reach the service at http:\/\/127\.0\.0\.1:1: /m,
      );
      const json = tuneflow('status', id, '--json');
      expect(await json.exited).toBe(0);
      expect(JSON.parse(json.stdout())).toMatchObject({
        status: 'RUNNING',
        retrying: {
          activity: 'createTune',
          type: 'ConnectionFailure',
          cause: expect.stringContaining('could not reach the service at http://127.0.0.1:1: '),
        },
      });
      const cancel = tuneflow('cancel', id);
      expect(await cancel.exited).toBe(0);
      expect(await waiting.exited).toBe(5);
    });
  },
);

devServerTest(
  'a 429 storm on POST /tunes: start --wait, status, status --json and the client progress show the Retry-After, the attempt and when the next comes',
  async () => {
    const queue = `rate-limited-${Date.now()}`;
    // Every create answered 429 with Retry-After: 60, as a service shedding load would.
    const limited = await startMockService({
      port: 0,
      faults: { status429Rate: 1, status429RetryAfterSeconds: 60, faultRoutes: ['POST /tunes'] },
    });
    const connection = await Connection.connect({ address: server!.address });
    await withWorker(
      queue,
      { apiUrl: limited.url },
      async () => {
        const id = `${queue}-run`;
        const started = Date.now();
        const waiting = tuneflow(...job(id, queue, limited.url), '--wait');
        const { match, at } = await waiting.line(
          /^creating-tune {2}elapsed \d+s {2}createTune failed \(attempt (\d+) next, in (\S+)\): POST \/tunes was rate limited \(429, Retry-After 60 s\): Too many requests/,
        );
        console.info(`429 storm: start --wait said why after ${at - started} ms (next attempt in ${match[2]})`);
        expect(match[1]).toBe('2');

        const status = tuneflow('status', id);
        expect(await status.exited).toBe(0);
        expect(status.stdout()).toMatch(
          /^now: +creating-tune: createTune failed \(attempt 2 next, in \S+\): POST \/tunes was rate limited \(429, Retry-After 60 s\): /m,
        );
        const json = tuneflow('status', id, '--json');
        expect(await json.exited).toBe(0);
        const { retrying } = JSON.parse(json.stdout()) as { retrying: { failedAt: string; nextAt: string } };
        expect(retrying).toEqual({
          activity: 'createTune',
          attempt: 2,
          type: 'RateLimited',
          cause: expect.stringMatching(/^POST \/tunes was rate limited \(429, Retry-After 60 s\): /),
          failedAt: expect.any(String),
          nextAt: expect.any(String),
        });
        // The next attempt comes the Retry-After after the failure (longer than the policy's own 30 s backoff); the
        // server's times are finer than a millisecond, so to the second.
        expect(Math.round((Date.parse(retrying.nextAt) - Date.parse(retrying.failedAt)) / 1000)).toBe(60);

        // A program's handle says the same: the query's progress, and what is retrying beside it.
        const run = new TuneflowClient({ client: new Client({ connection }), taskQueue: queue }).getHandle(id);
        const progress = await run.progress();
        expect(progress).toMatchObject({
          phase: 'creating-tune',
          retrying: {
            activity: 'createTune',
            attempt: 2,
            type: 'RateLimited',
            cause: expect.stringContaining('(429, Retry-After 60 s)'),
            nextAt: new Date(retrying.nextAt),
          },
        });

        const cancel = tuneflow('cancel', id);
        expect(await cancel.exited).toBe(0);
        expect(await waiting.exited).toBe(5);
      },
      connection,
      limited,
    );
  },
);

devServerTest(
  'a worker whose API key the service refuses: the run fails without a retry, and start --wait, status and the failure name TUNEFLOW_API_KEY, never the key',
  async () => {
    const queue = `refused-${Date.now()}`;
    const wrongKey = 'a-wrong-key-111111';
    const strict = await startMockService({ port: 0, apiKeys: ['the-right-key-000000'] });
    const connection = await Connection.connect({ address: server!.address });
    await withWorker(
      queue,
      { apiKey: wrongKey, apiUrl: strict.url },
      async (worker) => {
        const id = `${queue}-run`;
        const waiting = tuneflow(...job(id, queue, strict.url), '--wait');
        expect(await waiting.exited).toBe(1);
        expect(waiting.stderr()).toMatch(
          /^tuneflow start: the run failed: Unauthorized: POST \/tunes failed with 401: .*; the service refused the API key: check it \(TUNEFLOW_API_KEY for `tuneflow worker` and the plugin's api\.apiKey\)/m,
        );

        const status = tuneflow('status', id);
        expect(await status.exited).toBe(1);
        expect(status.stdout()).toMatch(/^run: +\S+: FAILED after /m);
        expect(status.stdout()).toMatch(
          /^failure: +Unauthorized: POST \/tunes failed with 401: .*check it \(TUNEFLOW_API_KEY /m,
        );
        const json = tuneflow('status', id, '--json');
        expect(await json.exited).toBe(1);
        expect(JSON.parse(json.stdout())).toMatchObject({
          status: 'FAILED',
          failure: expect.stringContaining('the service refused the API key: check it (TUNEFLOW_API_KEY'),
        });

        // The workflow's failure, as a program gets it: the activity's typed, non-retryable cause naming the setting.
        const run = new TuneflowClient({ client: new Client({ connection }), taskQueue: queue }).getHandle(id);
        const failure = await run.result().catch((err: unknown) => err);
        expect(failure).toBeInstanceOf(WorkflowFailedError);
        const cause = (failure as WorkflowFailedError).cause?.cause;
        expect(cause).toBeInstanceOf(ApplicationFailure);
        expect(cause).toMatchObject({ type: 'Unauthorized', nonRetryable: true });
        expect((cause as ApplicationFailure).message).toContain('check it (TUNEFLOW_API_KEY');
        // Tried once: a 401 is not retried.
        const history = await run.handle.fetchHistory();
        const attempts = (history.events ?? []).filter((e) => e.activityTaskStartedEventAttributes);
        expect(attempts.map((e) => e.activityTaskStartedEventAttributes!.attempt)).toEqual([1]);

        // Nowhere the key: what the user saw, the failure's details (decoded), the history, the worker's log.
        const everything = [
          waiting.stdout(),
          waiting.stderr(),
          status.stdout(),
          json.stdout(),
          JSON.stringify((cause as ApplicationFailure).details),
          JSON.stringify(history),
          worker.log(),
        ];
        for (const text of everything) expect(text).not.toContain(wrongKey);
      },
      connection,
      strict,
    );
  },
);

devServerTest(
  'start --inspect: a blurry photo fails the run InspectionRefused before any tune (exit 1), status and status --json show what inspection found; clean photos complete and --wait prints it',
  async () => {
    const queue = `inspect-${Date.now()}`;
    const quick = await startMockService({ port: 0, trainingTime: '1s', inferenceTime: '500ms' });
    await withWorker(
      queue,
      { apiUrl: quick.url },
      async () => {
        const start = (id: string, branch: string, images: string[]) =>
          tuneflow(
            ...['start', '--id', id, '--task-queue', queue, '--name', 'dog', '--branch', branch],
            ...images.flatMap((image) => ['--images', image]),
            ...['--prompt', 'sks dog on a beach', '--inspect', 'blurry,includes_multiple_people', '--wait'],
          );

        const refusedId = `${queue}-refused`;
        const refused = start(refusedId, 'sd15', [INSPECTED_URLS[0], BLURRY_URL]);
        expect(await refused.exited).toBe(1);
        expect(refused.stderr()).toMatch(
          /^tuneflow start: the run failed: InspectionRefused: Inspection refused 1 of 2 training images \(options\.inspect\.refuse: blurry, includes_multiple_people\): tune\.image_urls\[1\] \(https:\/\/example\.com\/training\/beach__blurry__\.jpg\): blurry; no tune was created$/m,
        );
        expect(quick.stats().routes).toEqual({ 'POST /images/inspect': 2 });
        expect(quick.ledger('command-line-test-key')).toEqual({ totalMc: 0, charges: [] });

        const status = tuneflow('status', refusedId);
        expect(await status.exited).toBe(1);
        expect(status.stdout()).toMatch(/^failure: +InspectionRefused: Inspection refused 1 of 2 training images /m);
        expect(status.stdout()).toMatch(/^inspection: +2 images inspected, 1 with flags$/m);
        expect(status.stdout()).toMatch(
          /^ +tune\.image_urls\[0\] https:\/\/example\.com\/training\/1\.jpg: no flag \(eye_color /m,
        );
        expect(status.stdout()).toMatch(/^ +tune\.image_urls\[1\] \S+beach__blurry__\.jpg: blurry \(eye_color /m);
        const json = tuneflow('status', refusedId, '--json');
        expect(await json.exited).toBe(1);
        expect(JSON.parse(json.stdout())).toMatchObject({
          status: 'FAILED',
          failure: expect.stringContaining('InspectionRefused: '),
          inspection: [
            { field: 'tune.image_urls[0]', image: INSPECTED_URLS[0], flags: [] },
            { field: 'tune.image_urls[1]', image: BLURRY_URL, flags: ['blurry'] },
          ],
        });

        const cleanId = `${queue}-clean`;
        const clean = start(cleanId, 'fast', INSPECTED_URLS.slice(0, 2));
        expect(await clean.exited).toBe(0);
        expect(clean.stdout()).toMatch(
          /^inspected tune\.image_urls\[0\] https:\/\/example\.com\/training\/1\.jpg: no flag /m,
        );
        expect(clean.stdout()).toMatch(
          /^inspected tune\.image_urls\[1\] https:\/\/example\.com\/training\/2\.jpg: no flag /m,
        );
        const cleanJson = tuneflow('status', cleanId, '--json');
        expect(await cleanJson.exited).toBe(0);
        const state = JSON.parse(cleanJson.stdout()) as { inspection: unknown[]; result: { inspection: unknown[] } };
        expect(state.inspection).toHaveLength(2);
        expect(state.result.inspection).toEqual(state.inspection);
        expect(quick.stats().routes).toMatchObject({ 'POST /images/inspect': 4, 'POST /tunes': 1 });

        // A raw start under the clean job's key with other input ("allow duplicate" after it closed): refused
        // KeyInUse, and status names the key's job, which completed, with what it made.
        const connection = await Connection.connect({ address: server!.address });
        try {
          const raw = await new Client({ connection }).workflow.start('trainThenGenerate', {
            taskQueue: queue,
            workflowId: cleanId,
            workflowIdReusePolicy: 'ALLOW_DUPLICATE',
            args: [{ tune: { name: 'cat', branch: 'fast', image_urls: INSPECTED_URLS.slice(0, 1) }, prompts: [] }],
          });
          await expect(raw.result()).rejects.toThrow(WorkflowFailedError);
        } finally {
          await connection.close();
        }
        const refusedKey = tuneflow('status', cleanId);
        expect(await refusedKey.exited).toBe(1);
        expect(refusedKey.stdout()).toMatch(/^failure: +KeyInUse: Invalid input: key: /m);
        expect(refusedKey.stdout()).toMatch(/^job: +the key's job, run \S+: COMPLETED at \S+: what it made below$/m);
        expect(refusedKey.stdout()).toMatch(/^prompts: +1 settled$/m);
        expect(refusedKey.stdout()).toMatch(/^ +\d+ "sks dog on a beach" 1 image: http:\/\/\S+$/m);
        const refusedJson = tuneflow('status', cleanId, '--json');
        expect(await refusedJson.exited).toBe(1);
        expect(JSON.parse(refusedJson.stdout())).toMatchObject({
          status: 'FAILED',
          job: { status: 'COMPLETED', result: { tune: { id: expect.any(Number) } } },
        });
      },
      quick,
    );
  },
);
