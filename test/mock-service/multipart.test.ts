/**
 * The mock's pure parts: bracket-notation unfolding and schema-driven coercion of form bodies, and the PNG writer
 * with its CRC-32.
 */
import { inflateSync } from 'node:zlib';
import { z } from 'zod';
import { PackTuneCreateInput, TuneCreateInput, TuneListParams } from '../../src/api/schemas';
import { coerceToSchema, unfoldForm } from '../../src/mock-service/multipart';
import { crc32, pngSize, solidPng } from '../../src/mock-service/png';

describe('unfoldForm', () => {
  test('nests objects, indexed arrays and pushed arrays', () => {
    const blob = new Blob(['x']);
    expect(
      unfoldForm([
        ['tune[title]', 'a'],
        ['tune[images][]', blob],
        ['tune[images][]', blob],
        ['tune[prompts_attributes][1][text]', 'second'],
        ['tune[prompts_attributes][0][text]', 'first'],
        ['tune[prompts_attributes][0][num_images]', '2'],
        ['tune[characteristics][eye_color]', 'blue'],
        ['name', 'top'],
      ]),
    ).toEqual({
      tune: {
        title: 'a',
        images: [blob, blob],
        prompts_attributes: [{ text: 'first', num_images: '2' }, { text: 'second' }],
        characteristics: { eye_color: 'blue' },
      },
      name: 'top',
    });
  });

  test('Rails-style a[][k] starts a new element when the key repeats', () => {
    expect(
      unfoldForm([
        ['p[][text]', 'a'],
        ['p[][seed]', '1'],
        ['p[][text]', 'b'],
      ]),
    ).toEqual({ p: [{ text: 'a', seed: '1' }, { text: 'b' }] });
  });

  test('a __proto__ key stays a plain field and changes no prototype', () => {
    const out = unfoldForm([
      ['tune[__proto__][polluted]', 'yes'],
      ['__proto__', 'x'],
    ]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.keys(out.tune as object)).toEqual(['__proto__']);
    // ...which the strict schemas then refuse as an unknown attribute.
    expect(TuneCreateInput.safeParse(out.tune).success).toBe(false);
  });

  test('keys that are not bracket notation are kept whole', () => {
    expect(
      unfoldForm([
        ['[x]', '1'],
        ['a[b', '2'],
      ]),
    ).toEqual({ '[x]': '1', 'a[b': '2' });
  });
});

describe('coerceToSchema', () => {
  test('coerces numbers and booleans where the schema wants them, and only there', () => {
    const value = coerceToSchema(TuneCreateInput, {
      title: '123',
      steps: '500',
      face_crop: 'true',
      auto_extend: '0',
      base_tune_id: '1504944',
      characteristics: { age: '30', smiling: 'true' },
      prompts_attributes: [{ text: '42', cfg_scale: '7.5', seed: '1e3', super_resolution: '1', w: '512' }],
      model_type: '',
    });
    expect(value).toEqual({
      title: '123',
      steps: 500,
      face_crop: true,
      auto_extend: false,
      base_tune_id: 1504944,
      characteristics: { age: '30', smiling: 'true' },
      prompts_attributes: [{ text: '42', cfg_scale: 7.5, seed: 1000, super_resolution: true, w: 512 }],
      model_type: null,
    });
  });

  test('leaves what is not a number or a boolean for the schema to refuse', () => {
    expect(coerceToSchema(TuneListParams, { limit: 'ten', offset: '', before_id: '12' })).toEqual({
      limit: 'ten',
      offset: '',
      before_id: 12,
    });
    expect(coerceToSchema(TuneCreateInput, { face_crop: 'yes', unknown: '1' })).toEqual({
      face_crop: 'yes',
      unknown: '1',
    });
    expect(coerceToSchema(PackTuneCreateInput, { tune_ids: ['1', 'x'] })).toEqual({ tune_ids: [1, 'x'] });
    expect(coerceToSchema(z.object({ n: z.number() }), 'not an object')).toBe('not an object');
  });
});

describe('png', () => {
  test('crc32 matches the standard check value', () => {
    expect(crc32(Buffer.from('123456789'))).toBe(0xcbf43926);
    expect(crc32(Buffer.alloc(0))).toBe(0);
  });

  test('solidPng writes a valid PNG: signature, chunk CRCs, and pixel data of the right size and color', () => {
    const png = solidPng('seed', 4);
    expect(png.subarray(0, 8)).toEqual(Buffer.from('89504e470d0a1a0a', 'hex'));
    expect(pngSize(png)).toEqual({ width: 4, height: 4 });
    const chunks: string[] = [];
    let idat: Buffer = Buffer.alloc(0);
    for (let at = 8; at < png.length; ) {
      const length = png.readUInt32BE(at);
      const type = png.toString('latin1', at + 4, at + 8);
      const data = png.subarray(at + 8, at + 8 + length);
      expect(png.readUInt32BE(at + 8 + length)).toBe(crc32(png.subarray(at + 4, at + 8 + length)));
      if (type === 'IDAT') idat = data;
      chunks.push(type);
      at += 12 + length;
    }
    expect(chunks).toEqual(['IHDR', 'IDAT', 'IEND']);
    const raw = inflateSync(idat);
    expect(raw.length).toBe(4 * (1 + 4 * 3));
    const pixel = raw.subarray(1, 4);
    for (let y = 0; y < 4; y++) {
      expect(raw[y * 13]).toBe(0);
      for (let x = 0; x < 4; x++) expect(raw.subarray(y * 13 + 1 + x * 3, y * 13 + 4 + x * 3)).toEqual(pixel);
    }
    expect(solidPng('other', 4).equals(png)).toBe(false);
    expect(solidPng('seed', 4).equals(png)).toBe(true);
    expect(pngSize(Buffer.from('not a png at all, really not'))).toBeUndefined();
  });
});
