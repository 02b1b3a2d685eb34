/**
 * Open requests: attributes the spec does not list reach the service unchanged, in JSON and in multipart bodies, while
 * every listed one keeps its rules (test/api/bad-input.test.ts). Over real HTTP: a loopback server that records what
 * arrives, and the mock service, which ignores what it does not know, as the service does.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Response } from 'undici';
import { TunesApi } from '../../src/api';
import { startMockService, type MockService } from '../../src/mock-service';

const URLS = ['https://example.com/train/1.jpg', 'https://example.com/train/2.jpg'];
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
  'base64',
);

interface Arrival {
  path: string;
  type: string;
  body: Buffer;
}

let recorder: Server;
let recorderUrl: string;
const arrivals: Arrival[] = [];
let mock: MockService;
const opened: TunesApi[] = [];

function client(baseUrl: string): TunesApi {
  const api = new TunesApi({ apiKey: `sk-${randomUUID()}`, baseUrl });
  opened.push(api);
  return api;
}

beforeAll(async () => {
  recorder = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      arrivals.push({ path: req.url ?? '', type: req.headers['content-type'] ?? '', body: Buffer.concat(chunks) });
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: 1, tune_id: 1, text: 'x', title: 't' }));
    });
  });
  await new Promise<void>((resolve) => recorder.listen(0, '127.0.0.1', resolve));
  recorderUrl = `http://127.0.0.1:${(recorder.address() as AddressInfo).port}`;
  mock = await startMockService({ trainingTime: '200ms', inferenceTime: '100ms' });
});
afterAll(async () => {
  await Promise.all(opened.map((api) => api.close()));
  await mock.close();
  await new Promise((resolve) => recorder.close(resolve));
});
beforeEach(() => (arrivals.length = 0));

const json = (a: Arrival) => JSON.parse(a.body.toString('utf8')) as Record<string, Record<string, unknown>>;
const form = (a: Arrival) => new Response(a.body, { headers: { 'content-type': a.type } }).formData();

test('a tune, a prompt and a pack tune carry their unlisted attributes as given (JSON)', async () => {
  const api = client(recorderUrl);
  await api.tunes.create({ title: 't', name: 'man', image_urls: URLS, workspace_id: 'ws-1', extras: { a: [1] } });
  await api.prompts.create(1, { text: 'x', aspect_ratio: '16:9', resolution: '1080p', cfg_scale: 3 });
  await api.packs.createTune(260, {
    title: 't',
    name: 'man',
    image_urls: URLS,
    branch: 'fast',
    preset: 'flux-lora-portrait',
    characteristics: '{"eye_color":"blue eyes"}',
  });
  expect(arrivals.map((a) => a.path)).toEqual(['/tunes', '/tunes/1/prompts', '/p/260/tunes']);
  expect(json(arrivals[0]).tune).toMatchObject({ workspace_id: 'ws-1', extras: { a: [1] } });
  expect(json(arrivals[1]).prompt).toEqual({ text: 'x', aspect_ratio: '16:9', resolution: '1080p', cfg_scale: 3 });
  expect(json(arrivals[2]).tune).toMatchObject({
    branch: 'fast',
    preset: 'flux-lora-portrait',
    characteristics: '{"eye_color":"blue eyes"}',
  });
});

test('multipart: characteristics as an object (bracket keys) or as a JSON string (one field), extras as fields', async () => {
  const api = client(recorderUrl);
  await api.tunes.create({ title: 't', name: 'man', images: [PNG], characteristics: { eye_color: 'blue' }, x: 'y' });
  await api.packs.createTune(260, { title: 't', name: 'man', images: [PNG], characteristics: '{"eye_color":"blue"}' });
  const [object, string] = await Promise.all(arrivals.map(form));
  expect(object.get('tune[characteristics][eye_color]')).toBe('blue');
  expect(object.get('tune[x]')).toBe('y');
  expect(string.get('tune[characteristics]')).toBe('{"eye_color":"blue"}');
  expect(string.getAll('tune[images][]')).toHaveLength(1);
});

test('the mock takes them too: a multipart pack tune with JSON-string characteristics in branch fast', async () => {
  const api = client(mock.url);
  const pets = (await api.packs.list()).find((p) => p.model_type === null)!;
  const tune = await api.packs.createTune(pets.id, {
    title: 'pack-open',
    name: 'dog',
    images: [PNG],
    branch: 'fast',
    characteristics: '{"fur":"golden"}',
    workspace_id: 'ws-1',
  });
  expect(tune.title).toBe('pack-open');
  expect((await api.tunes.retrieve(tune.id)).branch).toBe('fast');
  const texts = (await api.prompts.list(tune.id)).map((p) => p.text);
  expect(texts.length).toBeGreaterThan(0);
  expect(texts.filter((text) => text.includes('golden fur'))).toHaveLength(texts.length);
  const prompt = await api.prompts.create(tune.id, { text: 'sks dog, {{fur}} fur', aspect_ratio: '1:1' });
  expect(prompt).toMatchObject({ text: 'sks dog, golden fur', aspect_ratio: '1:1' });
});
