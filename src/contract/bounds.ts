/**
 * What a job's input may hold beyond the spec's rules: a bound on every string, list and object a starter sends, and
 * file paths that stay inside the worker's upload directory. The spec gives no string or count limits, so these are
 * tuneflow's, documented in the README and said in the JSON Schema (src/contract/input-schema.ts). Sandbox-safe: pure
 * code over plain values, run by the starters and by the workflow itself, before anything is sent.
 */
import type { InputIssue } from '../api/errors';

/** tuneflow's bounds on a job's input. */
export const INPUT_BOUNDS = {
  /** Any string attribute (a class name, a title, a token, a negative prompt, an attribute the spec does not list). */
  stringMax: 4_096,
  /** A prompt's text: room is left for the `<lora:ID:1>` reference a Flux LoRA's prompts get. */
  promptTextMax: 4_000,
  /** An http(s) URL (an image, an input or mask image). */
  urlMax: 8_192,
  /** A file path inside the upload directory. */
  pathMax: 1_024,
  /** Training images of one tune (`images` or `image_urls`): the service advises 10 to 20. */
  imagesMax: 100,
  /** Ids in `tune_ids` and `prompt_ids`. */
  idsMax: 120,
  /** Keys of `characteristics`. */
  characteristicsMax: 50,
  /** Attributes the spec does not list, per object, beyond those it lists (each a string, a number, a boolean or null). */
  otherAttributesMax: 16,
} as const;

/**
 * A tune's title is tuneflow's: the workflow ID and the run ID, so a retried create adopts only the run's own tune, and
 * the title tells which tenant's job made the tune (src/contract/tenants.ts). A starter's title could name another
 * job's, and take its tune.
 */
const TITLE_REFUSED =
  "is tuneflow's own (the job's workflow ID and run ID, which say whose job made the tune): leave it out";

/** Attributes of a job's input that tuneflow sets itself or takes elsewhere, never from a starter. */
const REFUSED: Record<'tune' | 'packTune', Record<string, string>> = {
  tune: {
    prompts_attributes:
      'is not taken: give the prompts in `prompts`, where they are counted against maxCostMc, bounded, waited for ' +
      'and cleaned up',
    title: TITLE_REFUSED,
  },
  packTune: { title: TITLE_REFUSED },
};

/** The attributes a kind of object lists (the spec's), each with its kind of value. */
export type AttributeKinds = Record<string, 'string' | 'text' | 'url' | 'path' | 'images' | 'urls' | 'ids' | 'other'>;

/**
 * The issues of one tune, pack tune or prompt of a job's input: strings, lists and objects within INPUT_BOUNDS,
 * attributes the spec does not list as scalars, no attribute tuneflow refuses, and file paths that can only name a file
 * inside the upload directory.
 *
 * @example
 * boundIssues('prompts[0]', prompt, PROMPT_ATTRIBUTES); // [{ field: 'prompts[0].text', rule: 'must be at most ...' }]
 */
export function boundIssues(
  subject: string,
  value: Record<string, unknown>,
  kinds: AttributeKinds,
  refused: 'tune' | 'packTune' | 'prompt' = 'prompt',
): InputIssue[] {
  const issues: InputIssue[] = [];
  const rules = refused === 'prompt' ? {} : REFUSED[refused];
  let attributes = 0;
  for (const [key, attribute] of Object.entries(value)) {
    const field = `${subject}.${key}`;
    if (attribute === undefined) continue;
    attributes++;
    if (rules[key]) {
      issues.push({ field, rule: rules[key] });
      continue;
    }
    const kind = kinds[key];
    if (kind === undefined) {
      const issue = otherAttribute(attribute);
      if (issue) issues.push({ field, rule: issue });
      continue;
    }
    issues.push(...valueIssues(field, attribute, kind));
  }
  const most = attributesMax(kinds);
  if (attributes > most)
    issues.push({
      field: subject,
      rule: `must hold at most ${most} attributes: those the spec lists and ${INPUT_BOUNDS.otherAttributesMax} more (it has ${attributes})`,
    });
  return issues;
}

/** The most attributes an object may hold: those the spec lists, and a few it does not (JSON Schema's maxProperties). */
export function attributesMax(kinds: AttributeKinds): number {
  return Object.keys(kinds).length + INPUT_BOUNDS.otherAttributesMax;
}

