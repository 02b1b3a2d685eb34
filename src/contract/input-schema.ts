/**
 * The workflows' input contract as JSON Schema (draft 2020-12), for callers in any language: generated from the one
 * contract (the spec's zod schemas in src/api/schemas.ts, the option rules and bounds of src/workflows), never written
 * twice. What zod cannot render is said here, once: refinements (an http(s) URL, a non-blank string, files as paths)
 * and the cross-field rules (as if/then, each naming the field the workflow names). Three rules no JSON Schema can
 * hold are left to the workflow and said in the schema's descriptions: the polls bound of the options, characteristics
 * sent as a JSON string, and the whole input's size in bytes. `tuneflow schema` prints these; the package ships them
 * (lib/schemas/).
 */
import { z } from 'zod';
import {
  FileInput,
  httpUrl,
  PackTuneCreateInput,
  PromptAttributesInput,
  PromptCreateInput,
  required,
  ResourceId,
  TuneCreateInput,
} from '../api/schemas';
import { attributesMax, INPUT_BOUNDS, PROTOTYPE_NAMES, UPLOAD_PATH_SCHEMA, type AttributeKinds } from './bounds';
import { businessKey, PACK_TUNE_KINDS, PROMPT_KINDS, TUNE_KINDS } from './check';
import { RESERVED_KEY_PREFIX } from './keys';
import { MAX_PROMPTS_PER_RUN } from './failures';
import { DEFAULT_OPTIONS, MAX_POLLS_PER_WAIT, MAX_PROMPT_CONCURRENCY } from './options';
import { INSPECTION_FLAGS } from './inspection';
import { JOBS, WORKFLOW_NAMES, type JsonSchema, type SchemaParts, type WorkflowName } from './jobs';

export type { JsonSchema };

/** Paths only: image bytes never enter a workflow's input (a JSON caller has no bytes to send anyway). */
const PATH: JsonSchema = { type: 'string', minLength: 1, description: 'a path the worker can read' };

/**
 * The URL parse the contract makes (WHATWG's, as Node's `URL`), as far as a pattern goes: leading blanks or controls
 * (stripped), http or https in any case, any slashes or backslashes, then a host. No `format: "uri"`: RFC 3986 refuses
 * URLs WHATWG takes (a space in a path). One difference is left: a tab or newline inside the scheme, which WHATWG
 * strips, the pattern refuses. A URL the pattern lets through and WHATWG cannot parse (a space in the host), the
 * workflow refuses, naming the field.
 */
const HTTP_URL = {
  pattern: String.raw`^[\x00-\x20]*[Hh][Tt][Tt][Pp][Ss]?:[/\\]*[^/\\?#\s]`,
  description: 'an http(s) URL (as WHATWG URL parses it: the workflow refuses one it cannot parse)',
};

/** `ms`'s units (src/duration.ts), case-insensitive as `ms` reads them. */
const DURATION_UNITS = [
  ...['milliseconds', 'millisecond', 'msecs', 'msec', 'ms', 'seconds', 'second', 'secs', 'sec', 's'],
  ...['minutes', 'minute', 'mins', 'min', 'm', 'hours', 'hour', 'hrs', 'hr', 'h', 'days', 'day', 'd'],
  ...['weeks', 'week', 'w', 'years', 'year', 'yrs', 'yr', 'y'],
];
const anyCase = (word: string) => [...word].map((c) => `[${c.toLowerCase()}${c.toUpperCase()}]`).join('');
/**
 * `ms`'s number (digits, a dot, digits: `(?:\d+)?\.?\d+`) with a digit 1-9 somewhere (not zero) and no sign (not
 * negative). No lookaround and ASCII digits: the patterns compile in RE2 (Go) and Python as in ECMA-262.
 */
const POSITIVE_DECIMAL = String.raw`(?:[0-9]*[1-9][0-9]*(?:\.[0-9]+)?|[0-9]*\.[0-9]*[1-9][0-9]*)`;
/** A positive duration: '90 seconds', '2s', '1.5 hours' (a digit 1-9 somewhere: not zero; no sign: not negative). */
const DURATION: JsonSchema = {
  anyOf: [
    { type: 'number', exclusiveMinimum: 0, description: 'milliseconds' },
    {
      type: 'string',
      maxLength: 100,
      pattern: `^${POSITIVE_DECIMAL} *(?:${DURATION_UNITS.map(anyCase).join('|')})?$`,
    },
  ],
};

const absent = false;
const isTrue = { required: [] as string[], properties: {} as Record<string, unknown> };
/** `if` for "this property is present and true". */
const holds = (property: string) => ({ ...isTrue, required: [property], properties: { [property]: { const: true } } });
const present = (...properties: string[]) => ({ anyOf: properties.map((p) => ({ required: [p] })) });

