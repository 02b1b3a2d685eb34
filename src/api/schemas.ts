/**
 * zod schemas for everything the service returns (tolerant: unknown fields pass through) and for every input
 * (strict: every rule of spec sections 4 and 8, checked before a request is sent). The mock service validates
 * requests with these same schemas, so the client and the mock can never disagree on a rule.
 */
import { z } from 'zod';

// ---------------------------------------------------------------------------------------------------------------
// Enumerations (spec 4.1, 4.5)

export const Branch = { flux1: 'flux1', sd15: 'sd15', sdxl1: 'sdxl1', fast: 'fast' } as const;
export type Branch = (typeof Branch)[keyof typeof Branch];

export const ModelType = { lora: 'lora', pti: 'pti', faceid: 'faceid' } as const;
export type ModelType = (typeof ModelType)[keyof typeof ModelType];

export const PRESETS = ['flux-lora-focus', 'flux-lora-portrait', 'flux-lora-fast'] as const;
export const SCHEDULERS = [
  'euler',
  'euler_a',
  'dpm++2m_karras',
  'dpm++sde_karras',
  'dpm++2m',
  'dpm++sde',
  'lcm',
  'tcd',
] as const;
export const STYLES = [
  'Cinematic',
  'Animated',
  'Digital Art',
  'Photographic',
  'Fantasy art',
  'Neonpunk',
  'Enhance',
  'Comic book',
  'Lowpoly',
  'Line art',
] as const;
export const COLOR_GRADINGS = ['Film Velvia', 'Film Portra', 'Ektar'] as const;
export const CONTROLNETS = [
  'composition',
  'reference',
  'segroom',
  'ipadapter',
  'lineart',
  'canny',
  'depth',
  'mlsd',
  'hed',
  'pose',
  'tile',
  'qr',
] as const;

/** Limits of spec section 8. */
export const LIMITS = {
  listLimitMax: 120,
  listLimitDefault: 20,
  tuneOffsetMax: 200,
  promptOffsetMax: 10_000,
  numImagesMax: 8,
  cfgScaleMax: 15,
  promptStepsMax: 50,
  seedMax: 2 ** 32,
  /** The service answers 504 after this long. */
  requestTimeoutMs: 30_000,
} as const;

// ---------------------------------------------------------------------------------------------------------------
// Building blocks with messages that name the rule (the path names the field)

const oneOf = <T extends readonly [string, ...string[]]>(values: T) =>
  z.enum(values, { error: `must be one of ${values.map((v) => JSON.stringify(v)).join(', ')}` });

const int = (min: number, max?: number) => {
  const rule = max === undefined ? `an integer of at least ${min}` : `an integer from ${min} to ${max}`;
  let s = z
    .number({ error: `must be ${rule}` })
    .int({ error: `must be ${rule}` })
    .min(min, { error: `must be ${rule}` });
  if (max !== undefined) s = s.max(max, { error: `must be ${rule}` });
  return s;
};

const range = (min: number, max: number) => {
  const rule = `must be a number from ${min} to ${max}`;
  return z.number({ error: rule }).min(min, { error: rule }).max(max, { error: rule });
};

const multipleOf8 = z
  .number({ error: 'must be a positive integer multiple of 8' })
  .int({ error: 'must be a positive integer multiple of 8' })
  .positive({ error: 'must be a positive integer multiple of 8' })
  .multipleOf(8, { error: 'must be a positive integer multiple of 8' });

const bool = z.boolean({ error: 'must be true or false' });
const text = z.string({ error: 'must be a string' });
/** A non-empty string, once trimmed. */
export const required = z.string({ error: 'is required and must be a non-empty string' }).trim().min(1, {
  error: 'is required and must be a non-empty string',
});
/**
 * A refinement, not `z.url({ protocol })`: zod's own regex and format checks reset their RegExp's `lastIndex`, which
 * throws on the deep-frozen copy a worker shares between runs (the input contract is preloaded once per worker).
 */
export const httpUrl = z
  .string({ error: 'must be an http(s) URL' })
  .refine(isHttpUrl, { error: 'must be an http(s) URL' });

