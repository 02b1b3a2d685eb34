/**
 * Fault injection and observation: 500, 429 (Retry-After), 504 (processed, then answered late), faultRoutes and
 * maxFaults, callbacks dropped, repeated, delayed and failing, tunes that never train, the /__mock routes, stats,
 * and a close() that leaves no timer or socket behind.
 */
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { InvalidInputError } from '../../src/api/errors';
import { startMockService, type MockService } from '../../src/mock-service';
import { call, CallbackReceiver, until, type ErrorJson, type TuneJson } from './loopback';

jest.setTimeout(20_000);

const ROOT = resolve(__dirname, '../..');

let mock: MockService;
let receiver: CallbackReceiver;
let keys = 0;
const newKey = () => `faults-${++keys}`;

beforeAll(async () => {
  mock = await startMockService({ trainingTime: '200ms', inferenceTime: '100ms' });
  receiver = await new CallbackReceiver().start();
});
afterAll(async () => {
  await mock.close();
  await receiver.close();
});
beforeEach(() => mock.setFaults({}));

const tuneBody = (extra: Record<string, unknown> = {}) => ({
  tune: { title: `t-${Math.random()}`, name: 'man', image_urls: ['https://images.test/1.jpg'], ...extra },
});
const countTunes = async (key: string) => (await call<TuneJson[]>(mock.url, key, 'GET', '/tunes')).body.length;
const trained = (key: string, id: number) =>
  until(
    async () => (await call<TuneJson>(mock.url, key, 'GET', `/tunes/${id}`)).body,
    (t) => t.trained_at !== null,
  );

