/**
 * zod schemas for everything the service returns (tolerant: unknown fields pass through), and with them the spec's
 * enumerations (./rules.ts) and the schemas of every input (./request-schemas.ts, strict: every rule of spec sections
 * 4 and 8, checked before a request is sent).
 */
import { z } from 'zod';

export {
  Branch,
  COLOR_GRADINGS,
  CONTROLNETS,
  FileInput,
  httpUrl,
  LIMITS,
  ModelType,
  PRESETS,
  required,
  SCHEDULERS,
  STYLES,
} from './rules';
export * from './request-schemas';

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
