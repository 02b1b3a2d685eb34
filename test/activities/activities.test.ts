/**
 * Tier 2: the activities in MockActivityEnvironment, over the real client against the real mock service on loopback.
 * Every error mapping (type, retryable, next delay) and the look-up-before-retry of both creates.
 */
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import * as http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { createActivities, toApplicationFailure, type TuneflowActivities } from '../../src/activities';
import { backoffMs } from '../../src/activities/failures';
import { briefInspection } from '../../src/activities/brief';
import { sameCallback } from '../../src/activities/lookup';
import { APIError, RateLimitError, TunesApi, type Duration } from '../../src/api';
import { CallbackSigner } from '../../src/callbacks/signing';
import { INSPECTION_FLAGS } from '../../src/contract/inspection';
import { RESULT_PROMPT_FIELDS, RESULT_TUNE_FIELDS } from '../../src/contract/results';
import { startMockService } from '../../src/mock-service';

type Mock = Awaited<ReturnType<typeof startMockService>>;

const SECRET = 'activity-test-secret-0123456789';
const PNG_1X1 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
const quiet = new DefaultLogger('ERROR', () => undefined);
const signer = new CallbackSigner({ baseUrl: 'http://127.0.0.1:9', secret: SECRET });
/** The signed URL of workflow `workflowId`'s run as `run` runs it, and the same as activity results carry it. */
const signedUrl = (kind: 'tune' | 'prompt', workflowId: string, params?: Record<string, string>) =>
  signer.url(kind, { workflowId, runId: 'run-1' }, params);
const redacted = (url: string) => url.replace(/sig=[0-9a-f]{64}/, 'sig=redacted');
let mock: Mock;
let keyCounter = 0;
const opened: TunesApi[] = [];

beforeAll(async () => {
  mock = await startMockService({ port: 0, trainingTime: '200ms', inferenceTime: '100ms' });
});
afterAll(async () => {
  await Promise.all(opened.map((api) => api.close()));
  await mock.close();
});
beforeEach(() => mock.setFaults({}));
/** Closed after the test that opened them. */
const afterThis: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(afterThis.splice(0).map((close) => close()));
});

/** A fresh account per test, so counts and look-ups see only that test's objects. */
function account(baseUrl = mock.url, timeout?: Duration) {
  const apiKey = `activity-key-${++keyCounter}-abcdefghijkl`;
  const api = new TunesApi({ apiKey, baseUrl, timeout });
  opened.push(api);
  return { apiKey, api, activities: createActivities({ api, callbacks: signer }) };
}

/**
 * A service on loopback holding `items`: a list path answers them newest first by id, honouring `before_id` and
 * `limit`; a path ending in an id answers that item, or 404. Records each request's path and query.
 */
