/**
 * What a job's input may hold beyond the spec's rules: a bound on every string, list and object a starter sends, on
 * how deep the whole input nests and how large it is, and file paths that stay inside the worker's upload directory. The spec gives no string or count limits, so these are
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
  /** Keys of `characteristics`, and attributes of a pack's `prompt_attributes`. */
  characteristicsMax: 50,
  /** The characters of a key of `characteristics` or `prompt_attributes`. */
  keyMax: 256,
  /** Attributes the spec does not list, per object, beyond those it lists (each a string, a number, a boolean or null). */
  otherAttributesMax: 16,
  /**
   * Objects and arrays nested in a job's whole input, the input itself counted. A job needs 4 at most
   * (`options.inspect.refuse`); every attribute's value is a scalar, a list or a flat object, so this bounds what no
   * other rule reads (a field the job does not know).
   */
  depthMax: 8,
  /** A job's whole input as JSON, in UTF-8 bytes: half the 2 MB Temporal's server takes in one payload. */
  inputBytesMax: 1_048_576,
} as const;

/**
 * A tune's title is tuneflow's: the workflow ID and the run ID, so a retried create adopts only the run's own tune, and
 * the title tells which tenant's job made the tune (src/contract/tenants.ts). A starter's title could name another
 * job's, and take its tune.
 */
const TITLE_REFUSED =
  "is tuneflow's own (the job's workflow ID and run ID, which say whose job made the tune): leave it out";

/**
 * The names every JavaScript object has (Object.prototype's own properties), refused as attribute names: a lookup by
 * name, a copy or a body builder on the way would read them as the object's own machinery, not as the caller's value.
 */
export const PROTOTYPE_NAMES = [
  '__defineGetter__',
  '__defineSetter__',
  '__lookupGetter__',
  '__lookupSetter__',
  '__proto__',
  'constructor',
  'hasOwnProperty',
  'isPrototypeOf',
  'propertyIsEnumerable',
  'toLocaleString',
  'toString',
  'valueOf',
] as const;
const PROTOTYPE_NAME: ReadonlySet<string> = new Set(PROTOTYPE_NAMES);

/** The rule for an attribute named as a property every object has, in words (never the property itself). */
export const prototypeNameRule = (name: string): string =>
  `is the name of a property every JavaScript object has (Object.prototype.${name}): it is not taken as an attribute ` +
  'name, so nothing on the way mistakes it for that property';

/**
 * Attributes of a job's input that tuneflow sets itself or takes elsewhere, never from a starter. Read by own name
 * only (Object.hasOwn): `toString` is no refused attribute.
 */
const REFUSED: Record<'tune' | 'packTune', Record<string, string>> = {
  tune: {
    prompts_attributes:
      'is not taken: give the prompts in `prompts`, where they are counted against maxCostMc, bounded, waited for ' +
      'and cleaned up',
    title: TITLE_REFUSED,
  },
  packTune: { title: TITLE_REFUSED },
};

/**
 * The attributes a kind of object lists (the spec's), each with its kind of value: `other` a flat object of scalars
 * (`characteristics`), `attributes` a pack's `prompt_attributes` (a prompt's attributes, each a scalar).
 */
export type AttributeKinds = Record<
  string,
  'string' | 'text' | 'url' | 'path' | 'images' | 'urls' | 'ids' | 'other' | 'attributes'
>;

/**
 * The issues of one tune, pack tune or prompt of a job's input: strings, lists and objects within INPUT_BOUNDS,
 * attributes the spec does not list as scalars, no attribute tuneflow refuses or every object has, and file paths that
 * can only name a file inside the upload directory.
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
  const rules = refused === 'prompt' ? undefined : REFUSED[refused];
  let attributes = 0;
  for (const [key, attribute] of Object.entries(value)) {
    const field = `${subject}.${key}`;
    if (attribute === undefined) continue;
    attributes++;
    if (PROTOTYPE_NAME.has(key)) {
      issues.push({ field, rule: prototypeNameRule(key) });
      continue;
    }
    if (rules && Object.hasOwn(rules, key)) {
      issues.push({ field, rule: rules[key] });
      continue;
    }
    const kind = Object.hasOwn(kinds, key) ? kinds[key] : undefined;
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
    case 'attributes':
      return promptAttributesIssues(field, value);
  }
}

function longer(field: string, value: unknown, max: number): InputIssue[] {
  if (typeof value !== 'string' || value.length <= max) return [];
  return [{ field, rule: `must be at most ${max} characters (it has ${value.length})` }];
}

/**
 * `characteristics`, a flat object of scalars (its form checked by the spec's schema): its keys and values bounded, in
 * the object or in the JSON string that may carry it.
 */