function valueIssues(field: string, value: unknown, kind: AttributeKinds[string]): InputIssue[] {
  switch (kind) {
    case 'string':
      return longer(field, value, INPUT_BOUNDS.stringMax);
    case 'text':
      return longer(field, value, INPUT_BOUNDS.promptTextMax);
    case 'url':
      return longer(field, value, INPUT_BOUNDS.urlMax);
    case 'path':
      return pathIssues(field, value);
    case 'images':
    case 'urls':
      if (!Array.isArray(value)) return [];
      if (value.length > INPUT_BOUNDS.imagesMax)
        return [{ field, rule: `must hold at most ${INPUT_BOUNDS.imagesMax} images (it has ${value.length})` }];
      return value.flatMap((item, i) =>
        kind === 'images' ? pathIssues(`${field}[${i}]`, item) : longer(`${field}[${i}]`, item, INPUT_BOUNDS.urlMax),
      );
    case 'ids':
      if (Array.isArray(value) && value.length > INPUT_BOUNDS.idsMax)
        return [{ field, rule: `must hold at most ${INPUT_BOUNDS.idsMax} ids (it has ${value.length})` }];
      return [];
    case 'other':
      return characteristicsIssues(field, value);
  }
}

function longer(field: string, value: unknown, max: number): InputIssue[] {
  if (typeof value !== 'string' || value.length <= max) return [];
  return [{ field, rule: `must be at most ${max} characters (it has ${value.length})` }];
}

/** The only object-valued attribute a caller sends freely: its keys and values bounded. */
function characteristicsIssues(field: string, value: unknown): InputIssue[] {
  if (typeof value === 'string') return longer(field, value, INPUT_BOUNDS.stringMax);
  if (typeof value !== 'object' || value === null) return [];
  const entries = Object.entries(value);
  if (entries.length > INPUT_BOUNDS.characteristicsMax)
    return [{ field, rule: `must hold at most ${INPUT_BOUNDS.characteristicsMax} keys (it has ${entries.length})` }];
  return entries.flatMap(([key, v]) => [
    ...longer(`${field}.${key}`, key, 256).map((i) => ({ ...i, rule: `its key ${i.rule}` })),
    ...longer(`${field}.${key}`, v, INPUT_BOUNDS.stringMax),
  ]);
}

function otherAttribute(value: unknown): string | undefined {
  if (value === null || typeof value === 'number' || typeof value === 'boolean') return undefined;
  if (typeof value === 'string')
    return value.length <= INPUT_BOUNDS.stringMax
      ? undefined
      : `must be at most ${INPUT_BOUNDS.stringMax} characters (it has ${value.length})`;
  return 'is an attribute the spec does not list: it must be a string, a number, a boolean or null';
}

/**
 * A file path in a job's input names a file inside the worker's upload directory (TUNEFLOW_UPLOAD_DIR): relative to
 * it, or absolute under it; never `..`, a NUL or a backslash. The worker opens the file once, checks that handle (a
 * regular file, inside the directory after every link) and reads from it (the activities' upload reads).
 */
export const PATH_RULE =
  'must be a path inside the worker\'s upload directory (TUNEFLOW_UPLOAD_DIR): no ".." segment, no NUL or backslash, ' +
  `at most ${INPUT_BOUNDS.pathMax} characters; or send image URLs`;

function pathIssues(field: string, value: unknown): InputIssue[] {
  if (typeof value !== 'string') return [];
  return isUploadPath(value) ? [] : [{ field, rule: PATH_RULE }];
}

/** A path that can only name something inside the upload directory once joined to it (lexically). */
export function isUploadPath(value: string): boolean {
  if (value.length === 0 || value.length > INPUT_BOUNDS.pathMax) return false;
  if (value.includes('\0') || value.includes('\\')) return false;
  return !value.split('/').some((segment) => segment === '..');
}

/** isUploadPath in JSON Schema (no lookaround, for RE2): `pattern` the characters, `not` a `..` segment. */
export const UPLOAD_PATH_SCHEMA = {
  type: 'string',
  minLength: 1,
  maxLength: INPUT_BOUNDS.pathMax,
  pattern: String.raw`^[^\x00\\]+$`,
  not: { pattern: String.raw`(^|/)\.\.(/|$)` },
  description: PATH_RULE,
} as const;

/** A file path of a job's input, with the field that holds it (`tune.images[0]`, `prompts[2].input_image`). */
export interface UploadPath {
  field: string;
  path: string;
}

/**
 * The files a job's input names, field by field: `tune.images`, each prompt's `input_image` and `mask_image`.
 *
 * @example
 * uploadPathsOf({ tune: { images: ['1.jpg'] }, prompts: [] }); // [{ field: 'tune.images[0]', path: '1.jpg' }]
 */
export function uploadPathsOf(input: unknown): UploadPath[] {
  const out: UploadPath[] = [];
  const job = input as { tune?: { images?: unknown }; prompts?: unknown } | null | undefined;
  const images = job?.tune?.images;
  if (Array.isArray(images))
    images.forEach((image, i) => typeof image === 'string' && out.push({ field: `tune.images[${i}]`, path: image }));
  if (Array.isArray(job?.prompts))
    job.prompts.forEach((prompt: Record<string, unknown> | null, i: number) => {
      for (const key of ['input_image', 'mask_image'])
        if (typeof prompt?.[key] === 'string') out.push({ field: `prompts[${i}].${key}`, path: prompt[key] as string });
    });
  return out;
}