async function serveKeysetList(items: readonly { id: number }[]): Promise<{ url: string; queries: string[] }> {
  const queries: string[] = [];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    queries.push(`${url.pathname}${url.search}`);
    const json = (status: number, body: unknown) =>
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    const byId = url.pathname.match(/\/(\d+)$/);
    if (byId) {
      const item = items.find((i) => i.id === Number(byId[1]));
      return item ? json(200, item) : json(404, {});
    }
    const before = Number(url.searchParams.get('before_id') ?? Infinity);
    const limit = Number(url.searchParams.get('limit') ?? 20);
    json(
      200,
      items
        .filter((i) => i.id < before)
        .sort((a, b) => b.id - a.id)
        .slice(0, limit),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  afterThis.push(() => new Promise((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, queries };
}

/** Runs one activity as attempt `attempt` of workflow `workflowId`. */
function run<K extends keyof TuneflowActivities>(
  activities: TuneflowActivities,
  name: K,
  input: Parameters<TuneflowActivities[K]>[0],
  { attempt = 1, workflowId = 'wf-1', scheduledTimestampMs = Date.now() - 1000 } = {},
): ReturnType<TuneflowActivities[K]> {
  const env = new MockActivityEnvironment(
    { attempt, workflowExecution: { workflowId, runId: 'run-1' }, scheduledTimestampMs },
    { logger: quiet }, // failures are what these tests assert; the SDK's log lines about them are noise here
  );
  const fn = activities[name] as (arg: typeof input) => ReturnType<TuneflowActivities[K]>;
  return env.run(fn, input) as ReturnType<TuneflowActivities[K]>;
}

/** Creates one prompt per key, in order; returns their ids. */
async function createPrompts(activities: TuneflowActivities, tuneId: number, keys: string[], workflowId: string) {
  const ids: number[] = [];
  for (const key of keys)
    ids.push((await run(activities, 'createPrompt', { tuneId, prompt: { text: key }, key }, { workflowId })).id);
  return ids;
}

/** Every request the mock has answered so far, all accounts together. */
function requestsSoFar(): number {
  return Object.values(mock.stats().routes as Record<string, number>).reduce((sum, n) => sum + n, 0);
}

async function failureOf(promise: Promise<unknown>): Promise<ApplicationFailure> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApplicationFailure);
  return err as ApplicationFailure;
}

const tune = (title: string) => ({
  title,
  name: 'woman',
  branch: 'fast' as const,
  image_urls: ['https://img.example.com/1.png', 'https://img.example.com/2.png'],
});

async function tuneCount(api: TunesApi): Promise<number> {
  let n = 0;
  for await (const _ of api.tunes.list()) n++;
  return n;
}

describe('createTune', () => {
  test('creates the tune with the callback signed for the run; the result carries it without its signature', async () => {
    const { api, activities } = account();
    const created = await run(activities, 'createTune', { tune: tune('job-a') }, { workflowId: 'job-a' });
    expect(created.title).toBe('job-a');
    // The service holds the signed URL; what enters history does not.
    const held = (await api.tunes.retrieve(created.id)).callback as string;
    expect(held).toBe(signedUrl('tune', 'job-a'));
    expect(signer.verify('tune', { workflowId: 'job-a', runId: 'run-1' }, new URL(held).searchParams.get('sig')!)).toBe(
      true,
    );
    expect(created.callback).toBe(redacted(held));
    expect(JSON.stringify(created)).not.toMatch(/[0-9a-f]{64}/);
  });

  test('a 504 after the tune was created: GatewayTimeout, retried after 60 s, and the retry finds the tune', async () => {
    const { api, activities } = account();
    const before = mock.stats().routes['POST /tunes'] ?? 0;
    mock.setFaults({ status504Rate: 1, faultRoutes: ['POST /tunes'], maxFaults: 1 });

    const failure = await failureOf(
      run(activities, 'createTune', { tune: tune('job-504') }, { workflowId: 'job-504' }),
    );
    expect(failure.type).toBe('GatewayTimeout');
    expect(failure.nonRetryable).toBe(false);
    expect(failure.nextRetryDelay).toBe('60 seconds');

    const retried = await run(
      activities,
      'createTune',
      { tune: tune('job-504') },
      { attempt: 2, workflowId: 'job-504' },
    );
    expect(retried.title).toBe('job-504');
    expect(mock.stats().routes['POST /tunes']).toBe(before + 1); // the retry looked, and did not POST again
    expect(await tuneCount(api)).toBe(1);
  });

  test("a retry finds the job's tune even when the server's clock ran far ahead (time skipping)", async () => {
    const { api, activities } = account();
    await run(activities, 'createTune', { tune: tune('job-skew') });
    await run(activities, 'createTune', { tune: tune('another-job') }); // newer: the scan meets it first
    const sixHoursAhead = Date.now() + 6 * 3600_000;
    const again = await run(
      activities,
      'createTune',
      { tune: tune('job-skew') },
      { attempt: 2, scheduledTimestampMs: sixHoursAhead },
    );
    expect(again.title).toBe('job-skew');
    expect(await tuneCount(api)).toBe(2);
  });

  test('a retry after a 500 that created nothing creates the tune once', async () => {
    const { api, activities } = account();
    mock.setFaults({ status500Rate: 1, faultRoutes: ['POST /tunes'], maxFaults: 1 });
    const failure = await failureOf(run(activities, 'createTune', { tune: tune('job-500') }));
    expect(failure.type).toBe('ServerError');
    expect(failure.nonRetryable).toBe(false);
    expect(failure.nextRetryDelay).toBeUndefined(); // the policy's 30 s backoff applies

    const created = await run(activities, 'createTune', { tune: tune('job-500') }, { attempt: 2 });
    expect(created.title).toBe('job-500');
    expect(await tuneCount(api)).toBe(1);
  });

  test('the look-up is one GET /tunes?title= call however many tunes the account has', async () => {
    const { api, activities } = account();
    await run(activities, 'createTune', { tune: tune('job-title') });
    for (let i = 0; i < 125; i++) await api.tunes.create(tune(`other-${i}`)); // more than a page, all newer
    const [lists, posts] = [mock.stats().routes['GET /tunes'] ?? 0, mock.stats().routes['POST /tunes']];
    const found = await run(activities, 'createTune', { tune: tune('job-title') }, { attempt: 2 });
    expect(found.title).toBe('job-title');
    expect(mock.stats().routes['GET /tunes']).toBe(lists + 1);
    expect(mock.stats().routes['POST /tunes']).toBe(posts);
  });

  test('where ?title= is not honoured, the look-up pages the account newest first and still finds the tune', async () => {
    // A service that ignores `title`: 130 tunes, the job's the oldest, paged by before_id.
    const tunes = Array.from({ length: 130 }, (_, i) => ({ id: 1000 + i, title: i === 0 ? 'job-old' : `t-${i}` }));
    const { url, queries } = await serveKeysetList(tunes);
    const { activities } = account(url);
    const found = await run(activities, 'createTune', { tune: tune('job-old') }, { attempt: 2 });
    expect(found).toMatchObject({ id: 1000, title: 'job-old' });
    expect(queries).toEqual(['/tunes?title=job-old&limit=120', '/tunes?before_id=1010&limit=120']);
  });

  test('the first attempt does not look (no list call)', async () => {
    const { activities } = account();
    const lists = mock.stats().routes['GET /tunes'] ?? 0;
    await run(activities, 'createTune', { tune: tune('job-first') });
    expect(mock.stats().routes['GET /tunes'] ?? 0).toBe(lists);
  });

  test('a training image path fails for good, naming it, on a worker without an upload directory', async () => {
    const { activities } = account();
    const before = requestsSoFar();
    const failure = await failureOf(
      run(activities, 'createTune', { tune: { title: 't', name: 'man', images: ['/etc/hostname'] } }),
    );
    expect(failure.type).toBe('InvalidInput');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toContain(
      'tune.images[0]: is a file path, and this worker reads none (no TUNEFLOW_UPLOAD_DIR)',
    );
    expect(requestsSoFar()).toBe(before);
  });
});

describe('the upload directory', () => {
  let root: string;
  let uploads: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'tuneflow-uploads-'));
    uploads = join(root, 'uploads');
    await mkdir(join(uploads, 'order-1'), { recursive: true });
    await writeFile(join(uploads, 'order-1', '1.png'), Buffer.from(PNG_1X1, 'base64'));
    await writeFile(join(root, 'secret.txt'), 'a token the worker can read');
    await symlink(join(root, 'secret.txt'), join(uploads, 'order-1', 'link.png'));
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  function withUploads() {
    const { api } = account();
    return { api, activities: createActivities({ api, callbacks: signer, uploadDir: uploads }) };
  }

  test('a file inside it, relative or absolute, is uploaded', async () => {
    const { activities } = withUploads();
    const relative = await run(activities, 'createTune', {
      tune: { title: 'u1', name: 'man', images: ['order-1/1.png'] },
    });
    const absolute = await run(activities, 'createTune', {
      tune: { title: 'u2', name: 'man', images: [join(uploads, 'order-1', '1.png')] },
    });
    expect(relative.orig_images).toHaveLength(1);
    expect(absolute.orig_images).toHaveLength(1);
  });

  test('a training image inside it is inspected as an upload (its file name reaches the service)', async () => {
    const { activities } = withUploads();
    await writeFile(join(uploads, 'order-1', 'dog__low_quality__.png'), Buffer.from(PNG_1X1, 'base64'));
    const image = { field: 'tune.images[0]', path: 'order-1/dog__low_quality__.png' };
    const found = await run(activities, 'inspectImage', { name: 'dog', image });
    // The 1x1 PNG is below the advised 512x512, by its bytes; low_quality by its name (the mock's hook).
    expect(found).toMatchObject({ field: 'tune.images[0]', image: image.path });
    expect(found.flags).toEqual(expect.arrayContaining(['low_resolution', 'low_quality']));
    const before = requestsSoFar();
    const outside = await failureOf(
      run(activities, 'inspectImage', { name: 'dog', image: { field: 'tune.images[1]', path: '/etc/hostname' } }),
    );
    expect(outside.type).toBe('InvalidInput');
    expect(outside.message).toContain('tune.images[1]: ');
    expect(requestsSoFar()).toBe(before);
  });

  test.each([
    ['a path outside it', '/etc/hostname'],
    ['a ".." that climbs out', 'order-1/../../secret.txt'],
    ['a symlink inside that points outside', 'order-1/link.png'],
    ['a file that is not there', 'order-1/2.png'],
    ['a directory', 'order-1'],
  ])('%s is refused, naming the field, and nothing is sent', async (_what, path) => {
    const { activities } = withUploads();
    const before = requestsSoFar();
    const tune = await failureOf(run(activities, 'createTune', { tune: { title: 'u3', name: 'man', images: [path] } }));
    const prompt = await failureOf(
      run(activities, 'createPrompt', {
        tuneId: 1,
        prompt: { text: 'x', input_image: path, controlnet: 'canny' },
        key: '0',
      }),
    );
    const checked = await failureOf(
      run(activities, 'checkUploads', { paths: [{ field: 'prompts[3].mask_image', path }] }),
    );
    for (const failure of [tune, prompt, checked]) {
      expect(failure.type).toBe('InvalidInput');
      expect(failure.nonRetryable).toBe(true);
    }
    expect(tune.message).toContain('tune.images[0]: ');
    expect(prompt.message).toContain('prompt.input_image: ');
    expect(checked.message).toContain('prompts[3].mask_image: ');
    expect(requestsSoFar()).toBe(before);
  });
});