/**
 * The cross-field rules of spec 4.5 (checkPromptRules in src/api/schemas.ts), each failing on the field the workflow
 * names: `then` forbids or constrains that field.
 */
const PROMPT_RULES: JsonSchema[] = [
  { if: { not: holds('super_resolution') }, then: { properties: { inpaint_faces: { const: false } } } },
  { if: { not: holds('super_resolution') }, then: { properties: { hires_fix: { const: false } } } },
  { if: { not: present('input_image', 'input_image_url') }, then: { properties: { controlnet: absent } } },
  { if: { required: ['input_image'] }, then: { properties: { input_image_url: absent } } },
  { if: { not: { required: ['input_image'] } }, then: { properties: { mask_image: absent } } },
  { if: { not: { required: ['input_image_url'] } }, then: { properties: { mask_image_url: absent } } },
];

/** Exactly one of images and image_urls: both name image_urls, neither names images (as the workflow does). */
const ONE_IMAGE_SOURCE: JsonSchema[] = [
  { if: { required: ['images'] }, then: { properties: { image_urls: absent } } },
  { if: { not: { required: ['image_urls'] } }, then: { required: ['images'] } },
];

const TUNE_RULES: JsonSchema[] = [
  ...ONE_IMAGE_SOURCE,
  // A Flux LoRA preset needs model_type "lora".
  {
    if: { not: { required: ['model_type'], properties: { model_type: { const: 'lora' } } } },
    then: { properties: { preset: { type: 'null' } } },
  },
];

/** Existing tunes (tune_ids) replace the images; a new tune needs a name and one image source. */
const PACK_TUNE_RULES: JsonSchema[] = [
  {
    if: { required: ['tune_ids'] },
    then: { if: present('images', 'image_urls'), then: { properties: { tune_ids: absent } } },
    else: { required: ['name'], allOf: ONE_IMAGE_SOURCE },
  },
];

/**
 * A character String.prototype.trim keeps, as every engine reads it: `\\S` is ASCII-only in RE2 (Go), where a
 * no-break space would pass, so JavaScript's blanks are listed (as characters: `\\u` escapes are not portable).
 */
const NOT_BLANK = '[^\\t\\n\\v\\f\\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]';

/** The zod schemas' JSON Schema, with what zod renders as "anything" or leaves out said here. */
function fromContract(schema: z.ZodType): JsonSchema {
  return z.toJSONSchema(schema, {
    io: 'input',
    unrepresentable: 'any',
    override: ({ zodSchema, jsonSchema }) => {
      const out = jsonSchema as JsonSchema;
      if (zodSchema === FileInput) {
        for (const key of Object.keys(out)) delete out[key];
        Object.assign(out, PATH);
      }
      if (zodSchema === httpUrl) Object.assign(out, HTTP_URL);
      // Trimmed, then at least one character: something other than blanks.
      if (zodSchema === required) Object.assign(out, { pattern: NOT_BLANK });
      if (zodSchema === PromptCreateInput || zodSchema === PromptAttributesInput) out.allOf = PROMPT_RULES;
      if (zodSchema === TuneCreateInput) out.allOf = TUNE_RULES;
      if (zodSchema === PackTuneCreateInput) out.allOf = PACK_TUNE_RULES;
    },
  }) as JsonSchema;
}

/** A scalar attribute the spec does not list: sent to the service as it is. */
const OTHER_SCALAR: JsonSchema = {
  anyOf: [
    { type: 'string', maxLength: INPUT_BOUNDS.stringMax },
    { type: 'number' },
    { type: 'boolean' },
    { type: 'null' },
  ],
};

/** No attribute named as a property every JavaScript object has (`__proto__`, `toString`, ...). */
const NOT_PROTOTYPE_NAME: JsonSchema = {
  not: { enum: [...PROTOTYPE_NAMES] },
  description: 'not the name of a property every JavaScript object has (Object.prototype)',
};

/** A key of characteristics or prompt_attributes. */
const KEY: JsonSchema = { maxLength: INPUT_BOUNDS.keyMax, ...NOT_PROTOTYPE_NAME };

/**
 * The bounds of src/contract/bounds.ts on an object's attributes: lengths, counts, upload paths, the attributes the
 * spec does not list as scalars, no attribute named as a property every object has, and those a job may not send.
 */
