/**
 * The mock's simulated time on real timers: tunes train, prompts wait for their tune and settle with real PNG
 * images, FaceID is immediate, Flux LoRAs load into the base tune, and deletes, themes, inspection and likes.
 */
import { inflateSync } from 'node:zlib';
import { request } from 'undici';
import { FLUX_BASE_TUNE, startMockService, type MockService } from '../../src/mock-service';
import { solidPng } from '../../src/mock-service/png';
import { INSPECTION_FLAGS } from '../../src/contract/inspection';
import { call, CallbackReceiver, multipart, until, type ErrorJson, type PromptJson, type TuneJson } from './loopback';

jest.setTimeout(20_000);

const TRAINING_MS = 300;
const DAY_MS = 24 * 3600 * 1000;
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
let mock: MockService;
let receiver: CallbackReceiver;
let keys = 0;

beforeAll(async () => {
  // loraPrompts 'refuse': the service notes' 422 (test/mock-service/production.test.ts covers the default, 'base').
  mock = await startMockService({ trainingTime: `${TRAINING_MS}ms`, inferenceTime: '150ms', loraPrompts: 'refuse' });
  receiver = await new CallbackReceiver().start();
});
afterAll(async () => {
  await mock.close();
  await receiver.close();
});

/** A fresh account per test. */
const newKey = () => `lifecycle-${++keys}`;

function tuneBody(extra: Record<string, unknown> = {}) {
  return { tune: { title: `t-${Math.random()}`, name: 'man', image_urls: ['https://images.test/1.jpg'], ...extra } };
}

async function createTune(key: string, extra: Record<string, unknown> = {}): Promise<TuneJson> {
  const res = await call<TuneJson>(mock.url, key, 'POST', '/tunes', tuneBody(extra));
  expect(res.status).toBe(201);
  return res.body;
}

const getTune = async (key: string, id: number) => (await call<TuneJson>(mock.url, key, 'GET', `/tunes/${id}`)).body;
const getPrompt = async (key: string, tuneId: number, id: number) =>
  (await call<PromptJson>(mock.url, key, 'GET', `/tunes/${tuneId}/prompts/${id}`)).body;
const trained = (key: string, id: number) =>
  until(
    () => getTune(key, id),
    (t) => t.trained_at !== null,
  );
const settled = (key: string, tuneId: number, id: number) =>
  until(
    () => getPrompt(key, tuneId, id),
    (p) => p.images.length > 0 || p.user_error !== null,
  );

