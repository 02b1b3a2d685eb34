/**
 * The upload directory: the only place a job's file paths may name. A path from a job's input (another team's, a raw
 * start's) is read only when it names a regular file inside the directory the operator named (TUNEFLOW_UPLOAD_DIR);
 * anything else is InvalidInput naming the field, before any request. Without an upload directory a worker takes image
 * URLs only.
 *
 * A path is a name, and a name can be swapped between a check and a read. So each file is opened once (no link
 * followed in its last component; non-blocking, so a FIFO cannot hold the open), checked on that handle (a regular
 * file, its size, and where it really is: the kernel's path of the open file on Linux, `/proc/self/fd`) and read from
 * the same handle. What was checked is what is sent.
 */
import { File } from 'node:buffer';
import { constants, promises as fs, type BigIntStats } from 'node:fs';
import * as path from 'node:path';
import { InvalidInputError } from '../api/errors';
import { isUploadPath, PATH_RULE, type UploadPath } from '../contract/bounds';

export type { UploadPath } from '../contract/bounds';

/** The largest file a job may upload: the service advises about 3 MB per training image. */
export const UPLOAD_MAX_BYTES = 32 * 1024 * 1024;

/** No link followed in the last component; a FIFO (or a device) opens at once instead of waiting for a writer. */
const OPEN_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** Files of one request open at once: bounds the worker's descriptors and the bytes being read, whatever the count. */
const OPEN_AT_ONCE = 4;

const NOT_A_FILE = 'must name a regular file in the upload directory';
const A_LINK = 'must name the file itself, not a symbolic link, in the upload directory';

export interface UploadReadOptions {
  /**
   * Called for each file once its handle has passed the checks, before its bytes are read. A test seam: a file swapped
   * here changes nothing that is sent.
   */
  beforeRead?: (file: { field: string; path: string }) => void | Promise<void>;
  /**
   * Whether the handle's path is read from `/proc/self/fd` (where the system has it); false takes the way of systems
   * without it (the handle's device and inode matched against the real path's), so tests can run it on Linux.
   * @default true
   */
  procSelfFd?: boolean;
}

/**
 * A job's files, each opened once, checked on its handle and read from it; throws InvalidInputError naming every field
 * whose path is outside the upload directory, a link, not a regular file, too large, or when there is no upload
 * directory. Returns the files (named as on disk), in order.
 *
 * @example
 * const [image] = await readUploads('/srv/uploads', [{ field: 'tune.images[0]', path: 'order-1/1.jpg' }]);
 */
export async function readUploads(
  dir: string | undefined,
  paths: readonly UploadPath[],
  options: UploadReadOptions = {},
): Promise<File[]> {
  return (await eachUpload(dir, paths, { ...options, read: true })) as File[];
}

/**
 * The same checks as readUploads, on the same kind of handle, without reading a byte: the early refusal a workflow asks
 * for before it creates anything. The read does not trust it: it checks again on its own handle.
 */
export async function checkUploadPaths(dir: string | undefined, paths: readonly UploadPath[]): Promise<void> {
  await eachUpload(dir, paths, { read: false });
}

async function eachUpload(
  dir: string | undefined,
  paths: readonly UploadPath[],
  options: UploadReadOptions & { read: boolean },
): Promise<(File | undefined)[]> {
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
  const files: (File | undefined)[] = new Array<File | undefined>(paths.length);
  const issues: { index: number; field: string; rule: string }[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < paths.length) {
      const index = next++;
      const { field } = paths[index];
      const outcome = await openChecked(root, paths[index], options);
      if (typeof outcome === 'string') issues.push({ index, field, rule: outcome });
      else files[index] = outcome.file;
    }
  };
  await Promise.all(Array.from({ length: Math.min(OPEN_AT_ONCE, paths.length) }, worker));
  if (issues.length)
    throw new InvalidInputError(
      'input',
      issues.sort((a, b) => a.index - b.index).map(({ field, rule }) => ({ field, rule })),
    );
  return files;
}

