/**
 * Any starter, any team: the bounds of a job's input (src/contract/bounds.ts), held alike by the contract and by the
 * published JSON Schema, and the business key's rules (src/contract/keys.ts): which inputs are the same job.
 */
import { InvalidInputError } from '../../src/api/errors';
import { INPUT_BOUNDS, isUploadPath, PROTOTYPE_NAMES, prototypeNameRule } from '../../src/contract/bounds';
import { businessKey, checkGenerate, checkPackTune, checkTrainThenGenerate } from '../../src/contract/check';
import type { WorkflowName } from '../../src/contract/jobs';
import { differingFields, KeyInUseError, otherJob } from '../../src/contract/keys';
import { tenantWorkflowId } from '../../src/contract/tenants';
import { schemaVerdict } from './input-schema-verdict';

const URLS = ['https://example.com/1.jpg'];
const tune = { name: 'dog', branch: 'fast', image_urls: URLS };
const long = (n: number) => 'x'.repeat(n);

function contractIssues(workflow: WorkflowName, input: unknown): 'ok' | InvalidInputError['issues'] {
  try {
    if (workflow === 'trainThenGenerate') checkTrainThenGenerate('order-1', input);
    else if (workflow === 'generate') checkGenerate(input);
    else checkPackTune('order-1', input);
    return 'ok';
  } catch (err) {
    if (err instanceof InvalidInputError) return err.issues;
    throw err;
  }
}

function contractFields(workflow: WorkflowName, input: unknown): 'ok' | string[] {
  const issues = contractIssues(workflow, input);
  return issues === 'ok' ? 'ok' : issues.map((i) => i.field);
}

