/**
 * The mock behaves like production where clients met the service: pack tunes in `branch: fast`, the un-nested
 * `GET /prompts/:id`, `.json` object paths (the `url` fields), gallery base tunes (690204 as well as 1504944), themes
 * answered 201 with an empty body, `GET /tunes?title=`, prompts posted to a LoRA tune run on its base (or 422 behind
 * the setting), and the README's `curl` examples exactly as printed. Real HTTP on loopback.
 */
import { request } from 'undici';
import { GALLERY_TUNES } from '../../src/mock-service/fixtures';
import { startMockService, type MockService } from '../../src/mock-service';
import { blocksUnder, commandsOf } from '../readme-blocks';
import { call } from './loopback';

type Json = Record<string, unknown>;

const URLS = ['https://images.test/1.jpg', 'https://images.test/2.jpg'];
let mock: MockService;
let keys = 0;
const newKey = () => `production-key-${++keys}`;

beforeAll(async () => {
  mock = await startMockService({ trainingTime: '150ms', inferenceTime: '50ms' });
});
afterAll(() => mock.close());

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const createTune = async (key: string, tune: Json = {}) =>
  (
    await call<Json>(mock.url, key, 'POST', '/tunes', {
      tune: { title: `t-${keys}`, name: 'man', image_urls: URLS, ...tune },
    })
  ).body;

test('a pack tune in branch fast is made, trained and given its prompts', async () => {
  const key = newKey();
  const res = await call<Json>(mock.url, key, 'POST', '/p/261/tunes', {
    tune: { title: 'pets-fast', name: 'dog', image_urls: URLS, branch: 'fast' },
  });
  expect(res.status).toBe(201);
  const tune = await until(
    async () => (await call<Json>(mock.url, key, 'GET', `/tunes/${String(res.body.id)}`)).body,
    (t) => t.trained_at !== null,
  );
  expect(tune).toMatchObject({ branch: 'fast', pack_id: 261 });
  const prompts = (await call<Json[]>(mock.url, key, 'GET', `/tunes/${String(tune.id)}/prompts`)).body;
  expect(prompts.length).toBeGreaterThan(0);
  expect((await call(mock.url, key, 'POST', '/p/261/tunes', { tune: { ...res.body, branch: 'turbo' } })).status).toBe(
    422,
  );
});

test('GET /prompts/:id, and every object at its url ending in .json', async () => {
  const key = newKey();
  const tune = await createTune(key);
  const prompt = (
    await call<Json>(mock.url, key, 'POST', `/tunes/${String(tune.id)}/prompts`, { prompt: { text: 'x' } })
  ).body;
  expect(tune.url).toBe(`${mock.url}/tunes/${String(tune.id)}.json`);
  expect(prompt.url).toBe(`${mock.url}/tunes/${String(tune.id)}/prompts/${String(prompt.id)}.json`);
  for (const path of [
    `/prompts/${String(prompt.id)}`,
    `/prompts/${String(prompt.id)}.json`,
    new URL(prompt.url as string).pathname,
  ]) {
    const got = await call<Json>(mock.url, key, 'GET', path);
    expect([path, got.status, got.body.id, got.body.tune_id]).toEqual([path, 200, prompt.id, tune.id]);
  }
  expect((await call<Json>(mock.url, key, 'GET', new URL(tune.url as string).pathname)).body.id).toBe(tune.id);
  expect((await call(mock.url, newKey(), 'GET', `/prompts/${String(prompt.id)}`)).status).toBe(404);
});

test('every gallery base tune, 690204 among them, is readable, trainable on and promptable', async () => {
  const key = newKey();
  expect(GALLERY_TUNES.map((t) => t.id)).toEqual(expect.arrayContaining([690204, 1504944]));
  for (const { id } of GALLERY_TUNES) {
    const base = await call<Json>(mock.url, key, 'GET', `/tunes/${id}`);
    expect([id, base.status, base.body.trained_at]).toEqual([id, 200, expect.any(String)]);
  }
  const tune = await createTune(key, { base_tune_id: 690204 });
  expect(tune).toMatchObject({ base_tune_id: 690204, branch: 'sd15' });
  const prompt = await call<Json>(mock.url, key, 'POST', '/tunes/690204/prompts', { prompt: { text: 'sks dog' } });
  expect([prompt.status, prompt.body.tune_id]).toEqual([201, 690204]);
  expect(
    (
      await call(mock.url, key, 'POST', '/tunes', {
        tune: { title: 'x', name: 'man', image_urls: URLS, base_tune_id: 42 },
      })
    ).status,
  ).toBe(422);
});

