/**
 * The service's rate limit in the mock (`rateLimitPerSecond`): N API requests a second per API key, a burst of a
 * second's worth, 429 with Retry-After above it, unprocessed and counted apart from the status faults. Over HTTP on
 * loopback, with rates slow enough that the machine's load cannot refill a bucket between two requests; the bucket's
 * arithmetic on the injector itself, with a clock of the test's own.
 */
import { FaultInjector } from '../../src/mock-service/faults';
import { startMockService, type MockService } from '../../src/mock-service';
import { call, type ErrorJson, type TuneJson } from './loopback';

jest.setTimeout(20_000);

let mock: MockService;
let keys = 0;
const newKey = () => `rate-${++keys}`;

beforeAll(async () => {
  mock = await startMockService({ trainingTime: '200ms', inferenceTime: '100ms' });
});
afterAll(() => mock.close());
beforeEach(() => mock.setFaults({}));

const tuneBody = () => ({
  tune: { title: `t-${Math.random()}`, name: 'man', image_urls: ['https://images.test/1.jpg'] },
});

describe('over HTTP', () => {
  test('over the limit: 429 with Retry-After, not processed, counted apart from the status faults', async () => {
    const key = newKey();
    // One request every 10 s: the second, sent at once, is over it.
    mock.setFaults({ rateLimitPerSecond: 0.1 });
    const before = mock.stats().rateLimited;
    const { routes, refused } = mock.stats();
    expect((await call(mock.url, key, 'POST', '/tunes', tuneBody())).status).toBe(201);
    const over = await call<ErrorJson>(mock.url, key, 'POST', '/tunes', tuneBody());
    expect(over.status).toBe(429);
    expect(over.body.error).toMatch(/rate limit/);
    const retryAfter = Number(over.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(10);
    expect(mock.stats().rateLimited).toBe(before + 1);
    expect(mock.stats().faults.injected).toBe(0);
    // The stats count the create once, and the refused request apart: no double create to misread.
    expect(mock.stats().routes['POST /tunes']).toBe((routes['POST /tunes'] ?? 0) + 1);
    expect(mock.stats().refused['POST /tunes']).toBe((refused['POST /tunes'] ?? 0) + 1);
    mock.setFaults({});
    // Only the first tune was made.
    expect((await call<TuneJson[]>(mock.url, key, 'GET', '/tunes')).body).toHaveLength(1);
  });

  test('per API key: each account has a limit of its own', async () => {
    mock.setFaults({ rateLimitPerSecond: 0.1 });
    const [a, b] = [newKey(), newKey()];
    expect((await call(mock.url, a, 'GET', '/tunes')).status).toBe(200);
    expect((await call(mock.url, a, 'GET', '/tunes')).status).toBe(429);
    expect((await call(mock.url, b, 'GET', '/tunes')).status).toBe(200);
    expect((await call(mock.url, b, 'GET', '/tunes')).status).toBe(429);
  });

  test("a burst of a second's worth passes, the request after it does not", async () => {
    // 2 a second: a bucket of 2, one more after 500 ms; the requests go one after another on loopback.
    mock.setFaults({ rateLimitPerSecond: 2 });
    const key = newKey();
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await call(mock.url, key, 'GET', '/packs')).status);
    expect(statuses).toEqual([200, 200, 429]);
  });

  test('after the Retry-After it named, the key passes again', async () => {
    mock.setFaults({ rateLimitPerSecond: 1 });
    const key = newKey();
    expect((await call(mock.url, key, 'GET', '/tunes')).status).toBe(200);
    const over = await call(mock.url, key, 'GET', '/tunes');
    expect(over.status).toBe(429);
    expect(over.headers['retry-after']).toBe('1');
    await new Promise((resolve) => setTimeout(resolve, Number(over.headers['retry-after']) * 1000));
    expect((await call(mock.url, key, 'GET', '/tunes')).status).toBe(200);
  });

  test('through POST /__mock/faults, shown by GET; {} lifts it; a bad value is named', async () => {
    const key = newKey();
    const set = await call(mock.url, null, 'POST', '/__mock/faults', { rateLimitPerSecond: 0.1 });
    expect(set.status).toBe(200);
    expect((await call(mock.url, null, 'GET', '/__mock/faults')).body).toEqual({ rateLimitPerSecond: 0.1 });
    expect((await call(mock.url, key, 'GET', '/tunes')).status).toBe(200);
    expect((await call(mock.url, key, 'GET', '/tunes')).status).toBe(429);
    await call(mock.url, null, 'POST', '/__mock/faults', {});
    expect((await call(mock.url, key, 'GET', '/tunes')).status).toBe(200);
    for (const bad of [0, -3, 'fast']) {
      const refused = await call<ErrorJson>(mock.url, null, 'POST', '/__mock/faults', { rateLimitPerSecond: bad });
      expect(refused.status).toBe(422);
      expect(refused.body['faults.rateLimitPerSecond']).toEqual(['must be a positive number of requests per second']);
    }
  });

  test('the same limit set again keeps the buckets (the soak sets faults again in bursts); a new one starts afresh', async () => {
    const key = newKey();
    mock.setFaults({ rateLimitPerSecond: 0.1 });
    expect((await call(mock.url, key, 'GET', '/tunes')).status).toBe(200);
    mock.setFaults({ rateLimitPerSecond: 0.1, callbackDropRate: 0.5 });
    expect((await call(mock.url, key, 'GET', '/tunes')).status).toBe(429);
    mock.setFaults({ rateLimitPerSecond: 0.2 });
    expect((await call(mock.url, key, 'GET', '/tunes')).status).toBe(200);
  });

  test('only API requests with a key: a keyless one is a 401, /__mock routes and images are never limited', async () => {
    mock.setFaults({ rateLimitPerSecond: 0.1 });
    for (let i = 0; i < 3; i++) {
      expect((await call(mock.url, null, 'GET', '/tunes')).status).toBe(401);
      expect((await call(mock.url, null, 'GET', '/__mock/stats')).status).toBe(200);
      expect((await call(mock.url, null, 'GET', '/images/1-0.png')).status).toBe(200);
    }
  });

  test('set at start, in force from the first request', async () => {
    const limited = await startMockService({ faults: { rateLimitPerSecond: 0.1 } });
    try {
      expect((await call(limited.url, 'k', 'GET', '/tunes')).status).toBe(200);
      expect((await call(limited.url, 'k', 'GET', '/tunes')).status).toBe(429);
      expect(limited.stats().rateLimited).toBe(1);
    } finally {
      await limited.close();
    }
  });
});

