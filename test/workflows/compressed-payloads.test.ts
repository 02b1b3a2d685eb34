/**
 * Compressed activity payloads as the README's "Compressed payloads" turns them on: `tuneflow worker` with
 * TUNEFLOW_COMPRESS_PAYLOADS=on against the CLI's dev server (a real server) and the mock service. The run's activity
 * payloads are stored compressed and its input and result plain, so a client with no codec reads the result;
 * tuneflow's readers of the history decode; and the README's `temporal workflow show --codec-endpoint` through its
 * `npx tuneflow codec-server`, both run by bash as printed, shows the service's answers the worker stored.
 */
import { execFile, spawn } from 'node:child_process';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { Client } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { TuneflowClient } from '../../src/client';
import { startMockService, type MockService } from '../../src/mock-service';
import { freePort } from '../../src/temporal-server/dev-server';
import { COMPRESSED_ENCODING } from '../../src/codec/compression';
import { asksForCallbacks } from '../../src/cli/run-watch';
import { blocksUnder, commandsOf } from '../readme-blocks';
import { devServerTest, startDevServer, temporalOnPath } from './environment';
import { summarize } from './history-summary';
import { startWorkerProcess } from './worker-process';

jest.setTimeout(180_000);

const ROOT = path.resolve(__dirname, '../..');
const API_KEY = 'compressed-payloads-test-key-0123456789';
/** The README's commands under "Compressed payloads": the worker, the codec server, the CLI's show. */
const [WORKER, CODEC_SERVER, SHOW] = commandsOf(blocksUnder('### Compressed payloads', 'sh')[0]!);
/** The workflow ID the README's show names; the test shows its own run. */
const PRINTED_WORKFLOW_ID = 'order-1042';

let env: TestWorkflowEnvironment | undefined;
let mock: MockService;

beforeAll(async () => {
  env = await startDevServer();
  mock = await startMockService({ port: 0, trainingTime: '1s', inferenceTime: '500ms' });
}, 120_000);

afterAll(async () => {
  await mock?.close();
  await env?.teardown();
});

/** A README command, run by bash as a user would (`temporal` on PATH, the dev server's address): its outcome. */
function sh(command: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const shEnv = {
    PATH: temporalOnPath(),
    HOME: process.env.HOME,
    TEMPORAL_ADDRESS: env!.address,
  };
  return new Promise((resolve, reject) =>
    execFile(
      'bash',
      ['-euo', 'pipefail', '-c', command],
      { cwd: ROOT, env: shEnv, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) =>
        error && typeof error.code !== 'number'
          ? reject(error)
          : resolve({ code: error ? Number(error.code) : 0, stdout, stderr }),
    ),
  );
}

/** The README's `npx tuneflow codec-server`, run by bash in the project as printed, once it says where it listens. */
async function startCodecServer(command: string) {
  const child = spawn('bash', ['-euo', 'pipefail', '-c', `exec ${command}`], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME },
    // A group of its own: npx runs the command as its child, and the stop reaches both.
    detached: true,
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (line) => {
      const listening = /^codec server listening on (\S+)/.exec(line);
      if (listening) resolve(listening[1]!);
    });
    void exited.then((code) => reject(new Error(`tuneflow codec-server exited with ${code}: ${stderr}`)));
  });
  return { url, stop: () => (process.kill(-child.pid!, 'SIGTERM'), exited) };
}

const encodingOf = (payload: { metadata?: Record<string, Uint8Array> | null } | undefined) =>
  Buffer.from(payload?.metadata?.encoding ?? new Uint8Array()).toString();

