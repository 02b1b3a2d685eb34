/**
 * Found again: a job's stored images checked against their digests, and every image that exists only at the service
 * (never copied, deleted from storage, or changed there) listed with its service URL, to copy again while the
 * service still has it (30 days after training, unless extended).
 */
import type { ResultPrompt } from '../contract/results';
import type { StoredImage } from '../contract/storage';
import { copyImage, sha256 } from './copy';
import type { ImageFetcher } from './image-fetch';
import type { ImageStore } from './store';

/** One image that is not in storage as the job's result says. */
export interface StoredImageProblem {
  workflowId: string;
  promptId: number;
  /** Its position in the prompt's `images`. */
  index: number;
  /** The service's URL: where it still is, until the service deletes it. */
  url: string;
  /** `missing`: not in storage; `differs`: stored bytes are not the digest's; `not-copied`: the job never copied it. */
  problem: 'missing' | 'differs' | 'not-copied';
  location?: string;
}

export interface StoredImageCheck {
  /** Images the results name. */
  images: number;
  /** Of them, in storage with their digest. */
  stored: number;
  problems: StoredImageProblem[];
}

/** A job's result (any of the three workflows'): its prompts, each with its stored copies. */
export interface CheckedJob {
  workflowId: string;
  prompts: readonly ResultPrompt[];
}

/**
 * Reads every stored copy the jobs' results name and compares its SHA-256; lists each image that is only at the
 * service. Reads a few at a time; changes nothing.
 *
 * @example
 * const { problems } = await checkStoredImages(store, [{ workflowId: 'order-1', prompts: result.prompts }]);
 */
export async function checkStoredImages(
  store: ImageStore,
  jobs: readonly CheckedJob[],
  { concurrency = 8 }: { concurrency?: number } = {},
): Promise<StoredImageCheck> {
  const tasks: { job: CheckedJob; prompt: ResultPrompt; index: number; url: string; copy?: StoredImage }[] = [];
  for (const job of jobs)
    for (const prompt of job.prompts)
      for (const [index, url] of (prompt.images ?? []).entries())
        tasks.push({ job, prompt, index, url, copy: prompt.stored_images?.[index] });
  const problems: (StoredImageProblem | undefined)[] = new Array(tasks.length);
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const i = next++;
      const { job, prompt, index, url, copy } = tasks[i];
      const at = { workflowId: job.workflowId, promptId: prompt.id, index, url };
      if (!copy) {
        problems[i] = { ...at, problem: 'not-copied' };
        continue;
      }
      const key = keyOfLocation(store, copy.location);
      const bytes = key === undefined ? undefined : await store.read(key);
      if (!bytes) problems[i] = { ...at, problem: 'missing', location: copy.location };
      else if (sha256(bytes) !== copy.sha256) problems[i] = { ...at, problem: 'differs', location: copy.location };
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, tasks.length) }, worker));
  const found = problems.filter((p): p is StoredImageProblem => p !== undefined);
  return { images: tasks.length, stored: tasks.length - found.length, problems: found };
}

/**
 * Copies again each `missing` or `not-copied` image while the service has it; answers the copies made and the images
 * it could not copy (gone at the service, say). A `differs` image is left as it is: the store holds another object
 * under its key, which tuneflow never replaces.
 *
 * @example
 * const { copied, failed } = await copyAgain(store, fetcher, check.problems);
 */
export async function copyAgain(
  store: ImageStore,
  fetcher: ImageFetcher,
  problems: readonly StoredImageProblem[],
): Promise<{
  copied: (StoredImageProblem & { stored: StoredImage })[];
  failed: (StoredImageProblem & { error: string })[];
}> {
  const copied: (StoredImageProblem & { stored: StoredImage })[] = [];
  const failed: (StoredImageProblem & { error: string })[] = [];
  for (const problem of problems) {
    if (problem.problem === 'differs') {
      failed.push({ ...problem, error: 'another object is stored under its key; tuneflow never replaces one' });
      continue;
    }
    try {
      copied.push({ ...problem, stored: await copyImage(store, fetcher, problem) });
    } catch (err) {
      failed.push({ ...problem, error: (err as Error).message });
    }
  }
  return { copied, failed };
}

/** The key of `location` in `store`; undefined when the location is another store's. */
function keyOfLocation(store: ImageStore, location: string): string | undefined {
  const marker = 'tuneflow-key-probe';
  const probe = store.location(marker);
  const base = probe.slice(0, probe.length - marker.length);
  if (!location.startsWith(base)) return undefined;
  const key = location.slice(base.length);
  // A folder's location is a file URL: its key's segments are URL-encoded there.
  return probe.startsWith('file:') ? key.split('/').map(decodeURIComponent).join('/') : key;
}
