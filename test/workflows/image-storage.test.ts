/**
 * Images that outlive the service (issue 46) on a real Temporal dev server, with the mock service, and storage on the
 * embedded default (a folder) and on a real S3-compatible store the project provisions (SeaweedFS, src/s3-server):
 * each settled prompt's images copied as it settles (a storeImages activity each, on the bookkeeping queue), checked by
 * SHA-256, named in the result; a worker killed in the middle of a copy's PUT leaves one object per image (the bucket's
 * versions, its own record of writes) and no multipart upload; a storage outage delays the job and loses nothing;
 * the check finds an image deleted from storage, and copies it again.
 */
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  ListMultipartUploadsCommand,
  ListObjectVersionsCommand,
  S3Client,
  type ObjectVersion,
} from '@aws-sdk/client-s3';
import { Client } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { NativeConnection, Worker, type WorkflowBundle } from '@temporalio/worker';
import { TuneflowClient } from '../../src/client';
import { startMockService, type MockService } from '../../src/mock-service';
import { TuneflowPlugin } from '../../src/plugin';
import { startS3Server, type S3Server } from '../../src/s3-server';
import {
  checkStoredImages,
  copyAgain,
  FolderStore,
  ImageFetcher,
  type ImageStore,
  type StorageSettings,
} from '../../src/storage';
import type { TrainThenGenerateResult } from '../../src/contract/inputs';
import { bundleWorkflows } from './bundle';
import { devServerTest, startDevServer, whileRunning } from './environment';
import { summarize } from './history-summary';
import { startWorkerProcess } from './worker-process';
import { blocksUnder, commandsOf } from '../readme-blocks';
import { execFile } from 'node:child_process';

jest.setTimeout(300_000);

const ROOT = path.resolve(__dirname, '../..');
/** The README's `tuneflow images` commands under "Images in your storage": a job's check, a tenant's with --copy. */
const [CHECK_JOB, COPY_TENANT] = commandsOf(blocksUnder('### Images in your storage', 'sh')[0]!);

const QUICK = {
  pollInterval: '1 second',
  maxPollInterval: '2 seconds',
  trainingTimeout: '1 minute',
  promptTimeout: '2 minutes',
};
const API_KEY = 'image-storage-test-key-0123456789';
const dog = () => ({ name: 'dog', branch: 'fast', image_urls: [`${mock.url}/images/training-1.png`] });

let env: TestWorkflowEnvironment | undefined;
let bundle: WorkflowBundle;
let connection: NativeConnection;
let mock: MockService;
let s3: S3Server | undefined;
let folder: string;

beforeAll(async () => {
  env = await startDevServer();
  [bundle, connection, mock, s3] = await Promise.all([
    bundleWorkflows(),
    NativeConnection.connect({ address: env.address }),
    startMockService({ trainingTime: '300ms', inferenceTime: '300ms' }),
    startS3Server(),
  ]);
  folder = await fs.mkdtemp(path.join(os.tmpdir(), 'tuneflow-images-'));
}, 240_000);

afterAll(async () => {
  await s3?.close();
  await mock?.close();
  await connection?.close();
  await env?.teardown();
  if (folder) await fs.rm(folder, { recursive: true, force: true });
});

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

function worker(taskQueue: string, storage: StorageSettings | false, baseUrl = mock.url) {
  return Worker.create({
    connection,
    taskQueue,
    workflowBundle: bundle,
    plugins: [
      new TuneflowPlugin({
        api: { apiKey: API_KEY, baseUrl },
        callbacks: false,
        nexus: false,
        serviceRate: false,
        storage,
        startReport: false,
      }),
    ],
  });
}

function starter(taskQueue: string): TuneflowClient {
  return new TuneflowClient({ client: new Client({ connection: env!.connection }), taskQueue });
}