function bounded(kinds: AttributeKinds, refused: string[] = []) {
  return (s: JsonSchema): void => {
    const properties = s.properties as Record<string, JsonSchema>;
    const maxLength = (p: JsonSchema | undefined, max: number) => {
      if (p?.type === 'string') p.maxLength = max;
      for (const option of (p?.anyOf as JsonSchema[] | undefined) ?? []) maxLength(option, max);
    };
    for (const [key, kind] of Object.entries(kinds)) {
      const p = properties[key];
      if (kind === 'string') maxLength(p, INPUT_BOUNDS.stringMax);
      if (kind === 'text') maxLength(p, INPUT_BOUNDS.promptTextMax);
      if (kind === 'url') maxLength(p, INPUT_BOUNDS.urlMax);
      if (kind === 'path') properties[key] = { ...UPLOAD_PATH_SCHEMA };
      if (kind === 'images') Object.assign(p, { maxItems: INPUT_BOUNDS.imagesMax, items: { ...UPLOAD_PATH_SCHEMA } });
      if (kind === 'urls') {
        p.maxItems = INPUT_BOUNDS.imagesMax;
        maxLength(p.items as JsonSchema, INPUT_BOUNDS.urlMax);
      }
      if (kind === 'ids') p.maxItems = INPUT_BOUNDS.idsMax;
      if (kind === 'other') {
        for (const option of (p.anyOf as JsonSchema[] | undefined) ?? [p]) {
          if (option.type === 'string') option.maxLength = INPUT_BOUNDS.stringMax;
          if (option.type !== 'object') continue;
          Object.assign(option, { maxProperties: INPUT_BOUNDS.characteristicsMax, propertyNames: KEY });
          maxLength(option.additionalProperties as JsonSchema, INPUT_BOUNDS.stringMax);
        }
      }
      if (kind === 'attributes') {
        // A prompt's attributes: each a scalar, the callback a URL.
        maxLength((p.properties as Record<string, JsonSchema>).callback, INPUT_BOUNDS.urlMax);
        Object.assign(p, {
          additionalProperties: OTHER_SCALAR,
          maxProperties: INPUT_BOUNDS.characteristicsMax,
          propertyNames: KEY,
        });
      }
    }
    for (const key of refused) (properties as Record<string, unknown>)[key] = false;
    s.additionalProperties = {
      ...OTHER_SCALAR,
      description: 'an attribute the spec does not list: sent to the service as it is',
    };
    s.maxProperties = attributesMax(kinds);
    s.propertyNames = NOT_PROTOTYPE_NAME;
  };
}

/**
 * A JSON value nesting at most `depth` objects and arrays (`jsonValue0`, a scalar), up to the whole input's depth:
 * the depth bound said as JSON Schema can, by nested definitions. For the fields of a job's input no rule reads.
 */
function nestedValues(): Record<string, JsonSchema> {
  const scalar = { anyOf: ['string', 'number', 'boolean', 'null'].map((type) => ({ type })) };
  const values: Record<string, JsonSchema> = { jsonValue0: scalar };
  for (let depth = 1; depth < INPUT_BOUNDS.depthMax; depth++) {
    const inner = { $ref: `#/$defs/jsonValue${depth - 1}` };
    values[`jsonValue${depth}`] = {
      anyOf: [
        { $ref: '#/$defs/jsonValue0' },
        { type: 'array', items: inner },
        { type: 'object', additionalProperties: inner },
      ],
    };
  }
  return values;
}

/**
 * A job's whole input: its depth (a field no rule reads nests what is left of it) and its size, which only the
 * workflow measures.
 */
function wholeInput(job: JsonSchema): JsonSchema {
  return {
    ...job,
    additionalProperties: { $ref: `#/$defs/jsonValue${INPUT_BOUNDS.depthMax - 1}` },
    description:
      `The whole input nests at most ${INPUT_BOUNDS.depthMax} objects and arrays deep, itself counted. One rule is ` +
      `the workflow's alone: the input is at most ${INPUT_BOUNDS.inputBytesMax} bytes as JSON (UTF-8).`,
  };
}

/** A zod object schema's JSON Schema without the keywords a nested definition does not repeat. */
function definition(schema: z.ZodType, changes: (s: JsonSchema) => void = () => undefined): JsonSchema {
  const out = fromContract(schema);
  delete out.$schema;
  changes(out);
  return out;
}

const withoutRequired = (name: string) => (s: JsonSchema) => {
  s.required = (s.required as string[]).filter((r) => r !== name);
};

/** Characteristics may come as a JSON string (as multipart clients send them): its content is the workflow's to check. */
function characteristicsAsJson(s: JsonSchema): void {
  const characteristics = (s.properties as Record<string, { anyOf: JsonSchema[] }>).characteristics;
  const [object, string] = characteristics.anyOf;
  characteristics.anyOf = [
    object,
    {
      ...string,
      contentMediaType: 'application/json',
      description: 'the same object as a JSON string: its content is checked by the workflow, not by this schema',
    },
  ];
}

