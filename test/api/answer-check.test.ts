/**
 * The compiled answer check of http.ts against zod itself: wherever the check accepts a value, zod accepts it too and
 * returns it unchanged; for the schemas it compiles, it accepts exactly what zod accepts unchanged. Checked on every
 * answer schema, with every field of a valid object replaced by each of a set of JSON values, and on the keys zod
 * treats apart (`__proto__`, `constructor`).
 */
import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import { acceptsAsIs } from '../../src/api/answer-check';
import {
  created,
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

  test('leaves to zod what it does not compile: stripping objects, refinements, transforms, formats', () => {
    const cases: [z.ZodType, unknown][] = [
      [z.object({ id: z.number() }), { id: 1 }],
      [z.strictObject({ id: z.number() }), { id: 1 }],
      [z.looseObject({ id: z.number().refine((n) => n > 0) }), { id: 1 }],
      [z.looseObject({ id: z.string().transform((s) => s.length) }), { id: 'x' }],
      [z.looseObject({ url: z.url() }), { url: 'https://example.com' }],
      [z.looseObject({ id: z.int() }), { id: 1 }],
      [z.looseObject({ n: z.coerce.number() }), { n: 1 }],
      [z.number().multipleOf(8), 16],
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
