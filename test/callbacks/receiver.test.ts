import { createServer as createNetServer, connect as connectTcp, type AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { Client, Connection, ServiceError, WorkflowNotFoundError } from '@temporalio/client';
import type { LogLevel, LogMetadata, Logger } from '@temporalio/common';
import { request } from 'undici';
import type { Prompt, Tune } from '../../src/api/schemas';
import {
  type CallbackReceiver,
  type Signaler,
  SignalerUnavailableError,
  type SignalOutcome,
  startCallbackReceiver,
  temporalSignaler,
} from '../../src/callbacks/receiver';
import { CallbackSigner } from '../../src/callbacks/signing';
import type { CallbackKind } from '../../src/workflows/messages';

jest.setTimeout(20_000);

const SECRET = 'receiver-test-secret-0123456789';
const signer = new CallbackSigner({ baseUrl: 'https://hooks.example.com', secret: SECRET });

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
  workflowId: string;
  kind: CallbackKind;
  payload: Tune | Prompt | Prompt[];
}

interface LogEntry {
  level: LogLevel;
  message: string;
  meta?: LogMetadata;
}

function recordingLogger(entries: LogEntry[]): Logger {
  const log = (level: LogLevel, message: string, meta?: LogMetadata) => void entries.push({ level, message, meta });
  return {
    log,
    trace: (m, meta) => log('TRACE', m, meta),
    debug: (m, meta) => log('DEBUG', m, meta),
    info: (m, meta) => log('INFO', m, meta),
    warn: (m, meta) => log('WARN', m, meta),
    error: (m, meta) => log('ERROR', m, meta),
  };
}

let receiver: CallbackReceiver;
let calls: SignalCall[];
let logs: LogEntry[];
/** What the recording signaler does after it records the call. */
let outcome: () => Promise<SignalOutcome>;

const recordingSignaler: Signaler = {
  signal(workflowId, kind, payload) {
    calls.push({ workflowId, kind, payload });
    return outcome();
  },
};

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
function signedPath(kind: CallbackKind, workflowId: string, params?: Record<string, string>): string {
  const url = new URL(signer.url(kind, workflowId, params));
  return url.pathname + url.search;
}

async function send(
  path: string,
  body?: string | Buffer | Readable | unknown,
  method: 'POST' | 'GET' | 'PUT' | 'HEAD' = 'POST',
): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
  const payload =
    body === undefined || typeof body === 'string' || Buffer.isBuffer(body) || body instanceof Readable
      ? body
      : JSON.stringify(body);
  const res = await request(receiver.url + path, {
    method,
    body: payload as string | Buffer | Readable | undefined,
    headers: payload === undefined ? {} : { 'content-type': 'application/json' },
  });
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
}

