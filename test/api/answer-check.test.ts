/**
 * The compiled as-is check against zod itself: wherever the check accepts a value, zod accepts it too and returns it
 * unchanged; for the schemas it compiles, it accepts exactly what zod accepts unchanged. Checked on every answer
 * schema, with every field of a valid object replaced by each of a set of JSON values, and on the keys zod treats apart
 * (`__proto__`, `constructor`); and on every input schema of the client (what parseInput checks before a request),
 * with every field replaced by each of a set of values a caller could pass, refinements, trims and bounds included.
 */
import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import { acceptsAsIs, acceptsInputAsIs } from '../../src/api/answer-check';
import { parseInput } from '../../src/api/parse-input';
import {
  created,
  FileInput,
  httpUrl,
  ImageInspectInput,
  PackListParams,
  PackTuneCreateInput,
  PromptAttributesInput,
  PromptCreateInput,
  PromptListParams,
  required,
  ThemeCreateInput,
  TuneCreateInput,
  TuneListParams,
  DeleteResult,
  InspectionResult,
  numeric,
  Pack,
  PackDetail,
  Prompt,
  ResourceId,
  Tune,
} from '../../src/api/schemas';

/** What the check must say: zod accepts the value and gives it back as it is. */
const zodAcceptsAsIs = (schema: z.ZodType, value: unknown): boolean => {
  const result = schema.safeParse(value);
  return result.success && isDeepStrictEqual(result.data, value);
};

/** JSON values (as JSON.parse makes them) that each field is replaced with, and `undefined` for a missing field. */
const SAMPLES: unknown[] = [
  undefined,
  null,
  0,
  -1,
  1,
  1.5,
  2 ** 53,
  -(2 ** 53) + 1,
  1e308,
  '',
  'x',
  '2025-03-01T10:00:00.000Z',
  // Numbers as the service renders them sometimes (Rails decimals), and strings that only look numeric.
  '3.0',
  '12',
  '-1',
  '.5',
  '1e3',
  '1e999',
  ' 3',
  '3,0',
  '0x10',
  true,
  false,
  [],
  ['x'],
  [1],
  [null],
  ['x', 2],
  [{}],
  [[1]],
  // A created object answered as a one-element array, and arrays that are not that.
  [{ id: 3, tune_id: 1504944, text: 'x' }],
  [{ id: '3', tune_id: '1504944' }],
  [
    { id: 3, tune_id: 1 },
    { id: 4, tune_id: 1 },
  ],
  {},
  { a: 1 },
  { man: 150000 },
  { man: 'cheap' },
  { man: { cost: 1.5, num_images: 6 } },
  { man: { cost: 'x' } },
  { man: { cost: null, extra: [1] } },
  { man: [{ text: 'ohwx man' }] },
  { man: [1] },
  { man: [] },
  { constructor: 1 },
].map((value) => (value === undefined ? undefined : (JSON.parse(JSON.stringify(value)) as unknown)));

const tune = {
  id: 1504944,
  title: 'job-1',
  name: 'woman',
  token: 'ohwx',
  base_tune_id: null,
  args: null,
  steps: null,
  face_crop: null,
  training_face_correct: false,
  is_api: true,
  ckpt_url: null,
  ckpt_urls: [],
  eta: '2025-03-01T10:07:00.000Z',
  trained_at: null,
  started_training_at: '2025-03-01T10:05:00.000Z',
  expires_at: '2025-03-31T10:05:00.000Z',
  created_at: '2025-03-01T10:05:00.000Z',
  updated_at: '2025-03-01T10:05:00.000Z',
  branch: 'fast',
  model_type: null,
  url: 'https://api.example.com/tunes/1504944.json',
  orig_images: ['https://cdn.example.com/1.jpg'],
  callback: null,
  preset: null,
  pack_id: null,
};
const prompt = {
  id: 3,
  callback: null,
  text: 'ohwx woman, studio portrait',
  negative_prompt: '',
  cfg_scale: 7.5,
  steps: 30,
  seed: 42,
  trained_at: '2025-03-01T10:07:00.000Z',
  created_at: '2025-03-01T10:05:30.000Z',
  tune_id: 1504944,
  images: ['https://cdn.example.com/1.jpg'],
  user_error: null,
  cost_mc: 1200,
};
const pack = { id: 260, base_tune_id: 1504944, slug: 'corporate', title: 'Corporate', cost_mc_hash: { man: 150000 } };
const packDetail = {
  ...pack,
  cover_url: 'https://cdn.example.com/cover.jpg',
  costs: { man: { cost: 1.5, num_images: 6 } },
  prompts_per_class: { man: [{ text: 'ohwx man' }] },
};
const inspection = { age: 30, ethnicity: 'x', blurry: false, selfie: null, hair_color: 'red' };