/** Why `file` may not be read, or what was read from it (nothing when `read` is false). */
async function openChecked(
  root: string,
  { field, path: file }: UploadPath,
  { read, beforeRead, procSelfFd = true }: UploadReadOptions & { read: boolean },
): Promise<string | { file?: File }> {
  if (!isUploadPath(file)) return PATH_RULE;
  const target = path.resolve(root, file);
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(target, OPEN_FLAGS);
  } catch (err) {
    return openRefusal(err);
  }
  try {
    const stat = await handle.stat({ bigint: true });
    if (!stat.isFile()) return NOT_A_FILE;
    const real = await handlePath(handle, target, stat, procSelfFd);
    // After every link: a file reached through a directory link that points outside is outside.
    if (real === undefined || !real.startsWith(root + path.sep)) return PATH_RULE;
    if (stat.size > BigInt(UPLOAD_MAX_BYTES)) return `must be at most ${UPLOAD_MAX_BYTES} bytes (it has ${stat.size})`;
    if (!read) return {};
    await beforeRead?.({ field, path: target });
    return { file: new File([await readAtMost(handle, Number(stat.size))], path.basename(target)) };
  } finally {
    await handle.close();
  }
}

/** A refused open in the input's words; a failure of the worker itself (EMFILE, EIO) is thrown, to be retried. */
function openRefusal(err: unknown): string {
  switch ((err as NodeJS.ErrnoException).code) {
    case 'ELOOP': // O_NOFOLLOW on a link (Linux, macOS)
    case 'EMLINK': // the same on FreeBSD
      return A_LINK;
    case 'ENOENT':
    case 'ENOTDIR':
      return 'names no file in the upload directory';
    case 'EACCES':
    case 'EPERM':
      return 'must name a file the worker may read in the upload directory';
    case 'ENXIO': // a socket
    case 'EOPNOTSUPP':
      return NOT_A_FILE;
    default:
      throw err;
  }
}

/**
 * Where the open file really is, or undefined when that cannot be told. Linux: the kernel's own path of the handle.
 * Without /proc/self/fd: the real path of `target` now, accepted only when it names the very file the handle holds
 * (same device and inode).
 */
async function handlePath(
  handle: fs.FileHandle,
  target: string,
  stat: BigIntStats,
  procSelfFd: boolean,
): Promise<string | undefined> {
  if (procSelfFd && process.platform === 'linux') {
    try {
      return await fs.readlink(`/proc/self/fd/${handle.fd}`);
    } catch {
      // No /proc mounted (a bare chroot): the way other systems take.
    }
  }
  try {
    const real = await fs.realpath(target);
    const now = await fs.stat(real, { bigint: true });
    return now.dev === stat.dev && now.ino === stat.ino ? real : undefined;
  } catch {
    return undefined;
  }
}

/** At most `size` bytes from the start of the handle: a file that grew after its check is sent as it was checked. */
async function readAtMost(handle: fs.FileHandle, size: number): Promise<Buffer> {
  const bytes = Buffer.allocUnsafe(size);
  let filled = 0;
  while (filled < size) {
    const { bytesRead } = await handle.read(bytes, filled, size - filled, filled);
    if (bytesRead === 0) break;
    filled += bytesRead;
  }
  return bytes.subarray(0, filled);
}

/**
 * A tune's file paths (`images`) as files read from the upload directory, checked before any request.
 *
 * @example
 * const tune = await uploadsOfTune('/srv/uploads', { name: 'woman', images: ['a/1.jpg'] });
 */
export async function uploadsOfTune<T extends { images?: string[] }>(
  dir: string | undefined,
  tune: T,
  options?: UploadReadOptions,
): Promise<WithFiles<T>> {
  if (!Array.isArray(tune.images)) return tune as WithFiles<T>;
  const paths = tune.images.map((path, i) => ({ field: `tune.images[${i}]`, path: path as string }));
  return { ...tune, images: await readUploads(dir, paths, options) } as WithFiles<T>;
}

/** A prompt's file paths (`input_image`, `mask_image`) as files read from the upload directory. */
export async function uploadsOfPrompt<P extends { input_image?: string; mask_image?: string }>(
  dir: string | undefined,
  prompt: P,
  options?: UploadReadOptions,
): Promise<WithFiles<P>> {
  const keys = (['input_image', 'mask_image'] as const).filter((key) => typeof prompt[key] === 'string');
  if (!keys.length) return prompt as WithFiles<P>;
  const paths = keys.map((key) => ({ field: `prompt.${key}`, path: prompt[key] as string }));
  const files = await readUploads(dir, paths, options);
  return { ...prompt, ...Object.fromEntries(keys.map((key, i) => [key, files[i]])) } as WithFiles<P>;
}

/** A job's tune or prompt with its paths replaced by the files read from them. */
export type WithFiles<T> = {
  [K in keyof T]: K extends 'images' ? File[] : K extends 'input_image' | 'mask_image' ? File : T[K];
};
