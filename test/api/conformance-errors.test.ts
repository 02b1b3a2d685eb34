/**
 * Every failure kind, from the real mock service where it can produce it (401, 404, 422, 400, 429, 500, 504) and
 * from small loopback servers where it cannot (a closed port, a server that never answers, a stalled body): the
 * error class, its fields, no retry, the caller's abort kept as is, and never the API key in an error.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import { getEventListeners } from 'node:events';
import type { AddressInfo } from 'node:net';
import { inspect } from 'node:util';
import { request } from 'undici';
import {
  APIError,
  ConnectionError,
  GatewayTimeoutError,
  NotFoundError,
  OffsetTooDeepError,
  RateLimitError,
  ServerError,
  TimeoutError,
  TunesApi,
  UnauthorizedError,
  ValidationError,
} from '../../src/api';
import { startMockService, type MockService } from '../../src/mock-service';

const KEY = 'sk-errors-primary-7c4e2a91d0';
const OTHER_KEY = 'sk-errors-other-3f8b6d05e2';
const WRONG_KEY = 'sk-errors-wrong-9a1c7e4b28';
const KEYS = [KEY, OTHER_KEY, WRONG_KEY];
const URLS = ['https://example.com/train/1.jpg'];
const FLUX_BASE = 1504944;

let mock: MockService;
let api: TunesApi;
const opened: TunesApi[] = [];

function client(apiKey: string, baseUrl: string, timeout?: string): TunesApi {
  const c = new TunesApi({ apiKey, baseUrl, ...(timeout ? { timeout: timeout as '1s' } : {}) });
  opened.push(c);
  return c;
}

/** The rejection of `promise`, checked to carry none of the API keys anywhere (message, fields, cause). */
async function failureOf(promise: PromiseLike<unknown>): Promise<unknown> {
  const error = await Promise.resolve(promise).then(
    () => {
      throw new Error('expected a rejection');
    },
    (err: unknown) => err,
  );
  const shown = [inspect(error, { depth: 10, showHidden: true }), JSON.stringify(error) ?? '', String(error)];
  for (const text of shown) for (const key of KEYS) expect(text).not.toContain(key);
  return error;
}

const routeCount = (route: string) => mock.stats().routes[route] ?? 0;

beforeAll(async () => {
  // Prompts posted to a LoRA tune answered 422, as the service notes say (the mock's other setting runs them on the base).
  mock = await startMockService({
    apiKeys: [KEY, OTHER_KEY],
    trainingTime: '300ms',
    inferenceTime: '100ms',
    loraPrompts: 'refuse',
  });
  api = client(KEY, mock.url);
});

afterAll(async () => {
  await Promise.all(opened.map((c) => c.close()));
  await mock.close();
});

afterEach(() => mock.setFaults({}));

