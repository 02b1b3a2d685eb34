/**
 * The JSON Schema of the workflows' inputs (src/contract/input-schema.ts) against the contract it is generated from: every job
 * of the refusal catalogue (test/api/bad-input-cases.ts), sent as JSON as another language would send it, gets the
 * same verdict from a pinned JSON Schema validator (ajv, test/contract/input-schema-verdict.ts) as from the contract, and a
 * refusal names the same fields; the valid jobs pass both. The rules the schema cannot hold are listed here, by name.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { schemaCommand, schemaFiles } from '../../src/cli/schema';
import { inputSchema, type JsonSchema } from '../../src/contract/input-schema';
import { INSPECTION_FLAGS } from '../../src/contract/inspection';
import { catalogueJobs as catalogueOf } from '../api/bad-input-cases';
import { schemaVerdict as schemaVerdictOf } from './input-schema-verdict';
import { verdictOf, type ContractJob } from '../workflows/contract-workflows';

const URLS = ['https://example.com/1.jpg'];

const schemaVerdict = (job: ContractJob, nexus = false) => schemaVerdictOf(job.workflow, job.input, { nexus });

/** The contract's verdict, as fields. */
function contractVerdict(job: ContractJob): 'ok' | string[] {
  const verdict = verdictOf(job);
  return verdict === 'ok' ? 'ok' : [...new Set(verdict.map((issue) => issue.field))].sort();
}

/** As another language sends it: JSON (a Buffer arrives as an object, which is no path). */
const asJson = (job: ContractJob): ContractJob => JSON.parse(JSON.stringify(job)) as ContractJob;

/** The catalogue's jobs, as another language sends them. */
const catalogueJobs = () => catalogueOf().map(({ name, job }) => ({ name, job: asJson(job) }));

/**
 * Rules only the workflow checks, each said in the schema's descriptions: the schema lets these through and the
 * workflow refuses them, naming the field.
 */
const WORKFLOW_ONLY: Record<string, string> = {
  'characteristics as a JSON string that is no object': 'JSON Schema cannot read inside a string',
};

/**
 * The one field the contract names beside the schema's: once an image that is no path is dropped, it checks what is
 * left and may find no image (`tune.images`). Both refuse, for the same first field.
 */
function withoutFollowUps(fields: string[]): string[] {
  return fields.some((field) => /^tune\.images\[\d+\]$/.test(field))
    ? fields.filter((f) => f !== 'tune.images')
    : fields;
}

const VALID: ContractJob[] = [
  { workflow: 'trainThenGenerate', input: { tune: { name: 'dog', image_urls: URLS }, prompts: [{ text: 'sks dog' }] } },
  {
    workflow: 'trainThenGenerate',
    input: {
      tune: { name: 'woman', images: ['/photos/1.jpg'], branch: 'flux1', model_type: 'lora', preset: 'flux-lora-fast' },
      prompts: [
        { text: 'ohwx woman', super_resolution: true, inpaint_faces: true, num_images: 4, w: 512, h: 768 },
        { text: 'ohwx woman, sketch', controlnet: 'pose', input_image_url: URLS[0], mask_image_url: URLS[0] },
      ],
      options: { pollInterval: '30 seconds', maxPollInterval: '5m', trainingTimeout: 3_600_000, cleanupOnCancel: true },
    },
  },
  { workflow: 'generate', input: { tuneId: 7, prompts: [{ text: 'sks dog', w: 512, cfg_scale: 3 }] } },
  { workflow: 'packTune', input: { packId: 260, tune: { name: 'man', image_urls: URLS, characteristics: '{}' } } },
  { workflow: 'packTune', input: { packId: 260, tune: { tune_ids: [12] }, options: { maxCostMc: 0 } } },
  {
    workflow: 'packTune',
    input: { packId: 260, tune: { name: 'man', image_urls: URLS }, options: { inspect: { refuse: ['blurry'] } } },
  },
  {
    workflow: 'trainThenGenerate',
    input: { tune: { name: 'dog', image_urls: URLS }, prompts: [], options: { inspect: { refuse: null } } },
  },
];