function s3Client(endpoint = s3!.endpoint): S3Client {
  return new S3Client({
    region: 'us-east-1',
    endpoint,
    forcePathStyle: true,
    credentials: s3!.credentials,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
}

function s3Storage(prefix: string, endpoint = s3!.endpoint): StorageSettings {
  return { target: { s3: { bucket: s3!.bucket, prefix, endpoint, credentials: s3!.credentials } } };
}

/** Every version the bucket holds under `prefix`: one per write, the store's own record. */
async function versionsUnder(prefix: string): Promise<ObjectVersion[]> {
  const client = s3Client();
  try {
    const answer = await client.send(new ListObjectVersionsCommand({ Bucket: s3!.bucket, Prefix: prefix }));
    return answer.Versions ?? [];
  } finally {
    client.destroy();
  }
}

const imageReads = () => mock.stats().routes['GET /images/:name'] ?? 0;

devServerTest(
  "storage on the embedded default: each settled prompt's images copied once (a storeImages activity per prompt, " +
    'on the bookkeeping queue), their SHA-256 that of the service bytes, named in the result; the check finds an ' +
    'image deleted from storage and copies it again',
  async () => {
    const taskQueue = `images-folder-${Date.now()}`;
    const readsBefore = imageReads();
    const w = await worker(taskQueue, { target: { folder } });
    const client = starter(taskQueue);
    const key = `${taskQueue}-job`;
    const result = (await whileRunning([w], async () => {
      const handle = await client.trainThenGenerate(key, {
        tune: dog(),
        prompts: [{ text: 'sks dog', num_images: 2 }, { text: 'sks dog on a beach' }],
        options: QUICK,
      });
      return handle.result();
    })) as TrainThenGenerateResult;

    const history = summarize(await env!.client.workflow.getHandle(key).fetchHistory());
    expect(history.activities.filter((a) => a === 'storeImages')).toHaveLength(2);
    const images = result.prompts.flatMap((p) => p.images ?? []);
    expect(images).toHaveLength(3);
    // One read of each image from the service (the training image is the mock's too, and not read).
    expect(imageReads() - readsBefore).toBe(3);
    for (const prompt of result.prompts) {
      expect(prompt.stored_images).toHaveLength(prompt.images!.length);
      for (const [i, stored] of prompt.stored_images!.entries()) {
        const service = Buffer.from(await (await fetch(prompt.images![i])).arrayBuffer());
        const copy = await fs.readFile(fileURLToPath(stored.location));
        expect(stored).toEqual({
          location: expect.stringMatching(
            new RegExp(`^file://${folder}/default/${key}/prompt-${prompt.id}/image-${i}\\.png$`),
          ),
          sha256: sha256(service),
          bytes: service.length,
          content_type: 'image/png',
        });
        expect(sha256(copy)).toBe(stored.sha256);
      }
    }

    // Found again: none missing; one deleted from storage is found, with its service URL, and copied again.
    const store = new FolderStore(folder);
    const jobs = [{ workflowId: key, prompts: result.prompts }];
    expect(await checkStoredImages(store, jobs)).toEqual({ images: 3, stored: 3, problems: [] });
    const deleted = result.prompts[0].stored_images![1];
    await fs.rm(fileURLToPath(deleted.location));
    const check = await checkStoredImages(store, jobs);
    expect(check).toEqual({
      images: 3,
      stored: 2,
      problems: [
        {
          workflowId: key,
          promptId: result.prompts[0].id,
          index: 1,
          url: result.prompts[0].images![1],
          problem: 'missing',
          location: deleted.location,
        },
      ],
    });
    const fetcher = new ImageFetcher({ hosts: [new URL(mock.url).host], maxBytes: 1 << 20 });
    const again = await copyAgain(store, fetcher, check.problems);
    await fetcher.close();
    expect(again.failed).toEqual([]);
    expect(again.copied.map((c) => c.stored)).toEqual([deleted]);
    expect(await checkStoredImages(store, jobs)).toEqual({ images: 3, stored: 3, problems: [] });
  },
);

devServerTest(
  'a job with storeImages: false copies nothing; storeImages: true on a worker without storage fails InvalidOptions ' +
    'having created nothing',
  async () => {
    const taskQueue = `images-optout-${Date.now()}`;
    const withStorage = await worker(taskQueue, { target: { folder } });
    const client = starter(taskQueue);
    const optOut = await whileRunning([withStorage], async () =>
      (
        await client.trainThenGenerate(`${taskQueue}-out`, {
          tune: dog(),
          prompts: [{ text: 'sks dog' }],
          options: { ...QUICK, storeImages: false },
        })
      ).result(),
    );
    expect(optOut.prompts[0].stored_images).toBeUndefined();
    const outHistory = summarize(await env!.client.workflow.getHandle(`${taskQueue}-out`).fetchHistory());
    expect(outHistory.activities).not.toContain('storeImages');

    const bareQueue = `${taskQueue}-bare`;
    const tunesBefore = mock.stats().routes['POST /tunes'] ?? 0;
    const without = await worker(bareQueue, false);
    const failure = await whileRunning([without], async () =>
      (
        await starter(bareQueue).trainThenGenerate(`${bareQueue}-needs`, {
          tune: dog(),
          prompts: [{ text: 'sks dog' }],
          options: { ...QUICK, storeImages: true },
        })
      )
        .result()
        .then(
          () => undefined,
          (err: { cause?: { type?: string; message?: string } }) => err.cause,
        ),
    );
    expect(failure).toMatchObject({ type: 'InvalidOptions', message: expect.stringContaining('storeImages') });
    expect(mock.stats().routes['POST /tunes'] ?? 0).toBe(tunesBefore);
  },
);

devServerTest(
  'S3 storage down when the images settle: the copies are retried until it is back, the job completes with every ' +
    'image stored once (one version each in the bucket)',
  async () => {
    const taskQueue = `images-outage-${Date.now()}`;
    const prefix = `outage-${Date.now()}`;
    const w = await worker(taskQueue, s3Storage(prefix));
    const key = `${taskQueue}-job`;
    await s3!.stop();
    const result = await whileRunning([w], async () => {
      const handle = await starter(taskQueue).trainThenGenerate(key, {
        tune: dog(),
        prompts: [{ text: 'sks dog', num_images: 2 }],
        options: QUICK,
      });
      // The copy fails while the store is down: at least one retry is scheduled before it is back.
      for (;;) {
        const { raw } = await env!.client.workflow.getHandle(key).describe();
        const pending = raw.pendingActivities ?? [];
        if (pending.some((a) => a.activityType?.name === 'storeImages' && (a.attempt ?? 0) >= 2)) break;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      await s3!.start();
      return handle.result();
    });
    const stored = result.prompts[0].stored_images!;
    expect(stored).toHaveLength(2);
    const versions = await versionsUnder(prefix);
    expect(versions.map((v) => `s3://${s3!.bucket}/${v.Key}`).sort()).toEqual(stored.map((s) => s.location).sort());
    const history = summarize(await env!.client.workflow.getHandle(key).fetchHistory());
    expect(history.activities.filter((a) => a === 'storeImages')).toHaveLength(1);
  },
);

/**
 * A TCP proxy in front of the store that holds the first PUT it sees and says so: `request`, after its first bytes (the
 * object is never written); `answer`, once the store took it whole, the store's answer (the object is written and
 * the worker never learns it). `close` cuts every connection.
 */
async function holdingProxy(target: string, hold: 'request' | 'answer') {
  const { hostname, port } = new URL(target);
  let armed = true;
  let sawPut: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (sawPut = resolve));
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(port), hostname);
    let put = false;
    sockets.add(client).add(upstream);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
    upstream.on('data', (chunk: Buffer) => {
      if (armed && put && hold === 'answer') {
        armed = false;
        upstream.pause();
        sawPut();
        return;
      }
      client.write(chunk);
    });
    client.on('data', (chunk: Buffer) => {
      if (chunk.toString('latin1').startsWith('PUT ')) put = true;
      if (armed && put && hold === 'request') {
        armed = false;
        // The request line and part of its headers go on; the rest (and the body) never do.
        upstream.write(chunk.subarray(0, Math.min(64, chunk.length)));
        client.pause();
        sawPut();
        return;
      }
      upstream.write(chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${address.port}`,
    held,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

devServerTest.each([
  ['its PUT half sent: the object never written', 'request'],
  ['its PUT taken whole, the answer never back: the object written', 'answer'],
] as const)(
  'a worker killed in the middle of a copy (%s): another worker copies the image, the bucket holds exactly one ' +
    'version of each image and no multipart upload is left open',
  async (_, hold) => {
    const taskQueue = `images-kill-${hold}-${Date.now()}`;
    const prefix = `kill-${hold}-${Date.now()}`;
    const proxy = await holdingProxy(s3!.endpoint, hold);
    const first = await startWorkerProcess({
      temporalAddress: env!.address,
      apiKey: API_KEY,
      apiUrl: mock.url,
      taskQueue,
      env: {
        TUNEFLOW_STORAGE: `s3://${s3!.bucket}/${prefix}`,
        TUNEFLOW_STORAGE_ENDPOINT: proxy.url,
        AWS_ACCESS_KEY_ID: s3!.credentials.accessKeyId,
        AWS_SECRET_ACCESS_KEY: s3!.credentials.secretAccessKey,
        AWS_REGION: 'us-east-1',
      },
    });
    const key = `${taskQueue}-job`;
    const handle = await starter(taskQueue).trainThenGenerate(key, {
      tune: dog(),
      prompts: [{ text: 'sks dog', num_images: 3 }],
      options: QUICK,
    });
    await proxy.held;
    first.child.kill('SIGKILL');
    await first.exited;
    await proxy.close();
    // The second worker reaches the store itself; the first one's attempt times out on its heartbeat and is retried.
    const second = await worker(taskQueue, s3Storage(prefix));
    const result = await whileRunning([second], () => handle.result());
    const stored = result.prompts[0].stored_images!;
    expect(stored).toHaveLength(3);
    const versions = await versionsUnder(prefix);
    expect(versions).toHaveLength(3);
    expect(versions.map((v) => `s3://${s3!.bucket}/${v.Key}`).sort()).toEqual(stored.map((s) => s.location).sort());
    const client = s3Client();
    const uploads = await client.send(new ListMultipartUploadsCommand({ Bucket: s3!.bucket, Prefix: prefix }));
    client.destroy();
    expect(uploads.Uploads ?? []).toEqual([]);
    // The killed attempt and the one that copied: one activity, retried.
    const history = await env!.client.workflow.getHandle(key).fetchHistory();
    expect(summarize(history).activities.filter((a) => a === 'storeImages')).toHaveLength(1);
    const started = history
      .events!.filter((e) => e.activityTaskStartedEventAttributes)
      .map((e) => e.activityTaskStartedEventAttributes!);
    expect(Math.max(...started.map((s) => s.attempt ?? 1))).toBeGreaterThanOrEqual(2);
  },
);