function isHttpUrl(value: string): boolean {
  try {
    const { protocol } = new URL(value);
    return protocol === 'http:' || protocol === 'https:';
  } catch {
    return false;
  }
}
const id = int(1);

/**
 * A file to upload: a path the caller's process can read, the bytes, or a Blob.
 * Paths are read at request time, so a workflow input can carry a path and never the bytes.
 */
const fileRule = 'must be a file path, a Buffer or a Blob';
export const FileInput = z.union(
  // Blob checked lazily: the workflow sandbox, where the input contract also runs, has no Blob global.
  [
    z.string().min(1, { error: fileRule }),
    z.instanceof(Uint8Array),
    z.custom<Blob>((value) => typeof Blob !== 'undefined' && value instanceof Blob),
  ],
  { error: fileRule },
);
export type FileInput = z.infer<typeof FileInput>;

// ---------------------------------------------------------------------------------------------------------------
// Objects returned by the service (spec 2, service notes). Liberal: only the fields tuneflow reads are checked, and
// those as the live service renders them; every other field passes through unchanged.

const timestamp = z.string();

/** A decimal as Rails renders it ("3.0", "-12", "1e3"): what the service puts in JSON for numeric columns. */
const NUMERIC_STRING = /^-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$/;

/**
 * A number the service may send as a numeric string (`"cfg_scale": "3.0"`): read as that number. Answer fields
 * tuneflow reads (and `cost_mc`) use it; the compiled answer check takes plain numbers as they are and leaves
 * strings to zod.
 *
 * @example
 * numeric().parse('3.0'); // 3
 * numeric({ int: true }).parse('12'); // 12
 */
export function numeric({ int = false }: { int?: boolean } = {}) {
  const rule = int ? 'must be an integer or a string of one' : 'must be a number or a numeric string';
  const number = int ? z.number({ error: rule }).int({ error: rule }) : z.number({ error: rule });
  // A refinement, not `.regex()`: frozen-safe, as httpUrl above (a non-global RegExp's test() writes nothing).
  const decimal = z.string().refine((value) => NUMERIC_STRING.test(value), { error: rule });
  return z.union([number, decimal.transform(Number).pipe(number)], {
    error: rule,
  });
}

/** `""` where the service usually sends null (an empty Rails column): read as null. */
const emptyAsNull = z.literal('').transform(() => null);

/** An optional answer field that may be null or `""` for null. */
const orNull = <S extends z.ZodType>(schema: S) => z.union([schema, emptyAsNull]).nullish();

const answerId = numeric({ int: true });

/**
 * An answer to a create: the object, or (as the service has answered a prompt create) a one-element array holding
 * it. Either way the object comes out.
 *
 * @example
 * await http.request('POST', '/tunes/1/prompts', created(Prompt), body);
 */
export function created<S extends z.ZodType>(schema: S) {
  return z.union([schema, z.tuple([schema]).transform(([object]) => object)]);
}

/**
 * The issues of a refused answer, each union's replaced by those of its first option: for created(...), what is
 * wrong with the object, not that it is no one-element array either.
 *
 * @example
 * answerIssues(created(Prompt).safeParse({ id: 1 }).error!)[0].path; // ['tune_id']
 */
export function answerIssues(error: z.ZodError): z.core.$ZodIssue[] {
  const flatten = (issue: z.core.$ZodIssue, prefix: PropertyKey[]): z.core.$ZodIssue[] => {
    const path = [...prefix, ...issue.path];
    if (issue.code === 'invalid_union' && issue.errors[0]?.length)
      return issue.errors[0].flatMap((inner) => flatten(inner, path));
    return [{ ...issue, path }];
  };
  return error.issues.flatMap((issue) => flatten(issue, []));
}

/**
 * A tune. Checked: what tuneflow reads (ids, kind, title, training times, `cost_mc`). Passed through unchanged:
 * everything else (`token`, `steps`, `args`, `ckpt_url(s)`, `orig_images`, `face_crop`, ...).
 */
