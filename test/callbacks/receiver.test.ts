import { createServer as createNetServer, connect as connectTcp, type AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { Client, Connection, ServiceError, WorkflowNotFoundError } from '@temporalio/client';
import { recordingLogger, type LogEntry } from '../recording-logger';
import { request } from 'undici';
import {
  type CallbackReceiver,
  type CallbackReceiverOptions,
  type Signaler,
  SignalerUnavailableError,
  type SignalOutcome,
  startCallbackReceiver,
  temporalSignaler,
} from '../../src/callbacks/receiver';
import { type CallbackRun, CallbackSigner } from '../../src/callbacks/signing';
import type { CallbackKind, CallbackWakeUp } from '../../src/contract/messages';

jest.setTimeout(20_000);

const SECRET = 'receiver-test-secret-0123456789';
const signer = new CallbackSigner({ baseUrl: 'https://hooks.example.com', secret: SECRET });
const RUN_ID = '0190b7c1-2f7e-7c1a-9d52-5a4f3c2b1a00';
const run = (workflowId: string, runId = RUN_ID): CallbackRun => ({ workflowId, runId });

const tune = {
  id: 1504944,
  title: 'job-1',
  name: 'woman',
  token: 'ohwx',
  base_tune_id: null,
  steps: null,
  branch: 'fast',
  model_type: 'lora',
  trained_at: '2025-03-01T10:05:00.000Z',
  started_training_at: '2025-03-01T10:00:00.000Z',
  created_at: '2025-03-01T09:59:00.000Z',
  updated_at: '2025-03-01T10:05:00.000Z',
  expires_at: '2025-03-31T10:05:00.000Z',
  url: 'https://api.example.com/tunes/1504944.json',
  orig_images: ['https://cdn.example.com/1.jpg'],
  // A field the schema does not know must pass through.
  workspace_id: 'ws-7',
};

const prompt = {
  id: 29716915,
  callback: 'https://hooks.example.com/callbacks/prompt?workflowId=job-1&sig=abc&key=p1',
  text: '<lora:1504944:1> ohwx woman, studio portrait, soft light',
  negative_prompt: 'blurry, lowres',
  cfg_scale: 7.5,
  steps: 30,
  seed: 42,
  trained_at: '2025-03-01T10:07:00.000Z',
  started_training_at: '2025-03-01T10:06:00.000Z',
  created_at: '2025-03-01T10:05:30.000Z',
  updated_at: '2025-03-01T10:07:00.000Z',
  tune_id: 1504944,
  url: 'https://api.example.com/tunes/1504944/prompts/29716915.json',
  images: ['https://cdn.example.com/p/1.jpg', 'https://cdn.example.com/p/2.jpg'],
  user_error: null,
  cost_mc: 1200,
  aspect_ratio: '1:1',
  content_types: ['image/jpeg', 'image/jpeg'],
};
const prompt2 = { ...prompt, id: 29716916, images: [], user_error: 'NSFW content detected' };

interface SignalCall {
  run: CallbackRun;
  wakeUp: CallbackWakeUp;
}

let receiver: CallbackReceiver;
let calls: SignalCall[];
let logs: LogEntry[];
/** What the recording signaler does after it records the call. */
let outcome: () => Promise<SignalOutcome>;

const recordingSignaler: Signaler = {
  signal(run, wakeUp) {
    calls.push({ run, wakeUp });
    return outcome();
  },
};

async function restart(options: Partial<CallbackReceiverOptions> = {}): Promise<void> {
  await receiver.close();
  receiver = await startCallbackReceiver({
    host: '127.0.0.1',
    signer,
    signaler: recordingSignaler,
    logger: recordingLogger(logs),
    ...options,
  });
}

beforeEach(async () => {
  calls = [];
  logs = [];
  outcome = async () => 'delivered';
  receiver = await startCallbackReceiver({
    host: '127.0.0.1',
    signer,
    signaler: recordingSignaler,
    logger: recordingLogger(logs),
  });
});

afterEach(async () => {
  await receiver.close();
  // Nothing logged may carry a signature or the secret.
  const logged = JSON.stringify(logs);
  expect(logged).not.toContain(SECRET);
  expect(logged).not.toMatch(/[0-9a-f]{64}/);
  expect(logged).not.toContain('sig=');
});

/** The path and query of a signed URL, to send to the local receiver. */
function signedPath(kind: CallbackKind, workflowId: string, params?: Record<string, string>, runId = RUN_ID): string {
  const url = new URL(signer.url(kind, run(workflowId, runId), params));
  return url.pathname + url.search;
}

async function send(
  path: string,
  body?: string | Buffer | Readable | unknown,
  method: 'POST' | 'GET' | 'PUT' | 'HEAD' = 'POST',
  contentType = 'application/json',
): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
  const payload =
    body === undefined || typeof body === 'string' || Buffer.isBuffer(body) || body instanceof Readable
      ? body
      : JSON.stringify(body);
  const res = await request(receiver.url + path, {
    method,
    body: payload as string | Buffer | Readable | undefined,
    headers: payload === undefined ? {} : { 'content-type': contentType },
  });
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
}