describe('status faults', () => {
  test('500: answered at once, not processed', async () => {
    const key = newKey();
    mock.setFaults({ status500Rate: 1 });
    const res = await call<ErrorJson>(mock.url, key, 'POST', '/tunes', tuneBody());
    expect(res.status).toBe(500);
    expect(res.body.error).toEqual(expect.any(String));
    mock.setFaults({});
    expect(await countTunes(key)).toBe(0);
  });

  test('429 carries Retry-After: 1 and is not processed', async () => {
    const key = newKey();
    mock.setFaults({ status429Rate: 1 });
    const res = await call(mock.url, key, 'POST', '/tunes', tuneBody());
    expect(res.status).toBe(429);
    expect(res.headers['retry-after']).toBe('1');
    mock.setFaults({});
    expect(await countTunes(key)).toBe(0);
  });

  test('429 carries the Retry-After status429RetryAfterSeconds sets', async () => {
    mock.setFaults({ status429Rate: 1, status429RetryAfterSeconds: 60 });
    const res = await call(mock.url, newKey(), 'POST', '/tunes', tuneBody());
    expect(res.status).toBe(429);
    expect(res.headers['retry-after']).toBe('60');
    mock.setFaults({});
  });

  test('504: the request IS processed, then answered 504 after status504DelayMs', async () => {
    const key = newKey();
    mock.setFaults({ status504Rate: 1, status504DelayMs: 150, faultRoutes: ['POST /tunes'] });
    const started = Date.now();
    const res = await call<ErrorJson>(mock.url, key, 'POST', '/tunes', tuneBody({ title: 'lost answer' }));
    expect(res.status).toBe(504);
    expect(Date.now() - started).toBeGreaterThanOrEqual(145);
    const tunes = (await call<TuneJson[]>(mock.url, key, 'GET', '/tunes')).body;
    expect(tunes.map((t) => t.title)).toEqual(['lost answer']);
  });

  test('faultRoutes restricts status faults to the routes named', async () => {
    const key = newKey();
    mock.setFaults({ status500Rate: 1, faultRoutes: ['POST /tunes'] });
    expect((await call(mock.url, key, 'GET', '/tunes')).status).toBe(200);
    expect((await call(mock.url, key, 'GET', '/packs')).status).toBe(200);
    expect((await call(mock.url, key, 'POST', '/tunes', tuneBody())).status).toBe(500);
  });

  test('image inspection takes status faults of its own: POST /images/inspect answered 500, other routes not', async () => {
    const key = newKey();
    mock.setFaults({ status500Rate: 1, faultRoutes: ['POST /images/inspect'], maxFaults: 1 });
    const inspect = () =>
      call(mock.url, key, 'POST', '/images/inspect', { name: 'dog', file_url: 'https://images.test/dog.jpg' });
    expect((await call(mock.url, key, 'POST', '/tunes', tuneBody())).status).toBe(201);
    expect((await inspect()).status).toBe(500);
    expect((await inspect()).status).toBe(200);
    expect(mock.stats().faults.byKind.status500).toBe(1);
  });

  test('answerDelayMs: a slow service answers late on faultRoutes, having processed the request; not a counted fault', async () => {
    const key = newKey();
    mock.setFaults({ answerDelayMs: 300, faultRoutes: ['POST /images/inspect', 'POST /tunes'] });
    const timed = async <T>(request: Promise<T>) => {
      const started = Date.now();
      return { answer: await request, ms: Date.now() - started };
    };
    const inspection = await timed(
      call(mock.url, key, 'POST', '/images/inspect', { name: 'dog', file_url: 'https://images.test/dog.jpg' }),
    );
    expect(inspection.answer.status).toBe(200);
    expect(inspection.ms).toBeGreaterThanOrEqual(295);
    // Processed before the answer is late: the tune exists while its answer waits.
    const created = call<TuneJson>(mock.url, key, 'POST', '/tunes', tuneBody({ title: 'slow answer' }));
    await until(
      () => countTunes(key),
      (n) => n === 1,
    );
    expect((await created).status).toBe(201);
    // Other routes answer at once (a bound, not a timing check: far below the delay).
    expect((await timed(call(mock.url, key, 'GET', '/tunes'))).ms).toBeLessThan(300);
    expect(mock.stats().faults.injected).toBe(0);
  });

  test('unpricedRoutes: those answers leave cost_mc out, the object is charged all the same; not a counted fault', async () => {
    const key = newKey();
    const tune = (await call<TuneJson>(mock.url, key, 'POST', '/tunes', tuneBody())).body;
    const promptOf = (id: number) => `/tunes/${tune.id}/prompts/${id}`;
    mock.setFaults({ unpricedRoutes: ['POST /tunes/:id/prompts'] });
    const created = await call<Record<string, unknown>>(mock.url, key, 'POST', `/tunes/${tune.id}/prompts`, {
      prompt: { text: 'ohwx man', num_images: 2 },
    });
    expect(created.status).toBe(201);
    expect(created.body).not.toHaveProperty('cost_mc');
    const id = created.body.id as number;
    // A read says it, until its route is unpriced too; lists carry it unless named.
    expect((await call<Record<string, unknown>>(mock.url, key, 'GET', promptOf(id))).body.cost_mc).toBe(4_000);
    mock.setFaults({ unpricedRoutes: ['POST /tunes/:id/prompts', 'GET /tunes/:tune_id/prompts/:id'] });
    expect((await call<Record<string, unknown>>(mock.url, key, 'GET', promptOf(id))).body).not.toHaveProperty(
      'cost_mc',
    );
    const listed = (await call<Record<string, unknown>[]>(mock.url, key, 'GET', `/tunes/${tune.id}/prompts`)).body;
    expect(listed.map((p) => p.cost_mc)).toEqual([4_000]);
    mock.setFaults({ unpricedRoutes: ['GET /tunes/:id/prompts'] });
    const unlisted = (await call<Record<string, unknown>[]>(mock.url, key, 'GET', `/tunes/${tune.id}/prompts`)).body;
    expect(unlisted.map((p) => 'cost_mc' in p)).toEqual([false]);
    expect(mock.ledger(key).charges.map((c) => [c.object, c.mc])).toEqual([
      ['tune', 150_000],
      ['prompt', 4_000],
    ]);
    expect(mock.stats().faults.injected).toBe(0);
  });

  test('maxFaults stops injecting after that many', async () => {
    const key = newKey();
    mock.setFaults({ status500Rate: 1, maxFaults: 2 });
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await call(mock.url, key, 'GET', '/tunes')).status);
    expect(statuses).toEqual([500, 500, 200, 200]);
    expect(mock.stats().faults.injected).toBe(2);
  });

  test('rates split one draw: 429 and 500 at half each over a run never show anything else', async () => {
    const key = newKey();
    mock.setFaults({ status500Rate: 0.5, status429Rate: 0.5 });
    const seen = new Set<number>();
    const statuses: number[] = [];
    for (let i = 0; i < 40; i++) statuses.push((await call(mock.url, key, 'GET', '/tunes')).status);
    for (const status of statuses) seen.add(status);
    expect([...seen].every((s) => s === 500 || s === 429)).toBe(true);
    // Counted by kind, as answered.
    const count = (status: number) => statuses.filter((s) => s === status).length;
    expect(mock.stats().faults.byKind).toEqual({
      status500: count(500),
      status429: count(429),
      status504: 0,
      garbled: 0,
    });
  });

  test('never on /__mock routes, generated images or uploaded files', async () => {
    mock.setFaults({ status500Rate: 1 });
    expect((await call(mock.url, null, 'GET', '/images/1-0.png')).status).toBe(200);
    expect((await call(mock.url, null, 'GET', '/__mock/stats')).status).toBe(200);
    expect((await call(mock.url, null, 'GET', '/files/none.png')).status).toBe(404);
    expect((await call(mock.url, null, 'POST', '/__mock/faults', {})).status).toBe(200);
    expect((await call(mock.url, newKey(), 'GET', '/tunes')).status).toBe(200);
  });
});

