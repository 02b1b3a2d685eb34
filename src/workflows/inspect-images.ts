/**
 * Image inspection (`options.inspect`): each training image is inspected before anything is paid for.
 */
import type { ImageInspection, TrainingImage } from '../contract/inspection';
import { runBounded } from './concurrency';
import { service } from './activity-calls';

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