/** Writes raw bytes on a fresh connection and reads what comes back until the server closes it (or `ms` pass). */
async function raw(bytes: string, ms = 2_000): Promise<string> {
  const { port } = new URL(receiver.url);
  const socket = connectTcp(Number(port), '127.0.0.1');
  let answer = '';
  socket.on('data', (chunk) => (answer += chunk.toString('latin1')));
  socket.on('error', () => undefined);
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  socket.write(bytes);
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  socket.destroy();
  return answer;
}

/**
 * Sends `head`, then `body` piece by piece, as a sender that goes on writing until the answer comes: the receiver
 * answers an over-limit body without reading it and closes, so the sender may see its upload reset after the answer
 * (an HTTP client then reports the reset, not the answer). Returns what came back.
 */
async function upload(head: string, body: Buffer[], ms = 5_000): Promise<string> {
  const { port } = new URL(receiver.url);
  const socket = connectTcp(Number(port), '127.0.0.1');
  let answer = '';
  socket.on('data', (chunk) => (answer += chunk.toString('latin1')));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  socket.write(head);
  for (const piece of body) {
    if (answer || socket.destroyed) break;
    if (!socket.write(piece)) await Promise.race([new Promise((resolve) => socket.once('drain', resolve)), closed]);
  }
  await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, ms))]);
  socket.destroy();
  return answer;
}

/** Closes the receiver, so its tally of refusals is logged, and returns that line's counts. */
async function refusedCounts(): Promise<Record<string, number> | undefined> {
  await receiver.close();
  const line = logs.find((l) => l.message === 'callbacks refused');
  // Closing twice is harmless: the afterEach closes it again.
  return line?.meta?.refused as Record<string, number> | undefined;
}

const wakeUp = (workflowId: string, kind: CallbackKind, ids: number[]): SignalCall => ({
  run: run(workflowId),
  wakeUp: { kind, ids },
});

