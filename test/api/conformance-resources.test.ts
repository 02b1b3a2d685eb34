/**
 * The client against the mock service, endpoint by endpoint: tunes (JSON and multipart), prompts, packs, likes,
 * image inspection, themes, and lists paged with `before_id`. Real HTTP on loopback; every account is a fresh key,
 * so each test sees only its own objects.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isPromptSettled, isTuneTrained, NotFoundError, type Prompt, type Tune, TunesApi } from '../../src/api';
import { until, useMockAccounts } from './mock-accounts';

const FLUX_BASE = 1504944;
const URLS = ['https://example.com/train/1.jpg', 'https://example.com/train/2.jpg'];
// A 1x1 PNG: a real image for the multipart uploads.
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
  'base64',
);

const { mock, account } = useMockAccounts({ trainingTime: '400ms', inferenceTime: '300ms' });
let dir: string;

const trained = (api: TunesApi, tune: Tune) => until(() => api.tunes.retrieve(tune.id), isTuneTrained);
const settled = (api: TunesApi, prompt: Prompt) =>
  until(() => api.prompts.retrieve(prompt.tune_id, prompt.id), isPromptSettled);

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tuneflow-conformance-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('tunes', () => {
  test('create with image_urls (JSON), retrieve until trained, delete', async () => {
    const api = account();
    const tune = await api.tunes.create({
      title: 'order-1',
      name: 'woman',
      branch: 'fast',
      image_urls: URLS,
      characteristics: { eye_color: 'blue eyes' },
    });
    expect(tune).toMatchObject({ title: 'order-1', name: 'woman', branch: 'fast' });
    expect(tune.id).toEqual(expect.any(Number));
    expect(tune.orig_images).toHaveLength(2);

    const done = await trained(api, tune);
    expect(done.trained_at).toEqual(expect.any(String));
    expect(done.id).toBe(tune.id);

    await expect(api.tunes.delete(tune.id)).resolves.toEqual(expect.any(Object));
    await expect(api.tunes.retrieve(tune.id)).rejects.toBeInstanceOf(NotFoundError);
  });

  test('create with images as a path, a Buffer and a Blob (multipart)', async () => {
    const api = account();
    const path = join(dir, 'face.png');
    await writeFile(path, PNG);
    const tune = await api.tunes.create({
      title: 'order-2',
      name: 'man',
      branch: 'fast',
      images: [path, PNG, new Blob([PNG], { type: 'image/png' })],
      face_crop: true,
      model_type: null,
      characteristics: { eye_color: 'green eyes', age: 30 },
      prompts_attributes: [{ text: 'ohwx man, portrait, {{eye_color}}', num_images: 2, w: 512, h: 512 }],
    });
    expect(tune).toMatchObject({ title: 'order-2', name: 'man' });
    expect(tune.orig_images).toHaveLength(3);
    // prompts_attributes arrived in bracket notation: the prompt exists, with the characteristic substituted.
    const prompts = await api.prompts.list(tune.id);
    expect(prompts).toHaveLength(1);
    expect(prompts[0]).toMatchObject({ tune_id: tune.id, text: 'ohwx man, portrait, green eyes' });
  });

  test('a Flux LoRA is trained on the base tune and prompted through it with <lora:ID:1>', async () => {
    const api = account();
    const lora = await api.tunes.create({
      title: 'order-3',
      name: 'woman',
      branch: 'flux1',
      model_type: 'lora',
      preset: 'flux-lora-portrait',
      base_tune_id: FLUX_BASE,
      image_urls: URLS,
    });
    expect(lora).toMatchObject({ model_type: 'lora', base_tune_id: FLUX_BASE });
    await trained(api, lora);
    const prompt = await api.prompts.create(FLUX_BASE, { text: `<lora:${lora.id}:1> ohwx woman, studio portrait` });
    expect(prompt.tune_id).toBe(FLUX_BASE);
    const done = await settled(api, prompt);
    expect(done.images?.length).toBeGreaterThan(0);
  });

  test('list: a page when awaited, every tune when iterated with before_id, stopping at the end', async () => {
    const api = account();
    const created: number[] = [];
    for (let i = 0; i < 7; i++) {
      const tune = await api.tunes.create({ title: `page-${i}`, name: 'dog', branch: 'fast', image_urls: URLS });
      created.push(tune.id);
    }
    const newestFirst = [...created].reverse();
    const firstPage = await api.tunes.list({ limit: 3 });
    expect(firstPage.map((t) => t.id)).toEqual(newestFirst.slice(0, 3));
    expect((await api.tunes.list({ limit: 3, offset: 3 })).map((t) => t.id)).toEqual(newestFirst.slice(3, 6));

    const before = mock().stats().routes['GET /tunes'] ?? 0;
    const seen: number[] = [];
    for await (const tune of api.tunes.list({ limit: 3 })) seen.push(tune.id);
    expect(seen).toEqual(newestFirst);
    // Pages of 3, 3 and 1: the short page ends it.
    expect((mock().stats().routes['GET /tunes'] ?? 0) - before).toBe(3);

    const six: number[] = [];
    const beforeSix = mock().stats().routes['GET /tunes'] ?? 0;
    for await (const tune of api.tunes.list({ limit: 3, before_id: newestFirst[0] })) six.push(tune.id);
    expect(six).toEqual(newestFirst.slice(1));
    // Pages of 3, 3 and an empty one that ends it.
    expect((mock().stats().routes['GET /tunes'] ?? 0) - beforeSix).toBe(3);
  });
});

describe('prompts', () => {
  let api: TunesApi;
  let tune: Tune;

  beforeAll(async () => {
    api = account();
    tune = await api.tunes.create({ title: 'prompts', name: 'woman', branch: 'fast', image_urls: URLS });
  });

  test('create, retrieve: the images appear after the inference time', async () => {
    const prompt = await api.prompts.create(tune.id, {
      text: 'ohwx woman, watercolor',
      num_images: 2,
      w: 512,
      h: 512,
      cfg_scale: 7.5,
      seed: 42,
      scheduler: 'euler_a',
    });
    expect(prompt).toMatchObject({ tune_id: tune.id, text: 'ohwx woman, watercolor', cfg_scale: 7.5, seed: 42 });
    // The tune is still training: no image yet.
    expect(isPromptSettled(prompt)).toBe(false);
    const done = await settled(api, prompt);
    expect(done.images).toHaveLength(2);
    for (const url of done.images ?? []) expect(url).toMatch(/^http/);
    expect(done.user_error ?? null).toBeNull();
  });

  test('create with an input image file (multipart) and controlnet', async () => {
    const prompt = await api.prompts.create(tune.id, {
      text: 'ohwx woman, pose',
      input_image: PNG,
      controlnet: 'pose',
    });
    expect(prompt).toMatchObject({ tune_id: tune.id, controlnet: 'pose' });
    expect(prompt.input_image).toEqual(expect.stringMatching(/^http/));
  });

  test('list per tune and globally; delete', async () => {
    const own = account();
    const t = await own.tunes.create({ title: 'list', name: 'cat', branch: 'fast', image_urls: URLS });
    const ids: number[] = [];
    for (let i = 0; i < 5; i++) ids.push((await own.prompts.create(t.id, { text: `sks cat ${i}` })).id);
    const newestFirst = [...ids].reverse();

    expect((await own.prompts.list(t.id, { limit: 2 })).map((p) => p.id)).toEqual(newestFirst.slice(0, 2));
    const all: number[] = [];
    for await (const p of own.prompts.list(t.id, { limit: 2 })) all.push(p.id);
    expect(all).toEqual(newestFirst);
    const global: number[] = [];
    for await (const p of own.prompts.listAll({ limit: 2 })) global.push(p.id);
    expect(global).toEqual(newestFirst);

    await expect(own.prompts.retrieve(t.id, ids[0])).resolves.toMatchObject({ id: ids[0] });
    await expect(own.prompts.delete(t.id, ids[0])).resolves.toEqual({ message: expect.any(String) });
    await expect(own.prompts.retrieve(t.id, ids[0])).rejects.toBeInstanceOf(NotFoundError);
    expect((await own.prompts.list(t.id)).map((p) => p.id)).toEqual(newestFirst.slice(0, 4));
  });

  test('likes: create and delete on an own prompt; a missing prompt is a 404', async () => {
    const prompt = await api.prompts.create(tune.id, { text: 'ohwx woman, liked' });
    await expect(api.likes.create(prompt.id)).resolves.toBeUndefined();
    await expect(api.likes.delete(prompt.id)).resolves.toBeUndefined();
    await expect(api.likes.create(999_999_999)).rejects.toBeInstanceOf(NotFoundError);
  });
});

describe('packs', () => {
  test('list and retrieve: supported classes are the keys of prompts_per_class', async () => {
    const api = account();
    const packs = await api.packs.list();
    expect(packs.length).toBeGreaterThan(0);
    for (const pack of packs) expect(pack).toMatchObject({ id: expect.any(Number), title: expect.any(String) });
    const detail = await api.packs.retrieve(packs[0].id);
    expect(detail.id).toBe(packs[0].id);
    const classes = Object.keys(detail.prompts_per_class ?? {});
    expect(classes.length).toBeGreaterThan(0);
    expect(Object.keys(detail.cost_mc_hash ?? {}).sort()).toEqual([...classes].sort());
  });

  test('createTune: a tune with the pack prompts of its class, prompt_attributes.callback applied', async () => {
    const api = account();
    const [pack] = await api.packs.list();
    const detail = await api.packs.retrieve(pack.id);
    const [name] = Object.keys(detail.prompts_per_class ?? {});
    const callback = 'http://127.0.0.1:9/prompt-done?job=pack-1';
    const tune = await api.packs.createTune(pack.id, {
      title: 'pack-order-1',
      name,
      image_urls: URLS,
      prompt_attributes: { callback },
    });
    expect(tune).toMatchObject({ title: 'pack-order-1', name });
    const prompts = await api.prompts.list(tune.id);
    expect(prompts).toHaveLength(detail.prompts_per_class?.[name]?.length ?? -1);
    for (const p of prompts) expect(p.callback).toBe(callback);
  });

  test('createTune with images uploaded (multipart)', async () => {
    const api = account();
    const [pack] = await api.packs.list();
    const [name] = Object.keys((await api.packs.retrieve(pack.id)).prompts_per_class ?? {});
    const tune = await api.packs.createTune(pack.id, { title: 'pack-order-2', name, images: [PNG, PNG] });
    expect(tune.orig_images).toHaveLength(2);
  });
});

describe('image inspection and themes', () => {
  test('inspect a file and a URL', async () => {
    const api = account();
    const fromFile = await api.images.inspect({ name: 'woman', file: PNG });
    // The 1x1 PNG is flagged as below the advised 512x512.
    expect(fromFile).toMatchObject({ low_resolution: true, blurry: expect.any(Boolean) });
    const fromUrl = await api.images.inspect({ name: 'man', file_url: URLS[0] });
    expect(fromUrl).toMatchObject({ eye_color: expect.any(String), selfie: expect.any(Boolean) });
  });

  test('a theme creates 10 prompts per tune, read back through the prompt list', async () => {
    const api = account();
    const tune = await api.tunes.create({ title: 'theme', name: 'man', branch: 'fast', image_urls: URLS });
    const answer = await api.themes.create({
      theme: 'astronaut',
      tune_ids: [tune.id],
      prompt_attributes: { num_images: 1, w: 512, h: 512 },
    });
    expect(answer).toBeUndefined(); // 201 with an empty body, as documented
    const prompts = await api.prompts.list(tune.id, { limit: 120 });
    expect(prompts).toHaveLength(10);
    for (const p of prompts) expect(p.text).toContain('astronaut');
  });
});