describe('tunes', () => {
  test('train in simulated time: eta, then trained_at and expires_at 30 days later, then the callback', async () => {
    const key = newKey();
    const created = await createTune(key, { callback: `${receiver.url}/tune-1?job=abc&sig=x%20y` });
    for (const field of ['eta', 'created_at', 'updated_at', 'started_training_at', 'expires_at'] as const)
      expect(created[field]).toMatch(ISO);
    expect(Date.parse(created.eta) - Date.parse(created.created_at)).toBe(TRAINING_MS);
    expect(created.started_training_at).toBe(created.created_at);
    expect(created.trained_at).toBeNull();
    expect(created).toMatchObject({
      branch: 'sd15',
      model_type: null,
      token: 'sks',
      name: 'man',
      orig_images: ['https://images.test/1.jpg'],
    });
    expect(created.url).toBe(`${mock.url}/tunes/${created.id}.json`);

    const done = await trained(key, created.id);
    expect(done.trained_at).toMatch(ISO);
    expect(Date.parse(done.trained_at!)).toBeGreaterThanOrEqual(Date.parse(created.eta) - 2);
    expect(Date.parse(done.expires_at) - Date.parse(done.trained_at!)).toBe(30 * DAY_MS);
    expect(done.ckpt_url).toBe(`${mock.url}/models/${created.id}.safetensors`);

    const [callback] = await receiver.waitFor('/tune-1', 1);
    expect(callback.query.get('job')).toBe('abc');
    expect(callback.query.get('sig')).toBe('x y');
    expect(callback.body).toMatchObject({ id: created.id, title: created.title, trained_at: done.trained_at });
  });

  test('branch fast trains the same way and fires its callback; sdxl1 is always pti with the ohwx token', async () => {
    const key = newKey();
    const fast = await createTune(key, { branch: 'fast', callback: `${receiver.url}/fast` });
    expect(fast.branch).toBe('fast');
    expect(fast.trained_at).toBeNull();
    await trained(key, fast.id);
    const [callback] = await receiver.waitFor('/fast', 1);
    expect((callback.body as TuneJson).id).toBe(fast.id);

    const sdxl = await createTune(key, { branch: 'sdxl1', model_type: 'lora' });
    expect(sdxl).toMatchObject({ branch: 'sdxl1', model_type: 'pti', token: 'ohwx' });
  });

  test('FaceID tunes are trained at creation; their prompts start at once', async () => {
    const key = newKey();
    const tune = await createTune(key, { model_type: 'faceid', callback: `${receiver.url}/faceid` });
    expect(tune.trained_at).toBe(tune.created_at);
    expect(tune.eta).toBe(tune.created_at);
    const prompt = await call<PromptJson>(mock.url, key, 'POST', `/tunes/${tune.id}/prompts`, {
      prompt: { text: 'ohwx man' },
    });
    expect(prompt.status).toBe(201);
    expect(prompt.body.started_training_at).toMatch(ISO);
    const [callback] = await receiver.waitFor('/faceid', 1);
    expect((callback.body as TuneJson).trained_at).toBe(tune.trained_at);
  });

  test('a checkpoint is deleted with its prompts; a pti tune leaves its prompts', async () => {
    const key = newKey();
    const checkpoint = await createTune(key, { prompts_attributes: [{ text: 'ohwx man, a' }] });
    const pti = await createTune(key, { branch: 'sdxl1', prompts_attributes: [{ text: 'ohwx man, b' }] });
    const before = (await call<PromptJson[]>(mock.url, key, 'GET', '/prompts')).body;
    expect(before.map((p) => p.tune_id).sort()).toEqual([checkpoint.id, pti.id].sort());

    for (const tune of [checkpoint, pti]) {
      const res = await call(mock.url, key, 'DELETE', `/tunes/${tune.id}`);
      expect(res.status).toBe(200);
      expect(res.body.message).toEqual(expect.any(String));
      expect((await call(mock.url, key, 'GET', `/tunes/${tune.id}`)).status).toBe(404);
    }
    const after = (await call<PromptJson[]>(mock.url, key, 'GET', '/prompts')).body;
    expect(after.map((p) => p.tune_id)).toEqual([pti.id]);
    expect((await call(mock.url, key, 'DELETE', `/tunes/${checkpoint.id}`)).status).toBe(404);
  });

  test('the public Flux base tune is readable by everyone and listed by no one', async () => {
    const key = newKey();
    const base = await call<TuneJson>(mock.url, key, 'GET', `/tunes/${FLUX_BASE_TUNE.id}`);
    expect(base.status).toBe(200);
    expect(base.body).toMatchObject({ id: 1504944, branch: 'flux1', trained_at: expect.stringMatching(ISO) });
    expect((await call(mock.url, key, 'GET', '/tunes')).body).toEqual([]);
    expect((await call(mock.url, key, 'DELETE', `/tunes/${FLUX_BASE_TUNE.id}`)).status).toBe(404);
  });
});

