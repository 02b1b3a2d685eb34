/**
 * Inspection before paying (`options.inspect`): each training image goes to the service's image inspection
 * (`POST /images/inspect`, service notes) before the tune is created, and a job whose images raise a flag the caller
 * refuses fails InspectionRefused, having created nothing. Sandbox-safe: plain values, no zod (the workflow bundle
 * evaluates this per run).
 */

/**
 * The quality flags the service's inspection answers (service notes), in its words. A unit test keeps this list in
 * step with the answer schema (InspectionResult in src/api/schemas.ts), which the sandbox may not import.
 */
export const INSPECTION_FLAGS = [
  'blurry',
  'selfie',
  'low_resolution',
  'low_quality',
  'includes_multiple_people',
  'wearing_sunglasses',
  'funny_face',
] as const;
export type InspectionFlag = (typeof INSPECTION_FLAGS)[number];

/** `options.inspect`: inspect every training image before the tune is created. */
export interface InspectOption {
  /**
   * Flags that fail the job (InspectionRefused) when any training image raises one; none: inspect and report only.
   * @default []
   */
  refuse?: InspectionFlag[];
}

/** One training image as the job's input names it. */
export interface TrainingImage {
  /** Where the input holds it: `tune.image_urls[0]`, `tune.images[2]`. */
  field: string;
  /** An image the service fetches (`image_urls`: sent as `file_url`)... */
  url?: string;
  /** ...or a file in the worker's upload directory (`images`: uploaded as `file`). */
  path?: string;
}

/** What the service's inspection found in one training image. */
export interface ImageInspection {
  /** Where the input holds the image: `tune.image_urls[0]`. */
  field: string;
  /** The image: its URL, or its path as the input gave it. */
  image: string;
  /** The quality flags it raised (those the service answered `true`). */
  flags: InspectionFlag[];
  /** What else the service said of it (`age`, `ethnicity`, `eye_color`, ...): scalars only, bounded. */
  characteristics: Record<string, string | number | boolean | null>;
}

/**
 * The training images of a tune or pack tune input, in order: `image_urls`, else `images`; none for a pack on
 * existing tunes.
 *
 * @example
 * trainingImagesOf({ image_urls: ['https://example.com/1.jpg'] }); // [{ field: 'tune.image_urls[0]', url: '...' }]
 */
export function trainingImagesOf(tune: { images?: unknown; image_urls?: unknown }): TrainingImage[] {
  const strings = (value: unknown) => (Array.isArray(value) ? value.filter((v) => typeof v === 'string') : []);
  const urls = strings(tune.image_urls).map((url, i) => ({ field: `tune.image_urls[${i}]`, url }));
  const paths = strings(tune.images).map((path, i) => ({ field: `tune.images[${i}]`, path }));
  return [...urls, ...paths];
}

/**
 * The refused flags `inspection` raised, image by image: only the images that raised one.
 *
 * @example
 * refusedFlags(found, ['blurry']); // [{ field: 'tune.image_urls[1]', image: 'https://...', flags: ['blurry'] }]
 */
export function refusedFlags(
  inspection: readonly ImageInspection[],
  refuse: readonly InspectionFlag[],
): Array<Pick<ImageInspection, 'field' | 'image' | 'flags'>> {
  return inspection
    .map(({ field, image, flags }) => ({ field, image, flags: flags.filter((flag) => refuse.includes(flag)) }))
    .filter((image) => image.flags.length > 0);
}

/**
 * The option's rule, for InvalidOptions: the `option` (a path under `options`) that breaks it, and why; undefined
 * when it holds. Only known flag names, each once: at most as many as the service has.
 *
 * @example
 * inspectIssue({ refuse: ['blurry', 'blurry'] }); // { option: 'inspect.refuse', rule: 'must not name a flag twice' }
 */
export function inspectIssue(value: unknown): { option: string; rule: string } | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'object' || Array.isArray(value))
    return { option: 'inspect', rule: 'must be an object such as { "refuse": ["blurry"] }' };
  for (const key of Object.keys(value))
    if (key !== 'refuse') return { option: `inspect.${key}`, rule: 'is not an inspect option (known: refuse)' };
  const refuse = (value as { refuse?: unknown }).refuse;
  if (refuse === undefined || refuse === null) return undefined;
  const known = `one of ${INSPECTION_FLAGS.join(', ')}`;
  if (!Array.isArray(refuse)) return { option: 'inspect.refuse', rule: `must be an array of flags, each ${known}` };
  const unknown = refuse.findIndex((flag) => !(INSPECTION_FLAGS as readonly unknown[]).includes(flag));
  if (unknown !== -1)
    return { option: `inspect.refuse[${unknown}]`, rule: `must be ${known} (got ${JSON.stringify(refuse[unknown])})` };
  if (new Set(refuse).size !== refuse.length) return { option: 'inspect.refuse', rule: 'must not name a flag twice' };
  return undefined;
}