function characteristicsIssues(field: string, value: unknown): InputIssue[] {
  if (typeof value === 'string') {
    const issues = longer(field, value, INPUT_BOUNDS.stringMax);
    if (issues.length) return issues;
    return Object.keys(objectIn(value) ?? {}).flatMap((key) =>
      PROTOTYPE_NAME.has(key) ? [{ field: `${field}.${key}`, rule: prototypeNameRule(key) }] : [],
    );
  }
  if (typeof value !== 'object' || value === null) return [];
  const entries = Object.entries(value);
  if (entries.length > INPUT_BOUNDS.characteristicsMax)
    return [{ field, rule: `must hold at most ${INPUT_BOUNDS.characteristicsMax} keys (it has ${entries.length})` }];
  return entries.flatMap(([key, v]) => {
    const at = `${field}.${key}`;
    if (PROTOTYPE_NAME.has(key)) return [{ field: at, rule: prototypeNameRule(key) }];
    return [...keyIssues(at, key), ...longer(at, v, INPUT_BOUNDS.stringMax)];
  });
}

/** A pack's `prompt_attributes`: a prompt's attributes, each a scalar (its `callback` a URL), keys bounded. */
function promptAttributesIssues(field: string, value: unknown): InputIssue[] {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return [];
  const entries = Object.entries(value);
  if (entries.length > INPUT_BOUNDS.characteristicsMax)
    return [
      { field, rule: `must hold at most ${INPUT_BOUNDS.characteristicsMax} attributes (it has ${entries.length})` },
    ];
  return entries.flatMap(([key, v]): InputIssue[] => {
    const at = `${field}.${key}`;
    if (PROTOTYPE_NAME.has(key)) return [{ field: at, rule: prototypeNameRule(key) }];
    const keyed = keyIssues(at, key);
    if (keyed.length) return keyed;
    if (key === 'callback') return longer(at, v, INPUT_BOUNDS.urlMax);
    if (v === null || typeof v === 'number' || typeof v === 'boolean') return [];
    if (typeof v === 'string') return longer(at, v, INPUT_BOUNDS.stringMax);
    return [
      { field: at, rule: 'must be a string, a number, a boolean or null: a prompt attribute holds no object or list' },
    ];
  });
}

/** A key of `characteristics` or `prompt_attributes`, bounded. */
function keyIssues(field: string, key: string): InputIssue[] {
  return longer(field, key, INPUT_BOUNDS.keyMax).map((i) => ({ ...i, rule: `its key ${i.rule}` }));
}