export const Tune = z.looseObject({
  id: answerId,
  title: z.string().nullish(),
  name: z.string().nullish(),
  base_tune_id: orNull(answerId),
  eta: timestamp.nullish(),
  trained_at: timestamp.nullish(),
  started_training_at: timestamp.nullish(),
  expires_at: timestamp.nullish(),
  created_at: timestamp.nullish(),
  branch: z.string().nullish(),
  model_type: z.string().nullish(),
  callback: z.string().nullish(),
  /** What the tune cost, in millicents (service notes); a job's cost is read from it. */
  cost_mc: orNull(numeric()),
});
export type Tune = z.infer<typeof Tune>;

/**
 * A prompt. Checked: what tuneflow reads (ids, `images`, `user_error`, times, `cost_mc`). Passed through unchanged:
 * everything else, as the service renders it (`"cfg_scale": "3.0"`, `seed`, `steps`, `aspect_ratio`, ...).
 */
export const Prompt = z.looseObject({
  id: answerId,
  tune_id: answerId,
  callback: z.string().nullish(),
  text: z.string(),
  trained_at: timestamp.nullish(),
  started_training_at: timestamp.nullish(),
  created_at: timestamp.nullish(),
  /** Generated image URLs; present once the prompt has run (service notes). */
  images: orNull(z.array(z.string())),
  /** A failed generation: terminal, like `images`. */
  user_error: z.string().nullish(),
  /** What the prompt cost, in millicents (service notes); a job's cost is read from it. */
  cost_mc: orNull(numeric()),
});
export type Prompt = z.infer<typeof Prompt>;

export const Pack = z.looseObject({
  id: answerId,
  base_tune_id: orNull(answerId),
  slug: z.string().nullish(),
  title: z.string().nullish(),
  token: z.string().nullish(),
  multiplier: orNull(numeric()),
  model_type: z.string().nullish(),
  public_at: timestamp.nullish(),
  /** Supported classes are its keys; values are millicents. */
  cost_mc_hash: z.record(z.string(), numeric()).nullish(),
});
export type Pack = z.infer<typeof Pack>;

export const PackDetail = Pack.extend({
  cover_url: z.string().nullish(),
  costs: z.record(z.string(), z.looseObject({ cost: orNull(numeric()), num_images: orNull(numeric()) })).nullish(),
  prompts_per_class: z.record(z.string(), z.array(z.looseObject({}))).nullish(),
});
export type PackDetail = z.infer<typeof PackDetail>;

/** Image inspection result: characteristics and quality flags (service notes). */
export const InspectionResult = z.looseObject({
  age: z.union([z.string(), z.number()]).nullish(),
  ethnicity: z.string().nullish(),
  eye_color: z.string().nullish(),
  blurry: z.boolean().nullish(),
  selfie: z.boolean().nullish(),
  low_resolution: z.boolean().nullish(),
  low_quality: z.boolean().nullish(),
  includes_multiple_people: z.boolean().nullish(),
  wearing_sunglasses: z.boolean().nullish(),
  funny_face: z.boolean().nullish(),
});
export type InspectionResult = z.infer<typeof InspectionResult>;

export const DeleteResult = z.looseObject({ message: z.string().optional() });
export type DeleteResult = z.infer<typeof DeleteResult>;

/** `POST /themes` creates 10 prompts per tune; its answer is not documented, so anything is accepted. */
export const ThemeResult = z.unknown();

/** A settled prompt has images or a user_error: both are terminal (service notes). */
export function isPromptSettled(prompt: Pick<Prompt, 'images' | 'user_error'>): boolean {
  return (prompt.images?.length ?? 0) > 0 || !!prompt.user_error;
}

/** A tune is trained when `trained_at` is set; no field marks a failed tune (service notes). */
export function isTuneTrained(tune: Pick<Tune, 'trained_at'>): boolean {
  return !!tune.trained_at;
}

// ---------------------------------------------------------------------------------------------------------------
// Inputs (spec 4.1, 4.3, 4.5, 4.7, 4.9, service notes). Strict where the spec lists an attribute: every rule, checked
// before anything is sent. Open elsewhere: an attribute the spec does not list (`aspect_ratio`, `resolution`,
// `workspace_id`, ...) goes to the service unchanged, and the service is the judge (422).