describe('prompts', () => {
  test('start when their tune is trained, settle with images served as PNG, then call back', async () => {
    const key = newKey();
    const tune = await createTune(key);
    const created = await call<PromptJson>(mock.url, key, 'POST', `/tunes/${tune.id}/prompts`, {
      prompt: {
        text: 'ohwx man on a boat',
        num_images: 2,
        seed: 42,
        w: 96,
        h: 64,
        callback: `${receiver.url}/prompt-1?n=1`,
      },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      tune_id: tune.id,
      images: [],
      user_error: null,
      started_training_at: null,
      trained_at: null,
      seed: 42,
      num_images: 2,
    });
    expect(created.body.url).toBe(`${mock.url}/tunes/${tune.id}/prompts/${created.body.id}.json`);

    const done = await settled(key, tune.id, created.body.id);
    const trainedTune = await getTune(key, tune.id);
    expect(Date.parse(done.started_training_at!)).toBeGreaterThanOrEqual(Date.parse(trainedTune.trained_at!));
    expect(Date.parse(done.trained_at!)).toBeGreaterThan(Date.parse(done.started_training_at!));
    expect(done.images).toEqual([0, 1].map((i) => `${mock.url}/images/${done.id}-${i}.png`));

    const bodies: Buffer[] = [];
    for (const url of done.images) {
      const res = await request(url);
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe('image/png');
      const bytes = Buffer.from(await res.body.arrayBuffer());
      expect(bytes.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
      // IHDR says 96x64 RGB (the prompt's w and h); the IDAT inflates to 64 rows of filter byte + 96 pixels.
      expect(bytes.toString('latin1', 12, 16)).toBe('IHDR');
      expect([bytes.readUInt32BE(16), bytes.readUInt32BE(20), bytes[24], bytes[25]]).toEqual([96, 64, 8, 2]);
      const idatLength = bytes.readUInt32BE(33);
      expect(bytes.toString('latin1', 37, 41)).toBe('IDAT');
      expect(inflateSync(bytes.subarray(41, 41 + idatLength)).length).toBe(64 * (1 + 96 * 3));
      bodies.push(bytes);
    }
    expect(bodies[0].equals(bodies[1])).toBe(false); // the pattern varies by image

    const [callback] = await receiver.waitFor('/prompt-1', 1);
    expect(callback.query.get('n')).toBe('1');
    expect(callback.body).toMatchObject({ id: done.id, images: done.images, tune_id: tune.id });
  });

  test('a prompt whose text has the word __fail__ settles with user_error and no images', async () => {
    const key = newKey();
    const tune = await createTune(key, { model_type: 'faceid' });
    const res = await call<PromptJson>(mock.url, key, 'POST', `/tunes/${tune.id}/prompts`, {
      prompt: { text: 'ohwx man __fail__', callback: `${receiver.url}/failed` },
    });
    const done = await settled(key, tune.id, res.body.id);
    expect(done.images).toEqual([]);
    expect(done.user_error).toEqual(expect.stringContaining('__fail__'));
    const [callback] = await receiver.waitFor('/failed', 1);
    expect((callback.body as PromptJson).user_error).toBe(done.user_error);
  });

  test('a Flux LoRA takes no prompts (422) but is loaded into the base tune with <lora:ID:STRENGTH>', async () => {
    const key = newKey();
    const lora = await createTune(key, {
      name: 'woman',
      base_tune_id: FLUX_BASE_TUNE.id,
      model_type: 'lora',
      preset: 'flux-lora-portrait',
    });
    expect(lora).toMatchObject({ branch: 'flux1', model_type: 'lora', base_tune_id: FLUX_BASE_TUNE.id, token: 'ohwx' });

    const onLora = await call<ErrorJson>(mock.url, key, 'POST', `/tunes/${lora.id}/prompts`, {
      prompt: { text: 'ohwx woman' },
    });
    expect(onLora.status).toBe(422);
    expect(onLora.body.error).toContain('model_type=lora is not supported');

    const text = `<lora:${lora.id}:1> ohwx woman, studio portrait`;
    const early = await call<ErrorJson>(mock.url, key, 'POST', `/tunes/${FLUX_BASE_TUNE.id}/prompts`, {
      prompt: { text },
    });
    expect(early.status).toBe(422); // not trained yet
    expect(early.body['prompt.text']).toEqual([expect.stringContaining('trained LoRA tune')]);

    await trained(key, lora.id);
    expect((await getTune(key, lora.id)).ckpt_url).toBeNull(); // the LoRA is not downloadable
    const created = await call<PromptJson>(mock.url, key, 'POST', `/tunes/${FLUX_BASE_TUNE.id}/prompts`, {
      prompt: { text },
    });
    expect(created.status).toBe(201);
    expect(created.body.tune_id).toBe(FLUX_BASE_TUNE.id);
    expect(created.body.started_training_at).toMatch(ISO); // the base tune is trained
    const done = await settled(key, FLUX_BASE_TUNE.id, created.body.id);
    expect(done.images).toHaveLength(1);

    // Prompts on the base tune belong to their account.
    const other = newKey();
    expect(
      (await call<PromptJson[]>(mock.url, key, 'GET', `/tunes/${FLUX_BASE_TUNE.id}/prompts`)).body.map((p) => p.id),
    ).toEqual([done.id]);
    expect((await call(mock.url, other, 'GET', `/tunes/${FLUX_BASE_TUNE.id}/prompts`)).body).toEqual([]);
    expect((await call(mock.url, other, 'GET', `/tunes/${FLUX_BASE_TUNE.id}/prompts/${done.id}`)).status).toBe(404);
    // Another account cannot load this LoRA; references must be well formed.
    for (const bad of [text, '<lora:abc:1> woman', `<lora:${lora.id}:> woman`, '<faceid:12:1> woman']) {
      const res = await call<ErrorJson>(
        mock.url,
        bad === text ? other : key,
        'POST',
        `/tunes/${FLUX_BASE_TUNE.id}/prompts`,
        { prompt: { text: bad } },
      );
      expect(res.status).toBe(422);
      expect(res.body['prompt.text']).toHaveLength(1);
    }
  });

  test('are deleted by both paths with a message, and are then gone', async () => {
    const key = newKey();
    const tune = await createTune(key, { prompts_attributes: [{ text: 'a' }, { text: 'b' }] });
    const [b, a] = (await call<PromptJson[]>(mock.url, key, 'GET', `/tunes/${tune.id}/prompts`)).body;
    expect([a.text, b.text]).toEqual(['a', 'b']);
    const nested = await call(mock.url, key, 'DELETE', `/tunes/${tune.id}/prompts/${a.id}`);
    expect(nested).toMatchObject({ status: 200, body: { message: expect.any(String) } });
    const flat = await call(mock.url, key, 'DELETE', `/prompts/${b.id}`);
    expect(flat).toMatchObject({ status: 200, body: { message: expect.any(String) } });
    expect((await call(mock.url, key, 'GET', `/tunes/${tune.id}/prompts/${a.id}`)).status).toBe(404);
    expect((await call(mock.url, key, 'DELETE', `/prompts/${b.id}`)).status).toBe(404);
    expect((await call(mock.url, key, 'GET', `/tunes/${tune.id}/prompts`)).body).toEqual([]);
  });

  test('likes: 201 with an empty body, shown on the prompt, removed with 200; only on your own prompts', async () => {
    const key = newKey();
    const tune = await createTune(key, { prompts_attributes: [{ text: 'a' }] });
    const [prompt] = (await call<PromptJson[]>(mock.url, key, 'GET', '/prompts')).body;
    const like = await call(mock.url, key, 'POST', `/prompts/${prompt.id}/likes`);
    expect(like.status).toBe(201);
    expect(like.body).toBe('');
    expect((await getPrompt(key, tune.id, prompt.id)).liked).toBe(true);
    expect((await call(mock.url, key, 'DELETE', `/prompts/${prompt.id}/likes`)).status).toBe(200);
    expect((await getPrompt(key, tune.id, prompt.id)).liked).toBe(false);
    expect((await call(mock.url, newKey(), 'POST', `/prompts/${prompt.id}/likes`)).status).toBe(404);
  });
});

describe('themes and image inspection', () => {
  test("a test chooses a flagged photo: a flag's name between double underscores in the URL or file name raises it", async () => {
    const key = newKey();
    const byUrl = (url: string) => call(mock.url, key, 'POST', '/images/inspect', { name: 'woman', file_url: url });
    const two = await byUrl('https://images.test/party__includes_multiple_people____wearing_sunglasses__.jpg');
    expect(two.body).toMatchObject({ includes_multiple_people: true, wearing_sunglasses: true });
    // Deterministic: the same photo, the same answer.
    expect(
      (await byUrl('https://images.test/party__includes_multiple_people____wearing_sunglasses__.jpg')).body,
    ).toEqual(two.body);
    const uploaded = await call(
      mock.url,
      key,
      'POST',
      '/images/inspect',
      multipart([
        ['name', 'dog'],
        ['file', new Blob([solidPng('dog', 600)], { type: 'image/png' }), 'dog__low_quality__.png'],
      ]),
    );
    expect(uploaded.body).toMatchObject({ low_quality: true, low_resolution: false });
  });

  test('a theme creates 10 prompts per tune, read back through the tune prompts', async () => {
    const key = newKey();
    const [t1, t2] = [await createTune(key), await createTune(key, { name: 'woman' })];
    const res = await call(mock.url, key, 'POST', '/themes', {
      theme: 'space explorers',
      tune_ids: [t1.id, t2.id],
      prompt_attributes: { num_images: 2, w: 512, h: 768 },
    });
    // As the service's docs show: 201 with an empty body.
    expect(res.status).toBe(201);
    expect([res.body, res.headers['content-length']]).toEqual(['', '0']);
    for (const tune of [t1, t2]) {
      const prompts = (await call<PromptJson[]>(mock.url, key, 'GET', `/tunes/${tune.id}/prompts?limit=100`)).body;
      expect(prompts).toHaveLength(10);
      for (const p of prompts) {
        expect(p.text).toContain('space explorers');
        expect(p).toMatchObject({ num_images: 2, w: 512, h: 768 });
      }
    }
    const foreign = await call<ErrorJson>(mock.url, newKey(), 'POST', '/themes', { theme: 'x', tune_ids: [t1.id] });
    expect(foreign.status).toBe(422);
    expect(foreign.body.tune_ids).toHaveLength(1);
    const invalid = await call<ErrorJson>(mock.url, key, 'POST', '/themes', { theme: 'x', tune_ids: [] });
    expect(invalid.status).toBe(422);
    expect(invalid.body.tune_ids).toEqual(['must hold at least one id']);
  });

  test('inspection answers characteristics and quality flags, the same for the same image', async () => {
    const key = newKey();
    const inspect = async () => {
      const form = multipart([
        ['name', 'woman'],
        ['file', new Blob([solidPng('face', 16)], { type: 'image/png' }), 'face.png'],
      ]);
      return call(mock.url, key, 'POST', '/images/inspect', form);
    };
    const first = await inspect();
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      name: 'woman',
      age: expect.any(String),
      ethnicity: expect.any(String),
      eye_color: expect.any(String),
      low_resolution: true, // 16x16, under 512
    });
    for (const flag of [
      'blurry',
      'selfie',
      'low_quality',
      'includes_multiple_people',
      'wearing_sunglasses',
      'funny_face',
    ])
      expect(typeof first.body[flag]).toBe('boolean');
    expect((await inspect()).body).toEqual(first.body);

    const byUrl = await call(mock.url, key, 'POST', '/images/inspect', {
      name: 'dog',
      file_url: 'https://images.test/dog.jpg',
    });
    expect(byUrl.status).toBe(200);
    expect(byUrl.body).toMatchObject({ name: 'dog', age: null, low_resolution: false });
    const flagged = await call(mock.url, key, 'POST', '/images/inspect', {
      name: 'dog',
      file_url: 'https://images.test/dog__blurry__.jpg',
    });
    expect(flagged.body).toMatchObject({ name: 'dog', blurry: true });
    const neither = await call<ErrorJson>(mock.url, key, 'POST', '/images/inspect', { name: 'dog' });
    expect(neither.status).toBe(422);
    expect(neither.body.file).toEqual(['exactly one of file or file_url is required']);
  });

  test('inspection raises no flag of its own: only the __flag__ hook (and a small PNG), whatever server serves the photo', async () => {
    const key = newKey();
    const inspectUrl = async (name: string, url: string) =>
      (await call<Record<string, unknown>>(mock.url, key, 'POST', '/images/inspect', { name, file_url: url })).body;
    const flagsOf = (answer: Record<string, unknown>) => INSPECTION_FLAGS.filter((flag) => answer[flag] === true);
    // A hundred photos of people, and the README's own examples: no flag raised by chance.
    for (let n = 0; n < 100; n++)
      expect(flagsOf(await inspectUrl(n % 2 ? 'man' : 'woman', `https://example.com/${n}.jpg`))).toEqual([]);
    // The same photo from two servers (a port that changes from run to run) gets the same answer.
    const [one, other] = [7001, 7002].map((port) => `http://127.0.0.1:${port}/images/training-1.png`);
    expect(await inspectUrl('woman', one)).toEqual(await inspectUrl('woman', other));
    expect(flagsOf(await inspectUrl('woman', 'https://example.com/me__selfie____funny_face__.jpg'))).toEqual([
      'selfie',
      'funny_face',
    ]);
  });
});