/** The object a JSON string holds, or undefined (no JSON, or no object). */
function objectIn(json: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(json);
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * `characteristics` (an object, or that object as a JSON string) without the keys every object has: what the spec's
 * schema reads once the bounds named those keys, so they are named once, in words, and not again as "no object of
 * strings" (zod takes an object whose own `constructor` is a string for no plain object). The value itself when it
 * holds none.
 *
 * @example
 * withoutPrototypeNames({ constructor: 'x', eye_color: 'blue' }); // { eye_color: 'blue' }
 */
export function withoutPrototypeNames(value: unknown): unknown {
  const object = typeof value === 'string' ? objectIn(value) : value;
  if (typeof object !== 'object' || object === null || Array.isArray(object)) return value;
  if (!Object.keys(object).some((key) => PROTOTYPE_NAME.has(key))) return value;
  const kept = Object.fromEntries(Object.entries(object).filter(([key]) => !PROTOTYPE_NAME.has(key)));
  return typeof value === 'string' ? JSON.stringify(kept) : kept;
}

/**
 * What one walk of a job's whole input tells: the issue of an object or array nested deeper than
 * INPUT_BOUNDS.depthMax (named at the first one too deep), and whether the input may be larger as JSON than
 * INPUT_BOUNDS.inputBytesMax (then `sizeIssue` measures it).
 */
export interface InputShape {
  tooDeep?: InputIssue;
  mayBeTooLarge: boolean;
}

/**
 * Walks a job's whole input once, without recursion (an input nested 20,000 deep costs no call stack), counting
 * what its JSON may hold at most: a string's characters and quotes, 24 for a number, the punctuation. Every
 * UTF-16 unit of that is 6 bytes at most (an escape), so an input counted under a sixth of the size bound is within
 * it without being written out, as typical inputs are.
 *
 * @example
 * inputShape({ tune: { x: [[[[[[[[1]]]]]]]] } }).tooDeep; // { field: 'tune.x[0][0][0][0][0]', rule: 'must nest ...' }
 */
export function inputShape(input: unknown): InputShape {
  const max = INPUT_BOUNDS.depthMax;
  const values: unknown[] = [input];
  const depths: number[] = [1];
  let units = 0;
  let unsure = false;
  while (values.length) {
    const value = values.pop();
    const depth = depths.pop() as number;
    if (typeof value === 'string') units += value.length + 2;
    else if (typeof value !== 'object' || value === null) units += 24;
    else if (depth > max) return { tooDeep: depthIssue(deepestPlace(input, max)), mayBeTooLarge: false };
    else {
      // An object that writes its own JSON (a Date, a Buffer) says nothing of its size here.
      if (typeof (value as { toJSON?: unknown }).toJSON === 'function') unsure = true;
      const items = Array.isArray(value) ? value : Object.keys(value);
      units += 2 + items.length;
      for (let i = 0; i < items.length; i++) {
        if (Array.isArray(value)) values.push(value[i]);
        else {
          const key = items[i] as string;
          units += key.length + 3;
          values.push((value as Record<string, unknown>)[key]);
        }
        depths.push(depth + 1);
      }
    }
  }
  return { mayBeTooLarge: unsure || units * 6 > INPUT_BOUNDS.inputBytesMax };
}

function depthIssue(field: string): InputIssue {
  return {
    field,
    rule:
      `must nest at most ${INPUT_BOUNDS.depthMax} objects and arrays deep, the input itself counted (this one is ` +
      `at depth ${INPUT_BOUNDS.depthMax + 1})`,
  };
}

/**
 * The whole input's size: more than INPUT_BOUNDS.inputBytesMax as JSON (UTF-8), or no JSON at all. For an input whose
 * depth is within its bound (JSON.stringify recurses) and that `inputShape` found may be too large.
 *
 * @example
 * sizeIssue({ tune: { name: 'x'.repeat(2_000_000) } }); // { field: 'input', rule: 'must be at most 1048576 bytes ...' }
 */
export function sizeIssue(input: unknown): InputIssue | undefined {
  let json: string | undefined;
  try {
    json = JSON.stringify(input);
  } catch (err) {
    return { field: 'input', rule: `must be JSON: ${(err as Error).message}` };
  }
  // Counted only when the length cannot tell: a UTF-16 unit is 3 bytes at most.
  if (json === undefined || json.length * 3 <= INPUT_BOUNDS.inputBytesMax) return undefined;
  const bytes = utf8Bytes(json);
  if (bytes <= INPUT_BOUNDS.inputBytesMax) return undefined;
  return {
    field: 'input',
    rule: `must be at most ${INPUT_BOUNDS.inputBytesMax} bytes as JSON (UTF-8), it is ${bytes}: a job's history starts with it`,
  };
}

/** The field of the first object or array nested deeper than `max` (the input at depth 1): walked again to name it. */
function deepestPlace(input: unknown, max: number): string {
  type Place = { value: unknown; depth: number; parent?: Place; key?: string | number };
  const stack: Place[] = [{ value: input, depth: 1 }];
  for (let place = stack.pop(); place; place = stack.pop()) {
    const value = place.value;
    if (typeof value !== 'object' || value === null) continue;
    if (place.depth > max) return fieldOf(place);
    const depth = place.depth + 1;
    if (Array.isArray(value))
      for (let i = 0; i < value.length; i++) stack.push({ value: value[i], depth, parent: place, key: i });
    else
      for (const key of Object.keys(value))
        stack.push({ value: (value as Record<string, unknown>)[key], depth, parent: place, key });
  }
  return 'input';

  function fieldOf(place: Place): string {
    let out = '';
    for (let p: Place | undefined = place; p?.parent; p = p.parent)
      out = `${typeof p.key === 'number' ? `[${p.key}]` : `.${p.key}`}${out}`;
    return out.startsWith('.') ? out.slice(1) : `input${out}`;
  }
}

/** The UTF-8 bytes of a string. */
function utf8Bytes(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    // A surrogate pair is 4 bytes, 2 a unit (JSON.stringify writes a lone one as an ASCII escape).
    bytes += unit < 0x80 ? 1 : unit < 0x800 || (unit >= 0xd800 && unit <= 0xdfff) ? 2 : 3;
  }
  return bytes;
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