describe('valid callbacks signal once with the parsed payload', () => {
  it('a flat tune', async () => {
    const res = await send(signedPath('tune', 'job-1'), tune);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text)).toEqual({ outcome: 'delivered' });
    expect(res.headers['content-type']).toBe('application/json');
    expect(calls).toEqual([{ workflowId: 'job-1', kind: 'tune', payload: tune }]);
    expect(logs).toContainEqual({
      level: 'INFO',
      message: 'callback delivered',
      meta: { kind: 'tune', workflowId: 'job-1', status: 200, outcome: 'delivered' },
    });
  });

  it('a wrapped tune ({"tune": {...}})', async () => {
    const res = await send(signedPath('tune', 'job-1'), { tune });
    expect(res.status).toBe(200);
    expect(calls).toEqual([{ workflowId: 'job-1', kind: 'tune', payload: tune }]);
  });

  it('a flat prompt with extra query params, unknown fields passing through', async () => {
    const res = await send(signedPath('prompt', 'job-1', { key: 'p1', user: 'customer 9' }), prompt);
    expect(res.status).toBe(200);
    expect(calls).toEqual([{ workflowId: 'job-1', kind: 'prompt', payload: prompt }]);
    expect((calls[0].payload as Prompt).cost_mc).toBe(1200);
  });

  it('a wrapped prompt ({"prompt": {...}})', async () => {
    const res = await send(signedPath('prompt', 'job:ä/1', { key: 'p2' }), { prompt: prompt2 });
    expect(res.status).toBe(200);
    expect(calls).toEqual([{ workflowId: 'job:ä/1', kind: 'prompt', payload: prompt2 }]);
  });

  it('pack prompts as a bare array', async () => {
    const res = await send(signedPath('pack-prompts', 'pack-job'), [prompt, prompt2]);
    expect(res.status).toBe(200);
    expect(calls).toEqual([{ workflowId: 'pack-job', kind: 'pack-prompts', payload: [prompt, prompt2] }]);
  });

  it('pack prompts wrapped ({"prompts": [...]})', async () => {
    const res = await send(signedPath('pack-prompts', 'pack-job'), { prompts: [prompt] });
    expect(res.status).toBe(200);
    expect(calls).toEqual([{ workflowId: 'pack-job', kind: 'pack-prompts', payload: [prompt] }]);
  });

  it('the live service\'s shapes: numeric strings read as numbers where tuneflow reads them, "" as null, the rest as sent', async () => {
    const live = { ...prompt, id: '29716915', tune_id: '1504944', cfg_scale: '3.0', cost_mc: '1200', images: '' };
    const res = await send(signedPath('prompt', 'job-1'), live);
    expect(res.status).toBe(200);
    // cost_mc too: a job's cost is read from it.
    const expected = { ...live, id: 29716915, tune_id: 1504944, cost_mc: 1200, images: null };
    expect(calls).toEqual([{ workflowId: 'job-1', kind: 'prompt', payload: expected }]);
    expect((calls[0].payload as Prompt).cfg_scale).toBe('3.0');

    calls.length = 0;
    const liveTune = { ...tune, id: '1504944', base_tune_id: '', steps: '500' };
    expect((await send(signedPath('tune', 'job-1'), liveTune)).status).toBe(200);
    expect(calls).toEqual([
      { workflowId: 'job-1', kind: 'tune', payload: { ...liveTune, id: 1504944, base_tune_id: null } },
    ]);
  });

  it('a prompt or a tune as a one-element array, as the service answers a prompt create', async () => {
    expect((await send(signedPath('prompt', 'job-1'), [prompt])).status).toBe(200);
    expect((await send(signedPath('tune', 'job-1'), [tune])).status).toBe(200);
    expect(calls).toEqual([
      { workflowId: 'job-1', kind: 'prompt', payload: prompt },
      { workflowId: 'job-1', kind: 'tune', payload: tune },
    ]);
  });

  it('pack prompts with numeric strings', async () => {
    const res = await send(signedPath('pack-prompts', 'pack-job'), [{ ...prompt, id: '5', cfg_scale: '7.5' }]);
    expect(res.status).toBe(200);
    expect(calls).toEqual([
      { workflowId: 'pack-job', kind: 'pack-prompts', payload: [{ ...prompt, id: 5, cfg_scale: '7.5' }] },
    ]);
  });

  it('a body that only zod can judge is signalled as zod gives it (a JSON "__proto__" key dropped)', async () => {
    // The compiled fast path leaves this body to zod, which returns the prompt without that key.
    const res = await send(
      signedPath('prompt', 'job-1'),
      `{"__proto__": {"polluted": true}, ${JSON.stringify(prompt).slice(1)}`,
    );
    expect(res.status).toBe(200);
    expect(calls).toEqual([{ workflowId: 'job-1', kind: 'prompt', payload: prompt }]);
    expect(Object.hasOwn(calls[0].payload, '__proto__')).toBe(false);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('a body sent in chunks without a content-length', async () => {
    const json = JSON.stringify(prompt);
    const parts = [json.slice(0, 10), json.slice(10, 200), json.slice(200)].map((s) => Buffer.from(s));
    const res = await send(signedPath('prompt', 'job-1'), Readable.from(parts));
    expect(res.status).toBe(200);
    expect(calls).toEqual([{ workflowId: 'job-1', kind: 'prompt', payload: prompt }]);
  });

  it('several callbacks on one keep-alive connection, each signalled once', async () => {
    for (let i = 0; i < 5; i++) {
      const res = await send(signedPath('prompt', `job-${i}`), { ...prompt, id: i + 1 });
      expect(res.status).toBe(200);
    }
    expect(calls.map((c) => [c.workflowId, (c.payload as Prompt).id])).toEqual([
      ['job-0', 1],
      ['job-1', 2],
      ['job-2', 3],
      ['job-3', 4],
      ['job-4', 5],
    ]);
  });
});