describe('valid callbacks wake the run they were signed for with the ids of their objects, and nothing else', () => {
  it('a flat tune: the callback signal carries the tune id only', async () => {
    const res = await send(signedPath('tune', 'job-1'), tune);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text)).toEqual({ outcome: 'delivered' });
    expect(res.headers['content-type']).toBe('application/json');
    expect(calls).toEqual([wakeUp('job-1', 'tune', [tune.id])]);
    expect(logs).toContainEqual({
      level: 'INFO',
      message: 'callback delivered',
      meta: { kind: 'tune', workflowId: 'job-1', ids: [tune.id], outcome: 'delivered' },
    });
  });

  it('a wrapped tune, a prompt with extra query params, a wrapped prompt, pack lists bare and wrapped', async () => {
    expect((await send(signedPath('tune', 'job-1'), { tune })).status).toBe(200);
    expect((await send(signedPath('prompt', 'job-1', { key: 'p1', user: 'customer 9' }), prompt)).status).toBe(200);
    expect((await send(signedPath('prompt', 'job:ä/1', { key: 'p2' }), { prompt: prompt2 })).status).toBe(200);
    expect((await send(signedPath('pack-prompts', 'pack-job'), [prompt, prompt2])).status).toBe(200);
    expect((await send(signedPath('pack-prompts', 'pack-job-2'), { prompts: [prompt] })).status).toBe(200);
    expect(calls).toEqual([
      wakeUp('job-1', 'tune', [tune.id]),
      wakeUp('job-1', 'prompt', [prompt.id]),
      wakeUp('job:ä/1', 'prompt', [prompt2.id]),
      wakeUp('pack-job', 'pack-prompts', [prompt.id, prompt2.id]),
      wakeUp('pack-job-2', 'pack-prompts', [prompt.id]),
    ]);
  });

  it("the live service's shapes: an id as a string, a one-element array, a form, a UTF-8 byte order mark", async () => {
    const live = { ...prompt, id: '29716915', tune_id: '1504944', cfg_scale: '3.0', images: '' };
    expect((await send(signedPath('prompt', 'job-1'), live)).status).toBe(200);
    expect((await send(signedPath('tune', 'job-2'), [tune])).status).toBe(200);
    const form = 'tune[id]=1504944&tune[title]=job-1&tune[orig_images][]=https%3A%2F%2Fcdn%2F1.jpg';
    expect((await send(signedPath('tune', 'job-3'), form, 'POST', 'application/x-www-form-urlencoded')).status).toBe(
      200,
    );
    const bom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify(prompt))]);
    expect((await send(signedPath('prompt', 'job-4'), bom)).status).toBe(200);
    expect(calls).toEqual([
      wakeUp('job-1', 'prompt', [29716915]),
      wakeUp('job-2', 'tune', [tune.id]),
      wakeUp('job-3', 'tune', [1504944]),
      wakeUp('job-4', 'prompt', [prompt.id]),
    ]);
  });

  it('a forged body with a valid URL wakes the run and writes nothing: images, cost, dates never reach it', async () => {
    const forged = {
      ...prompt,
      images: ['https://attacker.example/forged.jpg'],
      cost_mc: 0,
      updated_at: '2999-01-01T00:00:00.000Z',
    };
    expect((await send(signedPath('prompt', 'job-1'), forged)).status).toBe(200);
    expect(calls).toEqual([wakeUp('job-1', 'prompt', [prompt.id])]);
    expect(JSON.stringify(calls)).not.toContain('attacker');
  });

  it('a body sent in chunks without a content-length', async () => {
    const json = JSON.stringify(prompt);
    const parts = [json.slice(0, 10), json.slice(10, 200), json.slice(200)].map((s) => Buffer.from(s));
    expect((await send(signedPath('prompt', 'job-1'), Readable.from(parts))).status).toBe(200);
    expect(calls).toEqual([wakeUp('job-1', 'prompt', [prompt.id])]);
  });

  it('several callbacks on one keep-alive connection, each signalled once', async () => {
    for (let i = 0; i < 5; i++)
      expect((await send(signedPath('prompt', `job-${i}`), { ...prompt, id: i + 1 })).status).toBe(200);
    expect(calls.map((c) => [c.run.workflowId, c.wakeUp.ids[0]])).toEqual([
      ['job-0', 1],
      ['job-1', 2],
      ['job-2', 3],
      ['job-3', 4],
      ['job-4', 5],
    ]);
  });
});

describe('a flood of validly signed callbacks is bounded per run', () => {
  it('a repeat of a callback that just woke the run is answered without a signal: 100 padded copies, one signal', async () => {
    const padded = { ...prompt, padding: 'p'.repeat(60_000) };
    const answers = await Promise.all(
      Array.from({ length: 100 }, () => send(signedPath('prompt', 'job-1'), padded).then((r) => JSON.parse(r.text))),
    );
    expect(answers.filter((a) => a.outcome === 'delivered')).toHaveLength(1);
    expect(answers.filter((a) => a.outcome === 'coalesced')).toHaveLength(99);
    expect(calls).toEqual([wakeUp('job-1', 'prompt', [prompt.id])]);
    // A different body about the same object gets through: a forgery sent first cannot swallow the genuine callback.
    expect(JSON.parse((await send(signedPath('prompt', 'job-1'), prompt)).text)).toEqual({ outcome: 'delivered' });
    calls.pop();
    // Another object of the run, and the same object of another run, still get through.
    expect((await send(signedPath('prompt', 'job-1'), prompt2)).status).toBe(200);
    expect((await send(signedPath('prompt', 'job-2'), prompt)).status).toBe(200);
    expect(calls).toHaveLength(3);
  });

  it("a pack's list is not coalesced away by the callbacks of its prompts one by one", async () => {
    await send(signedPath('prompt', 'pack-job'), prompt);
    await send(signedPath('prompt', 'pack-job'), prompt2);
    await send(signedPath('pack-prompts', 'pack-job'), [prompt, prompt2]);
    expect(calls.map((c) => c.wakeUp.kind)).toEqual(['prompt', 'prompt', 'pack-prompts']);
  });

  it('past the run budget: 200 (never 429: the service does not retry) and no signal, counted; other runs unaffected', async () => {
    await restart({ runBudget: { burst: 3, perMinute: 0 } });
    const statuses: number[] = [];
    for (let id = 1; id <= 5; id++) statuses.push((await send(signedPath('prompt', 'job-1'), { id })).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200]);
    expect((await send(signedPath('prompt', 'job-2'), { id: 1 })).status).toBe(200);
    expect(calls).toHaveLength(4);
    expect(await refusedCounts()).toEqual({ '200 run budget spent: dropped': 2 });
  });

  it('a closed run is remembered: later callbacks for it are answered without asking Temporal again', async () => {
    outcome = async () => 'workflow-not-found';
    const first = await send(signedPath('tune', 'closed-job'), tune);
    const second = await send(signedPath('prompt', 'closed-job'), prompt);
    expect([first.status, second.status]).toEqual([200, 200]);
    expect(JSON.parse(second.text)).toEqual({ outcome: 'workflow-not-found' });
    expect(calls).toHaveLength(1);
  });

  it('pathological bodies cost no more than a real callback: the receiver memory stays flat', async () => {
    const bodies: Array<[CallbackKind, string]> = [
      ['pack-prompts', `[${'{},'.repeat(170_000)}{}]`],
      ['prompt', JSON.stringify({ id: 7, images: Array.from({ length: 6_000 }, () => 5) })],
      ['prompt', `{"id": 8, "x": ${'['.repeat(30_000)}${']'.repeat(30_000)}}`],
      ['tune', JSON.stringify({ id: 9, padding: 'z'.repeat(60_000) })],
    ];
    const before = process.memoryUsage().rss;
    for (let i = 0; i < 10; i++)
      for (const [kind, body] of bodies) await send(signedPath(kind, `job-${i % 3}`, undefined), body);
    const grewMiB = (process.memoryUsage().rss - before) / 2 ** 20;
    // The receiver before this change grew by 900 MiB to 2 GiB on one such body; forty of them here stay far below
    // one (the bound leaves room for the test runner's own garbage, collected when V8 likes).
    expect(grewMiB).toBeLessThan(300);
    expect(calls.every((c) => c.wakeUp.ids.length === 1)).toBe(true);
  });
});

