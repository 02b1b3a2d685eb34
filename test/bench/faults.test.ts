/**
 * The soak's fault injection (bench/soak/faults.ts) counts faults where they land: a forgery when the receiver got
 * it (and accepted only when answered 2xx), a receiver cut when a callback was refused during it, a restart once the
 * server is back, a tune that never trains when the mock made one. Real HTTP on loopback: the mock service and a
 * small receiver whose answer the test sets; the process faults' hooks are the test's own.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { FaultInjection, mockFaults, neverTrainIds, type FaultTargets } from '../../bench/soak/faults';
import { planJobs } from '../../bench/soak/jobs';
import { PROFILES, type ProfileName } from '../../bench/soak/options';
import { startMockService, type MockService } from '../../src/mock-service';

jest.setTimeout(30_000);

const ALL = Object.keys(PROFILES).filter((p) => p !== 'none') as ProfileName[];
const API_KEY = 'faults-test-key-0123456789';

/** A receiver that answers every POST with `status` (the test changes it) and counts them. */
class Receiver {
  status = 200;
  received = 0;
  private readonly server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      this.received++;
      res.writeHead(this.status).end();
    });
  });

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

let mock: MockService;
let receiver: Receiver;
let receiverUrl: string;

beforeEach(async () => {
  mock = await startMockService({ port: 0, trainingTime: '300ms', inferenceTime: '100ms', apiKeys: [API_KEY] });
  receiver = new Receiver();
  receiverUrl = await receiver.start();
});
afterEach(async () => {
  await mock.close();
  await receiver.close();
});

function targets(overrides: Partial<FaultTargets> = {}): FaultTargets {
  return {
    mock,
    killWorker: async () => undefined,
    cutReceiver: () => undefined,
    restoreReceiver: () => undefined,
    receiverUrl,
    secret: randomBytes(24).toString('hex'),
    workflowIds: () => ['soak-x-0', 'soak-x-1'],
    heldCallbacks: () => [],
    progress: () => ({ total: 2, started: 2, closed: 0 }),
    ...overrides,
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(done: () => boolean, timeoutMs = 10_000): Promise<void> {
  for (const start = Date.now(); !done(); await sleep(20))
    if (Date.now() - start > timeoutMs) throw new Error('still not done');
}

/** A tune whose training callback goes to the receiver (none with `callback: false`). */
async function tuneWithCallback(title: string, callback = true): Promise<void> {
  const res = await request(`${mock.url}/tunes`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      tune: {
        title,
        name: 'dog',
        image_urls: ['https://images.test/1.jpg'],
        ...(callback && { callback: `${receiverUrl}/cb` }),
      },
    }),
  });
  expect(res.statusCode).toBe(201);
  await res.body.dump();
}

test('a forgery the receiver accepts is counted accepted; one it refuses only answered', async () => {
  const injection = new FaultInjection(['forged-callbacks'], targets(), [], () => undefined);
  injection.start();
  await until(() => injection.forgeries.accepted >= 5);
  receiver.status = 403;
  const accepted = injection.forgeries.accepted;
  const answeredBefore = injection.forgeries.answered;
  await until(() => injection.forgeries.answered >= answeredBefore + 20);
  await injection.stop();
  expect(injection.forgeries.sent).toBe(injection.forgeries.answered);
  expect(injection.forgeries.sent).toBe(receiver.received);
  // Those in flight when the status changed may have been answered 200.
  expect(injection.forgeries.accepted).toBeLessThan(accepted + 20);
});

test('a forgery that reached no receiver is not counted sent', async () => {
  // The forgeries go to the closed receiver's port; a fresh one is there for afterEach to close.
  await receiver.close();
  receiver = new Receiver();
  await receiver.start();
  const injection = new FaultInjection(['forged-callbacks'], targets({ receiverUrl }), [], () => undefined);
  injection.start();
  await sleep(1_000);
  await injection.stop();
  expect(injection.forgeries).toMatchObject({ sent: 0, answered: 0, accepted: 0, leakedSent: 0 });
});