const OPTIONS_REFUSED: Array<{ options: unknown; field: string }> = [
  { options: { pollInterval: 'soon' }, field: 'options.pollInterval' },
  { options: { pollInterval: '0 seconds' }, field: 'options.pollInterval' },
  { options: { trainingTimeout: -5 }, field: 'options.trainingTimeout' },
  { options: { promptTimeout: '' }, field: 'options.promptTimeout' },
  { options: { promptConcurrency: 0 }, field: 'options.promptConcurrency' },
  { options: { promptConcurrency: 33 }, field: 'options.promptConcurrency' },
  { options: { cleanupOnCancel: 'yes' }, field: 'options.cleanupOnCancel' },
  { options: { maxCostMc: -1 }, field: 'options.maxCostMc' },
  { options: { tuneCostMc: 1.5 }, field: 'options.tuneCostMc' },
  { options: { retries: 3 }, field: 'options.retries' },
  { options: { inspect: 'blurry' }, field: 'options.inspect' },
  { options: { inspect: { reject: ['blurry'] } }, field: 'options.inspect.reject' },
  { options: { inspect: { refuse: 'blurry' } }, field: 'options.inspect.refuse' },
  { options: { inspect: { refuse: ['blurry', 'sharp'] } }, field: 'options.inspect.refuse[1]' },
  { options: { inspect: { refuse: ['selfie', 'blurry', 'selfie'] } }, field: 'options.inspect.refuse' },
  { options: 'fast', field: 'options' },
];

test('valid jobs pass the schema and the contract alike', () => {
  for (const job of VALID) {
    expect({ job, schema: schemaVerdict(job) }).toEqual({ job, schema: 'ok' });
    expect({ job, contract: contractVerdict(job) }).toEqual({ job, contract: 'ok' });
  }
});