test('themes answer 201 with an empty body, as documented; the prompts are on the tune', async () => {
  const key = newKey();
  const tune = await createTune(key);
  const res = await request(`${mock.url}/themes`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ theme: 'beach', tune_ids: [tune.id] }),
  });
  expect([res.statusCode, await res.body.text()]).toEqual([201, '']);
  expect((await call<Json[]>(mock.url, key, 'GET', `/tunes/${String(tune.id)}/prompts?limit=20`)).body).toHaveLength(
    10,
  );
});

test('GET /tunes?title= lists only the tunes with that title, paged like any list', async () => {
  const key = newKey();
  const a = await createTune(key, { title: 'same' });
  await createTune(key, { title: 'other' });
  const b = await createTune(key, { title: 'same' });
  const ids = async (query: string) =>
    (await call<Json[]>(mock.url, key, 'GET', `/tunes?${query}`)).body.map((t) => t.id);
  expect(await ids('title=same')).toEqual([b.id, a.id]);
  expect(await ids(`title=same&before_id=${String(b.id)}`)).toEqual([a.id]);
  expect(await ids('title=none')).toEqual([]);
  expect(await ids('')).toHaveLength(3);
});

describe('a prompt posted to a LoRA tune', () => {
  async function trainedLora(base: string, key: string) {
    const lora = (
      await call<Json>(base, key, 'POST', '/tunes', {
        tune: {
          title: 'lora',
          name: 'woman',
          image_urls: URLS,
          branch: 'flux1',
          model_type: 'lora',
          preset: 'flux-lora-fast',
          base_tune_id: 1504944,
        },
      })
    ).body;
    await until(
      async () => (await call<Json>(base, key, 'GET', `/tunes/${String(lora.id)}`)).body,
      (t) => t.trained_at !== null,
    );
    return lora;
  }

  test('by default runs on its base tune with the LoRA loaded, and the answer points to the base', async () => {
    const key = newKey();
    const lora = await trainedLora(mock.url, key);
    const res = await call<Json>(mock.url, key, 'POST', `/tunes/${String(lora.id)}/prompts`, {
      prompt: { text: 'ohwx woman' },
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ tune_id: 1504944, text: `<lora:${String(lora.id)}:1> ohwx woman` });
    const listed = (await call<Json[]>(mock.url, key, 'GET', '/tunes/1504944/prompts')).body;
    expect(listed.map((p) => p.id)).toEqual([res.body.id]);
  });

  test("with loraPrompts: 'refuse', 422 as the service notes say", async () => {
    const refusing = await startMockService({ trainingTime: '150ms', loraPrompts: 'refuse' });
    try {
      const key = newKey();
      const lora = await trainedLora(refusing.url, key);
      const res = await call<Json>(refusing.url, key, 'POST', `/tunes/${String(lora.id)}/prompts`, {
        prompt: { text: 'ohwx woman' },
      });
      expect(res.status).toBe(422);
      expect(res.body.error).toContain('model_type=lora is not supported');
    } finally {
      await refusing.close();
    }
  });
});

test("the README's curl examples under The mock service work exactly as printed (curl's form content type and all)", async () => {
  const lines = blocksUnder('## The mock service', 'sh').flatMap(commandsOf);
  expect(lines.length).toBeGreaterThanOrEqual(2);
  for (const command of lines) {
    const url = /\s(localhost:8080\S*)/.exec(command)![1];
    const data = /\s-d '([^']*)'/.exec(command)?.[1];
    const method = /-X (\w+)/.exec(command)?.[1] ?? (data === undefined ? 'GET' : 'POST');
    // What curl sends: its -d body as is, labelled a form.
    const headers: Record<string, string> = { 'user-agent': 'curl/8.5.0', accept: '*/*' };
    if (data !== undefined) headers['content-type'] = 'application/x-www-form-urlencoded';
    const res = await request(url.replace('localhost:8080', mock.url), {
      method: method as 'GET',
      headers,
      body: data,
    });
    const text = await res.body.text();
    expect([command, res.statusCode]).toEqual([command, 200]);
    if (data !== undefined) expect(JSON.parse(text)).toEqual(JSON.parse(data));
  }
  expect((await call<Json>(mock.url, null, 'GET', '/__mock/faults')).body).toEqual({
    status500Rate: 0.2,
    callbackDropRate: 1,
  });
  mock.setFaults({});
});
