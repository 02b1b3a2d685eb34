import { randomBytes } from 'node:crypto';
import { deflateRawSync } from 'node:zlib';
import { defaultPayloadConverter, type Payload, type SerializationContext } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import {
  COMPRESSED_ENCODING,
  CompressionCodec,
  MAX_DECOMPRESSED_BYTES,
  compressed,
  decompressed,
  isCompressed,
} from '../../src/codec/compression';

const activity: SerializationContext = { type: 'activity', namespace: 'default', workflowId: 'w', isLocal: false };
const workflow: SerializationContext = { type: 'workflow', namespace: 'default', workflowId: 'w' };

/** A trained tune as a brief answer gives it: the size of the answers a run's history holds. */
const tune = {
  id: 1_234_567,
  title: 'shop:trainThenGenerate-7f3c2a/4e9b7d1c-1d2e-4f5a-8b6c-0a1b2c3d4e5f',
  name: 'dog',
  token: 'sks',
  branch: 'fast',
  model_type: null,
  base_tune_id: null,
  trained_at: '2026-12-03T07:29:41.123Z',
  started_training_at: '2026-12-03T07:29:35.000Z',
  expires_at: '2027-01-02T07:29:41.123Z',
  created_at: '2026-12-03T07:29:34.456Z',
  updated_at: '2026-12-03T07:29:41.123Z',
  eta: null,
  cost_mc: 150_000,
  callback: 'http://127.0.0.1:41234/callbacks/tune',
};

const size = (payload: Payload) => temporal.api.common.v1.Payload.encode(payload).finish().length;

describe('CompressionCodec', () => {
  test('an activity payload is stored compressed, smaller, and decodes to the same bytes and metadata', async () => {
    const codec = new CompressionCodec({ compress: true });
    const plain = defaultPayloadConverter.toPayload(tune);
    const [stored] = await codec.encode([plain], activity);
    expect(isCompressed(stored!)).toBe(true);
    expect(Buffer.from(stored!.metadata!.encoding!).toString()).toBe(COMPRESSED_ENCODING);
    expect(size(stored!)).toBeLessThan(size(plain) * 0.7);
    const [read] = await codec.decode([stored!]);
    expect(Buffer.from(read!.data!)).toEqual(Buffer.from(plain.data!));
    expect(Buffer.from(read!.metadata!.encoding!).toString()).toBe('json/plain');
    expect(defaultPayloadConverter.fromPayload(read!)).toEqual(tune);
  });

  test("workflow payloads (inputs, results, signals, failures' details) stay plain, whatever the setting", async () => {
    const codec = new CompressionCodec({ compress: true });
    const plain = defaultPayloadConverter.toPayload(tune);
    expect(await codec.encode([plain], workflow)).toEqual([plain]);
    expect(await codec.encode([plain])).toEqual([plain]);
  });

  test('off, the codec compresses nothing and still decodes what a compressing worker wrote', async () => {
    const off = new CompressionCodec();
    const plain = defaultPayloadConverter.toPayload(tune);
    expect(await off.encode([plain], activity)).toEqual([plain]);
    const [stored] = await new CompressionCodec({ compress: true }).encode([plain], activity);
    expect(defaultPayloadConverter.fromPayload((await off.decode([stored!]))[0]!)).toEqual(tune);
  });

  test('a string (an activity summary the Web UI shows), a small payload and one not JSON stay as they are', () => {
    const summary = defaultPayloadConverter.toPayload(`read tune 1's price, ${'and more words '.repeat(10)}`);
    const small = defaultPayloadConverter.toPayload({ tuneId: 1, brief: true });
    const binary: Payload = { metadata: { encoding: Buffer.from('binary/plain') }, data: Buffer.alloc(500, 7) };
    const none = defaultPayloadConverter.toPayload(undefined);
    for (const payload of [summary, small, binary, none]) expect(compressed(payload)).toBe(payload);
  });

  test('a payload is stored compressed only where that makes it smaller', () => {
    for (let bytes = 32; bytes <= 2048; bytes *= 2) {
      const noisy = defaultPayloadConverter.toPayload({ noise: randomBytes(bytes).toString('latin1') });
      const stored = compressed(noisy);
      if (stored !== noisy) expect(size(stored)).toBeLessThan(size(noisy));
      else expect(isCompressed(stored)).toBe(false);
    }
    // A repetitive one shrinks to a fraction.
    expect(size(compressed(defaultPayloadConverter.toPayload({ noise: 'x'.repeat(500) })))).toBeLessThan(100);
  });

  test('decoding passes through every payload the codec did not write', async () => {
    const codec = new CompressionCodec();
    const payloads = [
      defaultPayloadConverter.toPayload(tune),
      defaultPayloadConverter.toPayload(undefined),
      { metadata: { encoding: Buffer.from('binary/encrypted') }, data: Buffer.from('secret') },
    ];
    expect(await codec.decode(payloads)).toEqual(payloads);
  });

  test('a compressed payload that is not deflate, or inflates past the bound, passes through undecoded', () => {
    const forged = (data: Buffer): Payload => ({ metadata: { encoding: Buffer.from(COMPRESSED_ENCODING) }, data });
    const garbage = forged(Buffer.from('not deflate at all'));
    expect(decompressed(garbage)).toBe(garbage);
    // A starter's input of 5 MB of zeros, deflated to a few KB: refused by its size, never held whole.
    const bomb = forged(deflateRawSync(Buffer.alloc(MAX_DECOMPRESSED_BYTES + 1024 * 1024)));
    expect(bomb.data!.length).toBeLessThan(10_000);
    expect(decompressed(bomb)).toBe(bomb);
    // The converter then refuses the encoding by name, where a worker would have spent the memory.
    expect(() => defaultPayloadConverter.fromPayload(bomb)).toThrow(COMPRESSED_ENCODING);
  });

  test('on the recorded answers of a job, activity payloads take under half their bytes', async () => {
    const codec = new CompressionCodec({ compress: true });
    const answers = [
      tune,
      { ...tune, trained_at: null, started_training_at: null },
      { id: 9, tune_id: tune.id, text: 'sks dog on a beach', num_images: 2, images: [], user_error: null },
      [1, 2].map((i) => ({
        id: 10 + i,
        tune_id: tune.id,
        text: `sks dog portrait ${i}`,
        num_images: 1,
        images: [`https://images.example.com/prompts/${10 + i}/0.png`],
        user_error: null,
        trained_at: '2026-12-03T07:30:01.000Z',
        created_at: '2026-12-03T07:29:58.000Z',
        updated_at: '2026-12-03T07:30:01.000Z',
        cost_mc: 2000,
        callback: 'http://127.0.0.1:41234/callbacks/prompt',
      })),
    ].map((value) => defaultPayloadConverter.toPayload(value));
    const stored = await codec.encode(answers, activity);
    const sum = (payloads: Payload[]) => payloads.reduce((total, p) => total + size(p), 0);
    expect(sum(stored)).toBeLessThan(sum(answers) / 2);
  });
});

test('a payload the reader would refuse to inflate (over MAX_DECOMPRESSED_BYTES) is stored plain', () => {
  const big = defaultPayloadConverter.toPayload({ text: 'x'.repeat(MAX_DECOMPRESSED_BYTES) });
  expect(compressed(big)).toBe(big);
  const under = defaultPayloadConverter.toPayload({ text: 'x'.repeat(MAX_DECOMPRESSED_BYTES - 1024) });
  const stored = compressed(under);
  expect(isCompressed(stored)).toBe(true);
  expect(Buffer.from(decompressed(stored).data!)).toEqual(Buffer.from(under.data!));
});
