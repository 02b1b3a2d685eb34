/**
 * The client's own pace (src/api/pacing.ts): a token bucket of a tenth of a second's worth, in order, whose timers
 * firing late never let more than the burst out at once; and, over real HTTP against the mock service's rate limit,
 * a paced client's requests, sent all at once (where an unpaced one's meet 429s) or after its event loop was held,
 * meet none; a client closing lets its waiting requests go first.
 */
import { randomUUID } from 'node:crypto';
import { TunesApi } from '../../src/api';
import { RequestPace } from '../../src/api/pacing';
import { startMockService, type MockService } from '../../src/mock-service';

describe('RequestPace', () => {
  // The fake timers' clock: it moves as they run, or alone (setSystemTime) as a held event loop's would.
  const clock = () => Date.now();
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  /** Runs what is due within `ms`, and the turns' callbacks. */
  const advance = (ms: number) => jest.advanceTimersByTimeAsync(ms);

  it('lets a burst of a tenth of a second go at once, then one every 1/rate seconds, in order', async () => {
    const pace = new RequestPace(20, clock);
    expect(pace.burst).toBe(2);
    const gone: number[] = [];
    const turns = Array.from({ length: 6 }, (_, i) => pace.turn().then(() => gone.push(i)));
    await advance(0);
    expect(gone).toEqual([0, 1]);
    await advance(49);
    expect(gone).toEqual([0, 1]);
    await advance(1);
    expect(gone).toEqual([0, 1, 2]);
    await advance(150);
    await Promise.all(turns);
    expect(gone).toEqual([0, 1, 2, 3, 4, 5]);
    expect(pace.waiting).toBe(0);
  });

  it('lets no more than its burst out when its timer fires late, however late', async () => {
    const pace = new RequestPace(20, clock);
    await Promise.all([pace.turn(), pace.turn()]);
    const gone: number[] = [];
    for (let i = 0; i < 10; i++) void pace.turn().then(() => gone.push(i));
    // The event loop held for 5 s: the clock moves on, the timer has not fired.
    jest.setSystemTime(Date.now() + 5_000);
    await advance(50);
    expect(gone).toEqual([0, 1]);
    await advance(50);
    expect(gone).toEqual([0, 1, 2]);
  });

  it('an aborted wait rejects with its reason, takes no turn, and the next in line goes in its place', async () => {
    const pace = new RequestPace(10, clock);
    await pace.turn();
    const controller = new AbortController();
    const aborted = pace.turn(controller.signal);
    const next = pace.turn();
    controller.abort(new Error('stop waiting'));
    await expect(aborted).rejects.toThrow('stop waiting');
    expect(pace.waiting).toBe(1);
    await advance(100);
    await next;
    expect(pace.waiting).toBe(0);
    await expect(pace.turn(AbortSignal.abort(new Error('already')))).rejects.toThrow('already');
  });

  it('is idle once the last waiting request left, or the last one aborted (its timer cleared)', async () => {
    const pace = new RequestPace(10, clock);
    await expect(pace.idle()).resolves.toBeUndefined();
    await pace.turn();
    const idle = jest.fn();
    const left = pace.turn().then(() => pace.idle().then(idle));
    void pace.idle().then(idle);
    await advance(99);
    expect(idle).not.toHaveBeenCalled();
    await advance(1);
    await left;
    expect(idle).toHaveBeenCalledTimes(2);
    const controller = new AbortController();
    const aborted = pace.turn(controller.signal).catch(() => undefined);
    const idleAgain = pace.idle();
    controller.abort(new Error('gone'));
    await aborted;
    await idleAgain;
    expect(jest.getTimerCount()).toBe(0);
  });

  it('refuses a rate that is not a positive number, naming the option', () => {
    for (const bad of [0, -1, Number.NaN, Number.POSITIVE_INFINITY])
      expect(() => new RequestPace(bad)).toThrow(/requestsPerSecond: must be a positive number/);
    expect(() => new TunesApi({ apiKey: 'k', requestsPerSecond: 0 })).toThrow(
      'TunesApiOptions.requestsPerSecond: must be a positive number of requests a second',
    );
  });
});

describe('a paced client under the service rate limit (the mock, over loopback HTTP)', () => {
  let mock: MockService;
  const opened: TunesApi[] = [];
  const client = (requestsPerSecond?: number) => {
    const api = new TunesApi({ apiKey: `sk-${randomUUID()}`, baseUrl: mock.url, requestsPerSecond });
    opened.push(api);
    return api;
  };
  beforeAll(async () => {
    mock = await startMockService();
    mock.setFaults({ rateLimitPerSecond: 25 });
  });
  afterAll(async () => {
    await Promise.all(opened.map((api) => api.close()));
    await mock.close();
  });

  /** 429s the mock answered while `send` ran. */
  async function limitedDuring(send: () => Promise<unknown>): Promise<number> {
    const before = mock.stats().rateLimited;
    await send();
    return mock.stats().rateLimited - before;
  }

  /** `count` reads sent at once, the event loop then held for `holdMs` before any of them is sent. */
  function readsAfterHold(api: TunesApi, count: number, holdMs: number): Promise<unknown> {
    const reads = Promise.allSettled(Array.from({ length: count }, () => api.tunes.list({ limit: 1 })));
    const until = Date.now() + holdMs;
    while (Date.now() < until); // a worker's event loop busy with workflow activations
    return reads;
  }

  it('sends 60 requests at 20 a second without a 429, where the same requests unpaced meet them', async () => {
    const send = (api: TunesApi) => Promise.allSettled(Array.from({ length: 60 }, () => api.tunes.list({ limit: 1 })));
    expect(await limitedDuring(() => send(client()))).toBeGreaterThan(0);
    // Another client, another key: a bucket of its own, full.
    const started = Date.now();
    expect(await limitedDuring(() => send(client(20)))).toBe(0);
    // 58 after the burst of 2, one every 50 ms: the pace, not the machine's speed, sets this floor.
    expect(Date.now() - started).toBeGreaterThanOrEqual(58 * 50 - 50);
  });

  it('a client closing lets the requests waiting their turn go first, then closes', async () => {
    const api = client(10);
    const reads = Promise.allSettled(Array.from({ length: 5 }, () => api.tunes.list({ limit: 1 })));
    await api.close();
    expect((await reads).map((r) => r.status)).toEqual(Array(5).fill('fulfilled'));
    await expect(api.tunes.list({ limit: 1 })).rejects.toThrow();
  });

  it('sends what waited through a held event loop at its pace, not together', async () => {
    // Paced at 20 a second against a limit of 25: the requests that waited 1.5 s leave 2 at once, then 20 a second.
    expect(await limitedDuring(() => readsAfterHold(client(20), 40, 1_500))).toBe(0);
  });
});
