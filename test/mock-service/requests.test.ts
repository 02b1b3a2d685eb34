/**
 * How the mock reads requests: authentication and accounts, path ids, malformed bodies, the 422 body shape from
 * the shared schemas, list paging and deep offsets, bracket-notation multipart bodies, and idempotency.
 */
import { request } from 'undici';
import { startMockService, type MockService } from '../../src/mock-service';
import { solidPng } from '../../src/mock-service/png';
import { call, multipart, until, type ErrorJson, type PromptJson, type TuneJson } from './loopback';

jest.setTimeout(20_000);

let mock: MockService;
let keys = 0;
const newKey = () => `requests-${++keys}`;

beforeAll(async () => {
  mock = await startMockService({ trainingTime: '5s', inferenceTime: '1s' });
});
afterAll(() => mock.close());

const images = { image_urls: ['https://images.test/1.jpg'] };
async function createTune(key: string, title = `t-${Math.random()}`): Promise<TuneJson> {
  const res = await call<TuneJson>(mock.url, key, 'POST', '/tunes', { tune: { title, name: 'man', ...images } });
  expect(res.status).toBe(201);
  return res.body;
}

describe('authentication and accounts', () => {
  test('a missing or malformed Authorization header is 401 with an error', async () => {
    expect(await call(mock.url, null, 'GET', '/tunes')).toMatchObject({
      status: 401,
      body: { error: expect.stringContaining('Bearer') },
    });
    const basic = await request(`${mock.url}/tunes`, { headers: { authorization: 'Basic dXNlcjpwdw==' } });
    expect(basic.statusCode).toBe(401);
    expect(await basic.body.json()).toEqual({ error: expect.any(String) });
  });

  test('apiKeys restricts the accepted keys', async () => {
    const strict = await startMockService({ apiKeys: ['good-key'] });
    try {
      expect((await call(strict.url, 'good-key', 'GET', '/tunes')).status).toBe(200);
      expect(await call(strict.url, 'other-key', 'GET', '/tunes')).toMatchObject({
        status: 401,
        body: { error: expect.any(String) },
      });
    } finally {
      await strict.close();
    }
  });

  test('each key is its own account: objects of another account are 404 and absent from lists', async () => {
    const [a, b] = [newKey(), newKey()];
    const tune = await createTune(a);
    const prompt = await call<PromptJson>(mock.url, a, 'POST', `/tunes/${tune.id}/prompts`, {
      prompt: { text: 'ohwx man' },
    });
    expect(prompt.status).toBe(201);

    for (const [method, path] of [
      ['GET', `/tunes/${tune.id}`],
      ['DELETE', `/tunes/${tune.id}`],
      ['GET', `/tunes/${tune.id}/prompts`],
      ['GET', `/tunes/${tune.id}/prompts/${prompt.body.id}`],
      ['DELETE', `/tunes/${tune.id}/prompts/${prompt.body.id}`],
      ['DELETE', `/prompts/${prompt.body.id}`],
    ] as const) {
      const res = await call<ErrorJson>(mock.url, b, method, path);
      expect([method, path, res.status]).toEqual([method, path, 404]);
      expect(res.body.error).toEqual(expect.any(String));
    }
    expect((await call(mock.url, b, 'POST', `/tunes/${tune.id}/prompts`, { prompt: { text: 'x' } })).status).toBe(404);
    expect((await call(mock.url, b, 'GET', '/tunes')).body).toEqual([]);
    expect((await call(mock.url, b, 'GET', '/prompts')).body).toEqual([]);
    // Still there for its owner.
    expect((await call(mock.url, a, 'GET', `/tunes/${tune.id}/prompts/${prompt.body.id}`)).status).toBe(200);
    expect((await call<TuneJson[]>(mock.url, a, 'GET', '/tunes')).body.map((t) => t.id)).toEqual([tune.id]);
  });
});

