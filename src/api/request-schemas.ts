/**
 * zod schemas for every input (strict: every rule of spec sections 4 and 8, checked before a request is sent). The
 * mock service validates requests with these same schemas, so the client and the mock can never disagree on a rule.
 */
import { z } from 'zod';
import {
  bool,
  COLOR_GRADINGS,
  CONTROLNETS,
  FileInput,
  httpUrl,
  id,
  int,
  LIMITS,
  multipleOf8,
  oneOf,
  PRESETS,
  range,
  required,
  SCHEDULERS,
  STYLES,
  text,
} from './rules';

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