/** `[[[...[value]...]]]`: `value` inside `depth` arrays. */
function nested(depth: number, value: unknown = 1): unknown {
  let out = value;
  for (let i = 0; i < depth; i++) out = [out];
  return out;
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
    name: "a pack's prompt attribute that is an object",
    workflow: 'packTune',
    input: { packId: 260, tune: { ...tune, prompt_attributes: { num_images: 2, layout: { rows: [1, 2] } } } },
    field: 'tune.prompt_attributes.layout',
  },
  {
    name: 'a callback in prompt_attributes over the URL bound',
    workflow: 'packTune',
    input: {
      packId: 260,
      tune: { ...tune, prompt_attributes: { callback: `https://example.com/${long(INPUT_BOUNDS.urlMax)}` } },
    },
    field: 'tune.prompt_attributes.callback',
  },
  {
    name: 'a field no rule reads, nested deeper than the whole input may',
    workflow: 'trainThenGenerate',
    input: { tune, prompts: [], note: nested(INPUT_BOUNDS.depthMax) },
    field: `note${'[0]'.repeat(INPUT_BOUNDS.depthMax - 1)}`,
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

describe('the whole input: its depth and its size', () => {
  test('a value nested 20,000 deep is refused for that alone, named where it passes the depth bound', () => {
    const deep = { packId: 260, tune: { ...tune, prompt_attributes: { x: nested(20_000) } } };
    expect(contractIssues('packTune', deep)).toEqual([
      {
        field: 'tune.prompt_attributes.x[0][0][0][0][0]',
        rule: 'must nest at most 8 objects and arrays deep, the input itself counted (this one is at depth 9)',
      },
    ]);
    // The schema refuses it at the attribute (no object or list there): ajv reads no deeper.
    expect(schemaVerdict('packTune', deep)).toEqual(['tune.prompt_attributes.x']);
  });

  test('as deep as the bound passes both; one level more is refused by both', () => {
    const at = (depth: number) => ({ tune, prompts: [], note: nested(depth - 1) });
    expect(contractFields('trainThenGenerate', at(INPUT_BOUNDS.depthMax))).toBe('ok');
    expect(schemaVerdict('trainThenGenerate', at(INPUT_BOUNDS.depthMax))).toBe('ok');
    expect(contractFields('trainThenGenerate', at(INPUT_BOUNDS.depthMax + 1))).toEqual([
      `note${'[0]'.repeat(INPUT_BOUNDS.depthMax - 1)}`,
    ]);
    expect(schemaVerdict('trainThenGenerate', at(INPUT_BOUNDS.depthMax + 1))).not.toBe('ok');
  });

  test('a cycle (a TuneflowClient caller can make one) is refused as too deep, not followed', () => {
    const loop: Record<string, unknown> = {};
    loop.self = loop;
    expect(contractFields('trainThenGenerate', { tune, prompts: [], loop })).toEqual([
      `loop${'.self'.repeat(INPUT_BOUNDS.depthMax - 1)}`,
    ]);
  });

  const prompts = (n: number, text: string) =>
    Array.from({ length: n }, () => ({ text, negative_prompt: text, ar: text }));

  test('each field within its bound, the whole over 1 MiB as JSON: refused as `input` (the schema cannot say it)', () => {
    const big = { tuneId: 7, prompts: prompts(120, long(INPUT_BOUNDS.promptTextMax)) };
    expect(JSON.stringify(big).length).toBeGreaterThan(INPUT_BOUNDS.inputBytesMax);
    const issues = contractIssues('generate', big);
    expect(issues).toEqual([{ field: 'input', rule: expect.stringMatching(/^must be at most 1048576 bytes as JSON/) }]);
    expect(schemaVerdict('generate', big)).toBe('ok');
    expect(contractFields('generate', { tuneId: 7, prompts: prompts(80, long(4_000)) })).toBe('ok');
  });

  test('bytes, not characters: a text of three-byte characters counts three a character', () => {
    const euros = { tuneId: 7, prompts: prompts(120, '€'.repeat(1_500)) };
    expect(JSON.stringify(euros).length).toBeLessThan(INPUT_BOUNDS.inputBytesMax);
    expect(Buffer.byteLength(JSON.stringify(euros))).toBeGreaterThan(INPUT_BOUNDS.inputBytesMax);
    expect(contractFields('generate', euros)).toEqual(['input']);
  });

  test("a field too long is named as that, not as the whole input's size", () => {
    const input = { tuneId: 7, prompts: [{ text: 'x', negative_prompt: long(5_000_000) }] };
    expect(contractFields('generate', input)).toEqual(['prompts[0].negative_prompt']);
  });
});

describe('names every JavaScript object has, in each place attributes are checked', () => {
  const image = JSON.stringify(URLS);
  const newTune = `"name":"dog","branch":"fast","image_urls":${image}`;
  /** Each place, as JSON text (JSON.parse makes `__proto__` an own key, as a caller's JSON does). */
  const PLACES: Array<{ place: string; workflow: WorkflowName; json: (name: string) => string; schema: boolean }> = [
    {
      place: 'tune',
      workflow: 'trainThenGenerate',
      json: (n) => `{"tune":{${newTune},"${n}":"x"},"prompts":[]}`,
      schema: true,
    },
    {
      place: 'prompts[0]',
      workflow: 'trainThenGenerate',
      json: (n) => `{"tune":{${newTune}},"prompts":[{"text":"sks dog","${n}":"x"}]}`,
      schema: true,
    },
    {
      place: 'prompts[0]',
      workflow: 'generate',
      json: (n) => `{"tuneId":7,"prompts":[{"text":"x","${n}":1}]}`,
      schema: true,
    },
    {
      place: 'tune',
      workflow: 'packTune',
      json: (n) => `{"packId":260,"tune":{${newTune},"${n}":null}}`,
      schema: true,
    },
    {
      place: 'tune.characteristics',
      workflow: 'trainThenGenerate',
      json: (n) => `{"tune":{${newTune},"characteristics":{"eye_color":"blue","${n}":"x"}},"prompts":[]}`,
      schema: true,
    },
    {
      place: 'tune.characteristics',
      workflow: 'packTune',
      json: (n) => `{"packId":260,"tune":{${newTune},"characteristics":${JSON.stringify(`{"${n}":"x"}`)}}}`,
      // Inside a JSON string: the workflow's alone (WORKFLOW_ONLY in input-schema.test.ts).
      schema: false,
    },
    {
      place: 'tune.prompt_attributes',
      workflow: 'packTune',
      json: (n) => `{"packId":260,"tune":{${newTune},"prompt_attributes":{"num_images":2,"${n}":"x"}}}`,
      schema: true,
    },
    {
      place: 'options',
      workflow: 'trainThenGenerate',
      json: (n) => `{"tune":{${newTune}},"prompts":[],"options":{"${n}":1}}`,
      schema: true,
    },
    {
      place: 'options.inspect',
      workflow: 'packTune',
      json: (n) => `{"packId":260,"tune":{${newTune}},"options":{"inspect":{"${n}":1}}}`,
      schema: true,
    },
  ];
  const cases = PLACES.flatMap((p) => PROTOTYPE_NAMES.map((name) => ({ ...p, name })));

  test('the list is every property Object.prototype has', () => {
    expect([...PROTOTYPE_NAMES].sort()).toEqual(Object.getOwnPropertyNames(Object.prototype).sort());
  });

  test.each(cases)(
    '$workflow $place.$name: refused in words, naming the attribute',
    ({ workflow, place, name, json, schema }) => {
      const input = JSON.parse(json(name)) as unknown;
      const issues = contractIssues(workflow, input);
      const field = `${place}.${name}`;
      expect(issues).toEqual([{ field, rule: expect.any(String) }]);
      const [{ rule }] = issues as readonly { rule: string }[];
      if (place.startsWith('options')) expect(rule).toMatch(/^is not an (inspect )?option \(known: /);
      else expect(rule).toBe(prototypeNameRule(name));
      expect(rule).not.toMatch(/\[object|native code|function/);
      if (schema) expect(schemaVerdict(workflow, input)).toEqual([field]);
    },
  );

  test('the rule says what is wrong', () => {
    expect(prototypeNameRule('toString')).toBe(
      'is the name of a property every JavaScript object has (Object.prototype.toString): it is not taken as an ' +
        'attribute name, so nothing on the way mistakes it for that property',
    );
  });
});

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

test('`bounds: false` takes what the depth, size and key bounds refuse, as runs started before them did', () => {
  const nestedAttribute = { packId: 260, tune: { ...tune, prompt_attributes: { layout: { rows: [1] } } } };
  const deepNote = { tune, prompts: [], note: nested(40) };
  const characteristics = JSON.parse(
    `{"packId":260,"tune":{"name":"dog","image_urls":["${URLS[0]}"],"characteristics":{"toString":"x"}}}`,
  );
  for (const [workflow, input] of [
    ['packTune', nestedAttribute],
    ['trainThenGenerate', deepNote],
    ['packTune', characteristics],
  ] as const) {
    expect(contractFields(workflow, input)).not.toBe('ok');
    const check = workflow === 'packTune' ? checkPackTune : checkTrainThenGenerate;
    expect(() => check('order-1', input, { bounds: false })).not.toThrow();
  }
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