describe('createPrompt', () => {
  async function trainedTune(activities: TuneflowActivities, title: string) {
    return run(activities, 'createTune', { tune: tune(title) }, { workflowId: title });
  }

  test('creates the prompt with a signed prompt callback carrying its key', async () => {
    const { activities } = account();
    const t = await trainedTune(activities, 'job-p');
    const prompt = await run(
      activities,
      'createPrompt',
      { tuneId: t.id, prompt: { text: 'ohwx woman' }, key: 'p0' },
      { workflowId: 'job-p' },
    );
    expect(prompt.tune_id).toBe(t.id);
    expect(prompt.callback).toBe(redacted(signedUrl('prompt', 'job-p', { key: 'p0' })));
  });

  test('a 504 after the prompt was created: the retry finds it by its considered attributes', async () => {
    const { api, activities } = account();
    const t = await trainedTune(activities, 'job-p504');
    mock.setFaults({ status504Rate: 1, faultRoutes: ['POST /tunes/:id/prompts'], maxFaults: 1 });
    const input = { tuneId: t.id, prompt: { text: 'ohwx woman, portrait', num_images: 2, seed: 7 }, key: 'p0' };
    const failure = await failureOf(run(activities, 'createPrompt', input, { workflowId: 'job-p504' }));
    expect(failure.type).toBe('GatewayTimeout');
    expect(failure.nextRetryDelay).toBe('60 seconds');

    const posts = mock.stats().routes['POST /tunes/:id/prompts'];
    const found = await run(activities, 'createPrompt', input, { attempt: 2, workflowId: 'job-p504' });
    expect(mock.stats().routes['POST /tunes/:id/prompts']).toBe(posts);
    expect(found.text).toBe('ohwx woman, portrait');
    expect(await api.prompts.list(t.id)).toHaveLength(1);
  });

  test("a retry finds the prompt an earlier release's attempt made (its callback signed without a run ID)", async () => {
    const { api, activities } = account();
    const t = await trainedTune(activities, 'job-upgrade');
    // The first attempt ran before the upgrade: the URL it sent had no run ID and another signature.
    const earlier = `${signer.baseUrl}/callbacks/prompt?workflowId=job-upgrade&sig=${'ab'.repeat(32)}&key=p0`;
    await api.prompts.create(t.id, { text: 'ohwx woman', seed: 3, callback: earlier });
    const posts = mock.stats().routes['POST /tunes/:id/prompts'];
    const input = { tuneId: t.id, prompt: { text: 'ohwx woman', seed: 3 }, key: 'p0' };
    const found = await run(activities, 'createPrompt', input, { attempt: 2, workflowId: 'job-upgrade' });
    expect(mock.stats().routes['POST /tunes/:id/prompts']).toBe(posts);
    expect(await api.prompts.list(t.id)).toHaveLength(1);
    expect(found.text).toBe('ohwx woman');
    // Another key or another workflow is another prompt.
    expect(sameCallback(earlier, earlier.replace('key=p0', 'key=p1'))).toBe(false);
    expect(sameCallback(earlier, earlier.replace('job-upgrade', 'job-other'))).toBe(false);
  });

  test('a retry does not mistake another prompt of the job (same text, other key) for its own', async () => {
    const { api, activities } = account();
    const t = await trainedTune(activities, 'job-twins');
    const first = await run(
      activities,
      'createPrompt',
      { tuneId: t.id, prompt: { text: 'same' }, key: 'p0' },
      { workflowId: 'job-twins' },
    );
    const second = await run(
      activities,
      'createPrompt',
      { tuneId: t.id, prompt: { text: 'same' }, key: 'p1' },
      { attempt: 3, workflowId: 'job-twins' },
    );
    expect(second.id).not.toBe(first.id);
    expect(await api.prompts.list(t.id)).toHaveLength(2);
  });

  test('a prompt posted to a Flux LoRA tune: the service says 422, Validation, never retried, with field errors', async () => {
    // The service notes' 422 (the mock's default runs such a prompt on the base tune, as production clients report).
    const refusing = await startMockService({ trainingTime: '200ms', inferenceTime: '100ms', loraPrompts: 'refuse' });
    afterThis.push(() => refusing.close());
    const { activities } = account(refusing.url);
    const lora = await run(activities, 'createTune', {
      tune: {
        ...tune('job-lora'),
        branch: 'flux1',
        model_type: 'lora',
        preset: 'flux-lora-portrait',
        base_tune_id: 1504944,
      },
    });
    const failure = await failureOf(
      run(activities, 'createPrompt', { tuneId: lora.id, prompt: { text: 'x' }, key: 'p0' }),
    );
    expect(failure.type).toBe('Validation');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toContain('422');
    expect(failure.message).toContain('model_type=lora is not supported');
    expect(failure.details?.[0]).toMatchObject({ status: 422 });
  });

  test('bad input is refused before any request: InvalidInput, never retried, naming the field', async () => {
    const { activities } = account();
    const posts = mock.stats().routes['POST /tunes/:id/prompts'] ?? 0;
    const failure = await failureOf(
      run(activities, 'createPrompt', { tuneId: 1, prompt: { text: 'x', w: 500 }, key: 'p0' }),
    );
    expect(failure.type).toBe('InvalidInput');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toContain('prompt.w');
    expect(mock.stats().routes['POST /tunes/:id/prompts'] ?? 0).toBe(posts);
  });
});