/** A README command, run by bash in the project as printed, with the variables of the worker's terminal. */
function sh(command: string, storage: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const shEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    TEMPORAL_ADDRESS: env!.address,
    TUNEFLOW_API_URL: mock.url,
    TUNEFLOW_STORAGE: storage,
  };
  return new Promise((resolve, reject) =>
    execFile('bash', ['-euo', 'pipefail', '-c', command], { cwd: ROOT, env: shEnv }, (error, stdout, stderr) =>
      error && typeof error.code !== 'number'
        ? reject(error)
        : resolve({ code: error ? Number(error.code) : 0, stdout, stderr }),
    ),
  );
}

devServerTest(
  "the README's `tuneflow images` as printed: 0 with every copy there; 1 naming an image deleted from storage and its " +
    'service URL; the tenant check with --copy copies it again, and the job checks clean after',
  async () => {
    const taskQueue = `images-cli-${Date.now()}`;
    const own = await fs.mkdtemp(path.join(os.tmpdir(), 'tuneflow-images-cli-'));
    const w = await worker(taskQueue, { target: { folder: own } });
    expect(CHECK_JOB).toMatch(/^npx tuneflow images my-first-run\b/);
    const result = (await whileRunning([w], async () =>
      (
        await starter(taskQueue).trainThenGenerate('my-first-run', {
          tune: dog(),
          prompts: [{ text: 'sks dog', num_images: 2 }],
          options: QUICK,
        })
      ).result(),
    )) as TrainThenGenerateResult;
    const clean = await sh(CHECK_JOB, own);
    expect(clean).toMatchObject({
      code: 0,
      stdout: expect.stringMatching(/^2 of 2 images of 1 jobs stored with their digest$/m),
    });

    const [kept, deleted] = result.prompts[0].stored_images!;
    await fs.rm(fileURLToPath(deleted.location));
    const found = await sh(CHECK_JOB, own);
    expect(found.code).toBe(1);
    expect(found.stdout).toContain(
      `my-first-run prompt ${result.prompts[0].id} image 1: missing from storage (${deleted.location}); at the ` +
        `service: ${result.prompts[0].images![1]}`,
    );
    expect(found.stdout).not.toContain(kept.location);

    const copied = await sh(COPY_TENANT, own);
    expect(copied.stdout).toContain(`copied again: ${deleted.location}`);
    expect(copied.code).toBe(0);
    expect(sha256(await fs.readFile(fileURLToPath(deleted.location)))).toBe(deleted.sha256);
    expect((await sh(CHECK_JOB, own)).code).toBe(0);
    await fs.rm(own, { recursive: true, force: true });
  },
);