test('a receiver cut comes while a callback is due, and counts only when a callback was refused during it', async () => {
  let cuts = 0;
  const cut = targets({
    cutReceiver: () => void (cuts++, (receiver.status = 503)),
    restoreReceiver: () => void (receiver.status = 200),
  });
  const quiet = new FaultInjection(['receiver-cut'], cut, [], () => undefined, { cutMs: 800 });
  quiet.start();
  await sleep(600);
  expect(cuts).toBe(0); // nothing is due from the mock yet
  await tuneWithCallback('cut-no-callback', false);
  await until(() => cuts === 1);
  await sleep(1_000);
  await quiet.stop();
  expect(quiet.counts.receiverCuts).toBe(0);

  const hit = new FaultInjection(['receiver-cut'], cut, [], () => undefined, { cutMs: 1_500 });
  hit.start();
  await tuneWithCallback('cut-victim'); // trains in 300 ms: its callback comes during the cut
  await until(() => hit.counts.receiverCuts === 1);
  await hit.stop();
  expect(mock.journal().callbacks).toEqual([expect.objectContaining({ status: 503 })]);
});

test('a cut no callback came through is made again when a callback is due, and that one counts', async () => {
  let cuts = 0;
  const cut = targets({
    cutReceiver: () => void (cuts++, (receiver.status = 503)),
    restoreReceiver: () => void (receiver.status = 200),
  });
  const injection = new FaultInjection(['receiver-cut'], cut, [], () => undefined, { cutMs: 800 });
  injection.start();
  await tuneWithCallback('recut-no-callback', false); // due, but its callback never comes: the first cut is idle
  await until(() => cuts === 1);
  await sleep(1_200); // the idle cut is over, not counted
  expect(injection.counts.receiverCuts).toBe(0);
  await tuneWithCallback('recut-victim'); // due again: a second cut, and its callback comes during it
  await until(() => cuts === 2 && injection.counts.receiverCuts === 1);
  await injection.stop();
  expect(mock.journal().callbacks).toEqual([expect.objectContaining({ status: 503 })]);
});

test('stopped during a cut, it leaves no timer running: one left would keep the process alive for ever', async () => {
  // Every interval the injection makes, and every timer cleared: an interval never cleared never lets node exit.
  const made: NodeJS.Timeout[] = [];
  const realSetInterval = global.setInterval;
  jest.spyOn(global, 'setInterval').mockImplementation(((...args: Parameters<typeof setInterval>) => {
    const timer = realSetInterval(...args);
    made.push(timer);
    return timer;
  }) as typeof setInterval);
  const clearedByTimeout = jest.spyOn(global, 'clearTimeout');
  const clearedByInterval = jest.spyOn(global, 'clearInterval');
  try {
    let cuts = 0;
    const injection = new FaultInjection(
      ['receiver-cut'],
      targets({ cutReceiver: () => void cuts++ }),
      [],
      () => undefined,
      { cutMs: 60_000 },
    );
    injection.start();
    await tuneWithCallback('cut-then-stop', false); // due, never comes: the cut would last its 60 s
    await until(() => cuts === 1);
    await injection.stop(); // the cut ends early, with nothing refused: it asks for another cut, after stop()
    const cleared = new Set([...clearedByTimeout.mock.calls, ...clearedByInterval.mock.calls].map(([t]) => t));
    expect(made.length).toBeGreaterThan(0);
    expect(made.filter((timer) => !cleared.has(timer)).length).toBe(0);
  } finally {
    jest.restoreAllMocks();
  }
});

test('process faults wait for runs in flight, and count once they took effect', async () => {
  let progress = { total: 4, started: 1, closed: 0 };
  let restarts = 0;
  const injection = new FaultInjection(
    ['worker-kill', 'server-restart'],
    targets({
      progress: () => progress,
      killWorker: async () => void (await sleep(100)),
      restartServer: async () => {
        restarts++;
        await sleep(300);
        if (restarts === 1) throw new Error('the server did not come back');
      },
    }),
    [],
    () => undefined,
    { killEveryMs: 60_000, restartDownMs: 0 },
  );
  injection.start();
  await sleep(600);
  // One job of four started: nothing yet.
  expect(restarts).toBe(0);
  expect(injection.counts.workerKills).toBe(0);
  progress = { total: 4, started: 2, closed: 0 };
  await until(() => injection.counts.workerKills === 1 && restarts === 1);
  await sleep(400);
  await injection.stop();
  // The restart whose server never came back is not counted.
  expect(injection.counts).toMatchObject({ workerKills: 1, serverRestarts: 0 });
});