describe('answers as the live service renders them (the mock in rails style)', () => {
  let rails: Mock;
  beforeAll(async () => {
    rails = await startMockService({ trainingTime: '200ms', inferenceTime: '100ms', answerStyle: 'rails' });
  });
  afterAll(() => rails.close());
  beforeEach(() => rails.setFaults({}));

  test('creates, lists and reads prompts answered with decimals as strings and creates as one-element arrays', async () => {
    const { api, activities } = account(rails.url);
    const t = await run(activities, 'createTune', { tune: tune('job-rails') }, { workflowId: 'job-rails' });
    const input = { tuneId: t.id, prompt: { text: 'ohwx woman', cfg_scale: 3, aspect_ratio: '1:1' }, key: 'p0' };
    const prompt = await run(activities, 'createPrompt', input, { workflowId: 'job-rails' });
    expect(prompt).toMatchObject({ tune_id: t.id, cfg_scale: '3.0', negative_prompt: '', aspect_ratio: '1:1' });
    expect(Array.isArray(prompt)).toBe(false);
    const listed = await run(activities, 'listPrompts', { tuneId: t.id });
    expect(listed).toEqual([expect.objectContaining({ id: prompt.id, cfg_scale: '3.0' })]);
    expect(await run(activities, 'retrievePrompt', { tuneId: t.id, promptId: prompt.id })).toMatchObject({
      id: prompt.id,
      cfg_scale: '3.0',
    });
    expect(await api.prompts.list(t.id)).toHaveLength(1);
  });

  test('a multipart tune on the gallery base 690204 with characteristics as a JSON string, and its prompt', async () => {
    const { api } = account(rails.url);
    const dir = await mkdtemp(join(tmpdir(), 'tuneflow-activities-'));
    afterThis.push(() => rm(dir, { recursive: true, force: true }));
    const activities = createActivities({ api, callbacks: signer, uploadDir: dir });
    await writeFile(join(dir, 'dog.png'), Buffer.from(PNG_1X1, 'base64'));
    const spec = {
      title: 'job-690204',
      name: 'dog',
      base_tune_id: 690204,
      images: ['dog.png'],
      characteristics: '{"fur":"grey"}',
      workspace_id: 'ws-1',
    };
    const created = await run(activities, 'createTune', { tune: spec }, { workflowId: 'job-690204' });
    expect(created).toMatchObject({ base_tune_id: 690204, branch: 'sd15' });
    expect(created.characteristics).toEqual({ fur: 'grey' });
    const input = { tuneId: 690204, prompt: { text: 'sks dog, {{fur}} fur', resolution: '1080p' }, key: 'p0' };
    const prompt = await run(activities, 'createPrompt', input, { workflowId: 'job-690204' });
    expect(prompt).toMatchObject({ tune_id: 690204, resolution: '1080p' });
    expect((await api.prompts.retrieveById(prompt.id)).tune_id).toBe(690204);
  });

  test('a prompt create answered with a body cut short is not made twice: the retry finds it ("3.0" is 3)', async () => {
    const { api, activities } = account(rails.url);
    const t = await run(activities, 'createTune', { tune: tune('job-garbled') }, { workflowId: 'job-garbled' });
    rails.setFaults({ garbledAnswerRate: 1, faultRoutes: ['POST /tunes/:id/prompts'], maxFaults: 1 });
    const input = { tuneId: t.id, prompt: { text: 'ohwx woman', cfg_scale: 3, seed: 9 }, key: 'p0' };
    const posts = rails.stats().routes['POST /tunes/:id/prompts'] ?? 0;
    const failure = await failureOf(run(activities, 'createPrompt', input, { workflowId: 'job-garbled' }));
    expect(failure.type).toBe('UnexpectedResponse');
    expect(failure.nonRetryable).toBe(false);

    const found = await run(activities, 'createPrompt', input, { attempt: 2, workflowId: 'job-garbled' });
    expect(found).toMatchObject({ tune_id: t.id, cfg_scale: '3.0' });
    expect(rails.stats().routes['POST /tunes/:id/prompts']).toBe(posts + 1);
    expect(rails.stats().faults.injected).toBe(1);
    expect((await api.prompts.list(t.id)).map((p) => p.id)).toEqual([found.id]);
  });

  test('a tune create answered with a body cut short is not made twice: the retry finds it by title', async () => {
    const { api, activities } = account(rails.url);
    rails.setFaults({ garbledAnswerRate: 1, faultRoutes: ['POST /tunes'], maxFaults: 1 });
    const failure = await failureOf(run(activities, 'createTune', { tune: tune('job-garbled-tune') }));
    expect(failure.type).toBe('UnexpectedResponse');
    const found = await run(activities, 'createTune', { tune: tune('job-garbled-tune') }, { attempt: 2 });
    expect(found.title).toBe('job-garbled-tune');
    expect((await api.tunes.list()).map((t) => t.id)).toEqual([found.id]);
  });
});

