/**
 * The embedded default store, on a real folder: a write never replaces an object (a second write of the key answers
 * `existed` and leaves the first bytes), a killed write's `.partial` file is no object and is cleared by the next
 * write, keys cannot leave the folder, and locations are file URLs the check reads back.
 */
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FolderStore } from '../../src/storage/store';

let root: string;
beforeEach(async () => (root = await mkdtemp(join(tmpdir(), 'tuneflow-folder-store-'))));
afterEach(() => rm(root, { recursive: true, force: true }));

const meta = { contentType: 'image/png', sha256: 'x' };

test('writes once: a second write of the key answers existed and keeps the first bytes', async () => {
  const store = new FolderStore(root);
  expect(await store.write('default/order-1/prompt-7/image-0.png', Buffer.from('first'), meta)).toBe('written');
  expect(await store.write('default/order-1/prompt-7/image-0.png', Buffer.from('second'), meta)).toBe('existed');
  expect(Buffer.from((await store.read('default/order-1/prompt-7/image-0.png'))!).toString()).toBe('first');
  expect(await readdir(join(root, 'default/order-1/prompt-7'))).toEqual(['image-0.png']);
});

test("a killed write's partial file is no object, and the next write of the key clears it", async () => {
  const store = new FolderStore(root);
  await store.write('t/k/prompt-1/image-1.png', Buffer.from('other'), meta);
  await writeFile(join(root, 't/k/prompt-1/image-0.png.0d1e.partial'), 'half');
  expect(await store.read('t/k/prompt-1/image-0.png')).toBeUndefined();
  expect(await store.write('t/k/prompt-1/image-0.png', Buffer.from('whole'), meta)).toBe('written');
  expect((await readdir(join(root, 't/k/prompt-1'))).sort()).toEqual(['image-0.png', 'image-1.png']);
});

test('keys stay inside the folder; the location is a file URL of the object', async () => {
  const store = new FolderStore(root);
  for (const key of ['../escape.png', 'a/../../b.png', '/abs.png', 'a//b.png', 'a\\b.png', ''])
    await expect(store.write(key, Buffer.from('x'), meta)).rejects.toThrow(/must be relative/);
  await store.write('default/a%20b/prompt-1/image-0.png', Buffer.from('y'), meta);
  const location = store.location('default/a%20b/prompt-1/image-0.png');
  expect(location).toBe(`file://${root}/default/a%2520b/prompt-1/image-0.png`);
  expect((await readFile(fileURLToPath(location))).toString()).toBe('y');
  expect(() => new FolderStore('relative/images')).toThrow(/must be an absolute path/);
});