describe('paths and bodies', () => {
  test('path ids that are not positive integers are 404', async () => {
    const key = newKey();
    for (const id of ['abc', '0', '-1', '1.5', '1e3', '99999999999999999999', '%20'])
      expect([id, (await call(mock.url, key, 'GET', `/tunes/${id}`)).status]).toEqual([id, 404]);
    expect((await call(mock.url, key, 'GET', '/tunes/12/prompts/x')).status).toBe(404);
    expect((await call(mock.url, key, 'GET', '/no/such/route')).status).toBe(404);
  });

  test('publicUrl is the base of object, image and file URLs', async () => {
    const proxied = await startMockService({ publicUrl: 'https://mock.example.test/api/', inferenceTime: '50ms' });
    try {
      const form = multipart([
        ['tune[title]', 'p'],
        ['tune[name]', 'man'],
        ['tune[model_type]', 'faceid'],
        ['tune[images][]', new Blob([solidPng('p')], { type: 'image/png' }), 'p.png'],
      ]);
      const tune = (await call<TuneJson>(proxied.url, 'k', 'POST', '/tunes', form)).body;
      expect(tune.url).toBe(`https://mock.example.test/api/tunes/${tune.id}.json`);
      expect(tune.orig_images).toEqual([
        expect.stringMatching(/^https:\/\/mock\.example\.test\/api\/files\/\d+\.png$/),
      ]);
      const prompt = (
        await call<PromptJson>(proxied.url, 'k', 'POST', `/tunes/${tune.id}/prompts`, { prompt: { text: 'x' } })
      ).body;
      const done = await until(
        async () => (await call<PromptJson>(proxied.url, 'k', 'GET', `/tunes/${tune.id}/prompts/${prompt.id}`)).body,
        (p) => p.images.length > 0,
      );
      expect(done.images).toEqual([`https://mock.example.test/api/images/${prompt.id}-0.png`]);
    } finally {
      await proxied.close();
    }
  });

  test('object urls answer with the .json suffix too', async () => {
    const key = newKey();
    const tune = await createTune(key);
    const res = await call<TuneJson>(mock.url, key, 'GET', `/tunes/${tune.id}.json`);
    expect(res.body.id).toBe(tune.id);
  });

  test('malformed JSON is 400 with an error; a JSON array is 400', async () => {
    const key = newKey();
    const bad = await call<ErrorJson>(mock.url, key, 'POST', '/tunes', '{"tune": {');
    expect(bad.status).toBe(400);
    expect(bad.body.error).toContain('malformed JSON');
    expect((await call(mock.url, key, 'POST', '/tunes', '[1]')).status).toBe(400);
  });

  test('422 names each field and rule: { error: "<field>: <rule>", "<field>": ["<rule>"] }', async () => {
    const key = newKey();
    const one = await call(mock.url, key, 'POST', '/tunes', { tune: { title: 'x', ...images } });
    expect(one).toMatchObject({ status: 422 });
    expect(one.body).toEqual({
      error: 'tune.name: is required and must be a non-empty string',
      'tune.name': ['is required and must be a non-empty string'],
    });

    const several = await call<ErrorJson>(mock.url, key, 'POST', '/tunes', {
      tune: { title: 'x', name: 'man', colour: 'red', steps: 0, image_urls: ['ftp://x'] },
    });
    expect(several.status).toBe(422);
    expect(several.body).toMatchObject({
      'tune.steps': ['must be an integer of at least 1'],
      'tune.image_urls[0]': ['must be an http(s) URL'],
    });
    // Like the service, the mock ignores attributes it does not list; it judges the ones it does.
    expect(several.body).not.toHaveProperty(['tune.colour']);
    expect(several.body.error).toContain('tune.steps: must be an integer of at least 1');
    expect(several.body.error).toContain('; ');

    const missing = await call<ErrorJson>(mock.url, key, 'POST', '/tunes', {});
    expect(missing.status).toBe(422);
    expect(missing.body.tune).toHaveLength(1);

    const tune = await createTune(key);
    const prompt = await call<ErrorJson>(mock.url, key, 'POST', `/tunes/${tune.id}/prompts`, {
      prompt: { text: 'x', w: 100, num_images: 9, lora_scale: 1 },
    });
    expect(prompt.status).toBe(422);
    expect(prompt.body).toMatchObject({
      'prompt.w': ['must be a positive integer multiple of 8'],
      'prompt.num_images': ['must be an integer from 1 to 8'],
      'prompt.lora_scale': [expect.stringContaining('prompts_attributes')],
    });
    const crossField = await call(mock.url, key, 'POST', `/tunes/${tune.id}/prompts`, {
      prompt: { text: 'x', inpaint_faces: true },
    });
    expect(crossField.body).toEqual({
      error: 'prompt.inpaint_faces: requires super_resolution to be true',
      'prompt.inpaint_faces': ['requires super_resolution to be true'],
    });
    const query = await call<ErrorJson>(mock.url, key, 'GET', '/tunes?limit=121');
    expect(query.status).toBe(422);
    expect(query.body).toEqual({
      error: 'limit: must be an integer from 1 to 120',
      limit: ['must be an integer from 1 to 120'],
    });
    expect((await call<ErrorJson>(mock.url, key, 'GET', '/tunes?limit=ten')).body.limit).toHaveLength(1);
    expect((await call<ErrorJson>(mock.url, key, 'GET', '/tunes?page=2')).body.page).toEqual([
      'is not an attribute the service knows',
    ]);
  });

  test('training images in JSON must be URLs: file paths there mean nothing to the service', async () => {
    const res = await call<ErrorJson>(mock.url, newKey(), 'POST', '/tunes', {
      tune: { title: 'x', name: 'man', images: ['/tmp/a.jpg'] },
    });
    expect(res.status).toBe(422);
    expect(res.body['tune.images']).toEqual([expect.stringContaining('multipart')]);
  });
});