describe('reads, lists and deletes', () => {
  test('listPrompts returns the prompts from minId up, in one list call', async () => {
    const { activities } = account();
    const t = await run(activities, 'createTune', { tune: tune('job-list') });
    const ids = await createPrompts(activities, t.id, ['a', 'b', 'c'], 'job-list');
    const lists = mock.stats().routes['GET /tunes/:id/prompts'] ?? 0;
    const listed = await run(activities, 'listPrompts', { tuneId: t.id, minId: ids[1] });
    expect(listed.map((p) => p.id).sort()).toEqual([ids[1], ids[2]].sort());
    expect(mock.stats().routes['GET /tunes/:id/prompts']).toBe(lists + 1);
  });

  test('listPrompts with a limit reads only the newest prompts, in one small call', async () => {
    const { activities } = account();
    const t = await run(activities, 'createTune', { tune: tune('job-limit') });
    const ids = await createPrompts(activities, t.id, ['a', 'b', 'c'], 'job-limit');
    const newest = await run(activities, 'listPrompts', { tuneId: t.id, limit: 1 });
    expect(newest.map((p) => p.id)).toEqual([Math.max(...ids)]);
  });

  test("listPrompts with promptIds returns only the job's prompts, in 1 + (pushed off the page) calls", async () => {
    const { api, activities } = account();
    const t = await run(activities, 'createTune', { tune: tune('job-own') });
    const others = (n: number) =>
      Promise.all(Array.from({ length: n }, (_, i) => api.prompts.create(t.id, { text: `other job ${i}` })));
    const [first] = await createPrompts(activities, t.id, ['a'], 'job-own');
    await others(130); // more than a page between the job's first and last prompt
    const [second, gone] = await createPrompts(activities, t.id, ['b', 'c'], 'job-own');
    await others(300); // made after the job's prompts: never read
    await api.prompts.delete(t.id, gone);
    const before = { ...mock.stats().routes };
    const listed = await run(activities, 'listPrompts', { tuneId: t.id, promptIds: [first, second, gone] });
    expect(listed.map((p) => p.id)).toEqual([second, first]); // newest first; the deleted one left out
    const after = mock.stats().routes;
    const calls = (route: string) => (after[route] ?? 0) - (before[route] ?? 0);
    // One page from the job's newest prompt down; by id the one it did not reach and the deleted one (404).
    expect(calls('GET /tunes/:id/prompts')).toBe(1);
    expect(calls('GET /tunes/:tune_id/prompts/:id')).toBe(2);
    expect(await run(activities, 'listPrompts', { tuneId: t.id, promptIds: [] })).toEqual([]);
  });

  test("listPrompts with promptIds on a busy tune reads a page only as long as the job's ids span", async () => {
    // A shared base tune: others' prompts before, between and after the job's (105, 108, 110).
    const prompts = Array.from({ length: 200 }, (_, i) => ({ id: 1 + i, tune_id: 7, text: `p${1 + i}`, images: [] }));
    const { url, queries } = await serveKeysetList(prompts);
    const { activities } = account(url);
    const listed = await run(activities, 'listPrompts', { tuneId: 7, promptIds: [108, 105, 110] });
    expect(listed.map((p) => p.id)).toEqual([110, 108, 105]);
    // 110 - 105 + 1 = 6 prompts at most between them: none older than 105 is read, and none needs a read by id.
    expect(queries).toEqual(['/tunes/7/prompts?before_id=111&limit=6']);
  });

  test("listPrompts with promptIds: ids other tunes took make the page run past the job's oldest, never short of it", async () => {
    // The tune holds the even ids only (the odd ones went to other tunes); the job's 113 is gone.
    const prompts = Array.from({ length: 200 }, (_, i) => ({ id: 2 * (i + 1), tune_id: 7, text: 'p', images: [] }));
    const { url, queries } = await serveKeysetList(prompts);
    const { activities } = account(url);
    const listed = await run(activities, 'listPrompts', { tuneId: 7, promptIds: [104, 113, 110] });
    expect(listed.map((p) => p.id)).toEqual([110, 104]);
    // 10 prompts down from 113: 112 to 94, so both of the job's live ones; the gone one read by id.
    expect(queries).toEqual(['/tunes/7/prompts?before_id=114&limit=10', '/tunes/7/prompts/113']);
  });

  test('retrieveTune of an unknown tune: NotFound, never retried', async () => {
    const { activities } = account();
    const failure = await failureOf(run(activities, 'retrieveTune', { tuneId: 999_999_999 }));
    expect(failure.type).toBe('NotFound');
    expect(failure.nonRetryable).toBe(true);
  });

  test('deletes are idempotent: a tune already gone counts as deleted', async () => {
    const { api, activities } = account();
    const t = await run(activities, 'createTune', { tune: tune('job-del') });
    await run(activities, 'deleteTune', { tuneId: t.id });
    await run(activities, 'deleteTune', { tuneId: t.id });
    await expect(api.tunes.retrieve(t.id)).rejects.toMatchObject({ status: 404 });
  });

  test('createPackTune requests the tune, per-prompt and all-prompts callbacks', async () => {
    const { api, activities } = account();
    const [pack] = await api.packs.list();
    const klass = Object.keys(pack.cost_mc_hash ?? {})[0];
    const created = await run(
      activities,
      'createPackTune',
      { packId: pack.id, tune: { title: 'job-pack', name: klass, image_urls: ['https://img.example.com/1.png'] } },
      { workflowId: 'job-pack' },
    );
    expect(created.title).toBe('job-pack');
    const prompts = await api.prompts.list(created.id);
    expect(prompts.length).toBeGreaterThan(0);
    for (const p of prompts) expect(p.callback).toBe(signedUrl('prompt', 'job-pack', { key: 'pack' }));
    expect(JSON.stringify(created)).not.toMatch(/[0-9a-f]{64}/);
  });
});

