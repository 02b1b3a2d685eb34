/**
 * Where a job's images are copied: the owner's storage. The embedded default is a folder on the worker's disk; any
 * S3-compatible store is the other (./s3.ts). A write never replaces an object: a retried or second copy of the same
 * image finds it there (the key names the job, the prompt and the image), so each image is written once.
 */
import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';

export interface ImageStore {
  /** What the start report and errors call it: `folder /srv/images`, `s3://bucket/prefix`. */
  readonly name: string;
  /** Where `key` is, as the result says: `file:///srv/images/key`, `s3://bucket/prefix/key`. */
  location(key: string): string;
  /**
   * Writes `bytes` under `key` unless an object is there already: `existed` then, and nothing is written. An abort of
   * `signal` (the activity's cancellation) ends the write.
   */
  write(
    key: string,
    bytes: Uint8Array,
    meta: { contentType: string; sha256: string },
    signal?: AbortSignal,
  ): Promise<'written' | 'existed'>;
  /** The object's bytes; undefined when there is none. */
  read(key: string, signal?: AbortSignal): Promise<Uint8Array | undefined>;
  /** Closes what the store holds open (its connections). */
  close?(): void;
}

/** A storage key as tuneflow makes them (src/contract/storage.ts): relative, no empty, `.` or `..` segment. */
export function checkKey(key: string): string {
  const segments = key.split('/');
  if (!key || key.length > 1024 || segments.some((s) => s === '' || s === '.' || s === '..' || s.includes('\\')))
    throw new TypeError(`storage key ${JSON.stringify(key)}: must be relative, with no empty, "." or ".." segment`);
  return key;
}

/**
 * The embedded default: a folder. A write goes to a file of its own beside the object, is flushed, and is linked
 * into place only if no object is there (link fails on an existing name, atomically): a worker killed mid-write
 * leaves no object, only a `.partial` file that the next write of that image removes.
 */
export class FolderStore implements ImageStore {
  readonly root: string;
  readonly name: string;

  constructor(root: string) {
    if (!path.isAbsolute(root)) throw new TypeError(`FolderStore: ${JSON.stringify(root)} must be an absolute path`);
    this.root = path.resolve(root);
    this.name = `folder ${this.root}`;
  }

  location(key: string): string {
    return pathToFileURL(this.pathOf(key)).href;
  }

  async write(
    key: string,
    bytes: Uint8Array,
    _meta?: { contentType: string; sha256: string },
  ): Promise<'written' | 'existed'> {
    const target = this.pathOf(key);
    await fs.mkdir(path.dirname(target), { recursive: true });
    await removePartials(target);
    const partial = `${target}.${randomUUID()}.partial`;
    const file = await fs.open(partial, 'wx', 0o644);
    try {
      await file.writeFile(bytes);
      await file.sync();
    } finally {
      await file.close();
    }
    try {
      await fs.link(partial, target);
      // The new name flushed too: a crash after the copy is reported stored must not lose it.
      const folder = await fs.open(path.dirname(target), 'r');
      await folder.sync().finally(() => folder.close());
      return 'written';
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') return 'existed';
      throw err;
    } finally {
      await fs.rm(partial, { force: true });
    }
  }

  async read(key: string): Promise<Uint8Array | undefined> {
    try {
      return await fs.readFile(this.pathOf(key));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  private pathOf(key: string): string {
    return path.join(this.root, ...checkKey(key).split('/'));
  }
}

/** What a killed write left beside `target`: its `.partial` files. */
async function removePartials(target: string): Promise<void> {
  const base = `${path.basename(target)}.`;
  const names = await fs.readdir(path.dirname(target)).catch(() => [] as string[]);
  await Promise.all(
    names
      .filter((n) => n.startsWith(base) && n.endsWith('.partial'))
      .map((n) => fs.rm(path.join(path.dirname(target), n), { force: true })),
  );
}
