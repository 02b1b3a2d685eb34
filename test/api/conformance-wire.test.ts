/**
 * What the client puts on the wire and how it reads answers, checked on a plain node:http server that records every
 * request: the Bearer header, JSON bodies, multipart bodies in the spec's bracket notation, query strings, paging by
 * `before_id`, empty bodies, and answers that do not fit the spec.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { Response } from 'undici';
import {
  APIError,
  InspectionResult,
  Pack,
  PackDetail,
  Prompt,
  RateLimitError,
  Tune,
  TunesApi,
  UnexpectedResponseError,
} from '../../src/api';
import { z } from 'zod';

const API_KEY = 'sk-wire-test-5b1d0c9e7f';

interface Recorded {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

interface Answer {
  status?: number;
  body?: unknown;
  /** Sent as is instead of JSON. */
  raw?: string;
  headers?: Record<string, string>;
}

let server: Server;
let baseUrl: string;
let recorded: Recorded[] = [];
let answer: (req: Recorded) => Answer = () => ({ body: {} });
let api: TunesApi;
let dir: string;

const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
  'base64',
);
const JPEG = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 16, 0x4a, 0x46, 0x49, 0x46]);

function tune(id: number, extra: Record<string, unknown> = {}) {
  return { id, title: `t${id}`, name: 'woman', trained_at: null, ...extra };
}

function prompt(id: number, extra: Record<string, unknown> = {}) {
  return { id, text: `p${id}`, tune_id: 1, ...extra };
}

/** The multipart body of a recorded request, parsed by undici's own form reader. */
async function formOf(req: Recorded): Promise<FormData> {
  return (await new Response(req.body, {
    headers: { 'content-type': String(req.headers['content-type']) },
  }).formData()) as FormData;
}

function keysOf(form: FormData): string[] {
  return [...form.keys()];
}

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rec = { method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks) };
      recorded.push(rec);
      const a = answer(rec);
      const text = a.raw ?? (a.body === undefined ? '' : JSON.stringify(a.body));
      res.writeHead(a.status ?? 200, { 'content-type': 'application/json', ...a.headers }).end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  api = new TunesApi({ apiKey: API_KEY, baseUrl });
  dir = await mkdtemp(join(tmpdir(), 'tuneflow-wire-'));
});

