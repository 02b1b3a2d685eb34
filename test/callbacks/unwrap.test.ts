/**
 * unwrapCallback with no HTTP server: which run a callback is for, and which objects it names. Nothing but the ids
 * is read from a body, whatever else it holds.
 */
import { CallbackSigner } from '../../src/callbacks/signing';
import {
  MAX_CALLBACK_OBJECTS,
  unwrapCallback,
  verifyCallbackUrl,
  type CallbackRefusal,
} from '../../src/callbacks/unwrap';
import type { CallbackKind } from '../../src/contract/messages';

const signer = new CallbackSigner({ baseUrl: 'https://hooks.example.com', secret: 'unwrap-test-secret-0123' });
const run = { workflowId: 'order-7', runId: '0190b7c1-2f7e-7c1a-9d52-5a4f3c2b1a00' };

/** The path and query of a signed URL, as the receiver sees `req.url`. */
function signed(kind: CallbackKind, params?: Record<string, string>): string {
  const url = new URL(signer.url(kind, run, params));
  return url.pathname + url.search;
}

function unwrap(kind: CallbackKind, body: string | Buffer, contentType: string | undefined = 'application/json') {
  return unwrapCallback(
    { method: 'POST', url: signed(kind), contentType, body: Buffer.isBuffer(body) ? body : Buffer.from(body) },
    signer,
  );
}

const refusal = (status: number) => expect.objectContaining({ status });

describe('the ids of the objects, from every shape the service may send', () => {
  test.each([
    ['a flat tune', 'tune', { id: 11, trained_at: '2025-01-01T00:00:00Z', title: 'order-7' }, [11]],
    ['a wrapped tune', 'tune', { tune: { id: 11 } }, [11]],
    ['a tune as a one-element array', 'tune', [{ id: 11 }], [11]],
    ['an id as a decimal string', 'prompt', { id: '29716915', images: '' }, [29716915]],
    ['an id as "12.0"', 'prompt', { id: '12.0' }, [12]],
    ['a wrapped prompt', 'prompt', { prompt: { id: 5, tune_id: 1 } }, [5]],
    ['a pack list', 'pack-prompts', [{ id: 1 }, { id: '2' }], [1, 2]],
    ['a wrapped pack list', 'pack-prompts', { prompts: [{ id: 3 }] }, [3]],
    ['an empty pack list', 'pack-prompts', [], []],
  ] as const)('%s', (_what, kind, body, ids) => {
    expect(unwrap(kind, JSON.stringify(body))).toEqual({ run, wakeUp: { kind, ids } });
  });

  test('a forged body gives its id and nothing else: no images, cost, dates or base tune reach the run', () => {
    const forged = {
      id: 42,
      images: ['https://attacker.example/forged.jpg'],
      cost_mc: 0,
      updated_at: '2999-01-01T00:00:00Z',
      model_type: 'lora',
      base_tune_id: 1,
      padding: 'x'.repeat(60_000),
    };
    expect(unwrap('prompt', JSON.stringify(forged))).toEqual({ run, wakeUp: { kind: 'prompt', ids: [42] } });
  });

  test('a form in the bracket notation of the service requests', () => {
    const form = 'application/x-www-form-urlencoded';
    expect(unwrap('tune', 'tune[id]=11&tune[title]=order-7&tune[orig_images][]=a.jpg', form)).toMatchObject({
      wakeUp: { kind: 'tune', ids: [11] },
    });
    expect(unwrap('prompt', 'id=5&text=a+dog&images[]=1.png&images[]=2.png', form)).toMatchObject({
      wakeUp: { ids: [5] },
    });
    const list = 'prompts[][id]=1&prompts[][text]=a&prompts[][id]=2&prompts[][text]=b';
    expect(unwrap('pack-prompts', list, `${form}; charset=UTF-8`)).toMatchObject({ wakeUp: { ids: [1, 2] } });
    expect(unwrap('pack-prompts', 'prompts[0][id]=7&prompts[1][id]=8', form)).toMatchObject({
      wakeUp: { ids: [7, 8] },
    });
    // Keys that would reach a prototype are not read.
    expect(unwrap('prompt', '__proto__[id]=1&constructor[prototype][id]=2&id=3', form)).toMatchObject({
      wakeUp: { ids: [3] },
    });
    expect(({} as Record<string, unknown>).id).toBeUndefined();
  });

  test('JSON with a UTF-8 byte order mark, with no content type, and with +json and charset=utf-8', () => {
    const bom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"id": 9}')]);
    expect(unwrap('prompt', bom)).toMatchObject({ wakeUp: { ids: [9] } });
    expect(unwrap('prompt', '{"id": 9}', undefined)).toMatchObject({ wakeUp: { ids: [9] } });
    expect(unwrap('prompt', '{"id": 9}', 'application/vnd.api+json')).toMatchObject({ wakeUp: { ids: [9] } });
    expect(unwrap('prompt', '{"id": 9}', 'application/json; charset="UTF-8"')).toMatchObject({ wakeUp: { ids: [9] } });
  });
});