const objects: { name: string; schema: z.ZodType; valid: Record<string, unknown> }[] = [
  { name: 'Tune', schema: Tune, valid: tune },
  { name: 'Prompt', schema: Prompt, valid: prompt },
  { name: 'Pack', schema: Pack, valid: pack },
  { name: 'PackDetail', schema: PackDetail, valid: packDetail },
  { name: 'InspectionResult', schema: InspectionResult, valid: inspection },
  { name: 'DeleteResult', schema: DeleteResult, valid: { message: 'deleted' } },
  { name: 'created(Tune)', schema: created(Tune), valid: tune },
  { name: 'created(Prompt)', schema: created(Prompt), valid: prompt },
];

/** The keys of an object schema, or of the object a created(...) union holds first. */
function shapeKeys(schema: z.ZodType): string[] {
  const object = schema instanceof z.ZodUnion ? (schema.options[0] as z.ZodType) : schema;
  return Object.keys((object as z.ZodObject).shape);
}

/** The valid object with `key` replaced by `value` (or left out, for undefined), as JSON.parse would give it. */
function withField(valid: Record<string, unknown>, key: string, value: unknown): Record<string, unknown> {
  const copy = JSON.parse(JSON.stringify(valid)) as Record<string, unknown>;
  if (value === undefined) delete copy[key];
  else copy[key] = value;
  return copy;
}