afterAll(async () => {
  await api.close();
  await new Promise((resolve) => server.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

beforeEach(() => {
  recorded = [];
  answer = () => ({ body: {} });
});

describe('requests', () => {
  test('carry the Bearer key, and a GET has no body', async () => {
    answer = () => ({ body: tune(7) });
    await expect(api.tunes.retrieve(7)).resolves.toMatchObject({ id: 7, title: 't7' });
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({ method: 'GET', url: '/tunes/7' });
    expect(recorded[0].headers.authorization).toBe(`Bearer ${API_KEY}`);
    expect(recorded[0].body.length).toBe(0);
  });

  test('keep the path prefix of the base URL', async () => {
    const prefixed = new TunesApi({ apiKey: API_KEY, baseUrl: `${baseUrl}/api/v1/` });
    try {
      answer = () => ({ body: tune(8) });
      await prefixed.tunes.retrieve(8);
      expect(recorded[0].url).toBe('/api/v1/tunes/8');
    } finally {
      await prefixed.close();
    }
  });

  test('close() may be called twice; a call after it is refused without a request', async () => {
    const closing = new TunesApi({ apiKey: API_KEY, baseUrl });
    await closing.close();
    await expect(closing.close()).resolves.toBeUndefined();
    // undici's own error, as is: using a closed client is a bug of the caller, not a failure of the service.
    await expect(closing.tunes.retrieve(1)).rejects.toMatchObject({
      code: expect.stringMatching(/^UND_ERR_(CLOSED|DESTROYED)$/),
    });
    expect(recorded).toHaveLength(0);
  });

  test('a tune with image_urls is JSON { tune: {...} }', async () => {
    answer = () => ({ body: tune(9) });
    const input = {
      title: 'order-9',
      name: 'woman',
      branch: 'flux1' as const,
      model_type: 'lora' as const,
      preset: 'flux-lora-portrait' as const,
      base_tune_id: 1504944,
      image_urls: ['https://example.com/1.jpg', 'https://example.com/2.jpg'],
      characteristics: { eye_color: 'blue' },
      prompts_attributes: [{ text: 'ohwx woman', lora_scale: 0.8 }],
    };
    await api.tunes.create(input);
    expect(recorded[0]).toMatchObject({ method: 'POST', url: '/tunes' });
    expect(recorded[0].headers['content-type']).toBe('application/json');
    expect(JSON.parse(recorded[0].body.toString())).toEqual({ tune: input });
  });

  test('a tune with images is multipart, in bracket notation, files from a path, a Buffer and a Blob', async () => {
    answer = () => ({ body: tune(10) });
    const path = join(dir, 'face-1.jpg');
    await writeFile(path, JPEG);
    const blob = new Blob([Buffer.from('blob-bytes')], { type: 'image/webp' });
    await api.tunes.create({
      title: 'order-10',
      name: 'man',
      images: [path, PNG, blob],
      model_type: null,
      face_crop: true,
      steps: 500,
      characteristics: { eye_color: 'green', age: 30 },
      prompts_attributes: [
        { text: 'ohwx man, portrait', num_images: 2 },
        { text: 'ohwx man, beach', input_image: PNG, controlnet: 'pose' },
      ],
    });
    const req = recorded[0];
    expect(req.headers['content-type']).toMatch(/^multipart\/form-data; boundary=/);
    const form = await formOf(req);
    expect(keysOf(form).sort()).toEqual(
      [
        'tune[title]',
        'tune[name]',
        'tune[images][]',
        'tune[images][]',
        'tune[images][]',
        'tune[model_type]',
        'tune[face_crop]',
        'tune[steps]',
        'tune[characteristics][eye_color]',
        'tune[characteristics][age]',
        'tune[prompts_attributes][0][text]',
        'tune[prompts_attributes][0][num_images]',
        'tune[prompts_attributes][1][text]',
        'tune[prompts_attributes][1][input_image]',
        'tune[prompts_attributes][1][controlnet]',
      ].sort(),
    );
    expect(form.get('tune[title]')).toBe('order-10');
    expect(form.get('tune[model_type]')).toBe('');
    expect(form.get('tune[face_crop]')).toBe('true');
    expect(form.get('tune[steps]')).toBe('500');
    expect(form.get('tune[characteristics][age]')).toBe('30');
    expect(form.get('tune[prompts_attributes][1][controlnet]')).toBe('pose');
    const files = form.getAll('tune[images][]') as File[];
    expect(files.map((f) => f.name)).toEqual(['face-1.jpg', 'image.png', 'image']);
    expect(Buffer.from(await files[0].arrayBuffer())).toEqual(JPEG);
    expect(Buffer.from(await files[1].arrayBuffer())).toEqual(PNG);
    expect(files[1].type).toBe('image/png');
    expect(Buffer.from(await files[2].arrayBuffer()).toString()).toBe('blob-bytes');
    const input = form.get('tune[prompts_attributes][1][input_image]') as File;
    expect(Buffer.from(await input.arrayBuffer())).toEqual(PNG);
  });

  test('a multipart body is the input as it was at the call, though the caller changes it while files are read', async () => {
    answer = () => ({ body: tune(12) });
    const path = join(dir, 'face-2.jpg');
    await writeFile(path, JPEG);
    const input = {
      title: 'order-12',
      name: 'man',
      images: [path, PNG],
      characteristics: { eye_color: 'green' },
      prompts_attributes: [{ text: 'ohwx man, portrait', num_images: 2 }],
    };
    const created = api.tunes.create(input);
    // The input was checked as it is (no copy): what is sent must be what was checked.
    input.characteristics.eye_color = 'changed';
    input.prompts_attributes[0].text = '';
    input.prompts_attributes[0].num_images = 99;
    await created;
    const form = await formOf(recorded[0]);
    expect(form.get('tune[characteristics][eye_color]')).toBe('green');
    expect(form.get('tune[prompts_attributes][0][text]')).toBe('ohwx man, portrait');
    expect(form.get('tune[prompts_attributes][0][num_images]')).toBe('2');
  });

  test('a prompt is JSON { prompt: {...} } without a file, multipart prompt[...] with one', async () => {
    answer = () => ({ body: prompt(11) });
    await api.prompts.create(5, { text: 'ohwx man', num_images: 2, style: null, backend_version: '1' });
    expect(recorded[0]).toMatchObject({ method: 'POST', url: '/tunes/5/prompts' });
    expect(JSON.parse(recorded[0].body.toString())).toEqual({
      prompt: { text: 'ohwx man', num_images: 2, style: null, backend_version: '1' },
    });

    await api.prompts.create(5, {
      text: 'ohwx man',
      input_image: PNG,
      mask_image: JPEG,
      controlnet: 'canny',
      cfg_scale: 7.5,
    });
    const form = await formOf(recorded[1]);
    expect(keysOf(form).sort()).toEqual(
      ['prompt[text]', 'prompt[input_image]', 'prompt[mask_image]', 'prompt[controlnet]', 'prompt[cfg_scale]'].sort(),
    );
    expect(form.get('prompt[cfg_scale]')).toBe('7.5');
    expect((form.get('prompt[mask_image]') as File).name).toBe('image.jpg');
  });

  test('a pack tune sends prompt_attributes.callback as tune[prompt_attributes][callback]', async () => {
    answer = () => ({ body: tune(12) });
    const callback = 'https://example.com/prompt?job=12';
    await api.packs.createTune(260, {
      title: 'order-12',
      name: 'woman',
      image_urls: ['https://e.com/1.jpg'],
      prompt_attributes: { callback },
    });
    expect(recorded[0]).toMatchObject({ method: 'POST', url: '/p/260/tunes' });
    expect(JSON.parse(recorded[0].body.toString())).toEqual({
      tune: { title: 'order-12', name: 'woman', image_urls: ['https://e.com/1.jpg'], prompt_attributes: { callback } },
    });

    await api.packs.createTune(260, {
      title: 'order-13',
      name: 'woman',
      images: [PNG],
      prompt_attributes: { callback },
    });
    const form = await formOf(recorded[1]);
    expect(form.get('tune[prompt_attributes][callback]')).toBe(callback);
    expect(form.getAll('tune[images][]')).toHaveLength(1);
  });

  test('image inspection is always a form: name plus file or file_url', async () => {
    answer = () => ({ body: { blurry: false, selfie: true, age: '30-40' } });
    await expect(api.images.inspect({ name: 'man', file_url: 'https://example.com/1.jpg' })).resolves.toMatchObject({
      selfie: true,
    });
    expect(recorded[0]).toMatchObject({ method: 'POST', url: '/images/inspect' });
    let form = await formOf(recorded[0]);
    expect(keysOf(form).sort()).toEqual(['file_url', 'name']);
    expect(form.get('name')).toBe('man');

    await api.images.inspect({ name: 'woman', file: PNG });
    form = await formOf(recorded[1]);
    expect(keysOf(form).sort()).toEqual(['file', 'name']);
    expect(Buffer.from(await (form.get('file') as File).arrayBuffer())).toEqual(PNG);
  });

  test('themes, likes and packs use their paths and bodies', async () => {
    answer = (req) => (req.url.includes('/likes') ? { status: req.method === 'POST' ? 201 : 200 } : { body: [] });
    await api.themes.create({ theme: 'beach', tune_ids: [1, 2], prompt_attributes: { num_images: 1, w: 512, h: 768 } });
    await expect(api.likes.create(44)).resolves.toBeUndefined();
    await expect(api.likes.delete(44)).resolves.toBeUndefined();
    await api.packs.list({ public: true, listed: true });
    expect(recorded.map((r) => `${r.method} ${r.url}`)).toEqual([
      'POST /themes',
      'POST /prompts/44/likes',
      'DELETE /prompts/44/likes',
      'GET /packs?public=true&listed=true',
    ]);
    expect(JSON.parse(recorded[0].body.toString())).toEqual({
      theme: 'beach',
      tune_ids: [1, 2],
      prompt_attributes: { num_images: 1, w: 512, h: 768 },
    });
  });

  test('deletes: a tune delete takes an empty body or any object; a prompt delete returns its message', async () => {
    answer = () => ({ status: 200 });
    await expect(api.tunes.delete(3)).resolves.toEqual({});
    answer = () => ({ body: { id: 3, title: 'gone' } });
    await expect(api.tunes.delete(3)).resolves.toEqual({ id: 3, title: 'gone' });
    answer = () => ({ body: { message: 'Prompt deleted' } });
    await expect(api.prompts.delete(3, 4)).resolves.toEqual({ message: 'Prompt deleted' });
    expect(recorded.map((r) => `${r.method} ${r.url}`)).toEqual([
      'DELETE /tunes/3',
      'DELETE /tunes/3',
      'DELETE /tunes/3/prompts/4',
    ]);
  });
});

describe('lists', () => {
  /** Serves ids `total..1`, newest first, honouring before_id and limit (and refusing offsets, to prove none is used). */
  function serveTunes(total: number) {
    answer = (req) => {
      const query = new URL(req.url, 'http://x').searchParams;
      if (query.has('offset') && query.has('before_id'))
        return { status: 400, body: { error: 'offset with before_id' } };
      const limit = Number(query.get('limit') ?? 20);
      const before = Number(query.get('before_id') ?? total + 1);
      const offset = Number(query.get('offset') ?? 0);
      const ids: number[] = [];
      for (let id = before - 1 - offset; id >= 1 && ids.length < limit; id--) ids.push(id);
      return { body: ids.map((id) => tune(id)) };
    };
  }

  test('awaiting gives the first page with the given params', async () => {
    serveTunes(10);
    const page = await api.tunes.list({ limit: 3, offset: 2 });
    expect(page.map((t) => t.id)).toEqual([8, 7, 6]);
    expect(recorded.map((r) => r.url)).toEqual(['/tunes?limit=3&offset=2']);
  });

  test('awaiting twice does not ask twice', async () => {
    serveTunes(10);
    const list = api.tunes.list({ limit: 2 });
    expect((await list).map((t) => t.id)).toEqual([10, 9]);
    expect((await list).map((t) => t.id)).toEqual([10, 9]);
    expect(recorded).toHaveLength(1);
  });

  test('later pages keep the params as they were when the list opened', async () => {
    serveTunes(7);
    const params = { limit: 3, title: 't' };
    const ids: number[] = [];
    for await (const t of api.tunes.list(params)) {
      ids.push(t.id);
      params.limit = 500;
      params.title = 'other';
    }
    expect(ids).toEqual([7, 6, 5, 4, 3, 2, 1]);
    expect(recorded.map((r) => r.url)).toEqual([
      '/tunes?limit=3&title=t',
      '/tunes?before_id=5&limit=3&title=t',
      '/tunes?before_id=2&limit=3&title=t',
    ]);
  });

  test('iterating pages with before_id = the last id, and stops on a short page', async () => {
    serveTunes(7);
    const ids: number[] = [];
    for await (const t of api.tunes.list({ limit: 3 })) ids.push(t.id);
    expect(ids).toEqual([7, 6, 5, 4, 3, 2, 1]);
    expect(recorded.map((r) => r.url)).toEqual([
      '/tunes?limit=3',
      '/tunes?before_id=5&limit=3',
      '/tunes?before_id=2&limit=3',
    ]);
  });

  test('iterating stops on an empty page', async () => {
    serveTunes(6);
    const ids: number[] = [];
    for await (const t of api.tunes.list({ limit: 3 })) ids.push(t.id);
    expect(ids).toEqual([6, 5, 4, 3, 2, 1]);
    expect(recorded.map((r) => r.url)).toEqual([
      '/tunes?limit=3',
      '/tunes?before_id=4&limit=3',
      '/tunes?before_id=1&limit=3',
    ]);
  });

  test('iterating without a limit pages by the service default of 20', async () => {
    serveTunes(45);
    let count = 0;
    for await (const _ of api.tunes.list()) count++;
    expect(count).toBe(45);
    expect(recorded.map((r) => r.url)).toEqual(['/tunes', '/tunes?before_id=26', '/tunes?before_id=6']);
  });

  test('an offset is used for the first page only; later pages use before_id', async () => {
    serveTunes(10);
    const ids: number[] = [];
    for await (const t of api.tunes.list({ limit: 4, offset: 3 })) ids.push(t.id);
    expect(ids).toEqual([7, 6, 5, 4, 3, 2, 1]);
    expect(recorded.map((r) => r.url)).toEqual(['/tunes?limit=4&offset=3', '/tunes?before_id=4&limit=4']);
  });

  test('breaking out of the loop stops the paging', async () => {
    serveTunes(100);
    for await (const t of api.tunes.list({ limit: 5 })) if (t.id === 94) break;
    expect(recorded).toHaveLength(2);
  });

  test('pages() yields whole pages; prompt lists page the same way on both paths', async () => {
    answer = (req) => {
      const query = new URL(req.url, 'http://x').searchParams;
      const before = Number(query.get('before_id') ?? 6);
      const ids = [before - 1, before - 2].filter((id) => id >= 1);
      return { body: ids.map((id) => prompt(id)) };
    };
    const pages: number[][] = [];
    for await (const page of api.prompts.list(9, { limit: 2 }).pages()) pages.push(page.map((p) => p.id));
    expect(pages).toEqual([[5, 4], [3, 2], [1]]);
    const all: number[] = [];
    for await (const p of api.prompts.listAll({ limit: 2 })) all.push(p.id);
    expect(all).toEqual([5, 4, 3, 2, 1]);
    expect(recorded.map((r) => r.url)).toEqual([
      '/tunes/9/prompts?limit=2',
      '/tunes/9/prompts?before_id=4&limit=2',
      '/tunes/9/prompts?before_id=2&limit=2',
      '/prompts?limit=2',
      '/prompts?before_id=4&limit=2',
      '/prompts?before_id=2&limit=2',
    ]);
  });

  test('an error on a later page rejects the loop', async () => {
    answer = (req) =>
      req.url.includes('before_id') ? { status: 500, body: { error: 'boom' } } : { body: [tune(9), tune(8)] };
    const seen: number[] = [];
    await expect(
      (async () => {
        for await (const t of api.tunes.list({ limit: 2 })) seen.push(t.id);
      })(),
    ).rejects.toMatchObject({ status: 500, kind: 'ServerError', path: '/tunes?before_id=8&limit=2' });
    expect(seen).toEqual([9, 8]);
  });
});

describe('answers', () => {
  test('unknown fields pass through', async () => {
    answer = () => ({
      body: prompt(3, { images: ['https://cdn/1.png'], cost_mc: 1200, content_types: ['image/png'] }),
    });
    await expect(api.prompts.retrieve(1, 3)).resolves.toMatchObject({ cost_mc: 1200, content_types: ['image/png'] });
  });

  test('a 2xx body that does not fit the spec is an UnexpectedResponseError', async () => {
    answer = () => ({ body: { id: 'seven', title: 't' } });
    const error = await api.tunes.retrieve(7).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnexpectedResponseError);
    expect(error).toMatchObject({ method: 'GET', path: '/tunes/7', body: { id: 'seven' }, kind: 'UnexpectedResponse' });
    expect((error as Error).message).toMatch(/id/);
  });

  test('a 2xx body that is not JSON, or empty where an object is due, is an UnexpectedResponseError', async () => {
    answer = () => ({ raw: '<html>maintenance</html>' });
    await expect(api.tunes.retrieve(7)).rejects.toMatchObject({
      kind: 'UnexpectedResponse',
      body: '<html>maintenance</html>',
    });
    answer = () => ({ raw: '' });
    await expect(api.prompts.retrieve(1, 7)).rejects.toBeInstanceOf(UnexpectedResponseError);
    answer = () => ({ body: { not: 'a list' } });
    await expect(api.tunes.list()).rejects.toBeInstanceOf(UnexpectedResponseError);
  });

  test('a non-2xx text body is kept as text', async () => {
    answer = () => ({ status: 502, raw: 'Bad Gateway' });
    const error = await api.tunes.retrieve(7).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(APIError);
    expect(error).toMatchObject({ status: 502, kind: 'ServerError', body: 'Bad Gateway' });
  });

  test('429 with Retry-After in seconds gives retryAfterMs', async () => {
    answer = () => ({ status: 429, body: { error: 'slow down' }, headers: { 'retry-after': '7' } });
    const error = await api.tunes.retrieve(7).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitError);
    expect((error as RateLimitError).retryAfterMs).toBe(7000);
    expect((error as Error).message).toBe('GET /tunes/7 was rate limited (429, Retry-After 7 s): slow down');
  });

  test('429 without Retry-After says it had none', async () => {
    answer = () => ({ status: 429, body: { error: 'slow down' } });
    const error = await api.tunes.retrieve(7).catch((e: unknown) => e);
    expect(error).toMatchObject({ kind: 'RateLimited', retryAfterMs: undefined });
    expect((error as Error).message).toBe('GET /tunes/7 was rate limited (429, no Retry-After): slow down');
  });

  test('403 is Unauthorized too, and names the setting that holds the key, never the key', async () => {
    answer = () => ({ status: 403, body: { error: 'Forbidden' } });
    const error = await api.tunes.retrieve(7).catch((e: unknown) => e);
    expect(error).toMatchObject({ status: 403, kind: 'Unauthorized' });
    expect((error as Error).message).toBe(
      "GET /tunes/7 failed with 403: Forbidden; the service did not allow this to the API key: check it (TUNEFLOW_API_KEY for `tuneflow worker` and the plugin's api.apiKey)",
    );
    expect((error as Error).message).not.toContain(API_KEY);
  });

  test('neither the client nor its errors show the API key', async () => {
    answer = () => ({ status: 401, body: { error: 'Unauthorized' } });
    const error = await api.tunes.retrieve(7).catch((e: unknown) => e);
    expect(error).toMatchObject({ status: 401, kind: 'Unauthorized' });
    expect(inspect(error, { depth: 10, showHidden: true })).not.toContain(API_KEY);
    expect(inspect(api, { depth: 10, showHidden: true })).not.toContain(API_KEY);
    expect(JSON.stringify(api)).not.toContain(API_KEY);
  });
});

describe('how answers are read', () => {
  let odd: Server;
  let oddUrl: string;
  let oddApi: TunesApi;
  /** How the odd server answers the next request: it writes these pieces, a turn of the event loop apart. */
  let pieces: (string | Buffer)[] = [];
  let earlyHints = false;

  beforeAll(async () => {
    odd = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        if (earlyHints) res.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' });
        const body = Buffer.concat(pieces.map((p) => (typeof p === 'string' ? Buffer.from(p) : p)));
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
        const rest = [...pieces];
        const next = (): void => {
          const piece = rest.shift();
          if (piece === undefined) res.end();
          else res.write(piece, () => setImmediate(next));
        };
        next();
      });
    });
    await new Promise<void>((resolve) => odd.listen(0, '127.0.0.1', resolve));
    oddUrl = `http://127.0.0.1:${(odd.address() as AddressInfo).port}`;
    oddApi = new TunesApi({ apiKey: API_KEY, baseUrl: oddUrl });
  });

  afterAll(async () => {
    await oddApi.close();
    await new Promise((resolve) => odd.close(resolve));
  });

  beforeEach(() => {
    earlyHints = false;
  });

  test('a body in pieces, with a character split between two of them, reads whole', async () => {
    const text = JSON.stringify(tune(9, { title: 'café ☕ 東京' }));
    const bytes = Buffer.from(text);
    const cut = bytes.indexOf(Buffer.from('☕')) + 1;
    pieces = [bytes.subarray(0, 10), bytes.subarray(10, cut), bytes.subarray(cut)];
    await expect(oddApi.tunes.retrieve(9)).resolves.toMatchObject({ id: 9, title: 'café ☕ 東京' });
  });

  test('a UTF-8 byte order mark before the JSON is dropped', async () => {
    pieces = [Buffer.from([0xef, 0xbb, 0xbf]), JSON.stringify(tune(10))];
    await expect(oddApi.tunes.retrieve(10)).resolves.toMatchObject({ id: 10 });
  });

  test('an informational 103 answer before the real one is passed over', async () => {
    earlyHints = true;
    pieces = [JSON.stringify(tune(11))];
    await expect(oddApi.tunes.retrieve(11)).resolves.toMatchObject({ id: 11 });
  });

  test("the caller's async context is still there after a call, answered or failed", async () => {
    const context = new AsyncLocalStorage<string>();
    pieces = [JSON.stringify(tune(12))];
    const seen = await context.run('activity-1', async () => {
      await oddApi.tunes.retrieve(12);
      return context.getStore();
    });
    expect(seen).toBe('activity-1');
    answer = () => ({ status: 404, body: { error: 'not found' } });
    const seenAfterError = await context.run('activity-2', async () => {
      await api.tunes.retrieve(12).catch(() => undefined);
      return context.getStore();
    });
    expect(seenAfterError).toBe('activity-2');
  });
});