describe('refusals', () => {
  test('415 for another type or charset, UTF-16 by its mark, multipart', () => {
    expect(unwrap('prompt', '{"id": 9}', 'text/plain')).toEqual(refusal(415));
    expect(unwrap('prompt', '--x\r\n', 'multipart/form-data; boundary=x')).toEqual(refusal(415));
    expect(unwrap('prompt', '{"id": 9}', 'application/json; charset=utf-16')).toEqual(refusal(415));
    const utf16 = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('{"id": 9}', 'utf16le')]);
    expect(unwrap('prompt', utf16)).toEqual(refusal(415));
  });

  test('400 for a body that is not JSON, or empty', () => {
    expect(unwrap('prompt', '{"id": 1, ')).toEqual({ status: 400, reason: 'not JSON', error: 'body is not JSON' });
    expect(unwrap('prompt', '')).toEqual(refusal(400));
  });

  test('422 without a usable id, naming the field', () => {
    const issues = (body: unknown, kind: CallbackKind = 'tune') =>
      (unwrap(kind, JSON.stringify(body)) as CallbackRefusal).issues;
    expect(issues({ id: 'one' })).toEqual(['tune.id: must be a positive integer']);
    expect(issues({ id: '15.5' })).toEqual(['tune.id: must be a positive integer']);
    expect(issues({ id: -3 })).toEqual(['tune.id: must be a positive integer']);
    expect(issues([{ id: 1 }, { id: 2 }])).toEqual(['tune: must be a tune object']);
    expect(issues(null, 'prompt')).toEqual(['prompt: must be a prompt object']);
    expect(issues({ id: 1 }, 'pack-prompts')).toEqual(['prompts: must be a list of prompt objects']);
    expect(unwrap('tune', '{"title": "x"}')).toMatchObject({ status: 422, error: 'body is not a valid tune object' });
  });

  test('a pack list of bad elements stops at the first three issues; more than the limit of objects is 413', () => {
    const bad = JSON.stringify(Array.from({ length: MAX_CALLBACK_OBJECTS }, () => ({})));
    expect((unwrap('pack-prompts', bad) as CallbackRefusal).issues).toEqual([
      'prompts.0.id: must be a positive integer',
      'prompts.1.id: must be a positive integer',
      'prompts.2.id: must be a positive integer',
    ]);
    // The body of the probe that held the event loop for 22 s: refused by count before any element is looked at.
    const flood = `[${'{},'.repeat(170_000)}{}]`;
    expect(unwrap('pack-prompts', flood)).toEqual(refusal(413));
  });

  test('413 past the kind own limit: 64 KiB for a prompt, 512 KiB for a pack list', () => {
    const big = JSON.stringify({ id: 1, text: 'x'.repeat(64 * 1024) });
    expect(unwrap('prompt', big)).toEqual(refusal(413));
    const list = JSON.stringify(Array.from({ length: 120 }, (_, i) => ({ id: i + 1, text: 'y'.repeat(2_000) })));
    expect(unwrap('pack-prompts', list)).toMatchObject({ wakeUp: { ids: expect.any(Array) } });
  });

  test('a body nested thousands deep in a field nobody reads is no harder than any other', () => {
    const deep = `{"id": 5, "extra": ${'['.repeat(20_000)}${']'.repeat(20_000)}}`;
    expect(unwrap('prompt', deep)).toMatchObject({ wakeUp: { ids: [5] } });
  });

  test('the URL first: 404, 405, 403 before any body is looked at', () => {
    const body = Buffer.from('not even JSON');
    expect(unwrapCallback({ method: 'POST', url: '/callbacks/video', body }, signer)).toEqual(refusal(404));
    expect(unwrapCallback({ method: 'GET', url: signed('tune'), body }, signer)).toEqual(refusal(405));
    const forged = `/callbacks/tune?workflowId=order-7&runId=${run.runId}&sig=${'ab'.repeat(32)}`;
    expect(unwrapCallback({ method: 'POST', url: forged, body }, signer)).toEqual({
      status: 403,
      reason: 'signature',
      error: 'invalid or missing signature',
    });
    // The URL of the same workflow ID's earlier run, and of another kind.
    const earlier = signed('tune').replace(run.runId, '0190b7c1-2f7e-7c1a-9d52-5a4f3c2b1a01');
    expect(unwrapCallback({ method: 'POST', url: earlier, body }, signer)).toEqual(refusal(403));
    const other = signed('tune').replace('/callbacks/tune', '/callbacks/prompt');
    expect(unwrapCallback({ method: 'POST', url: other, body }, signer)).toEqual(refusal(403));
  });
});

describe("a URL's parameters are signed", () => {
  const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
  const other = '00-11111111111111111111111111111111-2222222222222222-01';
  const run = { workflowId: 'job-1', runId: '0190b7c1-2f7e-7c1a-9d52-5a4f3c2b1a00' };
  const pathOf = (url: string) => `${new URL(url).pathname}${new URL(url).search}`;

  test('as signed: taken with its parameters', () => {
    const url = pathOf(signer.url('prompt', run, { key: '3', traceparent }));
    expect(verifyCallbackUrl('POST', url, signer)).toMatchObject({ run, params: { key: '3', traceparent } });
  });

  test('a parameter changed, added or repeated by a URL holder: refused', () => {
    const url = pathOf(signer.url('prompt', run, { key: '3', traceparent }));
    for (const tampered of [
      url.replace(traceparent, other),
      url.replace('key=3', 'key=4'),
      `${url}&extra=1`,
      `${url}&traceparent=${other}`,
    ])
      expect(verifyCallbackUrl('POST', tampered, signer)).toMatchObject({ status: 403 });
  });

  test('a URL of the releases that signed the run alone (runs in flight): taken, none of its parameters trusted', () => {
    const signedRunOnly = pathOf(signer.url('tune', run));
    const legacy = `${signedRunOnly}&traceparent=${other}`;
    expect(verifyCallbackUrl('POST', legacy, signer)).toMatchObject({ run, params: {} });
  });
});