test('never-train: the harness picks the jobs, the mock makes those tunes never train, the count is the mock’s', async () => {
  const jobs = planJobs('x', 20);
  expect(neverTrainIds(jobs, ['never-train'])).toEqual(['soak-x-3', 'soak-x-8', 'soak-x-13', 'soak-x-18']);
  expect(neverTrainIds(jobs, ALL)).toEqual(['soak-x-3', 'soak-x-8', 'soak-x-13']);
  expect(neverTrainIds(jobs, ['status-500'])).toEqual([]);

  const injection = new FaultInjection(['never-train'], targets(), ['never-1'], () => undefined);
  injection.start();
  await tuneWithCallback('never-1');
  await tuneWithCallback('trains-1');
  await until(() => mock.journal().tunes.some((t) => t.trainedAt !== null));
  await injection.stop();
  expect(injection.counts.neverTrain).toBe(1);
  expect(mock.journal().tunes.find((t) => t.title === 'never-1')).toMatchObject({ neverTrains: true, trainedAt: null });
});

test('status faults are counted by kind as the mock answered them, across the bursts that set its faults again', async () => {
  const injection = new FaultInjection(['status-500'], targets(), [], () => undefined);
  injection.start(); // the first burst: 1 s from now, 2.6 s long
  const statuses: number[] = [];
  for (const start = Date.now(); Date.now() - start < 4_500; await sleep(100)) {
    const res = await request(`${mock.url}/tunes`, { headers: { authorization: `Bearer ${API_KEY}` } });
    statuses.push(res.statusCode);
    await res.body.dump();
  }
  await injection.stop();
  const refused = statuses.filter((s) => s === 500).length;
  expect(refused).toBeGreaterThan(0);
  expect(statuses[statuses.length - 1]).toBe(200); // the burst is over: the mock's faults were set again
  expect(injection.counts).toMatchObject({ status500: refused, status429: 0, status504: 0 });
});

test('in all, the rates are lighter once a 504 landed, and the status faults end with their window', () => {
  const bursts = { status500: true, status429: true, statusWindow: true };
  expect(mockFaults(ALL, bursts)).toMatchObject({ status504Rate: 0.2, status500Rate: 0.4, status429Rate: 0.4 });
  expect(mockFaults(ALL, { ...bursts, landed504: true })).toMatchObject({
    status504Rate: 0.05,
    status500Rate: 0.475,
    status429Rate: 0.475,
  });
  expect(mockFaults(ALL, { ...bursts, statusWindow: false }, ['t'])).toEqual({
    callbackDropRate: 0.3,
    callbackDuplicateRate: 0.3,
    callbackDelayMs: 500,
    callbackJitterMs: 5_500,
    neverTrainTitles: ['t'],
  });
});

test("the service's rate limit stands beside the profiles' faults, is counted apart, and is lifted at stop", async () => {
  const standing = { rateLimitPerSecond: 0.1 };
  const injection = new FaultInjection(['callbacks-lost'], targets(), [], () => undefined, {}, standing);
  injection.start();
  expect(await faultsInForce()).toEqual({ callbackDropRate: 1, rateLimitPerSecond: 0.1 });
  // One request every 10 s for the key: the second, at once, is over the limit.
  const statuses = [];
  for (let i = 0; i < 2; i++) {
    const res = await request(`${mock.url}/tunes`, { headers: { authorization: `Bearer ${API_KEY}` } });
    await res.body.dump();
    statuses.push(res.statusCode);
  }
  expect(statuses).toEqual([200, 429]);
  expect(injection.counts).toMatchObject({ rateLimited: 1, status429: 0 });
  await injection.stop();
  expect(await faultsInForce()).toEqual({});
  expect(injection.counts.rateLimited).toBe(1);
});

async function faultsInForce(): Promise<Record<string, unknown>> {
  const res = await request(`${mock.url}/__mock/faults`);
  return (await res.body.json()) as Record<string, unknown>;
}