/** Attributes the spec does not list: passed to the service as they are. */
export type OtherAttributes = { [attribute: string]: unknown };

/** The input type of a body: the listed attributes, typed, plus any other ones. */
type Attributes<Shape extends z.ZodRawShape> = z.input<z.ZodObject<Shape>> & OtherAttributes;

const promptAttributeShape = {
  text: required,
  negative_prompt: text.optional(),
  callback: httpUrl.optional(),
  num_images: int(1, LIMITS.numImagesMax).optional(),
  seed: int(0, LIMITS.seedMax).optional(),
  super_resolution: bool.optional(),
  inpaint_faces: bool.optional(),
  hires_fix: bool.optional(),
  face_correct: bool.optional(),
  face_swap: bool.optional(),
  cfg_scale: range(0, LIMITS.cfgScaleMax).optional(),
  steps: int(0, LIMITS.promptStepsMax).optional(),
  use_lpw: bool.optional(),
  w: multipleOf8.optional(),
  h: multipleOf8.optional(),
  /** Aspect ratio, one of the considered attributes of spec 4.11. */
  ar: text.optional(),
  scheduler: oneOf(SCHEDULERS).optional(),
  backend_version: z.union([z.literal('1'), z.literal(1), z.null()], { error: 'must be null or "1"' }).optional(),
  style: oneOf(STYLES).nullable().optional(),
  color_grading: oneOf(COLOR_GRADINGS).optional(),
  film_grain: bool.optional(),
  controlnet: oneOf(CONTROLNETS).optional(),
  denoising_strength: range(0, 1).optional(),
  controlnet_conditioning_scale: range(0, 1).optional(),
  controlnet_txt2img: bool.optional(),
  input_image: FileInput.optional(),
  input_image_url: httpUrl.optional(),
  mask_image: FileInput.optional(),
  mask_image_url: httpUrl.optional(),
};

type PromptRuleInput = {
  super_resolution?: boolean;
  inpaint_faces?: boolean;
  hires_fix?: boolean;
  controlnet?: string;
  input_image?: unknown;
  input_image_url?: string;
  mask_image?: unknown;
  mask_image_url?: string;
};

/** The cross-field rules of spec 4.5. */
function checkPromptRules(p: PromptRuleInput, ctx: z.RefinementCtx): void {
  const issue = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
  if (p.inpaint_faces && p.super_resolution !== true) issue('inpaint_faces', 'requires super_resolution to be true');
  if (p.hires_fix && p.super_resolution !== true) issue('hires_fix', 'requires super_resolution to be true');
  const hasInput = p.input_image !== undefined || p.input_image_url !== undefined;
  if (p.controlnet !== undefined && !hasInput)
    issue('controlnet', 'requires an input image (input_image or input_image_url)');
  if (p.input_image !== undefined && p.input_image_url !== undefined)
    issue('input_image_url', 'give input_image or input_image_url, not both');
  if (p.mask_image !== undefined && p.input_image === undefined)
    issue('mask_image', 'requires input_image (a mask applies to an input image)');
  if (p.mask_image_url !== undefined && p.input_image_url === undefined)
    issue('mask_image_url', 'requires input_image_url (a mask applies to an input image)');
}

const loraScaleOutside = {
  lora_scale: z.never({ error: 'is allowed only inside prompts_attributes of a tune create (spec 4.5)' }).optional(),
};

const promptCreateShape = { ...promptAttributeShape, ...loraScaleOutside };
/** `POST /tunes/:id/prompts` body attributes (spec 4.5). */
export const PromptCreateInput = z.looseObject(promptCreateShape).superRefine(checkPromptRules);
export type PromptCreateInput = Attributes<typeof promptCreateShape>;
/** The attributes of spec 4.5 alone. */
export type PromptCreateAttributes = z.input<z.ZodObject<typeof promptCreateShape>>;

const promptAttributesShape = {
  ...promptAttributeShape,
  lora_scale: z.number({ error: 'must be a number' }).optional(),
};
/** A prompt inside `prompts_attributes` of a tune create: may carry `lora_scale`. */
export const PromptAttributesInput = z.looseObject(promptAttributesShape).superRefine(checkPromptRules);
export type PromptAttributesInput = Attributes<typeof promptAttributesShape>;