describe('the compiled answer check', () => {
  test.each(objects)('takes the fast path for a valid $name, alone and in a list', ({ schema, valid }) => {
    expect(zodAcceptsAsIs(schema, valid)).toBe(true);
    expect(acceptsAsIs(schema, valid)).toBe(true);
    expect(acceptsAsIs(z.array(schema), [valid, valid])).toBe(true);
  });

  test.each(objects)('agrees with zod on every field of the $name replaced by each sample', ({ schema, valid }) => {
    const keys = [...shapeKeys(schema), ...Object.keys(valid), 'unknown_field'];
    let compared = 0;
    for (const key of new Set(keys)) {
      for (const sample of SAMPLES) {
        const value = withField(valid, key, sample);
        const expected = zodAcceptsAsIs(schema, value);
        if (acceptsAsIs(schema, value) !== expected)
          throw new Error(`${key} = ${JSON.stringify(sample)}: the check says ${!expected}, zod ${expected}`);
        compared++;
      }
    }
    expect(compared).toBe(new Set(keys).size * SAMPLES.length);
  });

  test.each(objects)('agrees with zod on the $name replaced whole by each sample', ({ schema }) => {
    for (const sample of SAMPLES) {
      expect([sample, acceptsAsIs(schema, sample)]).toEqual([sample, zodAcceptsAsIs(schema, sample)]);
      expect([sample, acceptsAsIs(z.array(schema), sample)]).toEqual([sample, zodAcceptsAsIs(z.array(schema), sample)]);
    }
  });

  test.each(objects)(
    'agrees with zod on the $name with a "__proto__" key, as JSON.parse makes it',
    ({ schema, valid }) => {
      for (const sample of SAMPLES.slice(1)) {
        const value = JSON.parse(`{"__proto__":${JSON.stringify(sample)},${JSON.stringify(valid).slice(1)}`) as unknown;
        expect(Object.hasOwn(value as object, '__proto__')).toBe(true);
        expect([sample, acceptsAsIs(schema, value)]).toEqual([sample, zodAcceptsAsIs(schema, value)]);
      }
    },
  );

  test('agrees with zod on records with "__proto__" and "constructor" keys of their own', () => {
    const schemas = [z.record(z.string(), z.unknown()), z.record(z.string(), z.number()), Pack, PackDetail];
    const texts = [
      '{"__proto__": 1, "man": 2}',
      '{"constructor": 1}',
      '{"constructor": {}}',
      '{"constructor": {"prototype": {}}}',
      '{"constructor": {"prototype": {"isPrototypeOf": 1}}}',
      '{"constructor": {"prototype": []}}',
      '{"man": 2}',
    ];
    let accepted = 0;
    for (const schema of schemas) {
      for (const text of texts) {
        const record = JSON.parse(text) as unknown;
        const value = schema === Pack || schema === PackDetail ? { id: 1, cost_mc_hash: record } : record;
        expect([text, acceptsAsIs(schema, value)]).toEqual([text, zodAcceptsAsIs(schema, value)]);
        if (acceptsAsIs(schema, value)) accepted++;
      }
    }
    // Both verdicts occur: the comparison is not all "no".
    expect(accepted).toBeGreaterThan(3);
  });

  test('agrees with zod on integer and range bounds, inclusive and not', () => {
    const schemas = [
      ResourceId,
      z.number(),
      z.number().int(),
      z.number().int().min(1).max(10),
      z.number().gt(0).lt(1),
      z.number().min(-5).max(-1),
      z.number().positive(),
      z.number().nonnegative().int(),
      z.union([z.string(), z.number().int()]).nullish(),
    ];
    const values = [
      0,
      -0,
      1,
      10,
      11,
      0.5,
      1e-300,
      -1,
      -5,
      -5.5,
      2 ** 53 - 1,
      2 ** 53,
      -(2 ** 53),
      1e308,
      '1',
      null,
      true,
    ];
    for (const schema of schemas) {
      for (const value of values) {
        expect([value, acceptsAsIs(schema, value)]).toEqual([value, zodAcceptsAsIs(schema, value)]);
      }
    }
  });

  test('never accepts what zod would refuse or change, in unions whose options zod alone judges', () => {
    const schemas = [
      numeric(),
      numeric({ int: true }),
      numeric().nullish(),
      z.union([numeric(), z.string()]),
      z.union([z.string(), numeric()]),
      z.union([numeric({ int: true }), z.literal('').transform(() => null)]).nullish(),
      z.union([z.looseObject({ id: z.number() }), z.string()]),
      z.union([z.number(), z.array(z.number()), z.string()]),
      z.record(z.string(), numeric()),
    ];
    let accepted = 0;
    for (const schema of schemas) {
      for (const value of [...SAMPLES, { id: 1 }, JSON.parse('{"__proto__": 1, "id": 1}') as unknown, { man: '1.5' }]) {
        // Where a union stops compiling, "ask zod" may stand for a value zod takes as is: the check must never say
        // yes where zod would refuse or change the value.
        if (acceptsAsIs(schema, value)) {
          expect([value, zodAcceptsAsIs(schema, value)]).toEqual([value, true]);
          accepted++;
        } else if (schema !== schemas[3] && schema !== schemas[6] && schema !== schemas[7])
          expect([value, zodAcceptsAsIs(schema, value)]).toEqual([value, false]);
      }
    }
    expect(accepted).toBeGreaterThan(20);
  });

  test('reads numeric strings as numbers and a one-element array as its object (through zod, never as is)', () => {
    expect(numeric().parse('3.0')).toBe(3);
    expect(numeric({ int: true }).parse('1504944')).toBe(1504944);
    expect(numeric({ int: true }).safeParse('3.5').success).toBe(false);
    expect(numeric().safeParse('1e999').success).toBe(false);
    const answer = [{ ...prompt, id: '3', tune_id: '1504944', cfg_scale: '3.0', base: '' }];
    expect(acceptsAsIs(created(Prompt), answer)).toBe(false);
    expect(created(Prompt).parse(answer)).toEqual({ ...prompt, id: 3, tune_id: 1504944, cfg_scale: '3.0', base: '' });
    expect(Tune.parse({ ...tune, base_tune_id: '', id: '7' })).toMatchObject({ id: 7, base_tune_id: null });
    expect(Prompt.parse({ ...prompt, images: '' }).images).toBeNull();
  });

  test('leaves to zod what it does not compile: stripping objects, transforms, formats, coercion', () => {
    const cases: [z.ZodType, unknown][] = [
      [z.object({ id: z.number() }), { id: 1 }],
      [z.looseObject({ id: z.string().transform((s) => s.length) }), { id: 'x' }],
      [z.looseObject({ url: z.url() }), { url: 'https://example.com' }],
      [z.looseObject({ id: z.int() }), { id: 1 }],
      [z.looseObject({ n: z.coerce.number() }), { n: 1 }],
      [z.record(z.enum(['a']), z.number()), { a: 1 }],
    ];
    for (const [schema, value] of cases) {
      expect(schema.safeParse(value).success).toBe(true);
      expect(acceptsAsIs(schema, value)).toBe(false);
    }
  });

  test('reads keys that are not identifiers, as data', () => {
    const schema = z.looseObject({ 'a-b': z.string(), "it's": z.number().nullish(), '\\': z.boolean().optional() });
    expect(acceptsAsIs(schema, { 'a-b': 'x', "it's": 1, '\\': true })).toBe(true);
    expect(acceptsAsIs(schema, { 'a-b': 'x', "it's": 'one' })).toBe(false);
    expect(acceptsAsIs(schema, { "it's": 1 })).toBe(false);
  });
});