describe('answers of the mock service', () => {
  test('401 for a key the service does not know: UnauthorizedError with method and path, naming the setting', async () => {
    const error = await failureOf(client(WRONG_KEY, mock.url).tunes.retrieve(FLUX_BASE));
    expect(error).toBeInstanceOf(UnauthorizedError);
    expect(error).toMatchObject({ status: 401, kind: 'Unauthorized', method: 'GET', path: `/tunes/${FLUX_BASE}` });
    expect((error as Error).message).toMatch(
      /failed with 401: .*the service refused the API key: check it \(TUNEFLOW_API_KEY/,
    );
    expect((error as Error).message).not.toContain(WRONG_KEY);
  });

  test("404 for another account's tune and prompt", async () => {
    const tune = await api.tunes.create({ title: 'mine', name: 'man', branch: 'fast', image_urls: URLS });
    const prompt = await api.prompts.create(tune.id, { text: 'ohwx man' });
    const other = client(OTHER_KEY, mock.url);
    const error = await failureOf(other.tunes.retrieve(tune.id));
    expect(error).toBeInstanceOf(NotFoundError);
    expect(error).toMatchObject({ status: 404, kind: 'NotFound', path: `/tunes/${tune.id}` });
    await expect(failureOf(other.prompts.retrieve(tune.id, prompt.id))).resolves.toBeInstanceOf(NotFoundError);
    await expect(failureOf(other.tunes.delete(tune.id))).resolves.toBeInstanceOf(NotFoundError);
    // Still there for its owner.
    await expect(api.tunes.retrieve(tune.id)).resolves.toMatchObject({ id: tune.id });
  });

  test('422 from rules only the service knows: ValidationError with field errors', async () => {
    const lora = await api.tunes.create({
      title: 'lora',
      name: 'woman',
      branch: 'flux1',
      model_type: 'lora',
      preset: 'flux-lora-fast',
      base_tune_id: FLUX_BASE,
      image_urls: URLS,
    });
    const onLora = await failureOf(api.prompts.create(lora.id, { text: 'ohwx woman' }));
    expect(onLora).toBeInstanceOf(ValidationError);
    expect(onLora).toMatchObject({
      status: 422,
      kind: 'Validation',
      method: 'POST',
      path: `/tunes/${lora.id}/prompts`,
    });
    expect((onLora as Error).message).toContain('model_type=lora is not supported');
    expect(
      Object.values((onLora as ValidationError).fieldErrors)
        .flat()
        .join(' '),
    ).toContain('model_type=lora');

    const [pack] = await api.packs.list();
    const classes = Object.keys(pack.cost_mc_hash ?? {});
    const unsupported = ['man', 'woman', 'cat', 'dog', 'boy', 'girl', 'style'].find((c) => !classes.includes(c))!;
    const wrongClass = await failureOf(
      api.packs.createTune(pack.id, { title: 'wrong-class', name: unsupported, image_urls: URLS }),
    );
    expect(wrongClass).toBeInstanceOf(ValidationError);
    expect(Object.keys((wrongClass as ValidationError).fieldErrors).join(' ')).toContain('name');
  });

  test("422 from the service's schema rules (raw, past the client's own checks): { error, <field>: [rule] }", async () => {
    const res = await request(`${mock.url}/tunes`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ tune: { title: 'no-images', name: 'man', branch: 'fast' } }),
    });
    const body = (await res.body.json()) as Record<string, unknown>;
    expect(res.statusCode).toBe(422);
    expect(body.error).toEqual(expect.stringContaining('exactly one of images or image_urls'));
    const error = APIError.generate(res.statusCode, { method: 'POST', path: '/tunes' }, body, res.headers);
    expect(error).toBeInstanceOf(ValidationError);
    expect(Object.values((error as ValidationError).fieldErrors).flat()).toContain(
      'exactly one of images or image_urls is required',
    );
  });

  test.each([
    { path: '/tunes?offset=201', bound: 'tunes' },
    { path: '/prompts?offset=10001', bound: 'prompts' },
  ])(
    '400 for a deep offset on $bound (raw, past the client): OffsetTooDeepError naming before_id',
    async ({ path }) => {
      const res = await request(`${mock.url}${path}`, { headers: { authorization: `Bearer ${KEY}` } });
      const body: unknown = await res.body.json();
      expect(res.statusCode).toBe(400);
      const error = APIError.generate(res.statusCode, { method: 'GET', path }, body, res.headers);
      expect(error).toBeInstanceOf(OffsetTooDeepError);
      expect(error.message).toContain('before_id');
    },
  );

  test('the offsets the spec allows reach the service and are answered', async () => {
    await expect(api.tunes.list({ offset: 200 })).resolves.toEqual(expect.any(Array));
    await expect(api.prompts.listAll({ offset: 10_000 })).resolves.toEqual(expect.any(Array));
  });

  test('500 (injected): ServerError, sent once, never retried', async () => {
    mock.setFaults({ status500Rate: 1, faultRoutes: ['GET /tunes/:id'], maxFaults: 1 });
    const before = routeCount('GET /tunes/:id');
    const error = await failureOf(api.tunes.retrieve(FLUX_BASE));
    expect(error).toBeInstanceOf(ServerError);
    expect(error).toMatchObject({ status: 500, kind: 'ServerError', method: 'GET', path: `/tunes/${FLUX_BASE}` });
    expect(routeCount('GET /tunes/:id') - before).toBe(1);
    // The fault budget is spent: the next call goes through.
    await expect(api.tunes.retrieve(FLUX_BASE)).resolves.toMatchObject({ id: FLUX_BASE });
  });

  test('429 (injected): RateLimitError with retryAfterMs from Retry-After', async () => {
    mock.setFaults({ status429Rate: 1, faultRoutes: ['GET /tunes/:id/prompts'] });
    const before = routeCount('GET /tunes/:id/prompts');
    const refusedBefore = mock.stats().refused['GET /tunes/:id/prompts'] ?? 0;
    const error = await failureOf(api.prompts.list(FLUX_BASE));
    expect(error).toBeInstanceOf(RateLimitError);
    expect(error).toMatchObject({ status: 429, kind: 'RateLimited', retryAfterMs: 1000 });
    expect((error as Error).message).toMatch(/^GET \/tunes\/\d+\/prompts was rate limited \(429, Retry-After 1 s\): /);
    // One request, answered 429: counted apart from those the mock took up.
    expect(routeCount('GET /tunes/:id/prompts') - before).toBe(0);
    expect(mock.stats().refused['GET /tunes/:id/prompts'] - refusedBefore).toBe(1);
  });

  test('504 (injected): GatewayTimeoutError, and the tune was created all the same', async () => {
    mock.setFaults({ status504Rate: 1, faultRoutes: ['POST /tunes'], maxFaults: 1 });
    const before = routeCount('POST /tunes');
    const error = await failureOf(
      api.tunes.create({ title: 'after-504', name: 'man', branch: 'fast', image_urls: URLS }),
    );
    expect(error).toBeInstanceOf(GatewayTimeoutError);
    expect(error).toMatchObject({ status: 504, kind: 'GatewayTimeout', method: 'POST', path: '/tunes' });
    expect(routeCount('POST /tunes') - before).toBe(1);
    const titles: string[] = [];
    for await (const tune of api.tunes.list({ limit: 120 })) titles.push(tune.title ?? '');
    expect(titles.filter((t) => t === 'after-504')).toHaveLength(1);
  });

  test('500 on a later page of an iteration rejects the loop after the items already seen', async () => {
    const own = client(OTHER_KEY, mock.url);
    const tune = await own.tunes.create({ title: 'paged-500', name: 'man', branch: 'fast', image_urls: URLS });
    for (let i = 0; i < 3; i++) await own.prompts.create(tune.id, { text: `ohwx man ${i}` });
    const pages = own.prompts.list(tune.id, { limit: 2 }).pages();
    const first = await pages.next();
    expect(first.value).toHaveLength(2);
    mock.setFaults({ status500Rate: 1, faultRoutes: ['GET /tunes/:id/prompts'] });
    await expect(failureOf(pages.next())).resolves.toBeInstanceOf(ServerError);
  });
});