describe('refused callbacks signal nothing, and are logged as counts, never a line each', () => {
  afterEach(() => expect(calls).toEqual([]));

  it('403 for a forged signature: one tally line when the receiver closes, no URL or workflow ID in it', async () => {
    for (let i = 0; i < 50; i++) {
      const res = await send(`/callbacks/prompt?workflowId=job-1&runId=${RUN_ID}&sig=${'ab'.repeat(32)}`, prompt);
      expect(res.status).toBe(403);
      expect(JSON.parse(res.text)).toEqual({ error: 'invalid or missing signature' });
    }
    expect(logs).toEqual([]);
    expect(await refusedCounts()).toEqual({ '403 signature': 50 });
    expect(logs.filter((l) => l.message === 'callbacks refused')).toHaveLength(1);
    expect(JSON.stringify(logs)).not.toContain('job-1');
  });

  it('403 for a valid signature smuggled inside the workflow ID, and nothing of it logged', async () => {
    const sig = new URL(signer.url('prompt', run('job-1'))).searchParams.get('sig') as string;
    const smuggled = `/callbacks/prompt?workflowId=${encodeURIComponent(`job-1;sig=${sig}`)}&runId=${RUN_ID}&sig=00`;
    expect((await send(smuggled, prompt)).status).toBe(403);
    await refusedCounts();
    expect(JSON.stringify(logs)).not.toContain(sig);
  });

  it('403 for the URL of another run of the same workflow ID, of another workflow, of another kind', async () => {
    const earlierRun = signedPath('prompt', 'job-1', undefined, '0190b7c1-2f7e-7c1a-9d52-5a4f3c2b1a01');
    const later = new URL('http://x' + earlierRun);
    later.searchParams.set('runId', RUN_ID);
    expect((await send(later.pathname + later.search, prompt)).status).toBe(403);
    const other = new URL('http://x' + signedPath('prompt', 'job-2'));
    other.searchParams.set('workflowId', 'job-1');
    expect((await send(other.pathname + other.search, prompt)).status).toBe(403);
    const tuneQuery = new URL(signer.url('tune', run('job-1'))).search;
    expect((await send(`/callbacks/prompt${tuneQuery}`, prompt)).status).toBe(403);
    expect((await send(`/callbacks/pack-prompts${tuneQuery}`, [prompt])).status).toBe(403);
  });

  it('403 for an old URL without a run ID, without a signature, without a workflow ID', async () => {
    const oldSig = new URL(signer.url('prompt', run('job-1'))).searchParams.get('sig');
    expect((await send(`/callbacks/prompt?workflowId=job-1&sig=${oldSig}`, prompt)).status).toBe(403);
    expect((await send(`/callbacks/prompt?workflowId=job-1&runId=${RUN_ID}`, prompt)).status).toBe(403);
    expect((await send(`/callbacks/prompt?runId=${RUN_ID}&sig=${oldSig}`, prompt)).status).toBe(403);
    expect((await send('/callbacks/prompt', prompt)).status).toBe(403);
  });

  it('403 before the body is read: a forged callback with a huge body is not answered 413', async () => {
    const res = await send(`/callbacks/prompt?workflowId=job-1&sig=${'0'.repeat(64)}`, Buffer.alloc(3 << 20, 0x20));
    expect(res.status).toBe(403);
    expect((await send('/healthz', undefined, 'GET')).status).toBe(200);
  });

  it('400 for a body that is not JSON, or empty; 415 for another type', async () => {
    const res = await send(signedPath('prompt', 'job-1'), '{"id": 1, "text": ');
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text)).toEqual({ error: 'body is not JSON' });
    expect((await send(signedPath('prompt', 'job-1'), '')).status).toBe(400);
    expect((await send(signedPath('prompt', 'job-1'), 'id=1', 'POST', 'text/plain')).status).toBe(415);
    const multipart = await send(signedPath('prompt', 'job-1'), '--b\r\n', 'POST', 'multipart/form-data; boundary=b');
    expect(multipart.status).toBe(415);
    expect(await refusedCounts()).toEqual({ '400 not JSON': 2, '415 content type': 2 });
  });

  it('413 for a body over the kind limit (declared or chunked), and the receiver stays healthy', async () => {
    const path = signedPath('prompt', 'job-1');
    const big = Buffer.from(JSON.stringify({ ...prompt, text: 'x'.repeat(4 << 20) }));
    const pieces = Array.from({ length: Math.ceil(big.length / (64 << 10)) }, (_, i) =>
      big.subarray(i * (64 << 10), (i + 1) * (64 << 10)),
    );
    const declared = await upload(
      `POST ${path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${big.length}\r\n\r\n`,
      pieces,
    );
    expect(declared).toMatch(/^HTTP\/1\.1 413 /);
    expect(declared).toContain(JSON.stringify({ error: 'body too large' }));
    const chunk = Buffer.alloc(64 << 10, 0x20);
    const chunked = await upload(
      `POST ${path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n`,
      Array.from({ length: 48 }, () =>
        Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]),
      ),
    );
    expect(chunked).toMatch(/^HTTP\/1\.1 413 /);
    expect((await send('/healthz', undefined, 'GET')).status).toBe(200);
  });

  it('413 at once for `Expect: 100-continue` with a body over the limit: no 100 Continue is sent', async () => {
    const path = signedPath('prompt', 'job-1');
    const answer = await raw(
      `POST ${path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 10000000\r\n` +
        'expect: 100-continue\r\n\r\n',
    );
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(answer).not.toContain('100 Continue');
    // A forged one is refused the same way, before its body.
    const forged = await raw(
      `POST /callbacks/prompt?workflowId=j&runId=${RUN_ID}&sig=${'0'.repeat(64)} HTTP/1.1\r\nhost: x\r\n` +
        'content-length: 100\r\nexpect: 100-continue\r\n\r\n',
    );
    expect(forged).toMatch(/^HTTP\/1\.1 403 /);
    expect(forged).not.toContain('100 Continue');
  });

  it('100 Continue for a valid callback that asks for it, then delivered', async () => {
    const path = signedPath('prompt', 'job-1');
    const json = JSON.stringify(prompt);
    const { port } = new URL(receiver.url);
    const socket = connectTcp(Number(port), '127.0.0.1');
    let answer = '';
    socket.on('data', (chunk) => {
      answer += chunk.toString();
      if (answer.includes('100 Continue') && !answer.includes('200')) socket.write(json);
    });
    socket.write(
      `POST ${path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${json.length}\r\n` +
        'expect: 100-continue\r\nconnection: close\r\n\r\n',
    );
    await new Promise((resolve) => socket.once('close', resolve));
    expect(answer).toContain('HTTP/1.1 100 Continue');
    expect(answer).toContain('HTTP/1.1 200 OK');
    expect(calls).toEqual([wakeUp('job-1', 'prompt', [prompt.id])]);
    calls.length = 0;
  });

  it('408 for a client too slow with its headers or its body, and the connection closed', async () => {
    await restart({ clientTimeouts: { headers: '200 ms', request: '400 ms' } });
    // Headers never finished (a slow loris).
    expect(await raw('POST /callbacks/prompt HTTP/1.1\r\nhost: x\r\n', 3_000)).toMatch(/^HTTP\/1\.1 408 /);
    // Headers sent, the body never comes.
    expect(
      await raw(
        `POST ${signedPath('prompt', 'job-1')} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n` +
          'content-length: 100\r\n\r\n{',
        3_000,
      ),
    ).toMatch(/^HTTP\/1\.1 408 /);
    expect(calls).toEqual([]);
    expect(await refusedCounts()).toEqual({ '408 unreadable request': 2 });
  });

  it('clientTimeouts: a request timeout shorter than the headers one is refused, naming the option', async () => {
    await expect(
      startCallbackReceiver({
        signer,
        signaler: recordingSignaler,
        clientTimeouts: { headers: '10 seconds', request: '1 second' },
      }),
    ).rejects.toThrow(/^clientTimeouts: /);
  });

  it('431 for headers too large, 400 for a request that is not HTTP', async () => {
    expect(await raw(`GET /healthz HTTP/1.1\r\nhost: x\r\nx-big: ${'a'.repeat(40_000)}\r\n\r\n`)).toMatch(
      /^HTTP\/1\.1 431 /,
    );
    expect(await raw('NOT HTTP AT ALL\r\n\r\n')).toMatch(/^HTTP\/1\.1 400 /);
    expect(await refusedCounts()).toEqual({ '431 unreadable request': 1, '400 unreadable request': 1 });
  });

  it('404 for an unknown kind or path, 405 for another method with Allow: POST', async () => {
    const query = new URL(signer.url('prompt', run('job-1'))).search;
    expect((await send(`/callbacks/video${query}`, prompt)).status).toBe(404);
    expect((await send(`/callbacks/prompt/extra${query}`, prompt)).status).toBe(404);
    expect((await send('/', prompt)).status).toBe(404);
    const get = await send(signedPath('prompt', 'job-1'), undefined, 'GET');
    expect(get.status).toBe(405);
    expect(get.headers.allow).toBe('POST');
    expect((await send(signedPath('tune', 'job-1'), tune, 'PUT')).status).toBe(405);
  });

  it('422 for JSON without the objects ids, naming the field', async () => {
    const res = await send(signedPath('prompt', 'job-1'), { ...prompt, id: 'one' });
    expect(res.status).toBe(422);
    expect(JSON.parse(res.text)).toEqual({
      error: 'body is not a valid prompt object',
      issues: ['prompt.id: must be a positive integer'],
    });
    expect((await send(signedPath('tune', 'job-1'), [tune, tune])).status).toBe(422);
    expect((await send(signedPath('prompt', 'job-1'), 'null')).status).toBe(422);
    expect((await send(signedPath('pack-prompts', 'job-1'), prompt)).status).toBe(422);
    const mixed = await send(signedPath('pack-prompts', 'job-1'), [prompt, { ...prompt2, id: null }]);
    expect(mixed.status).toBe(422);
    expect(JSON.parse(mixed.text).issues).toEqual(['prompts.1.id: must be a positive integer']);
  });

  it('nothing for a client that hangs up mid-body, and the receiver stays healthy', async () => {
    const { port } = new URL(receiver.url);
    const socket = connectTcp(Number(port), '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    const path = signedPath('prompt', 'job-1');
    socket.write(`POST ${path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 5000\r\n\r\n`);
    socket.write(JSON.stringify(prompt).slice(0, 100));
    await new Promise((resolve) => setImmediate(resolve));
    const closed = new Promise((resolve) => socket.once('close', resolve));
    socket.destroy();
    await closed;
    expect((await send('/healthz', undefined, 'GET')).status).toBe(200);
  });
});