/** A store whose writes never end: a copy stays under way until its activity is cancelled (its signal aborted). */
const hangingStore: ImageStore = {
  name: 'a store that never answers',
  location: (key) => `hanging://${key}`,
  write: (_key, _bytes, _meta, signal) =>
    new Promise((_, reject) => signal?.addEventListener('abort', () => reject(signal.reason), { once: true })),
  read: async () => undefined,
};

devServerTest.each([
  ['while its prompts are still generating (the copies followed, none begun)', 'generating'],
  ['while its copies are under way (every prompt settled)', 'copying'],
] as const)(
  'a job with storage cancelled %s ends cancelled, its cleanup run: never stuck, never completed',
  async (_, when) => {
    const taskQueue = `images-cancel-${when}-${Date.now()}`;
    const slow = when === 'generating' ? await startMockService({ trainingTime: '300ms', inferenceTime: '1h' }) : mock;
    try {
      const w = await worker(taskQueue, { target: hangingStore }, slow.url);
      const key = `${taskQueue}-job`;
      const status = await whileRunning([w], async () => {
        const handle = await starter(taskQueue).trainThenGenerate(key, {
          tune: { ...dog(), image_urls: [`${slow.url}/images/training-1.png`] },
          prompts: [{ text: 'sks dog' }],
          options: { ...QUICK, promptTimeout: '2 hours', maxPollInterval: '2 minutes', cleanupOnCancel: true },
        });
        const raw = env!.client.workflow.getHandle(key);
        for (;;) {
          const history = summarize(await raw.fetchHistory());
          if (
            when === 'copying'
              ? history.activities.includes('storeImages')
              : history.activities.includes('createPrompt')
          )
            break;
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
        await handle.cancel();
        await handle.result().catch(() => undefined);
        return (await raw.describe()).status.name;
      });
      expect(status).toBe('CANCELLED');
      const history = summarize(await env!.client.workflow.getHandle(key).fetchHistory());
      // cleanupOnCancel: the tune it made is deleted.
      expect(history.activities).toContain('deleteTune');
    } finally {
      if (slow !== mock) await slow.close();
    }
  },
);