describe('lists', () => {
  test('newest first, keyset by before_id until an empty page, offset and limit', async () => {
    const key = newKey();
    const ids: number[] = [];
    for (let i = 0; i < 5; i++) ids.push((await createTune(key, `t${i}`)).id);
    const newestFirst = [...ids].reverse();
    const page = async (query: string) =>
      (await call<TuneJson[]>(mock.url, key, 'GET', `/tunes${query}`)).body.map((t) => t.id);

    expect(await page('')).toEqual(newestFirst);
    const seen: number[] = [];
    let cursor = '';
    for (;;) {
      const ids2 = await page(`?limit=2${cursor}`);
      if (!ids2.length) break;
      expect(ids2.length).toBeLessThanOrEqual(2);
      seen.push(...ids2);
      cursor = `&before_id=${ids2[ids2.length - 1]}`;
    }
    expect(seen).toEqual(newestFirst);
    expect(await page('?offset=1&limit=2')).toEqual(newestFirst.slice(1, 3));
    expect(await page(`?before_id=${ids[3]}&offset=1`)).toEqual([ids[1], ids[0]]);
  });

  test('limit defaults to 20 and goes up to 120', async () => {
    // Three themes make 30 prompts on one tune.
    const key = newKey();
    const tune = await createTune(key);
    await call(mock.url, key, 'POST', '/themes', { theme: 'a', tune_ids: [tune.id] });
    await call(mock.url, key, 'POST', '/themes', { theme: 'b', tune_ids: [tune.id] });
    await call(mock.url, key, 'POST', '/themes', { theme: 'c', tune_ids: [tune.id] });
    expect((await call<PromptJson[]>(mock.url, key, 'GET', '/prompts')).body).toHaveLength(20);
    expect((await call<PromptJson[]>(mock.url, key, 'GET', `/tunes/${tune.id}/prompts?limit=120`)).body).toHaveLength(
      30,
    );
  });

  test('an offset above the bound is 400 pointing to before_id (200 for tunes, 10,000 for prompts)', async () => {
    const key = newKey();
    const tune = await createTune(key);
    for (const path of ['/tunes?offset=201', '/prompts?offset=10001', `/tunes/${tune.id}/prompts?offset=10001`]) {
      const res = await call<ErrorJson>(mock.url, key, 'GET', path);
      expect([path, res.status]).toEqual([path, 400]);
      expect(res.body.error).toContain('before_id');
    }
    for (const path of ['/tunes?offset=200', '/prompts?offset=10000', `/tunes/${tune.id}/prompts?offset=10000`])
      expect((await call(mock.url, key, 'GET', path)).body).toEqual([]);
  });
});

