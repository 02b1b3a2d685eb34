/**
 * Brief answers: what a run keeps of the objects it reads. Every activity result enters the run's history and its
 * memory, and a wait may read a tune or a prompt several times before it is done. So the workflows ask for brief
 * answers (`brief: true`): an object, done or not, comes back with the fields tuneflow reads (those its answer schema
 * checks, and `updated_at` and `pack_id`, which the run's merge and a pack's claim read) and those the job's result
 * gives (src/contract/results.ts), so the result is made from what the run has read, each field through the history
 * once more at most. The callback URL is answered without its query: the run reads only that the service was asked
 * to call back, and the query (the run's IDs, the redacted signature) was most of an answer's bytes.
 */
import { Prompt, Tune, type InspectionResult } from '../api/schemas';
import { INSPECTION_FLAGS, type ImageInspection, type TrainingImage } from '../contract/inspection';
import { pickFields, RESULT_PROMPT_FIELDS, RESULT_TUNE_FIELDS } from '../contract/results';

const TUNE_FIELDS: readonly string[] = [...new Set([...Object.keys(Tune.shape), 'updated_at', ...RESULT_TUNE_FIELDS])];
const PROMPT_FIELDS: readonly string[] = [
  ...new Set([...Object.keys(Prompt.shape), 'updated_at', 'pack_id', ...RESULT_PROMPT_FIELDS]),
];

/**
 * The tune as a run needs it: the fields tuneflow reads and the result gives, trained or not.
 *
 * @example
 * briefTune({ id: 1, trained_at: null, orig_images: ['https://...'] }); // { id: 1, trained_at: null }
 */
export function briefTune(tune: Tune): Tune {
  return pick(tune, TUNE_FIELDS) as Tune;
}

/**
 * The prompt as a run needs it: the fields tuneflow reads and the result gives, settled or not.
 *
 * @example
 * briefPrompt({ id: 2, tune_id: 1, text: 'a', images: [], seed: 7 }); // { id: 2, tune_id: 1, text: 'a', images: [] }
 */
export function briefPrompt(prompt: Prompt): Prompt {
  return pick(prompt, PROMPT_FIELDS) as Prompt;
}

/**
 * A listing as a run needs it: each prompt as `briefPrompt` leaves it.
 *
 * @example
 * briefPrompts(await listOwnPrompts(api, tuneId, ids, options));
 */
export function briefPrompts(prompts: Prompt[]): Prompt[] {
  return prompts.map(briefPrompt);
}

/** Characteristics kept of an inspection: it enters the run's history and result, whatever the service answers. */
const CHARACTERISTICS_MAX = 50;
const CHARACTERISTIC_LENGTH_MAX = 256;

/**
 * An inspection as the run keeps it: the flags the service answered `true`, and its other scalar answers (the class
 * name it echoes left out), at most 50 of them, keys and strings at most 256 characters.
 *
 * @example
 * briefInspection({ field: 'tune.image_urls[0]', url }, { age: '25-34', blurry: true, selfie: false });
 * // { field: 'tune.image_urls[0]', image: url, flags: ['blurry'], characteristics: { age: '25-34' } }
 */
export function briefInspection(image: TrainingImage, answer: InspectionResult): ImageInspection {
  const flags = INSPECTION_FLAGS.filter((flag) => answer[flag] === true);
  const characteristics: ImageInspection['characteristics'] = {};
  let kept = 0;
  for (const [key, value] of Object.entries(answer)) {
    if ((INSPECTION_FLAGS as readonly string[]).includes(key) || key === 'name') continue;
    if (key.length > CHARACTERISTIC_LENGTH_MAX) continue;
    if (kept === CHARACTERISTICS_MAX) break;
    if (typeof value === 'string') characteristics[key] = value.slice(0, CHARACTERISTIC_LENGTH_MAX);
    else if (value === null || typeof value === 'number' || typeof value === 'boolean') characteristics[key] = value;
    else continue;
    kept++;
  }
  return { field: image.field, image: image.url ?? image.path ?? '', flags, characteristics };
}

function pick(object: Record<string, unknown>, fields: readonly string[]): Record<string, unknown> {
  const kept = pickFields(object, fields);
  if (typeof kept.callback === 'string') kept.callback = withoutQuery(kept.callback);
  return kept;
}

/** A callback URL without its query; a value that is no URL stays as it is (the run reads only that there is one). */
function withoutQuery(url: string): string {
  const query = url.indexOf('?');
  return query < 0 ? url : url.slice(0, query);
}