describe('options', () => {
  it('maxBodyBytes: accepts a body of exactly that size and refuses one byte more', async () => {
    await restart({ maxBodyBytes: 2000 });
    const base = JSON.stringify({ ...prompt, text: '' });
    const exact = JSON.stringify({ ...prompt, text: 'y'.repeat(2000 - base.length) });
    expect(Buffer.byteLength(exact)).toBe(2000);
    expect((await send(signedPath('prompt', 'job-1'), exact)).status).toBe(200);
    const over = JSON.stringify({ ...prompt, id: prompt.id + 1, text: 'y'.repeat(2001 - base.length) });
    expect((await send(signedPath('prompt', 'job-1'), over)).status).toBe(413);
    // The same, without a content-length to read the size from.
    const chunked = Readable.from([Buffer.from(over.slice(0, 1000)), Buffer.from(over.slice(1000))]);
    expect((await send(signedPath('prompt', 'job-1'), chunked)).status).toBe(413);
    expect(calls).toHaveLength(1);
  });

  it('refuses invalid options, naming them', async () => {
    await expect(startCallbackReceiver({ signer, signaler: recordingSignaler, maxBodyBytes: 0 })).rejects.toThrow(
      'maxBodyBytes: must be a positive integer',
    );
    await expect(startCallbackReceiver({ signer, signaler: recordingSignaler, port: 70000 })).rejects.toThrow(
      'port: must be an integer from 0 to 65535',
    );
    await expect(
      startCallbackReceiver({ signer, signaler: recordingSignaler, runBudget: { burst: 0, perMinute: 1 } }),
    ).rejects.toThrow(/runBudget: burst must be a positive integer/);
    await expect(
      startCallbackReceiver({ signer, signaler: recordingSignaler, coalesceWindow: 'soon' as never }),
    ).rejects.toThrow(/coalesceWindow: must be a duration/);
    await expect(startCallbackReceiver({ signer: undefined as never, signaler: recordingSignaler })).rejects.toThrow(
      'signer: must be a CallbackSigner',
    );
  });
});