function optionsSchema(): JsonSchema {
  return {
    // null, as no options: the workflow takes it so.
    type: ['object', 'null'],
    description:
      `The workflows' options. One rule is the workflow's alone: a wait may make at most ${MAX_POLLS_PER_WAIT} polls ` +
      'at the intervals given (trainingTimeout and promptTimeout against pollInterval and maxPollInterval), and ' +
      'maxPollInterval is at least pollInterval.',
    additionalProperties: false,
    properties: {
      pollInterval: { ...DURATION, default: DEFAULT_OPTIONS.pollInterval },
      maxPollInterval: { ...DURATION, default: DEFAULT_OPTIONS.maxPollInterval },
      trainingTimeout: { ...DURATION, default: DEFAULT_OPTIONS.trainingTimeout },
      promptTimeout: { ...DURATION, default: DEFAULT_OPTIONS.promptTimeout },
      promptConcurrency: {
        type: 'integer',
        minimum: 1,
        maximum: MAX_PROMPT_CONCURRENCY,
        default: DEFAULT_OPTIONS.promptConcurrency,
      },
      cleanupOnCancel: { type: 'boolean', default: DEFAULT_OPTIONS.cleanupOnCancel },
      storeImages: {
        type: ['boolean', 'null'],
        description:
          "Copy each settled prompt's images to the owner's storage (the worker's). false: not this job's; true: " +
          'needed, InvalidOptions on a worker without storage. Default: copied where the worker has storage.',
      },
      maxCostMc: { type: ['integer', 'null'], minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
      tuneCostMc: { type: ['integer', 'null'], minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
      inspect: {
        type: ['object', 'null'],
        description:
          'Inspect every training image (POST /images/inspect) before the tune is created; an image that raises a ' +
          'flag in refuse fails the job InspectionRefused, having created nothing. trainThenGenerate and packTune.',
        additionalProperties: false,
        properties: {
          refuse: {
            type: ['array', 'null'],
            items: { enum: [...INSPECTION_FLAGS] },
            uniqueItems: true,
            maxItems: INSPECTION_FLAGS.length,
            default: [],
          },
        },
      },
    },
  };
}

/** Every definition the workflows' schemas share. */
function definitions(): Record<string, JsonSchema> {
  const prompts = (minItems: number) => ({
    type: 'array',
    minItems,
    maxItems: MAX_PROMPTS_PER_RUN,
    items: { $ref: '#/$defs/promptAttributes' },
  });
  const id = definition(ResourceId);
  const parts: SchemaParts = { ref: (name) => ({ $ref: `#/$defs/${name}` }), prompts, id };
  return {
    // A new tune's title is tuneflow's; its images are paths; tuneflow sets its callback.
    tuneAttributes: definition(TuneCreateInput, (s) => {
      withoutRequired('title')(s);
      characteristicsAsJson(s);
      bounded(TUNE_KINDS, ['prompts_attributes', 'title'])(s);
    }),
    promptAttributes: definition(PromptCreateInput, bounded(PROMPT_KINDS)),
    packTuneAttributes: definition(PackTuneCreateInput, (s) => {
      characteristicsAsJson(s);
      bounded(PACK_TUNE_KINDS, ['title'])(s);
    }),
    options: optionsSchema(),
    ...nestedValues(),
    ...Object.fromEntries(WORKFLOW_NAMES.map((name) => [name, wholeInput(JOBS[name].schema(parts))])),
  };
}

/**
 * The JSON Schema of a workflow's input: what `temporal workflow start --type <workflow> --input` may send. With
 * `nexus`, of the Nexus operation's input: the same, and the business key.
 *
 * @example
 * new Ajv2020().compile(inputSchema('trainThenGenerate'))(JSON.parse(input)); // true when the contract holds
 */
export function inputSchema(workflow: WorkflowName, { nexus = false } = {}): JsonSchema {
  const $defs = definitions();
  const input: JsonSchema = { $ref: `#/$defs/${workflow}` };
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    title: nexus ? `tuneflow ${workflow} operation input` : `tuneflow ${workflow} input`,
    ...(nexus
      ? {
          allOf: [
            input,
            {
              type: 'object',
              required: ['key'],
              properties: {
                key: {
                  ...definition(businessKey),
                  not: { pattern: `^${RESERVED_KEY_PREFIX}` },
                  description:
                    "the job's business key, scoped to the caller's namespace: the same key and input attach to its " +
                    'job, other input under it is refused (KeyInUse)',
                },
              },
            },
          ],
        }
      : input),
    $defs,
  };
}