describe("the bucket's arithmetic", () => {
  const injector = (rate: number) => {
    const clock = { ms: 0 };
    const faults = new FaultInjector(new Set(), Math.random, () => clock.ms);
    faults.set({ rateLimitPerSecond: rate });
    return { faults, clock };
  };

  test('N a second: N at once, then one every 1/N s; Retry-After is the whole seconds until the next', () => {
    const { faults, clock } = injector(10);
    for (let i = 0; i < 10; i++) expect(faults.rateLimit('k')).toBeUndefined();
    expect(faults.rateLimit('k')).toBe(1);
    clock.ms = 99;
    expect(faults.rateLimit('k')).toBe(1);
    clock.ms = 100;
    expect(faults.rateLimit('k')).toBeUndefined();
    expect(faults.rateLimit('k')).toBe(1);
    // A second idle refills the bucket, and no more than it holds.
    clock.ms = 5_000;
    for (let i = 0; i < 10; i++) expect(faults.rateLimit('k')).toBeUndefined();
    expect(faults.rateLimit('k')).toBe(1);
    expect(faults.rateLimitedCount).toBe(4);
  });

  test('below one a second: a bucket of one request, and a Retry-After of several seconds', () => {
    const { faults, clock } = injector(0.25);
    expect(faults.rateLimit('k')).toBeUndefined();
    expect(faults.rateLimit('k')).toBe(4);
    clock.ms = 2_500;
    expect(faults.rateLimit('k')).toBe(2);
    clock.ms = 4_000;
    expect(faults.rateLimit('k')).toBeUndefined();
  });

  test('each refusal is kept with its route and how many requests came in the 100 ms and the second before it', () => {
    const { faults, clock } = injector(5);
    clock.ms = 10_000;
    for (let i = 0; i < 3; i++) faults.rateLimit('k', 'GET /tunes');
    // The bucket full again (5): five pass, the sixth is refused, nine requests in the second up to it.
    clock.ms = 10_950;
    for (let i = 0; i < 6; i++) faults.rateLimit('k', 'POST /tunes');
    expect(
      faults.rateLimitRefusals.map(({ route, inLast100Ms, inLastSecond }) => [route, inLast100Ms, inLastSecond]),
    ).toEqual([['POST /tunes', 6, 9]]);
    // A second and more later, the earlier requests no longer count as "in the last second".
    clock.ms = 12_000;
    for (let i = 0; i < 7; i++) faults.rateLimit('k', 'GET /tunes/:id');
    expect(faults.rateLimitRefusals.slice(1).map((r) => [r.inLast100Ms, r.inLastSecond])).toEqual([
      [6, 6],
      [7, 7],
    ]);
    expect(faults.rateLimitRefusals.every((r) => Math.abs(r.at - Date.now()) < 60_000)).toBe(true);
  });

  test('refused requests take nothing from the bucket; no limit, nothing is refused', () => {
    const { faults, clock } = injector(1);
    expect(faults.rateLimit('k')).toBeUndefined();
    for (let i = 0; i < 5; i++) expect(faults.rateLimit('k')).toBe(1);
    clock.ms = 1_000;
    expect(faults.rateLimit('k')).toBeUndefined();
    faults.set({});
    for (let i = 0; i < 5; i++) expect(faults.rateLimit('k')).toBeUndefined();
  });
});
