/**
 * Any starter, any team: the bounds of a job's input (src/contract/bounds.ts), held alike by the contract and by the
 * published JSON Schema, and the business key's rules (src/contract/keys.ts): which inputs are the same job.
 */
import { InvalidInputError } from '../../src/api/errors';
import { INPUT_BOUNDS, isUploadPath } from '../../src/contract/bounds';
import { businessKey, checkGenerate, checkPackTune, checkTrainThenGenerate } from '../../src/contract/check';
import type { WorkflowName } from '../../src/contract/jobs';
import { differingFields, KeyInUseError, otherJob } from '../../src/contract/keys';
import { tenantWorkflowId } from '../../src/contract/tenants';
import { schemaVerdict } from './input-schema-verdict';

const URLS = ['https://example.com/1.jpg'];
const tune = { name: 'dog', branch: 'fast', image_urls: URLS };
const long = (n: number) => 'x'.repeat(n);

function contractFields(workflow: WorkflowName, input: unknown): 'ok' | string[] {
  try {
    if (workflow === 'trainThenGenerate') checkTrainThenGenerate('order-1', input);
    else if (workflow === 'generate') checkGenerate(input);
    else checkPackTune('order-1', input);
    return 'ok';
  } catch (err) {
    if (err instanceof InvalidInputError) return err.issues.map((i) => i.field);
    throw err;
  }
}

/** Each case: a job a starter may not send, and the field both the contract and the schema name. */
const REFUSED: Array<{ name: string; workflow: WorkflowName; input: unknown; field: string }> = [
  {
    name: 'a prompt text over the bound',
    workflow: 'generate',
    input: { tuneId: 7, prompts: [{ text: long(INPUT_BOUNDS.promptTextMax + 1) }] },
    field: 'prompts[0].text',
  },
  {
    name: 'a negative prompt of 5 MB',
    workflow: 'generate',
    input: { tuneId: 7, prompts: [{ text: 'x', negative_prompt: long(5_000_000) }] },
    field: 'prompts[0].negative_prompt',
  },
  {
    name: 'a class name over the bound',
    workflow: 'trainThenGenerate',
    input: { tune: { ...tune, name: long(INPUT_BOUNDS.stringMax + 1) }, prompts: [] },
    field: 'tune.name',
  },
  {
    name: 'more training images than the bound',
    workflow: 'trainThenGenerate',
    input: { tune: { ...tune, image_urls: Array(INPUT_BOUNDS.imagesMax + 1).fill(URLS[0]) }, prompts: [] },
    field: 'tune.image_urls',
  },
  {
    name: 'a URL over the bound',
    workflow: 'trainThenGenerate',
    input: { tune: { ...tune, image_urls: [`https://example.com/${long(INPUT_BOUNDS.urlMax)}`] }, prompts: [] },
    field: 'tune.image_urls[0]',
  },
  {
    name: 'prompts smuggled in prompts_attributes',
    workflow: 'trainThenGenerate',
    input: { tune: { ...tune, prompts_attributes: [{ text: 'sks dog', num_images: 8 }] }, prompts: [] },
    field: 'tune.prompts_attributes',
  },
  {
    name: 'a training image path that climbs out of the upload directory',
    workflow: 'trainThenGenerate',
    input: { tune: { name: 'dog', images: ['../../etc/passwd'] }, prompts: [] },
    field: 'tune.images[0]',
  },
  {
    name: "a prompt's input image path with a backslash",
    workflow: 'generate',
    input: { tuneId: 7, prompts: [{ text: 'x', controlnet: 'canny', input_image: 'a\\..\\b.png' }] },
    field: 'prompts[0].input_image',
  },
  {
    name: 'a pack tune on more tune ids than the bound',
    workflow: 'packTune',
    input: { packId: 260, tune: { tune_ids: Array.from({ length: INPUT_BOUNDS.idsMax + 1 }, (_, i) => i + 1) } },
    field: 'tune.tune_ids',
  },
  {
    name: 'characteristics with more keys than the bound',
    workflow: 'trainThenGenerate',
    input: {
      tune: {
        ...tune,
        characteristics: Object.fromEntries(
          Array.from({ length: INPUT_BOUNDS.characteristicsMax + 1 }, (_, i) => [`k${i}`, 'v']),
        ),
      },
      prompts: [],
    },
    field: 'tune.characteristics',
  },
  {
    name: 'an attribute the spec does not list that is an object',
    workflow: 'generate',
    input: { tuneId: 7, prompts: [{ text: 'x', extra: { deep: [1, 2, 3] } }] },
    field: 'prompts[0].extra',
  },
  {
    name: 'more attributes the spec does not list than the bound',
    workflow: 'generate',
    input: {
      tuneId: 7,
      prompts: [{ text: 'x', ...Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`a${i}`, i])) }],
    },
    field: 'prompts[0]',
  },
];