describe('inspectImage', () => {
  test('a URL is inspected by file_url: the flags raised, and the rest as characteristics without the class name', async () => {
    const { api, activities } = account();
    const image = { field: 'tune.image_urls[1]', url: 'https://img.example.com/2__blurry____selfie__.png' };
    const found = await run(activities, 'inspectImage', { name: 'woman', image });
    const answer = await api.images.inspect({ name: 'woman', file_url: image.url });
    expect(found).toEqual({
      field: 'tune.image_urls[1]',
      image: image.url,
      flags: INSPECTION_FLAGS.filter((flag) => answer[flag] === true),
      characteristics: {
        age: answer.age,
        ethnicity: answer.ethnicity,
        eye_color: answer.eye_color,
        hair_color: answer.hair_color,
      },
    });
    expect(found.flags).toEqual(expect.arrayContaining(['blurry', 'selfie']));
  });

  test('a 500 is ServerError, retryable: a retry asks again, nothing else changes on the service', async () => {
    const { activities } = account();
    mock.setFaults({ status500Rate: 1, faultRoutes: ['POST /images/inspect'], maxFaults: 1 });
    const image = { field: 'tune.image_urls[0]', url: 'https://img.example.com/1.png' };
    const failure = await failureOf(run(activities, 'inspectImage', { name: 'dog', image }));
    expect(failure.type).toBe('ServerError');
    expect(failure.nonRetryable).toBe(false);
    expect((await run(activities, 'inspectImage', { name: 'dog', image }, { attempt: 2 })).field).toBe(
      'tune.image_urls[0]',
    );
  });

  test('what the run keeps of an answer is bounded: scalars, at most 50, keys and strings of 256 characters', () => {
    const answer = {
      name: 'dog',
      blurry: true,
      selfie: false,
      low_quality: null,
      note: 'x'.repeat(1000),
      [`k${'y'.repeat(300)}`]: 'long key',
      nested: { a: 1 },
      list: [1],
      ...Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`c${i}`, i])),
    };
    const kept = briefInspection({ field: 'tune.images[0]', path: 'order-1/1.png' }, answer);
    expect(kept.image).toBe('order-1/1.png');
    expect(kept.flags).toEqual(['blurry']);
    expect(Object.keys(kept.characteristics)).toHaveLength(50);
    expect(kept.characteristics.note).toBe('x'.repeat(256));
    for (const key of ['name', 'nested', 'list', 'blurry', 'selfie', 'low_quality'])
      expect(kept.characteristics).not.toHaveProperty(key);
  });
});