/** Values a caller could put in an input's field: JSON's, and strings to trim, URLs, bytes, odd objects. */
const INPUT_SAMPLES: unknown[] = [
  ...SAMPLES,
  ' x ',
  'x ',
  '   ',
  'https://images.example.com/1.jpg',
  'http://127.0.0.1:3001/callbacks/prompt?workflowId=w&runId=r&sig=abc',
  'ftp://images.example.com/1.jpg',
  'not a url',
  '{"eye_color":"blue eyes"}',
  '{"eye_color":{"x":1}}',
  'lora',
  'fast',
  'flux1',
  8,
  16,
  12,
  7.5,
  15,
  16.5,
  2 ** 32,
  2 ** 32 + 1,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  Buffer.from([0xff, 0xd8, 0xff]),
  new Uint8Array([1, 2]),
  new Blob(['x']),
  new Date(0),
  Object.assign(Object.create(null) as object, { a: 1 }),
  ['https://images.example.com/1.jpg'],
  ['https://images.example.com/1.jpg', 'ftp://x'],
  [' '],
  [1, 2],
  [0],
  [{ text: 'ohwx man' }],
  [{ text: ' ' }],
  [{ text: 'ohwx man', inpaint_faces: true }],
  { callback: 'https://callbacks.example.com/p' },
  { callback: 'ftp://x' },
  { num_images: 2, w: 512 },
  { w: 500 },
];