test.each(REFUSED)(
  '$name: refused by the contract and by the JSON Schema, naming $field',
  ({ workflow, input, field }) => {
    expect(contractFields(workflow, input)).toContain(field);
    const schema = schemaVerdict(workflow, JSON.parse(JSON.stringify(input)));
    expect(schema).not.toBe('ok');
    expect(schema).toContain(field);
  },
);

test('within every bound, the same kinds of value pass both', () => {
  const input = {
    tune: {
      ...tune,
      name: long(INPUT_BOUNDS.stringMax),
      image_urls: Array(INPUT_BOUNDS.imagesMax).fill(URLS[0]),
      characteristics: { eye_color: 'blue' },
      workspace_id: 'ws-1',
    },
    prompts: [{ text: long(INPUT_BOUNDS.promptTextMax), aspect_ratio: '1:1', resolution: null }],
  };
  expect(contractFields('trainThenGenerate', input)).toBe('ok');
  expect(schemaVerdict('trainThenGenerate', input)).toBe('ok');
  const files = { tune: { name: 'dog', images: ['order-1/1.png', '/srv/uploads/2.png'] }, prompts: [] };
  expect(contractFields('trainThenGenerate', files)).toBe('ok');
  expect(schemaVerdict('trainThenGenerate', files)).toBe('ok');
});

test('the first releases took what the bounds refuse: `bounds: false` checks as they did (runs started before)', () => {
  const smuggled = { tune: { ...tune, prompts_attributes: [{ text: 'x' }] }, prompts: [] };
  expect(() => checkTrainThenGenerate('order-1', smuggled)).toThrow(/tune.prompts_attributes: is not taken/);
  expect(() => checkTrainThenGenerate('order-1', smuggled, { bounds: false })).not.toThrow();
});

test('upload paths: relative or absolute, never "..", NUL or a backslash', () => {
  for (const ok of ['1.png', 'order-1/1.png', '/srv/uploads/1.png', 'a..b/c.png', '.hidden.png'])
    expect({ ok, upload: isUploadPath(ok) }).toEqual({ ok, upload: true });
  for (const bad of ['', '..', '../x', 'a/../../x', 'a/..', 'a\\b', 'a\0b', long(INPUT_BOUNDS.pathMax + 1)])
    expect({ bad, upload: isUploadPath(bad) }).toEqual({ bad, upload: false });
});

test('a business key may not take the prefix of the workflow IDs tuneflow makes', () => {
  expect(businessKey.safeParse('tuneflow:nexus:shop:order-1').success).toBe(false);
  expect(businessKey.safeParse('order-1').success).toBe(true);
  expect(schemaVerdict('trainThenGenerate', { key: 'tuneflow:x', tune, prompts: [] }, { nexus: true })).toContain(
    'key',
  );
  expect(tenantWorkflowId('shop', 'order-1')).toBe('tuneflow:nexus:shop:order-1');
  expect(tenantWorkflowId('default', 'order-1')).toBe('order-1');
});

describe('the same job', () => {
  const input = { tune, prompts: [{ text: 'sks dog', num_images: 2 }] };

  test('the same input, as JSON carries it, is the same job (absent, undefined, null and empty options alike)', () => {
    expect(differingFields(input, JSON.parse(JSON.stringify(input)))).toEqual([]);
    expect(differingFields({ ...input, options: undefined }, { ...input, options: {} })).toEqual([]);
    expect(differingFields({ ...input, options: null }, input)).toEqual([]);
    expect(differingFields({ tune: { ...tune, title: undefined }, prompts: input.prompts }, input)).toEqual([]);
  });

  test('other input names every field that differs', () => {
    const other = {
      tune: { ...tune, name: 'cat' },
      prompts: [{ text: 'sks cat', num_images: 2 }],
      options: { maxCostMc: 1 },
    };
    expect(differingFields(other, input)).toEqual(['input.tune.name', 'input.prompts[0].text', 'input.options']);
    expect(differingFields({ ...input, prompts: [] }, input)).toEqual(['input.prompts (0 against 1 items)']);
  });

  test('otherJob: the same workflow and input is that job; other input or another workflow is another', () => {
    const holder = { workflow: 'trainThenGenerate', input };
    expect(otherJob('trainThenGenerate', JSON.parse(JSON.stringify(input)), holder)).toBeUndefined();
    expect(otherJob('trainThenGenerate', { ...input, prompts: [] }, holder)).toEqual({
      workflow: 'trainThenGenerate',
      fields: ['input.prompts (0 against 1 items)'],
    });
    expect(otherJob('generate', input, holder)).toEqual({ workflow: 'trainThenGenerate', fields: [] });
  });

  test('a refusal names the key, the job that holds it and the fields, as bad input on `key`', () => {
    const err = new KeyInUseError('order-1', { workflow: 'trainThenGenerate' }, ['input.tune.name']);
    expect(err).toBeInstanceOf(InvalidInputError);
    expect(err.issues).toEqual([
      {
        field: 'key',
        rule:
          '"order-1" names a trainThenGenerate job with other input (input.tune.name differ): a key names one job, ' +
          'and a job runs once; use a new key for a new job',
      },
    ]);
  });
});
