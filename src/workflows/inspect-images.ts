/**
 * Image inspection (`options.inspect`): each training image is inspected before anything is paid for.
 */
import { patchedOrFolded } from './patches';
import { trainingImagesOf, type ImageInspection, type TrainingImage } from '../contract/inspection';
import type { ResolvedOptions } from '../contract/options';
import { runBounded } from './concurrency';
import { service } from './activity-calls';

/**
 * Runs with this marker are `inspecting` from their start (their first search attribute upsert says so, and the
 * `progress` query), not `creating-tune` until the first inspection. Asked only by runs that inspect: runs started
 * before it upserted `creating-tune` first, then `inspecting`.
 */
export const INSPECTING_FROM_START = 'inspecting-from-start';

/**
 * True when the run will inspect training images before anything else it does (`options.inspect`, and a tune with
 * images), so that is its first phase. Decided before the search attributes' local activity (see Job.run).
 *
 * @example
 * const first = inspectsFirst(options, input.tune) ? Phase.inspecting : Phase.creatingTune;
 */
export function inspectsFirst(options: ResolvedOptions, tune: unknown): boolean {
  if (!options.inspect || typeof tune !== 'object' || tune === null) return false;
  return trainingImagesOf(tune).length > 0 && patchedOrFolded(INSPECTING_FROM_START);
}

/**
 * Training images inspected at once: a few, as prompts are created, so a job of 100 images neither floods the service
 * nor waits for each in turn. One activity per image: a retry asks again for that image alone, and what was found is
 * in history as soon as it is.
 */
const INSPECTIONS_AT_ONCE = 4;

/**
 * Inspects each of `images` (`inspectImage`, retried as any call), a few at a time; what each one raised, in order.
 *
 * @example
 * const found = await inspectEach('woman', images, counted);
 */
export async function inspectEach(
  name: string,
  images: readonly TrainingImage[],
  counted: <T>(call: Promise<T>) => Promise<T>,
): Promise<ImageInspection[]> {
  const found: ImageInspection[] = [];
  await runBounded(images.length, INSPECTIONS_AT_ONCE, (i) =>
    counted(
      service.inspectImage.executeWithOptions({ summary: `inspect training image ${i + 1} of ${images.length}` }, [
        { name, image: images[i] },
      ]),
    ).then((inspection) => (found[i] = inspection)),
  );
  return found;
}