const url = 'https://images.example.com/1.jpg';
const inputs: { name: string; schema: z.ZodType; valid: Record<string, unknown> }[] = [
  {
    name: 'PromptCreateInput',
    schema: PromptCreateInput,
    valid: { text: 'ohwx woman, studio light', num_images: 2, callback: `${url}?key=0`, w: 512, h: 640 },
  },
  {
    name: 'PromptAttributesInput',
    schema: PromptAttributesInput,
    valid: { text: 'ohwx woman', lora_scale: 0.8, super_resolution: true, inpaint_faces: true },
  },
  {
    name: 'TuneCreateInput',
    schema: TuneCreateInput,
    valid: {
      name: 'woman',
      title: 'job-1',
      branch: 'fast',
      image_urls: [url],
      callback: `${url}?tune`,
      model_type: 'lora',
      preset: 'flux-lora-portrait',
      characteristics: { eye_color: 'blue eyes' },
      prompts_attributes: [{ text: 'ohwx woman', num_images: 1 }],
    },
  },
  {
    name: 'PackTuneCreateInput',
    schema: PackTuneCreateInput,
    valid: { name: 'man', title: 'job-2', image_urls: [url], prompt_attributes: { callback: url }, branch: 'fast' },
  },
  { name: 'TuneListParams', schema: TuneListParams, valid: { limit: 20, offset: 0, title: 'job-1' } },
  { name: 'PromptListParams', schema: PromptListParams, valid: { limit: 6, before_id: 114 } },
  { name: 'PackListParams', schema: PackListParams, valid: { public: true } },
  { name: 'ImageInspectInput', schema: ImageInspectInput, valid: { name: 'man', file_url: url } },
  {
    name: 'ThemeCreateInput',
    schema: ThemeCreateInput,
    valid: { theme: 'autumn', tune_ids: [1504944], prompt_attributes: { num_images: 2, w: 512 } },
  },
];

/**
 * Fields where the check may say "ask zod" to a value zod takes as is: unions it checks only up to an option whose "no"
 * can be zod's "yes, changed" (characteristics: an object first, a JSON string second).
 */
const PARTIAL: Record<string, string[]> = {
  TuneCreateInput: ['characteristics'],
  PackTuneCreateInput: ['characteristics'],
};