type ImagesRuleInput = { images?: unknown[]; image_urls?: unknown[] };
function checkExactlyOneImageSource(t: ImagesRuleInput, ctx: z.RefinementCtx): void {
  const hasFiles = t.images !== undefined;
  const hasUrls = t.image_urls !== undefined;
  if (hasFiles === hasUrls)
    ctx.addIssue({
      code: 'custom',
      path: [hasFiles ? 'image_urls' : 'images'],
      message: 'exactly one of images or image_urls is required',
    });
}

const branch = oneOf(['flux1', 'sd15', 'sdxl1', 'fast']);
const images = z
  .array(FileInput, { error: 'must be an array of files' })
  .min(1, { error: 'must hold at least one image' });
const imageUrls = z
  .array(httpUrl, { error: 'must be an array of URLs' })
  .min(1, { error: 'must hold at least one URL' });
const characteristicsObject = z.record(
  z.string(),
  z.union([z.string(), z.number(), z.boolean()], { error: 'must be a string, a number or a boolean' }),
  { error: 'must be an object of strings' },
);
const characteristicsRule = 'must be an object of strings, or that object as a JSON string';
/**
 * Free-form values for `{{key}}` placeholders: an object, or (as multipart clients send it) that object as a JSON
 * string, sent as given.
 */
const characteristics = z.union(
  [
    characteristicsObject,
    z.string().refine((json) => readCharacteristics(json) !== undefined, { error: characteristicsRule }),
  ],
  { error: characteristicsRule },
);

/**
 * The characteristics an input carries, whichever form it took; undefined when they are no object of scalars.
 *
 * @example
 * readCharacteristics('{"eye_color":"blue eyes"}'); // { eye_color: 'blue eyes' }
 */
export function readCharacteristics(value: unknown): Record<string, string | number | boolean> | undefined {
  let object = value;
  if (typeof value === 'string') {
    try {
      object = JSON.parse(value);
    } catch {
      return undefined;
    }
  }
  const result = characteristicsObject.safeParse(object, { jitless: true });
  return result.success ? result.data : undefined;
}

const tuneCreateShape = {
  name: required,
  title: required,
  images: images.optional(),
  image_urls: imageUrls.optional(),
  callback: httpUrl.optional(),
  branch: branch.optional(),
  steps: int(1).optional(),
  token: required.optional(),
  face_crop: bool.optional(),
  training_face_correct: bool.optional(),
  base_tune_id: id.optional(),
  model_type: oneOf(['lora', 'pti', 'faceid']).nullable().optional(),
  auto_extend: bool.optional(),
  preset: oneOf(PRESETS).nullable().optional(),
  characteristics: characteristics.optional(),
  prompts_attributes: z.array(PromptAttributesInput, { error: 'must be an array of prompt attributes' }).optional(),
};
/** `POST /tunes` body attributes (spec 4.1). */
export const TuneCreateInput = z.looseObject(tuneCreateShape).superRefine((t, ctx) => {
  checkExactlyOneImageSource(t, ctx);
  if (t.preset != null && t.model_type !== 'lora')
    ctx.addIssue({
      code: 'custom',
      path: ['preset'],
      message: 'is a Flux LoRA preset: it requires model_type "lora"',
    });
});
export type TuneCreateInput = Attributes<typeof tuneCreateShape>;
/** The attributes of spec 4.1 alone. */
export type TuneCreateAttributes = z.input<z.ZodObject<typeof tuneCreateShape>>;

