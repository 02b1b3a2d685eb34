/**
 * Where a job's image is in storage: its key names the tenant, the job, the prompt and the image, so the same image
 * of the same job always has the same key (a retry writes it once), and one tenant's images are under its own prefix.
 */
import { createHash } from 'node:crypto';
import { jobOfWorkflowId } from '../contract/tenants';

/** A job key's segment past this (percent-encoded) is cut and hashed: a folder's name holds at most 255 bytes. */
const MAX_SEGMENT = 160;

/**
 * The storage key of image `index` of prompt `promptId` of the job under `workflowId`.
 *
 * @example
 * imageKey('order-1', 7, 0, 'png'); // 'default/order-1/prompt-7/image-0.png'
 */
export function imageKey(workflowId: string, promptId: number, index: number, ext: string): string {
  const job = jobOfWorkflowId(workflowId);
  if (!job) throw new TypeError(`imageKey: ${JSON.stringify(workflowId)} is no job's workflow ID`);
  return `${job.tenant}/${keySegment(job.key)}/prompt-${promptId}/image-${index}.${ext}`;
}

/**
 * A job's key as one path segment: percent-encoded, dots too, so no key is `..` or a folder of its own; a long one
 * cut, with the SHA-256 of the whole key after it, so it stays one job's and fits a file name.
 */
function keySegment(key: string): string {
  const encoded = encodeURIComponent(key).replace(
    /[!'()*.~]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  if (encoded.length <= MAX_SEGMENT) return encoded;
  const digest = createHash('sha256').update(key).digest('hex').slice(0, 32);
  // Cut before a percent escape's end, never inside one.
  const cut = encoded.slice(0, MAX_SEGMENT - 33).replace(/%[0-9A-F]?$/, '');
  // `~` is escaped in every encoded key: a cut key never reads as another whole one.
  return `${cut}~${digest}`;
}