describe('failures without an answer', () => {
  let silent: Server;
  let silentUrl: string;
  let stalled: Server;
  let stalledUrl: string;
  const hanging: ServerResponse[] = [];
  let silentRequests = 0;

  beforeAll(async () => {
    // Reads the request and never answers.
    silent = createServer((_req, res) => {
      silentRequests++;
      hanging.push(res);
    });
    // Sends the headers and the start of a body, then nothing.
    stalled = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"id": 1, "title": ');
      hanging.push(res);
    });
    for (const s of [silent, stalled]) await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
    silentUrl = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    stalledUrl = `http://127.0.0.1:${(stalled.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    for (const s of [silent, stalled]) {
      s.closeAllConnections();
      await new Promise((resolve) => s.close(resolve));
    }
  });

  test("a closed port: ConnectionError with method, path, the cause, and the service's origin in its message", async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const { port } = probe.address() as AddressInfo;
    await new Promise((resolve) => probe.close(resolve));

    // A path prefix and credentials in the base URL: the message names the origin alone.
    const error = await failureOf(
      client(KEY, `http://user:secret@127.0.0.1:${port}/api?token=secret`).tunes.retrieve(5),
    );
    expect(error).toBeInstanceOf(ConnectionError);
    expect(error).toMatchObject({ kind: 'ConnectionFailure', method: 'GET', path: '/api/tunes/5' });
    expect((error as ConnectionError).cause).toMatchObject({ code: 'ECONNREFUSED' });
    expect((error as Error).message).toBe(
      `GET /api/tunes/5 could not reach the service at http://127.0.0.1:${port}: connect ECONNREFUSED 127.0.0.1:${port}`,
    );
    expect((error as Error).message).not.toContain('secret');
  });

  test('no answer within the client timeout: TimeoutError', async () => {
    const error = await failureOf(client(KEY, silentUrl, '200ms').tunes.retrieve(5));
    expect(error).toBeInstanceOf(TimeoutError);
    expect(error).toMatchObject({ kind: 'ClientTimeout', method: 'GET', path: '/tunes/5', timeoutMs: 200 });
  });

  test('no answer within a per-call timeout: TimeoutError', async () => {
    const error = await failureOf(client(KEY, silentUrl).prompts.create(5, { text: 'x' }, { timeoutMs: 150 }));
    expect(error).toBeInstanceOf(TimeoutError);
    expect(error).toMatchObject({ method: 'POST', path: '/tunes/5/prompts', timeoutMs: 150 });
  });

  test('a body that stops arriving: TimeoutError', async () => {
    const error = await failureOf(client(KEY, stalledUrl).tunes.retrieve(5, { timeoutMs: 200 }));
    expect(error).toBeInstanceOf(TimeoutError);
  });

  test("the caller's abort is rethrown as is, not as a service failure", async () => {
    const c = client(KEY, silentUrl);
    const before = silentRequests;
    const controller = new AbortController();
    const pending = failureOf(c.tunes.retrieve(5, { signal: controller.signal }));
    // Abort once the request is on the server, so it is a request in flight that is aborted.
    while (silentRequests === before) await new Promise((resolve) => setImmediate(resolve));
    const reason = new Error('the user went away');
    controller.abort(reason);
    expect(await pending).toBe(reason);
  });

  test('an abort without a reason is the AbortError of the signal', async () => {
    const controller = new AbortController();
    const pending = failureOf(client(KEY, silentUrl).tunes.list({}, { signal: controller.signal }));
    controller.abort();
    const error = await pending;
    expect(error).toBe(controller.signal.reason);
    expect(error).toMatchObject({ name: 'AbortError' });
  });

  test('an already aborted signal sends nothing', async () => {
    const before = silentRequests;
    const signal = AbortSignal.abort();
    const error = await failureOf(client(KEY, silentUrl).likes.create(3, { signal }));
    expect(error).toBe(signal.reason);
    expect(silentRequests).toBe(before);
  });

  test('an abort while the request waits for a connection is rethrown at once, not once a connection frees', async () => {
    const c = new TunesApi({ apiKey: KEY, baseUrl: silentUrl, connections: 1, timeout: '60s' });
    opened.push(c);
    const before = silentRequests;
    // The only connection is taken by a request the server never answers (it fails when the test servers close).
    void c.tunes.retrieve(5).catch(() => undefined);
    while (silentRequests === before) await new Promise((resolve) => setImmediate(resolve));
    const controller = new AbortController();
    const queued = failureOf(c.tunes.retrieve(6, { signal: controller.signal }));
    const reason = new Error('no longer needed');
    controller.abort(reason);
    expect(await queued).toBe(reason);
    expect(silentRequests).toBe(before + 1);
  });

  test('a finished call leaves no listener on its signal, answered or failed', async () => {
    const controller = new AbortController();
    await api.tunes.retrieve(FLUX_BASE, { signal: controller.signal });
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    await failureOf(api.tunes.retrieve(999_999_999, { signal: controller.signal }));
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    await failureOf(client(KEY, stalledUrl).tunes.retrieve(5, { signal: controller.signal, timeoutMs: 100 }));
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  test('an abort while the answer is being read is rethrown as is too', async () => {
    const controller = new AbortController();
    const pending = failureOf(client(KEY, stalledUrl).tunes.retrieve(5, { signal: controller.signal }));
    await new Promise((resolve) => setTimeout(resolve, 50));
    controller.abort();
    expect(await pending).toBe(controller.signal.reason);
  });
});