const packTuneCreateShape = {
  name: required.optional(),
  title: required.optional(),
  images: images.optional(),
  image_urls: imageUrls.optional(),
  callback: httpUrl.optional(),
  characteristics: characteristics.optional(),
  prompt_attributes: z.looseObject({ callback: httpUrl.optional() }).optional(),
  prompts_callback: httpUrl.optional(),
  /** Reuse existing tunes: only the pack's prompts are created for them. */
  tune_ids: z
    .array(id, { error: 'must be an array of tune ids' })
    .min(1, { error: 'must hold at least one id' })
    .optional(),
  /** Run a subset of the pack's prompts. */
  prompt_ids: z.array(id, { error: 'must be an array of prompt ids' }).optional(),
  /** The service's own example app makes pack tunes in `fast` (free mock) mode; same values as a tune's. */
  branch: branch.optional(),
  /** A training preset; the pack's own when unset. */
  preset: z.string({ error: 'must be a string' }).nullable().optional(),
};
/** `POST /p/:pack_id/tunes` body attributes (spec 4.9, service notes). */
export const PackTuneCreateInput = z.looseObject(packTuneCreateShape).superRefine((t, ctx) => {
  if (t.tune_ids !== undefined) {
    if (t.images !== undefined || t.image_urls !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['tune_ids'],
        message: 'replaces images and image_urls: give one or the other',
      });
    return;
  }
  for (const key of ['name', 'title'] as const)
    if (t[key] === undefined)
      ctx.addIssue({ code: 'custom', path: [key], message: 'is required and must be a non-empty string' });
  checkExactlyOneImageSource(t, ctx);
});
export type PackTuneCreateInput = Attributes<typeof packTuneCreateShape>;
/** The attributes of spec 4.9 (and the service notes) alone. */
export type PackTuneCreateAttributes = z.input<z.ZodObject<typeof packTuneCreateShape>>;

const listShape = (offsetMax: number) => ({
  before_id: id.optional(),
  limit: int(1, LIMITS.listLimitMax).optional(),
  offset: int(0, offsetMax).optional(),
});

/**
 * `GET /tunes` parameters (spec 4.3), and `title`: only tunes with exactly that title (the service's MCP server finds
 * tunes so; a service that ignores it lists all).
 */
export const TuneListParams = z.strictObject({ ...listShape(LIMITS.tuneOffsetMax), title: text.optional() });
export type TuneListParams = z.input<typeof TuneListParams>;

/** `GET /tunes/:id/prompts` and `GET /prompts` parameters (spec 4.7). */
export const PromptListParams = z.strictObject(listShape(LIMITS.promptOffsetMax));
export type PromptListParams = z.input<typeof PromptListParams>;

/** `GET /packs` parameters. */
export const PackListParams = z.strictObject({ public: bool.optional(), listed: bool.optional() });
export type PackListParams = z.input<typeof PackListParams>;

/** `POST /images/inspect` (service notes): a class name and one image. */
export const ImageInspectInput = z
  .strictObject({ name: required, file: FileInput.optional(), file_url: httpUrl.optional() })
  .superRefine((t, ctx) => {
    if ((t.file === undefined) === (t.file_url === undefined))
      ctx.addIssue({ code: 'custom', path: ['file'], message: 'exactly one of file or file_url is required' });
  });
export type ImageInspectInput = z.input<typeof ImageInspectInput>;

/** `POST /themes` (service notes): 10 prompts per tune on a theme. */
export const ThemeCreateInput = z.strictObject({
  theme: required,
  tune_ids: z.array(id, { error: 'must be an array of tune ids' }).min(1, { error: 'must hold at least one id' }),
  prompt_attributes: z
    .strictObject({
      num_images: int(1, LIMITS.numImagesMax).optional(),
      w: multipleOf8.optional(),
      h: multipleOf8.optional(),
    })
    .optional(),
});
export type ThemeCreateInput = z.input<typeof ThemeCreateInput>;

/** An id in a path: a positive integer. */
export const ResourceId = id;

/**
 * The attributes the service compares for prompt idempotency (spec 4.11). The activities use them to find a
 * prompt an earlier attempt may have created; the mock uses them to honour the account setting.
 */
export const PROMPT_CONSIDERED_ATTRIBUTES = [
  'text',
  'tune_id',
  'cfg_scale',
  'steps',
  'seed',
  'callback',
  'negative_prompt',
  'super_resolution',
  'face_correct',
  'ar',
  'num_images',
  'controlnet',
  'denoising_strength',
  'use_lpw',
  'controlnet_conditioning_scale',
  'w',
  'h',
  'hires_fix',
  'scheduler',
  'controlnet_txt2img',
  'inpaint_faces',
] as const;