devServerTest(
  "the README's TUNEFLOW_COMPRESS_PAYLOADS=on: activity payloads stored compressed, input and result plain; its codec server shows them to `temporal workflow show`",
  async () => {
    expect(WORKER).toBe('TUNEFLOW_COMPRESS_PAYLOADS=on npx tuneflow worker');
    expect(CODEC_SERVER).toBe('npx tuneflow codec-server');
    expect(SHOW).toContain(`--workflow-id ${PRINTED_WORKFLOW_ID} `);
    const taskQueue = `tuneflow-compressed-${process.pid}`;
    const worker = await startWorkerProcess({
      temporalAddress: env!.address,
      apiKey: API_KEY,
      apiUrl: mock.url,
      taskQueue,
      callbackPort: await freePort(),
      // The README's worker: its variable, beside the connection's settings.
      env: { TUNEFLOW_COMPRESS_PAYLOADS: /^TUNEFLOW_COMPRESS_PAYLOADS=(\w+) /.exec(WORKER)![1]! },
    });
    const workflowId = `compressed-${Date.now()}`;
    try {
      expect(worker.log()).toContain('"compressPayloads":"on"');
      // A client with no codec at all: what a caller in another language or namespace holds.
      const tuneflow = new TuneflowClient({
        client: new Client({ connection: env!.connection, namespace: env!.namespace }),
        taskQueue,
      });
      const job = await tuneflow.trainThenGenerate(workflowId, {
        tune: { name: 'dog', branch: 'fast', image_urls: [`${mock.url}/images/training-1.png`] },
        prompts: [{ text: 'sks dog on a beach', num_images: 2 }],
      });
      const result = await job.result();
      expect(result.tune.trained_at).toBeTruthy();
      expect(result.prompts[0]?.images).toHaveLength(2);

      const history = await job.handle.fetchHistory();
      const events = history.events ?? [];
      const activityPayloads = events.flatMap((e) => [
        ...(e.activityTaskScheduledEventAttributes?.input?.payloads ?? []),
        ...(e.activityTaskCompletedEventAttributes?.result?.payloads ?? []),
      ]);
      expect(activityPayloads.filter((p) => encodingOf(p) === COMPRESSED_ENCODING).length).toBeGreaterThanOrEqual(6);
      expect(encodingOf(events[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0])).toBe('json/plain');
      expect(encodingOf(events.at(-1)?.workflowExecutionCompletedEventAttributes?.result?.payloads?.[0])).toBe(
        'json/plain',
      );
      // tuneflow's readers of a history decode: the activities and their answers, and that the run asked for callbacks.
      const { activities, calls } = summarize(history);
      expect(activities.slice(0, 2)).toEqual(['createTune', 'retrieveTune']);
      expect(calls[0]?.result).toMatchObject({ id: result.tune.id });
      expect(asksForCallbacks(history)).toBe(true);

      const show = SHOW.replace(PRINTED_WORKFLOW_ID, workflowId);
      // Without the codec the CLI shows the compressed bytes: the answers' fields are not there to read.
      const plain = await sh(`${show.replace(/ --codec-endpoint \S+/, '')} --output json`);
      expect(plain.code).toBe(0);
      expect(plain.stdout).toContain(Buffer.from(COMPRESSED_ENCODING).toString('base64'));
      const codec = await startCodecServer(CODEC_SERVER);
      try {
        // The README's show, as printed but for the run's own ID, through the endpoint it prints.
        expect(show).toContain(`--codec-endpoint ${codec.url}`);
        const decoded = await sh(`${show} --output json`);
        expect(decoded).toMatchObject({ code: 0 });
        expect(decoded.stdout).not.toContain(Buffer.from(COMPRESSED_ENCODING).toString('base64'));
        expect(decoded.stdout).not.toContain(COMPRESSED_ENCODING);
        type Shown = { result?: { payloads?: { metadata: { encoding: string }; data: string }[] } };
        const shown = JSON.parse(decoded.stdout) as { events: { activityTaskCompletedEventAttributes?: Shown }[] };
        const answers = shown.events.flatMap((e) => e.activityTaskCompletedEventAttributes?.result?.payloads ?? []);
        expect(answers.length).toBeGreaterThanOrEqual(3);
        expect(answers.map((p) => Buffer.from(p.metadata.encoding, 'base64').toString())).toEqual(
          answers.map(() => 'json/plain'),
        );
        // The created tune's answer, as the worker read it.
        expect(JSON.parse(Buffer.from(answers[0]!.data, 'base64').toString())).toMatchObject({ id: result.tune.id });
        // And as a person reads it, the command exactly as printed but for the ID.
        const text = await sh(show);
        expect(text.code).toBe(0);
        expect(text.stdout).toContain('ActivityTaskCompleted');
        expect(text.stdout).not.toContain(COMPRESSED_ENCODING);
      } finally {
        // npx passes SIGTERM on; its own code may be 143 (README, exit codes): only that it stopped counts.
        await codec.stop();
      }
    } finally {
      worker.child.kill('SIGTERM');
    }
    expect(await worker.exited).toBe(0);
  },
);
