/**
 * `POST /images/inspect` (service notes): a class name and one image (file or URL) in, characteristics and quality
 * flags out. Deterministic: the same image always gets the same answer, whatever host or port serves it.
 *
 * The mock raises a flag only when told to, so a job's outcome never rests on chance: a flag's name between double
 * underscores in the image's URL or uploaded file name (`dog__blurry__.jpg`) raises that flag, and an uploaded PNG
 * under 512 pixels on a side is `low_resolution` (the service advises at least 512x512). No other image raises any.
 * The characteristics (age, eye color...) are picked from the image's bytes, or from its URL's path alone.
 */
import { ImageInspectInput } from '../api/schemas';
import { INSPECTION_FLAGS } from '../contract/inspection';
import { fnv1a, pngSize } from './png';
import { unprocessable, type RouteDefinition } from './requests';

const AGES = ['18-24', '25-34', '35-44', '45-54'];
const ETHNICITIES = ['white', 'black', 'east asian', 'south asian', 'hispanic', 'middle eastern'];
const EYE_COLORS = ['brown eyes', 'blue eyes', 'green eyes', 'hazel eyes'];
const HAIR_COLORS = ['black', 'brown', 'blond', 'red', 'gray'];
const PEOPLE = new Set(['man', 'woman', 'boy', 'girl', 'person']);

/**
 * The inspection of one image; `bytes` (and its file name) when it was uploaded, `url` when it was given as a URL.
 * @example inspect('woman', { bytes }) // { age: '25-34', eye_color: 'brown eyes', blurry: false, ... }
 * @example inspect('dog', { url: 'https://example.com/dog__blurry__.jpg' }).blurry // true
 */
export function inspect(
  name: string,
  image: { bytes?: Uint8Array; url?: string; fileName?: string },
): Record<string, unknown> {
  const h = fnv1a(image.bytes ?? pathOf(image.url ?? ''));
  const pick = <T>(list: readonly T[], shift: number) => list[(h >>> shift) % list.length];
  const size = image.bytes ? pngSize(image.bytes) : undefined;
  const person = PEOPLE.has(name);
  const named = image.url ?? image.fileName ?? '';
  const flags = Object.fromEntries(INSPECTION_FLAGS.map((flag) => [flag, named.includes(`__${flag}__`)]));
  if (size !== undefined && Math.min(size.width, size.height) < 512) flags.low_resolution = true;
  return {
    name,
    age: person ? pick(AGES, 0) : null,
    ethnicity: person ? pick(ETHNICITIES, 3) : null,
    eye_color: pick(EYE_COLORS, 6),
    hair_color: person ? pick(HAIR_COLORS, 9) : null,
    ...flags,
  };
}

/** A URL's path (its host and port left out: the same photo from any server), or the text as given. */
function pathOf(url: string): string {
  try {
    return new URL(url).pathname;
  } catch {
    return url;
  }
}

/** The image inspection route of the mock. */
export function inspectionRoutes(): RouteDefinition[] {
  return [
    {
      method: 'POST',
      pattern: '/images/inspect',
      kind: 'api',
      async handle(ctx) {
        const { input } = await ctx.bodyInput(ImageInspectInput);
        let bytes: Uint8Array | undefined;
        if (input.file instanceof Blob) bytes = new Uint8Array(await input.file.arrayBuffer());
        else if (input.file !== undefined)
          throw unprocessable('file', 'must be uploaded as a file in a multipart body; send a URL as file_url');
        const fileName = input.file instanceof File ? input.file.name : undefined;
        return { status: 200, body: inspect(input.name, { bytes, url: input.file_url, fileName }) };
      },
    },
  ];
}