describe('refused callbacks signal nothing', () => {
  afterEach(() => expect(calls).toEqual([]));

  it('403 for a forged signature', async () => {
    const res = await send(`/callbacks/prompt?workflowId=job-1&sig=${'ab'.repeat(32)}`, prompt);
    expect(res.status).toBe(403);
    expect(JSON.parse(res.text)).toEqual({ error: 'invalid or missing signature' });
    expect(logs).toContainEqual({
      level: 'WARN',
      message: 'callback refused',
      meta: { kind: 'prompt', workflowId: 'job-1', status: 403, reason: 'signature' },
    });
  });

  it('403 for a forged callback with a long workflow ID, logged shortened', async () => {
    const long = 'w'.repeat(5000);
    expect((await send(`/callbacks/tune?workflowId=${long}&sig=${'ab'.repeat(32)}`, tune)).status).toBe(403);
    const entry = logs.find((l) => l.meta?.status === 403);
    expect(entry?.meta?.workflowId).toBe(`${'w'.repeat(200)}...`);
  });

  it('403 for the signature of another workflow', async () => {
    const sig = new URL(signer.url('prompt', 'job-2')).searchParams.get('sig');
    expect((await send(`/callbacks/prompt?workflowId=job-1&sig=${sig}`, prompt)).status).toBe(403);
  });

  it('403 for the signature of another kind', async () => {
    const tuneQuery = new URL(signer.url('tune', 'job-1')).search;
    expect((await send(`/callbacks/prompt${tuneQuery}`, prompt)).status).toBe(403);
    expect((await send(`/callbacks/pack-prompts${tuneQuery}`, [prompt])).status).toBe(403);
  });

  it('403 without a signature or without a workflow ID', async () => {
    expect((await send('/callbacks/prompt?workflowId=job-1', prompt)).status).toBe(403);
    const sig = new URL(signer.url('prompt', 'job-1')).searchParams.get('sig');
    expect((await send(`/callbacks/prompt?sig=${sig}`, prompt)).status).toBe(403);
    expect((await send('/callbacks/prompt', prompt)).status).toBe(403);
  });

  it('403 before the body is read: a forged callback with a huge body is not answered 413', async () => {
    const res = await send(`/callbacks/prompt?workflowId=job-1&sig=${'0'.repeat(64)}`, Buffer.alloc(3 << 20, 0x20));
    expect(res.status).toBe(403);
    expect((await send('/healthz', undefined, 'GET')).status).toBe(200);
  });

  it('400 for a body that is not JSON, or empty', async () => {
    const res = await send(signedPath('prompt', 'job-1'), '{"id": 1, "text": ');
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text)).toEqual({ error: 'body is not JSON' });
    expect((await send(signedPath('prompt', 'job-1'), '')).status).toBe(400);
    expect(logs.filter((l) => l.meta?.status === 400)).toHaveLength(2);
  });

  it('413 for a body of a few MiB, and the receiver stays healthy', async () => {
    const big = Buffer.from(JSON.stringify({ ...prompt, text: 'x'.repeat(4 << 20) }));
    const res = await send(signedPath('prompt', 'job-1'), big);
    expect(res.status).toBe(413);
    expect(JSON.parse(res.text)).toEqual({ error: 'body too large' });
    expect(logs).toContainEqual(expect.objectContaining({ meta: expect.objectContaining({ status: 413 }) }));
    const health = await send('/healthz', undefined, 'GET');
    expect([health.status, health.text]).toEqual([200, 'ok']);
    // Still delivers afterwards (checked by the outer afterEach only for the refused part).
    calls.length = 0;
    expect((await send(signedPath('prompt', 'job-1'), prompt)).status).toBe(200);
    expect(calls).toHaveLength(1);
    calls.length = 0;
  });

  it('413 for an oversized body sent in chunks without a content-length', async () => {
    const chunks = function* () {
      for (let i = 0; i < 48; i++) yield Buffer.alloc(64 * 1024, 0x20);
    };
    const res = await send(signedPath('prompt', 'job-1'), Readable.from(chunks()));
    expect(res.status).toBe(413);
    expect((await send('/healthz', undefined, 'GET')).status).toBe(200);
  });

  it('404 for an unknown kind or path', async () => {
    const query = new URL(signer.url('prompt', 'job-1')).search;
    expect((await send(`/callbacks/video${query}`, prompt)).status).toBe(404);
    expect((await send(`/callbacks/prompt/extra${query}`, prompt)).status).toBe(404);
    expect((await send('/', prompt)).status).toBe(404);
  });

  it('405 for another method, with Allow: POST', async () => {
    const get = await send(signedPath('prompt', 'job-1'), undefined, 'GET');
    expect(get.status).toBe(405);
    expect(get.headers.allow).toBe('POST');
    expect((await send(signedPath('tune', 'job-1'), tune, 'PUT')).status).toBe(405);
  });

  it('422 for JSON that is not the object of the kind, naming the fields', async () => {
    const { tune_id: _dropped, ...withoutTuneId } = prompt;
    const res = await send(signedPath('prompt', 'job-1'), withoutTuneId);
    expect(res.status).toBe(422);
    const body = JSON.parse(res.text);
    expect(body.error).toBe('body is not a valid prompt object');
    expect(body.issues).toEqual([expect.stringMatching(/^prompt\.tune_id: /)]);

    expect((await send(signedPath('tune', 'job-1'), { ...tune, id: 'one' })).status).toBe(422);
    expect((await send(signedPath('tune', 'job-1'), { ...tune, id: '15.5' })).status).toBe(422);
    expect((await send(signedPath('tune', 'job-1'), [tune, tune])).status).toBe(422);
    expect((await send(signedPath('prompt', 'job-1'), { prompt: { id: 1 } })).status).toBe(422);
    expect((await send(signedPath('prompt', 'job-1'), 'null')).status).toBe(422);
    expect((await send(signedPath('pack-prompts', 'job-1'), prompt)).status).toBe(422);
    const mixed = await send(signedPath('pack-prompts', 'job-1'), [prompt, { ...prompt2, text: 5 }]);
    expect(mixed.status).toBe(422);
    expect(JSON.parse(mixed.text).issues).toEqual([expect.stringMatching(/^prompts\.1\.text: /)]);
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

describe('body limit', () => {
  it('accepts a body of exactly maxBodyBytes and refuses one byte more', async () => {
    await receiver.close();
    receiver = await startCallbackReceiver({
      host: '127.0.0.1',
      signer,
      signaler: recordingSignaler,
      maxBodyBytes: 2000,
      logger: recordingLogger(logs),
    });
    const base = JSON.stringify({ ...prompt, text: '' });
    const exact = JSON.stringify({ ...prompt, text: 'y'.repeat(2000 - base.length) });
    expect(Buffer.byteLength(exact)).toBe(2000);
    expect((await send(signedPath('prompt', 'job-1'), exact)).status).toBe(200);
    const over = JSON.stringify({ ...prompt, text: 'y'.repeat(2001 - base.length) });
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
      level: 'WARN',
      message: 'callback for a closed or unknown workflow',
      meta: { kind: 'tune', workflowId: 'closed-job', status: 200, outcome: 'workflow-not-found' },
    });
  });

  it('SignalerUnavailableError is answered 503', async () => {
    outcome = async () => {
      throw new SignalerUnavailableError('Temporal is unavailable');
    };
    const res = await send(signedPath('prompt', 'job-1'), prompt);
    expect(res.status).toBe(503);
    expect(JSON.parse(res.text)).toEqual({ error: 'temporal unavailable' });
    expect(logs).toContainEqual(
      expect.objectContaining({ level: 'ERROR', meta: expect.objectContaining({ status: 503, workflowId: 'job-1' }) }),
    );
  });

  it('any other error is answered 500 and logged', async () => {
    outcome = async () => {
      throw new RangeError('boom');
    };
    const res = await send(signedPath('prompt', 'job-1'), prompt);
    expect(res.status).toBe(500);
    expect(JSON.parse(res.text)).toEqual({ error: 'internal error' });
    const entry = logs.find((l) => l.level === 'ERROR');
    expect(entry?.meta).toMatchObject({ kind: 'prompt', workflowId: 'job-1', status: 500 });
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
  function clientThat(answer: () => Promise<void>, sent: Array<[string, string, unknown]>): Client {
    return {
      workflow: {
        getHandle: (workflowId: string) => ({
          signal: (def: { name: string }, payload: unknown) => {
            sent.push([workflowId, def.name, payload]);
            return answer();
          },
        }),
      },
      withDeadline: (_deadline: number, fn: () => Promise<void>) => fn(),
    } as unknown as Client;
  }
  const grpcError = (code: number) => Object.assign(new Error(`${code} grpc`), { code, details: 'x', metadata: {} });

  it('sends the signal of each kind with the payload', async () => {
    const sent: Array<[string, string, unknown]> = [];
    const signaler = temporalSignaler(clientThat(async () => undefined, sent));
    await expect(signaler.signal('w1', 'tune', tune)).resolves.toBe('delivered');
    await expect(signaler.signal('w2', 'prompt', prompt)).resolves.toBe('delivered');
    await expect(signaler.signal('w3', 'pack-prompts', [prompt])).resolves.toBe('delivered');
    expect(sent).toEqual([
      ['w1', 'tuneTrained', tune],
      ['w2', 'promptSettled', prompt],
      ['w3', 'packPromptsSettled', [prompt]],
    ]);
  });

  it('maps WorkflowNotFoundError to workflow-not-found', async () => {
    const signaler = temporalSignaler(
      clientThat(async () => {
        throw new WorkflowNotFoundError('workflow execution already completed', 'w1', undefined);
      }, []),
    );
    await expect(signaler.signal('w1', 'tune', tune)).resolves.toBe('workflow-not-found');
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
    await expect(signaler.signal('w1', 'prompt', prompt)).rejects.toBeInstanceOf(SignalerUnavailableError);
  });

  it('lets other failures through (PERMISSION_DENIED, plain errors)', async () => {
    const denied = temporalSignaler(
      clientThat(async () => {
        throw new ServiceError('Failed to signal Workflow', { cause: grpcError(7) });
      }, []),
    );
    await expect(denied.signal('w1', 'prompt', prompt)).rejects.toBeInstanceOf(ServiceError);
    const plain = temporalSignaler(
      clientThat(async () => {
        throw new TypeError('bad');
      }, []),
    );
    await expect(plain.signal('w1', 'prompt', prompt)).rejects.toBeInstanceOf(TypeError);
  });

  it('signals under a deadline of now + timeout', async () => {
    const deadlines: number[] = [];
    const client = clientThat(async () => undefined, []);
    (client as unknown as { withDeadline: unknown }).withDeadline = (deadline: number, fn: () => Promise<void>) => {
      deadlines.push(deadline);
      return fn();
    };
    const before = Date.now();
    await temporalSignaler(client, { timeout: '3 seconds' }).signal('w1', 'tune', tune);
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
      const entry = logs.find((l) => l.meta?.status === 503);
      expect(entry?.meta?.error).toBeInstanceOf(SignalerUnavailableError);
      expect((entry?.meta?.error as SignalerUnavailableError).workflowId).toBe('job-1');
    } finally {
      await unreachable.close();
      await connection.close();
    }
  });
});