describe('multipart bodies in bracket notation', () => {
  test('nested keys unfold, numbers and booleans are coerced by attribute type, files are stored and served', async () => {
    const key = newKey();
    const png = solidPng('training-1', 16);
    const jpeg = Buffer.from('not really a jpeg, but bytes all the same');
    const form = multipart([
      ['tune[title]', 'multipart tune'],
      ['tune[name]', 'man'],
      ['tune[steps]', '500'],
      ['tune[face_crop]', 'true'],
      ['tune[training_face_correct]', 'false'],
      ['tune[callback]', 'https://hooks.test/cb?user=1'],
      ['tune[characteristics][age]', '30'],
      ['tune[characteristics][eye_color]', 'blue eyes'],
      ['tune[images][]', new Blob([png], { type: 'image/png' }), 'one.png'],
      ['tune[images][]', new Blob([jpeg], { type: 'image/jpeg' }), 'two.jpg'],
      ['tune[prompts_attributes][0][text]', 'ohwx man, {{eye_color}}, age {{age}}'],
      ['tune[prompts_attributes][0][num_images]', '2'],
      ['tune[prompts_attributes][0][cfg_scale]', '7.5'],
      ['tune[prompts_attributes][0][super_resolution]', 'true'],
      ['tune[prompts_attributes][0][hires_fix]', 'true'],
      ['tune[prompts_attributes][1][text]', 'ohwx man, plain'],
      ['tune[prompts_attributes][1][seed]', '4294967296'],
    ]);

    const res = await call<TuneJson>(mock.url, key, 'POST', '/tunes', form);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      title: 'multipart tune',
      steps: 500,
      face_crop: true,
      training_face_correct: false,
      callback: 'https://hooks.test/cb?user=1',
      characteristics: { age: '30', eye_color: 'blue eyes' }, // a characteristic stays a string
    });
    expect(res.body.orig_images).toEqual([
      expect.stringMatching(/\/files\/\d+\.png$/),
      expect.stringMatching(/\/files\/\d+\.jpg$/),
    ]);
    for (const [url, bytes, type] of [
      [res.body.orig_images[0], png, 'image/png'],
      [res.body.orig_images[1], jpeg, 'image/jpeg'],
    ] as const) {
      expect(url.startsWith(`${mock.url}/files/`)).toBe(true);
      const file = await request(url);
      expect(file.headers['content-type']).toBe(type);
      expect(Buffer.from(await file.body.arrayBuffer()).equals(bytes)).toBe(true);
    }

    const prompts = (await call<PromptJson[]>(mock.url, key, 'GET', `/tunes/${res.body.id}/prompts`)).body.reverse();
    expect(prompts[0]).toMatchObject({
      text: 'ohwx man, blue eyes, age 30',
      num_images: 2,
      cfg_scale: 7.5,
      super_resolution: true,
      hires_fix: true,
    });
    expect(prompts[1]).toMatchObject({ text: 'ohwx man, plain', seed: 4294967296 });
  });

  test('image_urls[] are recorded as given; a value of the wrong type is a 422 naming the field', async () => {
    const key = newKey();
    const form = multipart([
      ['tune[title]', 'urls'],
      ['tune[name]', 'woman'],
      ['tune[image_urls][]', 'https://images.test/a.jpg?x=1'],
      ['tune[image_urls][]', 'https://images.test/b.jpg'],
      ['tune[model_type]', 'faceid'],
    ]);
    const res = await call<TuneJson>(mock.url, key, 'POST', '/tunes', form);
    expect(res.status).toBe(201);
    expect(res.body.orig_images).toEqual(['https://images.test/a.jpg?x=1', 'https://images.test/b.jpg']);

    const bad = multipart([
      ['tune[title]', 'bad'],
      ['tune[name]', 'man'],
      ['tune[steps]', 'many'],
      ['tune[face_crop]', 'yes'],
      ['tune[image_urls][]', 'https://images.test/a.jpg'],
    ]);
    const refused = await call<ErrorJson>(mock.url, key, 'POST', '/tunes', bad);
    expect(refused.status).toBe(422);
    expect(refused.body).toMatchObject({
      'tune.steps': ['must be an integer of at least 1'],
      'tune.face_crop': ['must be true or false'],
    });
  });

  test('a prompt in multipart with an input image file: the file is stored and its URL kept', async () => {
    const key = newKey();
    const tune = await createTune(key);
    const form = multipart([
      ['prompt[text]', 'ohwx man, pose'],
      ['prompt[controlnet]', 'pose'],
      ['prompt[controlnet_txt2img]', 'false'],
      ['prompt[denoising_strength]', '0.5'],
      ['prompt[input_image]', new Blob([solidPng('pose')], { type: 'image/png' }), 'pose.png'],
    ]);
    const res = await call<PromptJson>(mock.url, key, 'POST', `/tunes/${tune.id}/prompts`, form);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ controlnet: 'pose', controlnet_txt2img: false, denoising_strength: 0.5 });
    expect(res.body.input_image).toEqual(expect.stringMatching(new RegExp(`^${mock.url}/files/\\d+\\.png$`)));
  });
});