describe('answer validation agrees with the zod schemas', () => {
  const fullTune = {
    ...tune(21),
    token: 'ohwx',
    base_tune_id: null,
    args: { anything: [1, 'two'] },
    steps: null,
    face_crop: true,
    ckpt_urls: [],
    eta: '2025-03-01T10:07:00.000Z',
    branch: 'fast',
    model_type: null,
    orig_images: ['https://cdn/1.jpg'],
    extra: { nested: true },
  };
  const cases: { name: string; schema: z.ZodType; call: (a: TunesApi) => Promise<unknown>; body: unknown }[] = [
    { name: 'a full tune', schema: Tune, call: (a) => a.tunes.retrieve(21), body: fullTune },
    {
      name: 'a tune with an id of 1.5',
      schema: Tune,
      call: (a) => a.tunes.retrieve(21),
      body: { ...fullTune, id: 1.5 },
    },
    {
      name: 'a tune with an unsafe id',
      schema: Tune,
      call: (a) => a.tunes.retrieve(21),
      body: { ...fullTune, id: 2 ** 53 },
    },
    {
      name: 'a tune with a string id',
      schema: Tune,
      call: (a) => a.tunes.retrieve(21),
      body: { ...fullTune, id: '21' },
    },
    { name: 'a tune without an id', schema: Tune, call: (a) => a.tunes.retrieve(21), body: { title: 'x' } },
    {
      name: 'a tune with a numeric title',
      schema: Tune,
      call: (a) => a.tunes.retrieve(21),
      body: { ...fullTune, title: 5 },
    },
    {
      name: 'ckpt_urls of numbers',
      schema: Tune,
      call: (a) => a.tunes.retrieve(21),
      body: { ...fullTune, ckpt_urls: [1] },
    },
    {
      name: 'orig_images null',
      schema: Tune,
      call: (a) => a.tunes.retrieve(21),
      body: { ...fullTune, orig_images: null },
    },
    { name: 'an array for a tune', schema: Tune, call: (a) => a.tunes.retrieve(21), body: [fullTune] },
    { name: 'null for a tune', schema: Tune, call: (a) => a.tunes.retrieve(21), body: null },
    {
      name: 'a settled prompt',
      schema: Prompt,
      call: (a) => a.prompts.retrieve(1, 3),
      body: prompt(3, { images: ['https://cdn/1.png'], user_error: null, cost_mc: 10 }),
    },
    {
      name: 'a prompt with a null image',
      schema: Prompt,
      call: (a) => a.prompts.retrieve(1, 3),
      body: prompt(3, { images: ['https://cdn/1.png', null] }),
    },
    {
      name: 'a prompt without text',
      schema: Prompt,
      call: (a) => a.prompts.retrieve(1, 3),
      body: { id: 3, tune_id: 1 },
    },
    {
      name: 'a prompt with a numeric user_error',
      schema: Prompt,
      call: (a) => a.prompts.retrieve(1, 3),
      body: prompt(3, { user_error: 5 }),
    },
    {
      name: 'a pack with costs and prompts per class',
      schema: PackDetail,
      call: (a) => a.packs.retrieve(260),
      body: {
        id: 260,
        cost_mc_hash: { man: 150000 },
        costs: { man: { cost: 1.5, num_images: 6 } },
        prompts_per_class: { man: [{ text: 'ohwx man' }] },
      },
    },
    {
      name: 'a pack with a string cost',
      schema: PackDetail,
      call: (a) => a.packs.retrieve(260),
      body: { id: 260, cost_mc_hash: { man: 'cheap' } },
    },
    {
      name: 'a pack with a prompt that is not an object',
      schema: PackDetail,
      call: (a) => a.packs.retrieve(260),
      body: { id: 260, prompts_per_class: { man: [1] } },
    },
    {
      name: 'a pack list with a bad entry',
      schema: z.array(Pack),
      call: (a) => a.packs.list(),
      body: [{ id: 1 }, { id: 'two' }],
    },
    {
      name: 'an inspection with a numeric age',
      schema: InspectionResult,
      call: (a) => a.images.inspect({ name: 'man', file_url: 'https://e.com/1.jpg' }),
      body: { age: 30, blurry: false, hair_color: 'red' },
    },
    {
      name: 'an inspection with a string flag',
      schema: InspectionResult,
      call: (a) => a.images.inspect({ name: 'man', file_url: 'https://e.com/1.jpg' }),
      body: { blurry: 'no' },
    },
  ];

  test.each(cases)('$name', async ({ schema, call, body }) => {
    answer = () => ({ body });
    const expected = schema.safeParse(body);
    const outcome = await call(api).then(
      (value) => ({ ok: true as const, value }),
      (error: unknown) => ({ ok: false as const, error }),
    );
    expect(outcome.ok).toBe(expected.success);
    if (outcome.ok) expect(outcome.value).toEqual(expected.data);
    else expect(outcome.error).toBeInstanceOf(UnexpectedResponseError);
  });
});