describe('callback faults', () => {
  test('dropped callbacks are never sent and are counted', async () => {
    const key = newKey();
    const before = mock.stats().callbacks;
    mock.setFaults({ callbackDropRate: 1 });
    const tune = (
      await call<TuneJson>(mock.url, key, 'POST', '/tunes', tuneBody({ callback: `${receiver.url}/dropped` }))
    ).body;
    await trained(key, tune.id);
    const after = mock.stats().callbacks;
    expect(after.dropped - before.dropped).toBe(1);
    expect(after.sent).toBe(before.sent);
    expect(receiver.at('/dropped')).toEqual([]);
  });

  test('duplicated callbacks arrive twice with the same body', async () => {
    const key = newKey();
    const before = mock.stats().callbacks;
    mock.setFaults({ callbackDuplicateRate: 1 });
    const tune = (
      await call<TuneJson>(mock.url, key, 'POST', '/tunes', tuneBody({ callback: `${receiver.url}/twice` }))
    ).body;
    const [a, b] = await receiver.waitFor('/twice', 2);
    expect(a.body).toEqual(b.body);
    expect((a.body as TuneJson).id).toBe(tune.id);
    const after = mock.stats().callbacks;
    expect([after.duplicated - before.duplicated, after.sent - before.sent]).toEqual([1, 2]);
  });

  test('delayed callbacks arrive callbackDelayMs after the event at the earliest', async () => {
    const key = newKey();
    mock.setFaults({ callbackDelayMs: 300 });
    await call(mock.url, key, 'POST', '/tunes', tuneBody({ callback: `${receiver.url}/late` }));
    const [late] = await receiver.waitFor('/late', 1);
    expect(late.at - Date.parse((late.body as TuneJson).trained_at!)).toBeGreaterThanOrEqual(295);
  });

  test('a callback the receiver refuses is counted failed and never retried', async () => {
    const key = newKey();
    const before = mock.stats().callbacks;
    receiver.status = 500;
    try {
      await call(mock.url, key, 'POST', '/tunes', tuneBody({ callback: `${receiver.url}/refused` }));
      await until(
        async () => mock.stats().callbacks.failed,
        (failed) => failed === before.failed + 1,
      );
    } finally {
      receiver.status = 200;
    }
    expect(receiver.at('/refused')).toHaveLength(1);
    expect(mock.stats().callbacks.sent - before.sent).toBe(1);
  });

  test('an unreachable receiver is counted failed, quietly', async () => {
    const key = newKey();
    const before = mock.stats().callbacks.failed;
    // Port 9 (discard) on loopback: nothing listens there.
    await call(mock.url, key, 'POST', '/tunes', tuneBody({ callback: 'http://127.0.0.1:9/nobody' }));
    await until(
      async () => mock.stats().callbacks.failed,
      (failed) => failed === before + 1,
    );
  });

  test('neverTrainRate: such a tune never gets trained_at, while later tunes do', async () => {
    const key = newKey();
    mock.setFaults({ neverTrainRate: 1 });
    const stuck = (await call<TuneJson>(mock.url, key, 'POST', '/tunes', tuneBody())).body;
    const faceid = (await call<TuneJson>(mock.url, key, 'POST', '/tunes', tuneBody({ model_type: 'faceid' }))).body;
    expect(faceid.trained_at).not.toBeNull(); // ready at creation regardless
    mock.setFaults({});
    const later = (await call<TuneJson>(mock.url, key, 'POST', '/tunes', tuneBody())).body;
    await trained(key, later.id);
    // The later tune was created after the stuck one with the same training time: the stuck one is overdue.
    expect((await call<TuneJson>(mock.url, key, 'GET', `/tunes/${stuck.id}`)).body.trained_at).toBeNull();
  });
});

