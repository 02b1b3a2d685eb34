/**
 * The spec's enumerations and limits, and the building blocks of its schemas: each with a message that names the rule
 * (the path names the field).
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

export const oneOf = <T extends readonly [string, ...string[]]>(values: T) =>
  z.enum(values, { error: `must be one of ${values.map((v) => JSON.stringify(v)).join(', ')}` });

export const int = (min: number, max?: number) => {
  const rule = max === undefined ? `an integer of at least ${min}` : `an integer from ${min} to ${max}`;
  let s = z
    .number({ error: `must be ${rule}` })
    .int({ error: `must be ${rule}` })
    .min(min, { error: `must be ${rule}` });
  if (max !== undefined) s = s.max(max, { error: `must be ${rule}` });
  return s;
};

export const range = (min: number, max: number) => {
  const rule = `must be a number from ${min} to ${max}`;
  return z.number({ error: rule }).min(min, { error: rule }).max(max, { error: rule });
};

export const multipleOf8 = z
  .number({ error: 'must be a positive integer multiple of 8' })
  .int({ error: 'must be a positive integer multiple of 8' })
  .positive({ error: 'must be a positive integer multiple of 8' })
  .multipleOf(8, { error: 'must be a positive integer multiple of 8' });

export const bool = z.boolean({ error: 'must be true or false' });
export const text = z.string({ error: 'must be a string' });
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
export const id = int(1);

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
