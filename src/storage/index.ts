/**
 * The owner's storage, as the plugin and `tuneflow worker` set it up: a folder (the embedded default) or an
 * S3-compatible bucket, and the reader of the service's images.
 */
import * as fs from 'node:fs';
import { DEFAULT_IMAGE_MAX_BYTES } from '../contract/storage';
import { ImageFetcher } from './image-fetch';
import { S3Store, type S3StoreOptions } from './s3';
import { FolderStore, type ImageStore } from './store';

export { FolderStore, type ImageStore } from './store';
export { S3Store, type S3StoreOptions } from './s3';
export { ImageFetcher, ImageFetchError } from './image-fetch';
export { checkStoredImages, copyAgain, type StoredImageCheck, type StoredImageProblem } from './check';

/** Where the images go: a folder, a bucket, or a store of the caller's. */
export type StorageTarget = { folder: string } | { s3: S3StoreOptions } | ImageStore;

export interface StorageSettings {
  target: StorageTarget;
  /**
   * Hosts image URLs may name besides any https one (`host` or `host:port`): plain-http image hosts. The service's
   * own API host is one (the key is never sent to it all the same).
   * @default none
   */
  imageHosts?: readonly string[];
  /** @default 32 MiB */
  imageMaxBytes?: number;
}

/**
 * The store and the reader a worker copies with. A folder is made if it is not there.
 *
 * @example
 * const { store, fetcher } = storageOf({ target: { folder: '/srv/images' } }, 'https://api.astria.ai');
 */
export function storageOf(settings: StorageSettings, apiUrl: string): { store: ImageStore; fetcher: ImageFetcher } {
  const { target } = settings;
  let store: ImageStore;
  if ('folder' in target && typeof target.folder === 'string') {
    fs.mkdirSync(target.folder, { recursive: true });
    store = new FolderStore(target.folder);
  } else if ('s3' in target) store = new S3Store(target.s3);
  else store = target as ImageStore;
  const apiHost = new URL(apiUrl).host;
  const fetcher = new ImageFetcher({
    hosts: [...(settings.imageHosts ?? []), apiHost],
    maxBytes: settings.imageMaxBytes ?? DEFAULT_IMAGE_MAX_BYTES,
  });
  return { store, fetcher };
}