describe('/__mock routes and stats', () => {
  test('POST /__mock/faults validates with zod: 422 on bad values, {} resets', async () => {
    const bad = [
      [{ status500Rate: 2 }, 'faults.status500Rate', 'must be a number from 0 to 1'],
      [{ status429Rate: '0.5' }, 'faults.status429Rate', 'must be a number from 0 to 1'],
      [{ bogus: 1 }, 'faults.bogus', 'is not an attribute the service knows'],
      [{ faultRoutes: ['GET /nope'] }, 'faults.faultRoutes[0]', expect.stringContaining('API route')],
      [{ faultRoutes: ['GET /__mock/stats'] }, 'faults.faultRoutes[0]', expect.stringContaining('API route')],
      [{ unpricedRoutes: ['POST /prompt'] }, 'faults.unpricedRoutes[0]', expect.stringContaining('API route')],
      [{ maxFaults: -1 }, 'faults.maxFaults', 'must be an integer of at least 0'],
      [{ neverTrainTitles: 'job-1' }, 'faults.neverTrainTitles', 'must be an array of tune titles'],
      [{ status504DelayMs: 1.5 }, 'faults.status504DelayMs', expect.stringContaining('milliseconds')],
      [{ answerDelayMs: -1 }, 'faults.answerDelayMs', expect.stringContaining('milliseconds')],
      [{ status429RetryAfterSeconds: -1 }, 'faults.status429RetryAfterSeconds', expect.stringContaining('seconds')],
      [{ status500Rate: 0.6, status504Rate: 0.6 }, 'faults.status500Rate', expect.stringContaining('at most 1')],
      [{ rateLimitPerSecond: 0 }, 'faults.rateLimitPerSecond', 'must be a positive number of requests per second'],
    ] as const;
    for (const [faults, field, rule] of bad) {
      const res = await call<ErrorJson>(mock.url, null, 'POST', '/__mock/faults', faults);
      expect([JSON.stringify(faults), res.status]).toEqual([JSON.stringify(faults), 422]);
      expect(res.body[field]).toEqual([rule]);
      expect(res.body.error).toEqual(expect.stringContaining(`${field}: `));
    }
    expect((await call(mock.url, null, 'POST', '/__mock/faults', '{oops')).status).toBe(400);

    const set = await call(mock.url, null, 'POST', '/__mock/faults', {
      status500Rate: 1,
      faultRoutes: ['GET /tunes/:id'],
    });
    expect(set).toMatchObject({ status: 200, body: { status500Rate: 1, faultRoutes: ['GET /tunes/:id'] } });
    expect((await call(mock.url, null, 'GET', '/__mock/faults')).body).toEqual(set.body);
    expect((await call(mock.url, newKey(), 'GET', '/tunes/1504944')).status).toBe(500);
    expect((await call(mock.url, null, 'POST', '/__mock/faults', {})).body).toEqual({});
    expect((await call(mock.url, newKey(), 'GET', '/tunes/1504944')).status).toBe(200);
  });

  test('setFaults validates too, throwing InvalidInputError', () => {
    expect(() => mock.setFaults({ callbackDropRate: -0.1 })).toThrow(InvalidInputError);
    expect(() => mock.setFaults({ faultRoutes: ['POST /tunez'] })).toThrow(/faults\.faultRoutes\[0\]/);
  });

  test('GET /__mock/stats counts requests per route pattern (API and images, not /__mock)', async () => {
    const fresh = await startMockService();
    try {
      const key = 'stats';
      const tune = (await call<TuneJson>(fresh.url, key, 'POST', '/tunes', tuneBody())).body;
      await call(fresh.url, key, 'GET', `/tunes/${tune.id}`);
      await call(fresh.url, key, 'GET', `/tunes/${tune.id}`);
      await call(fresh.url, key, 'GET', '/tunes/abc'); // matched, then 404
      await call(fresh.url, key, 'POST', `/tunes/${tune.id}/prompts`, { prompt: { text: 'x' } });
      await call(fresh.url, key, 'GET', '/tunes?limit=1');
      await call(fresh.url, key, 'GET', '/no/such/route');
      await call(fresh.url, null, 'GET', '/images/3-0.png');
      await call(fresh.url, null, 'GET', '/__mock/stats');
      const res = await call(fresh.url, null, 'GET', '/__mock/stats');
      expect(res.body).toEqual({
        routes: {
          'POST /tunes': 1,
          'GET /tunes/:id': 3,
          'POST /tunes/:id/prompts': 1,
          'GET /tunes': 1,
          'GET /images/:name': 1,
        },
        callbacks: { sent: 0, duplicated: 0, dropped: 0, failed: 0 },
        faults: { injected: 0, byKind: { status500: 0, status429: 0, status504: 0, garbled: 0 } },
        refused: {},
        rateLimited: 0,
        rateLimitRefusals: [],
      });
      expect(fresh.stats()).toEqual(res.body);
    } finally {
      await fresh.close();
    }
  });
});

