/**
 * One prompt's images copied to the owner's storage: each read from the service's image host, checked (an image,
 * within the size bound), written under its key unless it is there, and read back: the copy counts only when the
 * SHA-256 of the bytes read back is the SHA-256 of the bytes read from the service.
 */
import { createHash } from 'node:crypto';
import type { StoredImage } from '../contract/storage';
import type { ImageFetcher } from './image-fetch';
import { imageKey } from './keys';
import type { ImageStore } from './store';

/** A copy that failed for a reason a retry cannot mend: the stored object is not the image (another's, or changed). */
export class StoredImageDiffers extends Error {
  constructor(readonly location: string) {
    super(`${location}: the stored object is not the image the service has (another SHA-256); it is left as it is`);
    this.name = 'StoredImageDiffers';
  }
}

export const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

export interface PromptImages {
  workflowId: string;
  promptId: number;
  /** The prompt's `images`, the service's URLs, in its order. */
  urls: readonly string[];
}

/** An image this copy checked: its key and what the result says of it (an activity's heartbeat carries these). */
export interface CheckedCopy {
  index: number;
  key: string;
  stored: StoredImage;
}

/**
 * Copies each image of the prompt, one after another (a prompt has a few), and answers where each is. `earlier` are
 * the copies an earlier attempt checked (its heartbeats): each is taken once its bytes read back have its digest,
 * with no second read of the service's; `checked` is told each copy as it is checked.
 *
 * @example
 * const stored = await copyPromptImages(store, fetcher, { workflowId, promptId: 7, urls: prompt.images });
 */
export async function copyPromptImages(
  store: ImageStore,
  fetcher: ImageFetcher,
  { workflowId, promptId, urls }: PromptImages,
  {
    signal,
    earlier = [],
    checked,
  }: { signal?: AbortSignal; earlier?: readonly CheckedCopy[]; checked?: (copy: CheckedCopy) => void } = {},
): Promise<StoredImage[]> {
  const stored: StoredImage[] = [];
  for (const [index, url] of urls.entries()) {
    const before = earlier.find((c) => c.index === index);
    const again = before && (await store.read(before.key, signal));
    let copy: CheckedCopy;
    if (before && again && sha256(again) === before.stored.sha256) copy = before;
    else {
      const key = { workflowId, promptId, index, url };
      copy = { index, ...(await copyImageKeyed(store, fetcher, key, signal)) };
    }
    checked?.(copy);
    stored.push(copy.stored);
  }
  return stored;
}

/**
 * Copies one image: read from the service, written under its key unless there, read back and compared.
 *
 * @example
 * await copyImage(store, fetcher, { workflowId: 'order-1', promptId: 7, index: 0, url });
 */
export async function copyImage(
  store: ImageStore,
  fetcher: ImageFetcher,
  image: { workflowId: string; promptId: number; index: number; url: string },
  signal?: AbortSignal,
): Promise<StoredImage> {
  return (await copyImageKeyed(store, fetcher, image, signal)).stored;
}

async function copyImageKeyed(
  store: ImageStore,
  fetcher: ImageFetcher,
  { workflowId, promptId, index, url }: { workflowId: string; promptId: number; index: number; url: string },
  signal?: AbortSignal,
): Promise<{ key: string; stored: StoredImage }> {
  const image = await fetcher.fetch(url, { signal });
  const key = imageKey(workflowId, promptId, index, image.ext);
  const digest = sha256(image.bytes);
  await store.write(key, image.bytes, { contentType: image.contentType, sha256: digest }, signal);
  const back = await store.read(key, signal);
  // Not there right after the write: a store slow to show it (retried); another object there: never mended.
  if (!back) throw new Error(`${store.location(key)}: not found right after it was written`);
  if (sha256(back) !== digest) throw new StoredImageDiffers(store.location(key));
  return {
    key,
    stored: { location: store.location(key), sha256: digest, bytes: back.length, content_type: image.contentType },
  };
}
