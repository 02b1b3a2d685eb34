/**
 * The upload directory: the only place a job's file paths may name. A path from a job's input (another team's, a raw
 * start's) is resolved against the directory the operator named (TUNEFLOW_UPLOAD_DIR), after symlinks, and read only
 * when it is a regular file inside it; anything else is InvalidInput naming the field, before any request. Without an
 * upload directory a worker takes image URLs only.
 */
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { InvalidInputError } from '../api/errors';
import { isUploadPath, PATH_RULE, type UploadPath } from '../contract/bounds';

export type { UploadPath } from '../contract/bounds';

/** The largest file a job may upload: the service advises about 3 MB per training image. */
export const UPLOAD_MAX_BYTES = 32 * 1024 * 1024;

/**
 * Resolves a job's file paths inside `dir`; throws InvalidInputError naming every field whose path is outside it, not
 * a regular file, too large, or when there is no upload directory. Returns the real paths, in order.
 *
 * @example
 * await resolveUploads('/srv/uploads', [{ field: 'tune.images[0]', path: 'order-1/1.jpg' }]); // ['/srv/uploads/order-1/1.jpg']
 */
export async function resolveUploads(dir: string | undefined, paths: readonly UploadPath[]): Promise<string[]> {
  if (paths.length === 0) return [];
  if (dir === undefined)
    throw new InvalidInputError(
      'input',
      paths.map(({ field }) => ({
        field,
        rule: 'is a file path, and this worker reads none (no TUNEFLOW_UPLOAD_DIR): send image URLs',
      })),
    );
  const root = await fs.realpath(dir);
  const issues: { field: string; rule: string }[] = [];
  const resolved = await Promise.all(
    paths.map(async ({ field, path: file }) => {
      const rule = await refusal(root, file);
      if (typeof rule === 'string') issues.push({ field, rule });
      return typeof rule === 'string' ? '' : rule.real;
    }),
  );
  if (issues.length) throw new InvalidInputError('input', issues);
  return resolved;
}

/** Why `file` may not be read, or its real path. */
async function refusal(root: string, file: string): Promise<string | { real: string }> {
  if (!isUploadPath(file)) return PATH_RULE;
  let real: string;
  try {
    real = await fs.realpath(path.resolve(root, file));
  } catch {
    return 'names no file in the upload directory';
  }
  // After symlinks: a link inside that points outside is outside.
  if (!real.startsWith(root + path.sep)) return PATH_RULE;
  const stat = await fs.stat(real);
  if (!stat.isFile()) return 'must name a regular file in the upload directory';
  if (stat.size > UPLOAD_MAX_BYTES) return `must be at most ${UPLOAD_MAX_BYTES} bytes (it has ${stat.size})`;
  return { real };
}

/**
 * A tune's file paths (`images`) as real paths inside the upload directory, checked before any request.
 *
 * @example
 * const tune = await uploadsOfTune('/srv/uploads', { name: 'woman', images: ['a/1.jpg'] });
 */
export async function uploadsOfTune<T extends { images?: unknown }>(dir: string | undefined, tune: T): Promise<T> {
  if (!Array.isArray(tune.images)) return tune;
  const paths = tune.images.map((path, i) => ({ field: `tune.images[${i}]`, path: path as string }));
  return { ...tune, images: await resolveUploads(dir, paths) };
}

/** A prompt's file paths (`input_image`, `mask_image`) as real paths inside the upload directory. */
export async function uploadsOfPrompt<P extends { input_image?: unknown; mask_image?: unknown }>(
  dir: string | undefined,
  prompt: P,
): Promise<P> {
  const keys = (['input_image', 'mask_image'] as const).filter((key) => typeof prompt[key] === 'string');
  if (!keys.length) return prompt;
  const paths = keys.map((key) => ({ field: `prompt.${key}`, path: prompt[key] as string }));
  const real = await resolveUploads(dir, paths);
  return { ...prompt, ...Object.fromEntries(keys.map((key, i) => [key, real[i]])) };
}