describe('close()', () => {
  test('stops listening and ends requests in flight; a second close is fine', async () => {
    const busy = await startMockService({ trainingTime: '1h', inferenceTime: '1h' });
    try {
      const key = 'busy';
      await call(
        busy.url,
        key,
        'POST',
        '/tunes',
        tuneBody({ callback: `${receiver.url}/never`, prompts_attributes: [{ text: 'waits' }] }),
      );
      busy.setFaults({ status504Rate: 1, status504DelayMs: 3_600_000 });
      const pending = call(busy.url, key, 'GET', '/tunes').catch((e: Error) => e);
      await until(
        async () => busy.stats().faults.injected,
        (n) => n === 1,
      );
      await busy.close();
      expect(await pending).toBeInstanceOf(Error); // its socket was closed, not left waiting an hour
      const refused = await call(busy.url, key, 'GET', '/tunes').catch((e: NodeJS.ErrnoException) => e.code);
      expect(refused).toBe('ECONNREFUSED');
      expect(receiver.at('/never')).toEqual([]);
    } finally {
      await busy.close();
    }
  });

  test('leaves no timer or socket behind: a process with hour-long work in flight exits by itself after close()', async () => {
    // Work that would keep a process alive for an hour: training, inference, a delayed callback, a late 504.
    const script = `
      const { startMockService } = require(${JSON.stringify(require.resolve('../../src/mock-service'))});
      const { request } = require('undici');
      (async () => {
        const mock = await startMockService({ trainingTime: '1h', inferenceTime: '1h', faults: { callbackDelayMs: 3600000 } });
        const post = (path, body) => request(mock.url + path, { method: 'POST', headers: { authorization: 'Bearer k', 'content-type': 'application/json' }, body: JSON.stringify(body) }).then((r) => r.body.json());
        const faceid = await post('/tunes', { tune: { title: 'f', name: 'man', model_type: 'faceid', image_urls: ['https://i.test/1.jpg'], callback: ${JSON.stringify(`${receiver.url}/exit`)} } });
        await post('/tunes/' + faceid.id + '/prompts', { prompt: { text: 'slow' } });
        await post('/tunes', { tune: { title: 't', name: 'man', image_urls: ['https://i.test/1.jpg'], prompts_attributes: [{ text: 'waits' }] } });
        mock.setFaults({ status504Rate: 1, status504DelayMs: 3600000 });
        const late = request(mock.url + '/tunes', { headers: { authorization: 'Bearer k' } }).catch(() => 'ended');
        while (mock.stats().faults.injected === 0) await new Promise((r) => setTimeout(r, 10));
        await mock.close();
        console.log('closed', await late);
      })();
    `;
    const child = spawn(process.execPath, ['--import', 'tsx', '-e', script], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c));
    child.stderr.on('data', (c: Buffer) => (out += c));
    // A hang guard, not a speed check: a process kept alive by the mock would otherwise linger for an hour.
    const code = await new Promise<number | null | 'hung'>((done) => {
      const guard = setTimeout(() => {
        child.kill('SIGKILL');
        done('hung');
      }, 15_000);
      child.on('exit', (exitCode) => {
        clearTimeout(guard);
        done(exitCode);
      });
    });
    expect(out.trim().split('\n').pop()).toBe('closed ended');
    expect(code).toBe(0);
  });
});