describe('idempotency (spec 4.11)', () => {
  test('off by default: the same title twice makes two tunes', async () => {
    const key = newKey();
    const [a, b] = [await createTune(key, 'same'), await createTune(key, 'same')];
    expect(a.id).not.toBe(b.id);
  });

  test('on: the same title returns the tune; the same considered attributes return the prompt', async () => {
    const idem = await startMockService({ idempotency: true, trainingTime: '5s' });
    try {
      const body = { tune: { title: 'job-42', name: 'man', ...images } };
      const first = await call<TuneJson>(idem.url, 'k', 'POST', '/tunes', body);
      const again = await call<TuneJson>(idem.url, 'k', 'POST', '/tunes', { tune: { ...body.tune, name: 'woman' } });
      expect([first.status, again.status]).toEqual([201, 200]);
      expect(again.body).toEqual(first.body);
      expect((await call<TuneJson[]>(idem.url, 'k', 'GET', '/tunes')).body).toHaveLength(1);
      // Another account has its own titles.
      expect((await call(idem.url, 'other', 'POST', '/tunes', body)).status).toBe(201);

      const path = `/tunes/${first.body.id}/prompts`;
      const prompt = { text: 'ohwx man', seed: 7, num_images: 2, callback: 'https://hooks.test/p?id=1' };
      const p1 = await call<PromptJson>(idem.url, 'k', 'POST', path, { prompt });
      // Not a considered attribute: still the same prompt.
      const p2 = await call<PromptJson>(idem.url, 'k', 'POST', path, { prompt: { ...prompt, film_grain: true } });
      const p3 = await call<PromptJson>(idem.url, 'k', 'POST', path, { prompt: { ...prompt, seed: 8 } });
      expect([p1.status, p2.status, p3.status]).toEqual([201, 200, 201]);
      expect(p2.body.id).toBe(p1.body.id);
      expect(p3.body.id).not.toBe(p1.body.id);
      expect((await call<PromptJson[]>(idem.url, 'k', 'GET', path)).body).toHaveLength(2);
    } finally {
      await idem.close();
    }
  });
});
