import { defaultPayloadConverter, type Payload, type SerializationContext } from '@temporalio/common';
import { request } from 'undici';
import { CompressionCodec, COMPRESSED_ENCODING } from '../../src/codec/compression';
import { MAX_CODEC_BODY_BYTES, startCodecServer, type CodecServer } from '../../src/codec/server';

const activity: SerializationContext = { type: 'activity', namespace: 'default', isLocal: false };
const UI = 'http://localhost:8233';

/** A payload as the remote codec protocol carries it: metadata values and data in base64. */
const wire = (payload: Payload) => ({
  metadata: Object.fromEntries(
    Object.entries(payload.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
  ),
  data: Buffer.from(payload.data ?? new Uint8Array()).toString('base64'),
});
const fromWire = (payload: { metadata: Record<string, string>; data: string }): Payload => ({
  metadata: Object.fromEntries(Object.entries(payload.metadata).map(([k, v]) => [k, Buffer.from(v, 'base64')])),
  data: Buffer.from(payload.data, 'base64'),
});

const answer = { id: 7, tune_id: 1, text: 'sks dog on a beach', images: ['https://images.example.com/7/0.png'] };

let server: CodecServer;
beforeAll(async () => {
  server = await startCodecServer({ port: 0, corsOrigins: [UI] });
});
afterAll(() => server.close());

async function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await request(`${server.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.statusCode, headers: res.headers, body: (await res.body.json()) as Record<string, unknown> };
}

describe('codec server', () => {
  test('POST /decode answers a compressed payload as the worker read it, and a plain one as it came', async () => {
    const plain = defaultPayloadConverter.toPayload({ ...answer, text: answer.text.repeat(4) });
    const [stored] = await new CompressionCodec({ compress: true }).encode([plain], activity);
    expect(Buffer.from(stored!.metadata!.encoding!).toString()).toBe(COMPRESSED_ENCODING);
    const other = defaultPayloadConverter.toPayload('a summary');
    const res = await post('/decode', { payloads: [wire(stored!), wire(other)] }, { 'x-namespace': 'default' });
    expect(res.status).toBe(200);
    const [decoded, same] = (res.body.payloads as Parameters<typeof fromWire>[0][]).map(fromWire);
    expect(defaultPayloadConverter.fromPayload(decoded!)).toEqual({ ...answer, text: answer.text.repeat(4) });
    expect(wire(same!)).toEqual(wire(other));
  });

  test("POST /encode answers its payloads as they came: what the Web UI sends is a workflow's, stored plain", async () => {
    const plain = defaultPayloadConverter.toPayload({ ...answer, text: answer.text.repeat(4) });
    const res = await post('/encode', { payloads: [wire(plain)] });
    expect(res.status).toBe(200);
    expect(res.body.payloads).toEqual([wire(plain)]);
  });

  test('the Web UI origin gets CORS answers, its preflight included; another origin gets none', async () => {
    const preflight = await request(`${server.url}/decode`, {
      method: 'OPTIONS',
      headers: { origin: UI, 'access-control-request-method': 'POST', 'access-control-request-headers': 'x-namespace' },
    });
    await preflight.body.dump();
    expect(preflight.statusCode).toBe(204);
    expect(preflight.headers['access-control-allow-origin']).toBe(UI);
    expect(preflight.headers['access-control-allow-methods']).toContain('POST');
    expect(preflight.headers['access-control-allow-headers']).toContain('x-namespace');
    const allowed = await post('/decode', { payloads: [] }, { origin: UI });
    expect(allowed.headers['access-control-allow-origin']).toBe(UI);
    const stranger = await post('/decode', { payloads: [] }, { origin: 'https://evil.example' });
    expect(stranger.status).toBe(200);
    expect(stranger.headers['access-control-allow-origin']).toBeUndefined();
  });

  test('a body that is not the protocol is refused 400, naming the field', async () => {
    expect(await post('/decode', 'not json')).toMatchObject({ status: 400, body: { error: /body: must be JSON/ } });
    expect(await post('/decode', { payload: [] })).toMatchObject({ status: 400, body: { error: /^body\.payloads:/ } });
    const bad = await post('/decode', { payloads: [{ metadata: { encoding: 'json/plain' }, data: '!!' }] });
    expect(bad).toMatchObject({ status: 400, body: { error: /^body\.payloads\.0\.(metadata\.encoding|data):/ } });
  });

  test('a body over the bound is refused 413 before it is read whole; other paths 404, other methods 405', async () => {
    const big = await post('/decode', 'x'.repeat(MAX_CODEC_BODY_BYTES + 1));
    expect(big.status).toBe(413);
    expect((await request(`${server.url}/other`, { method: 'POST', body: '{}' })).statusCode).toBe(404);
    const get = await request(`${server.url}/decode`);
    await get.body.dump();
    expect(get.statusCode).toBe(405);
    expect(get.headers.allow).toBe('POST, OPTIONS');
  });
});