describe('signal outcomes', () => {
  it("'workflow-not-found' is answered 200 and logged", async () => {
    outcome = async () => 'workflow-not-found';
    const res = await send(signedPath('tune', 'closed-job'), tune);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text)).toEqual({ outcome: 'workflow-not-found' });
    expect(calls).toHaveLength(1);
    expect(logs).toContainEqual({
      level: 'INFO',
      message: 'callback for a closed or unknown run',
      meta: { kind: 'tune', workflowId: 'closed-job', outcome: 'workflow-not-found' },
    });
  });

  it('SignalerUnavailableError is answered 503, and the same callback may wake the run once Temporal is back', async () => {
    outcome = async () => {
      throw new SignalerUnavailableError('Temporal is unavailable');
    };
    const res = await send(signedPath('prompt', 'job-1'), prompt);
    expect(res.status).toBe(503);
    expect(JSON.parse(res.text)).toEqual({ error: 'temporal unavailable' });
    expect(logs).toContainEqual(
      expect.objectContaining({ level: 'ERROR', meta: expect.objectContaining({ workflowId: 'job-1' }) }),
    );
    outcome = async () => 'delivered';
    expect(JSON.parse((await send(signedPath('prompt', 'job-1'), prompt)).text)).toEqual({ outcome: 'delivered' });
  });

  it('any other error is answered 500 and logged', async () => {
    outcome = async () => {
      throw new RangeError('boom');
    };
    const res = await send(signedPath('prompt', 'job-1'), prompt);
    expect(res.status).toBe(500);
    expect(JSON.parse(res.text)).toEqual({ error: 'internal error' });
    const entry = logs.find((l) => l.level === 'ERROR');
    expect(entry?.meta).toMatchObject({ kind: 'prompt', workflowId: 'job-1' });
    expect((entry?.meta?.error as Error).message).toBe('boom');
  });

  it('a signaler that throws synchronously is answered 500', async () => {
    outcome = () => {
      throw new Error('sync boom');
    };
    expect((await send(signedPath('prompt', 'job-1'), prompt)).status).toBe(500);
  });
});