test('every job of the refusal catalogue gets the same verdict from the schema as from the contract, field for field', () => {
  const jobs = catalogueJobs();
  expect(jobs.length).toBeGreaterThanOrEqual(50);
  for (const { name, job } of jobs) {
    const contract = contractVerdict(job);
    const schema = schemaVerdict(job);
    if (name in WORKFLOW_ONLY) {
      expect({ name, schema }).toEqual({ name, schema: 'ok' });
      expect({ name, contract: contract === 'ok' }).toEqual({ name, contract: false });
      continue;
    }
    if (contract === 'ok' || schema === 'ok') {
      expect({ name, schema }).toEqual({ name, schema: contract });
      continue;
    }
    // Every field the contract names, and its first, the schema names too.
    const named = withoutFollowUps(contract);
    expect({ name, schema: schema.filter((field) => named.includes(field)) }).toEqual({ name, schema: named });
    // zod checks an object's cross-field rules once its fields pass; the schema checks all at once, so it may name
    // a field more, of an object the contract refused already.
    const objectOf = (field: string) => field.replace(/(\.|\[)[^.[]*$/, '');
    for (const extra of schema.filter((field) => !named.includes(field)))
      expect({ name, extra, sameObject: named.some((field) => objectOf(field) === objectOf(extra)) }).toEqual({
        name,
        extra,
        sameObject: true,
      });
  }
});

test('options: each refused by the schema is refused by the contract, naming the same option', () => {
  const job = (options: unknown): ContractJob => ({
    workflow: 'generate',
    input: { tuneId: 7, prompts: [{ text: 'x' }], options },
  });
  for (const { options, field } of OPTIONS_REFUSED) {
    expect({ options, schema: schemaVerdict(job(options)) }).toEqual({ options, schema: [field] });
    expect({ options, contract: contractVerdict(job(options)) }).toEqual({ options, contract: [field] });
  }
  // The polls bound is the workflow's alone (said in the schema's description).
  const tooManyPolls = job({ pollInterval: '1 second', maxPollInterval: '1 second', trainingTimeout: '1 hour' });
  expect(schemaVerdict(tooManyPolls)).toBe('ok');
  expect(contractVerdict(tooManyPolls)).toEqual(['options.trainingTimeout']);
  expect(JSON.stringify(inputSchema('generate'))).toContain('at most 100 polls');
});

test('options.inspect: the schema lists the flags inspection may refuse, the same the contract knows', () => {
  const { options } = inputSchema('packTune').$defs as Record<string, { properties: Record<string, JsonSchema> }>;
  const refuse = (options.properties.inspect.properties as Record<string, JsonSchema>).refuse;
  expect(refuse).toMatchObject({ items: { enum: [...INSPECTION_FLAGS] }, uniqueItems: true, maxItems: 7 });
  expect(INSPECTION_FLAGS).toEqual([
    'blurry',
    'selfie',
    'low_resolution',
    'low_quality',
    'includes_multiple_people',
    'wearing_sunglasses',
    'funny_face',
  ]);
});

test('nothing in the schema is "anything" but the attributes the spec does not list (sent to the service as given)', () => {
  // zod renders what it cannot express (a custom type, an instance check) as {} when told to go on: each must be said
  // in src/contract/input-schema.ts instead, or show up here.
  const empty: string[] = [];
  const walk = (value: unknown, at: string): void => {
    if (typeof value !== 'object' || value === null) return;
    if (!Array.isArray(value) && Object.keys(value).length === 0) empty.push(at);
    for (const [key, inner] of Object.entries(value)) walk(inner, `${at}/${key}`);
  };
  walk(inputSchema('trainThenGenerate', { nexus: true }), '');
  expect(empty.filter((at) => !/\/additionalProperties$/.test(at))).toEqual([
    // lora_scale outside a tune create's prompts_attributes: never allowed ({ not: {} }).
    '/$defs/promptAttributes/properties/lora_scale/not',
  ]);
});

test('options may be null, as no options; a URL is held to the scheme and a host, not to RFC 3986', () => {
  const job = (input: object): ContractJob => ({ workflow: 'generate', input: { tuneId: 7, ...input } });
  const nullOptions = job({ prompts: [{ text: 'x' }], options: null });
  expect([schemaVerdict(nullOptions), contractVerdict(nullOptions)]).toEqual(['ok', 'ok']);
  const spaced = job({ prompts: [{ text: 'x', controlnet: 'pose', input_image_url: 'https://example.com/a b.jpg' }] });
  expect([schemaVerdict(spaced), contractVerdict(spaced)]).toEqual(['ok', 'ok']);
  expect(JSON.stringify(inputSchema('generate'))).not.toContain('"format"');
});

test('image URLs: the schema takes what WHATWG URL takes as http(s), but for a tab inside the scheme', () => {
  const job = (url: string): ContractJob => ({
    workflow: 'trainThenGenerate',
    input: { tune: { name: 'dog', image_urls: [url] }, prompts: [] },
  });
  const urls = [
    'https://example.com/1.jpg',
    'HTTP://EXAMPLE.COM/1.jpg',
    'http:example.com/1.jpg',
    ' https://example.com/1.jpg',
    'https:\\\\example.com\\1.jpg',
    'http:///example.com/1.jpg',
    'https://example.com/a b.jpg',
    'http://',
    'http://?x',
    'ftp://example.com/1.jpg',
    'example.com/1.jpg',
    'https//example.com/1.jpg',
  ];
  for (const url of urls)
    expect({ url, schema: schemaVerdict(job(url)) }).toEqual({ url, schema: contractVerdict(job(url)) });
  // A space in the host: the pattern lets it through, the workflow refuses it (its parse fails).
  expect(schemaVerdict(job('https://exa mple.com/1.jpg'))).toBe('ok');
  expect(contractVerdict(job('https://exa mple.com/1.jpg'))).toEqual(['tune.image_urls[0]']);
  // A tab inside the scheme: WHATWG strips it, the pattern refuses.
  expect(schemaVerdict(job('ht\ttps://example.com/1.jpg'))).toEqual(['tune.image_urls[0]']);
  expect(contractVerdict(job('ht\ttps://example.com/1.jpg'))).toBe('ok');
});

test('durations: the schema takes what the workflow takes as a positive duration', () => {
  // Polls a day apart and up to centuries: no duration here makes a wait poll more than the bound allows.
  const job = (promptTimeout: unknown): ContractJob => ({
    workflow: 'generate',
    input: {
      tuneId: 7,
      prompts: [{ text: 'x' }],
      options: { pollInterval: '1 day', maxPollInterval: '1000 years', promptTimeout },
    },
  });
  const durations = ['90 seconds', '2s', '1.5 hours', '.5h', '0.5 H', '10', '007ms', '1 Minute', '2  days', '3y'];
  const refused = [
    '0',
    '0.0 s',
    '00',
    '-5s',
    '1.',
    '.',
    's',
    '1 fortnight',
    '1e3',
    ' 2s',
    '2s ',
    '1,5h',
    'x'.repeat(101),
  ];
  for (const value of [...durations, ...refused, 2500, 0.5, 0, -1]) {
    const verdicts = { schema: schemaVerdict(job(value)), contract: contractVerdict(job(value)) };
    expect({ value, ...verdicts }).toEqual({ value, schema: verdicts.contract, contract: verdicts.contract });
  }
  for (const value of durations)
    expect({ value, verdict: contractVerdict(job(value)) }).toEqual({ value, verdict: 'ok' });
  for (const value of refused)
    expect({ value, verdict: contractVerdict(job(value)) }).toEqual({ value, verdict: ['options.promptTimeout'] });
});

/** Strings each pattern is tried on in every engine: URLs as users write them, blanks, digits of other scripts. */
const PROBES = [
  'https://example.com/a.png',
  'http://127.0.0.1:8080/images/training-1.png',
  'HTTPS://EXAMPLE.COM',
  ' https://example.com',
  'http:example.com',
  'http:\\\\example.com',
  'ftp://example.com',
  'not-a-url',
  '',
  ' ',
  'order-1',
  '42',
  '\u0664\u0662',
  '1.5',
  'sks dog\non a beach',
  '\u00a0',
  '\u3000\ufeff',
  '\u200b',
  '\t\v',
  '90 seconds',
  '2s',
  '1.5 Hours',
  '0',
  ' 2s',
];

test('every pattern compiles in RE2 (Go) and Python and matches as in ECMA-262: no lookaround, no \\u escapes', () => {
  const patterns = [
    ...new Set(
      [
        ...JSON.stringify(inputSchema('trainThenGenerate', { nexus: true })).matchAll(/"pattern":"((?:[^"\\]|\\.)*)"/g),
      ].map((m) => JSON.parse(`"${m[1]}"`) as string),
    ),
  ];
  expect(patterns.length).toBeGreaterThanOrEqual(3);
  for (const pattern of patterns)
    expect({ pattern, portable: !/\(\?[=!<]|\\u/.test(pattern) }).toEqual({ pattern, portable: true });

  // JSON Schema's `pattern` is a search, not a full match: re.search in Python, MatchString in Go, test in JS.
  const ecma = patterns.map((pattern) => PROBES.map((probe) => new RegExp(pattern, 'u').test(probe)));
  const engines = path.join(__dirname, 'pattern-engines');
  const input = JSON.stringify({ patterns, probes: PROBES });
  const python = execFileSync('python3', [path.join(engines, 'match.py')], { input, encoding: 'utf8' });
  expect(JSON.parse(python)).toEqual(ecma);
  const go = execFileSync('go', ['run', path.join(engines, 'match.go')], {
    input,
    encoding: 'utf8',
    env: { ...process.env, GO111MODULE: 'off', GOFLAGS: '' },
  });
  expect(JSON.parse(go)).toEqual(ecma);
}, 120_000);

test("a Nexus operation's input is the workflow's and a business key", () => {
  const job: ContractJob = { workflow: 'generate', input: { tuneId: 7, prompts: [{ text: 'x' }] } };
  expect(schemaVerdict(job, true)).toEqual(['key']);
  expect(schemaVerdict({ ...job, input: { ...(job.input as object), key: '' } }, true)).toEqual(['key']);
  expect(schemaVerdict({ ...job, input: { ...(job.input as object), key: 'order-1' } }, true)).toBe('ok');
});

describe('tuneflow schema', () => {
  const run = async (argv: string[]) => {
    let stdout = '';
    let stderr = '';
    const io = {
      stdout: { write: (s: string) => ((stdout += s), true) } as NodeJS.WritableStream,
      stderr: { write: (s: string) => ((stderr += s), true) } as NodeJS.WritableStream,
      env: {},
    };
    return { code: await schemaCommand(argv, io), stdout, stderr };
  };

  test("prints a workflow's input schema, or its Nexus operation's", async () => {
    expect(JSON.parse((await run(['packTune'])).stdout)).toEqual(inputSchema('packTune'));
    expect(JSON.parse((await run(['generate', '--nexus'])).stdout)).toEqual(inputSchema('generate', { nexus: true }));
  });

  test('--out writes every schema, as the build ships them in lib/schemas/', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-schemas-'));
    try {
      expect((await run(['--out', dir])).code).toBe(0);
      for (const { file, workflow, nexus } of schemaFiles(dir))
        expect(JSON.parse(fs.readFileSync(file, 'utf8'))).toEqual(inputSchema(workflow, { nexus }));
      expect(fs.readdirSync(dir).sort()).toEqual(['generate.json', 'nexus', 'packTune.json', 'trainThenGenerate.json']);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('an unknown workflow, none, or two are usage errors (exit 2) that name the known ones', async () => {
    for (const argv of [['tuneFlow'], [], ['generate', 'packTune'], ['--out', '/tmp/x', 'generate']]) {
      const { code, stderr } = await run(argv);
      expect({ argv, code }).toEqual({ argv, code: 2 });
      // One line, and where the usage is: not the whole usage.
      expect(stderr).toMatch(/^tuneflow schema: [^\n]+ \(see tuneflow schema --help\)\n$/);
    }
    expect((await run(['tuneFlow'])).stderr).toContain('known: trainThenGenerate, generate, packTune');
  });
});