describe('brief answers (what a wait reads and the result gives, done or not)', () => {
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  /** What the workflows read of an object they wait for: each field must survive a brief answer. */
  const TUNE_READS = ['id', 'eta', 'created_at', 'started_training_at', 'trained_at', 'updated_at', 'model_type'];
  const PROMPT_READS = ['id', 'tune_id', 'images', 'user_error', 'started_training_at', 'updated_at', 'pack_id'];
  const callbackOf = (url: string) => url.slice(0, url.indexOf('?'));

  test('a tune comes back with what a wait reads and the result gives, in training and trained alike', async () => {
    const { api, activities } = account();
    const created = await run(activities, 'createTune', { tune: tune('job-brief'), brief: true }, { workflowId: 'b' });
    const full = await api.tunes.retrieve(created.id);
    expect(full.trained_at).toBeNull();
    for (const field of [...TUNE_READS, ...RESULT_TUNE_FIELDS]) expect(created[field]).toEqual(full[field]);
    // The callback without its query: the run reads only that there is one.
    expect(full.callback).toContain('?');
    expect(created.callback).toBe(callbackOf(full.callback as string));
    for (const field of ['orig_images', 'url', 'ckpt_urls', 'args']) {
      expect(full).toHaveProperty(field);
      expect(created).not.toHaveProperty(field);
    }
    expect(JSON.stringify(created).length).toBeLessThan(JSON.stringify(full).length * 0.6);

    const polled = await run(activities, 'retrieveTune', { tuneId: created.id, brief: true });
    expect(Object.keys(polled).sort()).toEqual(Object.keys(created).sort());
    await sleep(400); // the mock trains in 200 ms
    const trained = await run(activities, 'retrieveTune', { tuneId: created.id, brief: true });
    const whole = await run(activities, 'retrieveTune', { tuneId: created.id });
    expect(trained.trained_at).toBeTruthy();
    expect(Object.keys(trained).sort()).toEqual(Object.keys(created).sort());
    for (const field of RESULT_TUNE_FIELDS) expect(trained[field]).toEqual(whole[field]);
    expect(whole).toHaveProperty('orig_images');
    expect(trained).not.toHaveProperty('orig_images');
  });

  test('a prompt comes back with what a wait reads and the result gives, settled or not', async () => {
    const { activities } = account();
    const t = await run(activities, 'createTune', { tune: tune('job-brief-prompts') });
    await sleep(400);
    const prompt = { text: 'sks dog', num_images: 2, seed: 7 };
    const created = await run(
      activities,
      'createPrompt',
      { tuneId: t.id, prompt, key: '0', brief: true },
      { workflowId: 'bp' },
    );
    expect(created.images ?? []).toEqual([]);
    for (const field of [...PROMPT_READS.filter((f) => f !== 'pack_id'), 'text', 'callback', 'cost_mc', 'num_images'])
      expect(created).toHaveProperty(field);
    expect(created.callback).toMatch(/\/callbacks\/prompt$/);
    for (const field of ['seed', 'url']) expect(created).not.toHaveProperty(field);

    await sleep(400); // the mock generates in 100 ms
    const [settled] = await run(activities, 'listPrompts', { tuneId: t.id, promptIds: [created.id], brief: true });
    const [whole] = await run(activities, 'listPrompts', { tuneId: t.id, promptIds: [created.id] });
    expect(settled.images?.length).toBe(2);
    for (const field of RESULT_PROMPT_FIELDS.filter((f) => f in whole)) expect(settled[field]).toEqual(whole[field]);
    expect(whole).toMatchObject({ num_images: 2, seed: 7 });
    expect(settled).not.toHaveProperty('seed');
  });

  test("a pack's prompts in a brief listing keep pack_id, which a pack's claim reads", async () => {
    const { api, activities } = account();
    const [pack] = await api.packs.list();
    const klass = Object.keys(pack.cost_mc_hash ?? {})[0];
    const spec = { title: 'job-brief-pack', name: klass, image_urls: ['https://img.example.com/1.png'] };
    const created = await run(activities, 'createPackTune', { packId: pack.id, tune: spec, brief: true });
    const listed = await run(activities, 'listPrompts', { tuneId: created.id, minId: 0, brief: true });
    expect(listed.length).toBeGreaterThan(0);
    for (const p of listed) {
      expect(p.images ?? []).toEqual([]);
      expect(p.pack_id).toBe(pack.id);
      expect(p).not.toHaveProperty('url');
    }
  });
});

