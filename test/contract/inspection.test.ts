/**
 * Inspection before paying (src/contract/inspection.ts): the option's rule (known flags, each once), the training
 * images a job names, the InspectionRefused failure, and the flags in step with the service's answer schema.
 */
import { ApplicationFailure } from '@temporalio/common';
import { z } from 'zod';
import { InspectionResult } from '../../src/api/schemas';
import { checkPackTune, checkTrainThenGenerate } from '../../src/contract/check';
import { FailureType, inspectionRefused, type InspectionRefusedDetails } from '../../src/contract/failures';
import { INSPECTION_FLAGS, refusedFlags, trainingImagesOf, type ImageInspection } from '../../src/contract/inspection';
import { resolveOptions } from '../../src/contract/options';
import type { TuneflowOptions } from '../../src/contract/inputs';

const URLS = ['https://example.com/1.jpg', 'https://example.com/2__blurry__.jpg'];

/** The InvalidOptions failure resolveOptions throws for `inspect`. */
function refusal(inspect: unknown): { option: string; rule: string; message: string } {
  try {
    resolveOptions({ inspect } as TuneflowOptions);
  } catch (err) {
    expect(err).toBeInstanceOf(ApplicationFailure);
    const failure = err as ApplicationFailure;
    expect(failure.type).toBe(FailureType.invalidOptions);
    return { ...(failure.details?.[0] as { option: string; rule: string }), message: failure.message };
  }
  throw new Error(`resolveOptions accepted inspect ${JSON.stringify(inspect)}`);
}

test("the flags are the service's: every boolean flag of the inspection answer, and nothing else", () => {
  const booleans = Object.entries(InspectionResult.shape)
    .filter(([, schema]) => (schema as z.ZodType).safeParse(true).success)
    .map(([key]) => key);
  expect([...INSPECTION_FLAGS].sort()).toEqual(booleans.sort());
});

test('options.inspect: absent or null is no inspection; refuse defaults to none', () => {
  expect(resolveOptions({}).inspect).toBeUndefined();
  expect(resolveOptions({ inspect: null } as unknown as TuneflowOptions).inspect).toBeUndefined();
  expect(resolveOptions({ inspect: {} }).inspect).toEqual({ refuse: [] });
  expect(resolveOptions({ inspect: { refuse: ['blurry', 'includes_multiple_people'] } }).inspect).toEqual({
    refuse: ['blurry', 'includes_multiple_people'],
  });
  expect(resolveOptions({ inspect: { refuse: [...INSPECTION_FLAGS] } }).inspect?.refuse).toHaveLength(7);
});

test('options.inspect: only known flag names, each once; refused InvalidOptions naming the place', () => {
  expect(refusal({ refuse: ['blurry', 'sharp'] })).toMatchObject({
    option: 'inspect.refuse[1]',
    rule: expect.stringContaining('must be one of blurry, selfie, low_resolution'),
  });
  expect(refusal({ refuse: ['blurry', 'Blurry'] }).option).toBe('inspect.refuse[1]');
  expect(refusal({ refuse: ['selfie', 'blurry', 'selfie'] })).toEqual({
    option: 'inspect.refuse',
    rule: 'must not name a flag twice',
    message: 'Invalid option inspect.refuse: must not name a flag twice',
  });
  expect(refusal({ refuse: 'blurry' }).option).toBe('inspect.refuse');
  expect(refusal({ refuse: ['blurry'], reject: ['selfie'] }).option).toBe('inspect.reject');
  expect(refusal(true).option).toBe('inspect');
  expect(refusal(['blurry']).option).toBe('inspect');
});

test('the input contract names the option as a field of the job', () => {
  const job = { tune: { name: 'dog', image_urls: URLS }, prompts: [], options: { inspect: { refuse: ['fuzzy'] } } };
  expect(() => checkTrainThenGenerate('order-1', job)).toThrow('options.inspect.refuse[0]: must be one of');
  const pack = { packId: 260, tune: { name: 'dog', image_urls: URLS }, options: { inspect: { refuse: ['selfie'] } } };
  expect(checkPackTune('order-1', pack).options.inspect).toEqual({ refuse: ['selfie'] });
});

test('the training images of a job, field by field: URLs, or files of the upload directory; none when reused', () => {
  expect(trainingImagesOf({ image_urls: URLS })).toEqual([
    { field: 'tune.image_urls[0]', url: URLS[0] },
    { field: 'tune.image_urls[1]', url: URLS[1] },
  ]);
  expect(trainingImagesOf({ images: ['order-1/a.png'] })).toEqual([{ field: 'tune.images[0]', path: 'order-1/a.png' }]);
  expect(trainingImagesOf({})).toEqual([]);
});

describe('InspectionRefused', () => {
  const inspection: ImageInspection[] = [
    { field: 'tune.image_urls[0]', image: URLS[0], flags: ['selfie'], characteristics: { age: '25-34' } },
    { field: 'tune.image_urls[1]', image: URLS[1], flags: ['blurry', 'selfie'], characteristics: { age: null } },
    {
      field: 'tune.image_urls[2]',
      image: `https://example.com/${'x'.repeat(200)}__includes_multiple_people__.jpg`,
      flags: ['includes_multiple_people'],
      characteristics: {},
    },
  ];

  test('only the refused flags count: an image whose flags are all allowed is not named', () => {
    expect(refusedFlags(inspection, ['blurry', 'includes_multiple_people']).map((i) => [i.field, i.flags])).toEqual([
      ['tune.image_urls[1]', ['blurry']],
      ['tune.image_urls[2]', ['includes_multiple_people']],
    ]);
    expect(refusedFlags(inspection, [])).toEqual([]);
  });

  test('non-retryable, naming each refused image and its flags; the details hold the whole inspection', () => {
    const failure = inspectionRefused(['blurry', 'includes_multiple_people'], inspection);
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect(failure.type).toBe('InspectionRefused');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toMatch(
      /^Inspection refused 2 of 3 training images \(options\.inspect\.refuse: blurry, includes_multiple_people\): /,
    );
    expect(failure.message).toContain(`tune.image_urls[1] (${URLS[1]}): blurry;`);
    // A long URL is cut in the message, whole in the details.
    expect(failure.message).toMatch(/tune\.image_urls\[2\] \(https:\/\/example\.com\/x+…\): includes_multiple_people/);
    expect(failure.message).toMatch(/; no tune was created$/);
    const details = failure.details?.[0] as InspectionRefusedDetails;
    expect(details.refuse).toEqual(['blurry', 'includes_multiple_people']);
    expect(details.images).toEqual([
      { field: 'tune.image_urls[1]', image: URLS[1], flags: ['blurry'] },
      { field: 'tune.image_urls[2]', image: inspection[2].image, flags: ['includes_multiple_people'] },
    ]);
    expect(details.inspection).toEqual(inspection);
  });
});