describe('the compiled check of the client inputs', () => {
  test.each(inputs)(
    'takes the fast path for a valid $name, and parseInput returns it as it is',
    ({ schema, valid }) => {
      expect(zodAcceptsAsIs(schema, valid)).toBe(true);
      expect(acceptsInputAsIs(schema, valid)).toBe(true);
      expect(parseInput(schema, 'input', valid)).toBe(valid);
    },
  );

  test.each(inputs)(
    'agrees with zod on every field of the $name replaced by each sample',
    ({ name, schema, valid }) => {
      const keys = new Set([...shapeKeys(schema), ...Object.keys(valid), 'unknown_field']);
      let accepted = 0;
      let refused = 0;
      for (const key of keys) {
        for (const sample of INPUT_SAMPLES) {
          const value = { ...valid, [key]: sample };
          const expected = zodAcceptsAsIs(schema, value);
          const got = acceptsInputAsIs(schema, value);
          if (got) accepted++;
          else refused++;
          if (got === expected || (!got && PARTIAL[name]?.includes(key))) continue;
          throw new Error(`${key} = ${String(sample)}: the check says ${got}, zod ${expected}`);
        }
        // A field left out, and a field present as undefined (zod keeps the key).
        const { [key]: _, ...without } = valid;
        expect([key, acceptsInputAsIs(schema, without)]).toEqual([key, zodAcceptsAsIs(schema, without)]);
      }
      // Both verdicts occur: the comparison is not all "no".
      expect(accepted).toBeGreaterThan(keys.size);
      expect(refused).toBeGreaterThan(keys.size);
    },
  );

  test.each(inputs)('agrees with zod on the $name replaced whole by each sample', ({ schema }) => {
    for (const sample of INPUT_SAMPLES) {
      expect([sample, acceptsInputAsIs(schema, sample)]).toEqual([sample, zodAcceptsAsIs(schema, sample)]);
    }
  });

  test('agrees with zod on trims, URLs, files, multiples and refinements alone', () => {
    const schemas = [
      required,
      httpUrl,
      FileInput,
      z.number().multipleOf(8),
      z.number().int().positive().multipleOf(8),
      z.number().refine((n) => n > 0),
      z.string().min(2).max(4),
      z.array(z.number()).min(1),
      z.enum(['a', 'b']),
      z.literal(1),
      z.never().optional(),
      z.strictObject({ id: z.number().optional() }),
      z.looseObject({ a: z.number() }).superRefine((o, ctx) => {
        if (o.a > 1) ctx.addIssue({ code: 'custom', message: 'too big', path: ['a'] });
      }),
      z.string().refine(() => Promise.resolve(true)),
    ];
    for (const schema of schemas) {
      for (const sample of [...INPUT_SAMPLES, { id: 1 }, { id: 1, x: 2 }, { id: undefined }, 'ab', 'abcde', 'a']) {
        if (schema === schemas[schemas.length - 1] && typeof sample === 'string') {
          // An async refinement: zod's synchronous parse throws, the check asks zod.
          expect(acceptsInputAsIs(schema, sample)).toBe(false);
          continue;
        }
        expect([sample, acceptsInputAsIs(schema, sample)]).toEqual([sample, zodAcceptsAsIs(schema, sample)]);
      }
    }
  });

  test.each(inputs)(
    'asks zod about a $name that is not plain data: getters, proxies, symbol or hidden keys, odd arrays',
    ({ schema, valid }) => {
      const getters = Object.defineProperties(
        {},
        Object.fromEntries(Object.entries(valid).map(([k, v]) => [k, { get: () => v, enumerable: true }])),
      );
      const odd: unknown[] = [
        getters,
        new Proxy({ ...valid }, {}),
        { ...valid, [Symbol('s')]: 1 },
        Object.defineProperty({ ...valid }, 'hidden', { value: 1, enumerable: false }),
      ];
      for (const value of odd) {
        expect(acceptsInputAsIs(schema, value)).toBe(false);
        // zod judges it, and what parseInput returns is zod's copy, never the caller's object.
        if (schema.safeParse(value).success) expect(parseInput(schema, 'input', value)).not.toBe(value);
      }
      // The same inside: each object or array field of the valid input made odd.
      let nested = 0;
      for (const [key, field] of Object.entries(valid)) {
        if (typeof field !== 'object' || field === null) continue;
        const oddFields: unknown[] = Array.isArray(field)
          ? [Object.assign([...field], { extra: 1 }), new Proxy([...field], {}), [, ...field]]
          : [new Proxy({ ...field }, {}), { ...field, [Symbol('s')]: 1 }];
        for (const value of oddFields) {
          expect([key, acceptsInputAsIs(schema, { ...valid, [key]: value })]).toEqual([key, false]);
          nested++;
        }
      }
      expect(nested + odd.length).toBeGreaterThan(3);
      expect(acceptsInputAsIs(schema, { ...valid })).toBe(true);
    },
  );

  test('parseInput returns an input that fits as it is, and names the field and rule of one that does not', () => {
    const prompt = { text: 'ohwx woman', num_images: 2 };
    expect(parseInput(PromptCreateInput, 'prompt', prompt)).toBe(prompt);
    expect(parseInput(TuneCreateInput, 'tune', { name: ' woman ', title: 'job', image_urls: [url] })).toEqual({
      name: 'woman',
      title: 'job',
      image_urls: [url],
    });
    expect(() => parseInput(PromptCreateInput, 'prompt', { ...prompt, w: 500 })).toThrow(
      'prompt.w: must be a positive integer multiple of 8',
    );
    expect(() => parseInput(PromptCreateInput, 'prompt', { ...prompt, inpaint_faces: true })).toThrow(
      'prompt.inpaint_faces: requires super_resolution to be true',
    );
    expect(() => parseInput(PromptCreateInput, 'prompt', { ...prompt, callback: 'ftp://x' })).toThrow(
      'prompt.callback: must be an http(s) URL',
    );
  });
});