describe('createPackTune on reused tunes (tune_ids)', () => {
  test('a 504 after the pack prompts were created: the retry finds them and creates none again', async () => {
    const { api, activities } = account();
    const [pack] = await api.packs.list();
    const klass = Object.keys(pack.cost_mc_hash ?? {})[0];
    const own = await run(activities, 'createTune', { tune: { ...tune('job-reuse-base'), name: klass } });
    mock.setFaults({ status504Rate: 1, faultRoutes: ['POST /p/:pack_id/tunes'], maxFaults: 1 });
    const input = { packId: pack.id, tune: { title: 'job-reuse', tune_ids: [own.id] } };
    const failure = await failureOf(run(activities, 'createPackTune', input, { workflowId: 'job-reuse' }));
    expect(failure.type).toBe('GatewayTimeout');
    const afterFirst = (await api.prompts.list(own.id)).length;
    expect(afterFirst).toBeGreaterThan(0);

    const again = await run(activities, 'createPackTune', input, { attempt: 2, workflowId: 'job-reuse' });
    expect(again.id).toBe(own.id);
    expect(await api.prompts.list(own.id)).toHaveLength(afterFirst);
  });
});

describe('error mapping over the wire', () => {
  test('429 with Retry-After: RateLimited, retried after Retry-After', async () => {
    const { activities } = account();
    mock.setFaults({ status429Rate: 1, maxFaults: 1 });
    const failure = await failureOf(run(activities, 'retrieveTune', { tuneId: 1 }));
    expect(failure.type).toBe('RateLimited');
    expect(failure.nonRetryable).toBe(false);
    expect(failure.nextRetryDelay).toBe(1000);
  });

  test('401: Unauthorized, never retried, and the API key is nowhere in the failure', async () => {
    const strict = await startMockService({ port: 0, apiKeys: ['the-only-good-key-0123456789'] });
    try {
      const { apiKey, activities } = account(strict.url);
      const failure = await failureOf(run(activities, 'retrieveTune', { tuneId: 1 }));
      expect(failure.type).toBe('Unauthorized');
      expect(failure.nonRetryable).toBe(true);
      expect(JSON.stringify({ m: failure.message, d: failure.details, s: failure.stack })).not.toContain(apiKey);
    } finally {
      await strict.close();
    }
  });

  test('a refused connection: ConnectionFailure, retried', async () => {
    const server = http.createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    await new Promise<void>((r) => server.close(() => r()));
    const { activities } = account(`http://127.0.0.1:${port}`);
    const failure = await failureOf(run(activities, 'retrieveTune', { tuneId: 1 }));
    expect(failure.type).toBe('ConnectionFailure');
    expect(failure.nonRetryable).toBe(false);
  });

  test('no answer in time: ClientTimeout, retried', async () => {
    const silent = http.createServer(() => undefined);
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    try {
      const { activities } = account(`http://127.0.0.1:${(silent.address() as AddressInfo).port}`, '200ms');
      const failure = await failureOf(run(activities, 'retrieveTune', { tuneId: 1 }));
      expect(failure.type).toBe('ClientTimeout');
      expect(failure.nonRetryable).toBe(false);
    } finally {
      silent.closeAllConnections();
      await new Promise<void>((r) => silent.close(() => r()));
    }
  });
});

describe('toApplicationFailure', () => {
  const req = { method: 'GET', path: '/tunes' };
  test.each([
    [400, { error: 'offset above 200: use before_id' }, 'OffsetTooDeep', true],
    [400, { error: 'bad' }, 'BadRequest', true],
    [401, {}, 'Unauthorized', true],
    [403, {}, 'Unauthorized', true],
    [404, {}, 'NotFound', true],
    [422, { name: ['is not a class of this pack'] }, 'Validation', true],
    [500, {}, 'ServerError', false],
    [502, {}, 'ServerError', false],
    [504, {}, 'GatewayTimeout', false],
  ])('%i %j -> %s (nonRetryable %s)', (status, body, type, nonRetryable) => {
    const failure = toApplicationFailure(APIError.generate(status, req, body)) as ApplicationFailure;
    expect(failure.type).toBe(type);
    expect(failure.nonRetryable).toBe(nonRetryable);
  });

  test("a short Retry-After never shortens the policy's own backoff", () => {
    const retryPolicy = {
      initialInterval: '30 seconds',
      backoffCoefficient: 2,
      maximumInterval: '10 minutes',
    } as const;
    const short = new RateLimitError(429, 'GET', '/tunes', {}, 1000);
    const long = new RateLimitError(429, 'GET', '/tunes', {}, 300_000);
    const delay = (err: RateLimitError, attempt: number) =>
      (toApplicationFailure(err, { attempt, retryPolicy }) as ApplicationFailure).nextRetryDelay;
    expect(delay(short, 1)).toBe(30_000);
    expect(delay(short, 3)).toBe(120_000);
    expect(delay(short, 12)).toBe(600_000); // the ceiling
    expect(delay(long, 1)).toBe(300_000); // the service asked for longer
    expect(backoffMs({ attempt: 2, retryPolicy: { initialInterval: '30 seconds' } })).toBe(60_000);
  });

  test('429 without Retry-After waits 60 seconds', () => {
    const failure = toApplicationFailure(new RateLimitError(429, 'GET', '/tunes', {})) as ApplicationFailure;
    expect(failure.nextRetryDelay).toBe('60 seconds');
  });

  test('422 carries the field errors', () => {
    const failure = toApplicationFailure(
      APIError.generate(422, req, { name: ['is not a class'] }),
    ) as ApplicationFailure;
    expect(failure.details?.[0]).toMatchObject({ fieldErrors: { name: ['is not a class'] } });
  });

  test('anything else passes through untouched', () => {
    const err = new Error('boom');
    expect(toApplicationFailure(err)).toBe(err);
  });
});