describe('health', () => {
  it('GET /healthz is 200 ok; POST /healthz is 405', async () => {
    const res = await send('/healthz', undefined, 'GET');
    expect([res.status, res.text, res.headers['content-type']]).toEqual([200, 'ok', 'text/plain']);
    expect((await send('/healthz', {}, 'POST')).status).toBe(405);
  });
});

describe('temporalSignaler', () => {
  /** A client stand-in that records the signal and answers as told: the receiver's view of Temporal's errors. */
  function clientThat(answer: () => Promise<void>, sent: Array<[string, string | undefined, string, unknown]>): Client {
    return {
      workflow: {
        getHandle: (workflowId: string, runId?: string) => ({
          signal: (def: { name: string }, payload: unknown) => {
            sent.push([workflowId, runId, def.name, payload]);
            return answer();
          },
        }),
      },
      withDeadline: (_deadline: number, fn: () => Promise<void>) => fn(),
    } as unknown as Client;
  }
  const grpcError = (code: number) => Object.assign(new Error(`${code} grpc`), { code, details: 'x', metadata: {} });

  it('sends the callback signal with the wake-up, to the run the URL was signed for', async () => {
    const sent: Array<[string, string | undefined, string, unknown]> = [];
    const signaler = temporalSignaler(clientThat(async () => undefined, sent));
    await expect(signaler.signal(run('w1'), { kind: 'tune', ids: [1] })).resolves.toBe('delivered');
    await expect(signaler.signal(run('w2', 'r2'), { kind: 'pack-prompts', ids: [2, 3] })).resolves.toBe('delivered');
    expect(sent).toEqual([
      ['w1', RUN_ID, 'callback', { kind: 'tune', ids: [1] }],
      ['w2', 'r2', 'callback', { kind: 'pack-prompts', ids: [2, 3] }],
    ]);
  });

  it('maps WorkflowNotFoundError (a closed run) to workflow-not-found', async () => {
    const signaler = temporalSignaler(
      clientThat(async () => {
        throw new WorkflowNotFoundError('workflow execution already completed', 'w1', RUN_ID);
      }, []),
    );
    await expect(signaler.signal(run('w1'), { kind: 'tune', ids: [1] })).resolves.toBe('workflow-not-found');
  });

  it.each([
    ['UNAVAILABLE', 14],
    ['DEADLINE_EXCEEDED', 4],
    ['RESOURCE_EXHAUSTED', 8],
  ])('maps a ServiceError with gRPC %s to SignalerUnavailableError', async (_name, code) => {
    const signaler = temporalSignaler(
      clientThat(async () => {
        throw new ServiceError('Failed to signal Workflow', { cause: grpcError(code) });
      }, []),
    );
    await expect(signaler.signal(run('w1'), { kind: 'prompt', ids: [1] })).rejects.toBeInstanceOf(
      SignalerUnavailableError,
    );
  });

  it('lets other failures through (PERMISSION_DENIED, plain errors)', async () => {
    const denied = temporalSignaler(
      clientThat(async () => {
        throw new ServiceError('Failed to signal Workflow', { cause: grpcError(7) });
      }, []),
    );
    await expect(denied.signal(run('w1'), { kind: 'prompt', ids: [1] })).rejects.toBeInstanceOf(ServiceError);
    const plain = temporalSignaler(
      clientThat(async () => {
        throw new TypeError('bad');
      }, []),
    );
    await expect(plain.signal(run('w1'), { kind: 'prompt', ids: [1] })).rejects.toBeInstanceOf(TypeError);
  });

  it('signals under a deadline of now + timeout', async () => {
    const deadlines: number[] = [];
    const client = clientThat(async () => undefined, []);
    (client as unknown as { withDeadline: unknown }).withDeadline = (deadline: number, fn: () => Promise<void>) => {
      deadlines.push(deadline);
      return fn();
    };
    const before = Date.now();
    await temporalSignaler(client, { timeout: '3 seconds' }).signal(run('w1'), { kind: 'tune', ids: [1] });
    const after = Date.now();
    expect(deadlines).toHaveLength(1);
    expect(deadlines[0]).toBeGreaterThanOrEqual(before + 3000);
    expect(deadlines[0]).toBeLessThanOrEqual(after + 3000);
    expect(() => temporalSignaler(client, { timeout: 'soon' as never })).toThrow(/timeout: must be a duration/);
  });

  it('against a real but unreachable Temporal (lazy connection), the receiver answers 503', async () => {
    const closed = createNetServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((resolve) => closed.close(() => resolve()));

    const connection = Connection.lazy({ address: `127.0.0.1:${port}` });
    const client = new Client({ connection, namespace: 'default' });
    const unreachable = await startCallbackReceiver({
      host: '127.0.0.1',
      signer,
      signaler: temporalSignaler(client, { timeout: '1 second' }),
      logger: recordingLogger(logs),
    });
    try {
      const res = await request(unreachable.url + signedPath('prompt', 'job-1'), {
        method: 'POST',
        body: JSON.stringify(prompt),
      });
      expect(res.statusCode).toBe(503);
      expect(await res.body.json()).toEqual({ error: 'temporal unavailable' });
      const entry = logs.find((l) => l.message === 'callback not signalled: Temporal unavailable');
      expect(entry?.meta?.error).toBeInstanceOf(SignalerUnavailableError);
      expect((entry?.meta?.error as SignalerUnavailableError).workflowId).toBe('job-1');
    } finally {
      await unreachable.close();
      await connection.close();
    }
  });
});
