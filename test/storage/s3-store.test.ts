/**
 * S3-compatible storage against a real store the project provisions (SeaweedFS, src/s3-server), with what tuneflow
 * relies on checked on the store itself: a conditional write (`If-None-Match: *`) refused 412 on an existing key,
 * versioning (each write a version: the store's own record of writes), multipart uploads listed. The S3Store writes
 * once per key, reads back, sends none of the SDK's newer default checksums, and the copy of a prompt's images is
 * idempotent: a retry writes nothing more and reads no service byte for an image it finds stored.
 */
import { promises as fs } from 'node:fs';
import { createServer, type Server } from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import * as net from 'node:net';
import type { AddressInfo } from 'node:net';
import {
  CreateMultipartUploadCommand,
  ListMultipartUploadsCommand,
  ListObjectVersionsCommand,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { solidPng } from '../../src/mock-service/png';
import { provisionWeed, startS3Server, type S3Server } from '../../src/s3-server';
import { copyPromptImages, sha256, StoredImageDiffers, type CheckedCopy } from '../../src/storage/copy';
import { ImageFetcher } from '../../src/storage/image-fetch';
import { S3Store } from '../../src/storage/s3';

jest.setTimeout(120_000);

let s3: S3Server;
let images: Server;
let imageHost: string;
let imageReads = 0;
const PNGS = [solidPng('a', 24), solidPng('b', 24)];

beforeAll(async () => {
  s3 = await startS3Server();
  images = createServer((req, res) => {
    imageReads++;
    const i = Number(/\/(\d+)\.png$/.exec(req.url ?? '')?.[1]);
    if (PNGS[i]) res.writeHead(200).end(PNGS[i]);
    else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => images.listen(0, '127.0.0.1', resolve));
  imageHost = `127.0.0.1:${(images.address() as AddressInfo).port}`;
}, 120_000);

afterAll(async () => {
  if (images) await new Promise((resolve) => images.close(resolve));
  await s3?.close();
});

const raw = () =>
  new S3Client({
    region: 'us-east-1',
    endpoint: s3.endpoint,
    forcePathStyle: true,
    credentials: s3.credentials,
    requestChecksumCalculation: 'WHEN_REQUIRED',
  });
const store = (prefix: string, endpoint = s3.endpoint) =>
  new S3Store({ bucket: s3.bucket, prefix, endpoint, credentials: s3.credentials });

test('the store honours what tuneflow relies on: If-None-Match refused 412, a version per write, multipart uploads listed', async () => {
  const client = raw();
  const Key = `features-${Date.now()}/a.png`;
  await client.send(new PutObjectCommand({ Bucket: s3.bucket, Key, Body: 'one', IfNoneMatch: '*' }));
  await expect(
    client.send(new PutObjectCommand({ Bucket: s3.bucket, Key, Body: 'two', IfNoneMatch: '*' })),
  ).rejects.toMatchObject({ $metadata: { httpStatusCode: 412 } });
  await client.send(new PutObjectCommand({ Bucket: s3.bucket, Key, Body: 'three' }));
  const versions = await client.send(new ListObjectVersionsCommand({ Bucket: s3.bucket, Prefix: Key }));
  expect(versions.Versions).toHaveLength(2);
  await client.send(new CreateMultipartUploadCommand({ Bucket: s3.bucket, Key: `${Key}.mp` }));
  const uploads = await client.send(new ListMultipartUploadsCommand({ Bucket: s3.bucket, Prefix: Key }));
  expect(uploads.Uploads?.map((u) => u.Key)).toEqual([`${Key}.mp`]);
  client.destroy();
});

test('S3Store writes a key once (existed after), reads it back, answers undefined for none, and names s3:// locations', async () => {
  const prefix = `store-${Date.now()}`;
  const s = store(prefix);
  const meta = { contentType: 'image/png', sha256: sha256(PNGS[0]) };
  expect(await s.write('t/k/prompt-1/image-0.png', PNGS[0], meta)).toBe('written');
  expect(await s.write('t/k/prompt-1/image-0.png', PNGS[1], meta)).toBe('existed');
  expect(Buffer.from((await s.read('t/k/prompt-1/image-0.png'))!)).toEqual(PNGS[0]);
  expect(await s.read('t/k/prompt-1/none.png')).toBeUndefined();
  expect(s.location('t/k/prompt-1/image-0.png')).toBe(`s3://${s3.bucket}/${prefix}/t/k/prompt-1/image-0.png`);
  const client = raw();
  const versions = await client.send(new ListObjectVersionsCommand({ Bucket: s3.bucket, Prefix: prefix }));
  client.destroy();
  expect(versions.Versions).toHaveLength(1);
  s.close();
});

test("S3Store's requests carry no SDK checksum (some S3-compatible stores refuse them), only its own SHA-256 metadata", async () => {
  const { hostname, port } = new URL(s3.endpoint);
  const heads: string[] = [];
  const proxy = net.createServer((client) => {
    const upstream = net.connect(Number(port), hostname);
    client.on('data', (chunk: Buffer) => {
      heads.push(chunk.toString('latin1').split('\r\n\r\n')[0]);
      upstream.write(chunk);
    });
    upstream.pipe(client);
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
    client.on('close', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const s = store(`checksums-${Date.now()}`, `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`);
  await s.write('t/k/prompt-1/image-0.png', PNGS[0], { contentType: 'image/png', sha256: sha256(PNGS[0]) });
  await s.read('t/k/prompt-1/image-0.png');
  s.close();
  await new Promise((resolve) => proxy.close(resolve));
  const put = heads.find((h) => h.startsWith('PUT '))!;
  expect(put).toMatch(/if-none-match: \*/i);
  expect(put).toMatch(new RegExp(`x-amz-meta-sha256: ${sha256(PNGS[0])}`, 'i'));
  expect(heads.join('\n')).not.toMatch(/x-amz-checksum-|x-amz-sdk-checksum-algorithm|x-amz-trailer/i);
});

test("a prompt's copy: stored with digests; a retry finds them and reads no service byte; another object under the key is StoredImageDiffers", async () => {
  const prefix = `copy-${Date.now()}`;
  const s = store(prefix);
  const fetcher = new ImageFetcher({ hosts: [imageHost], maxBytes: 1 << 20 });
  const job = { workflowId: 'order-1', promptId: 7, urls: [0, 1].map((i) => `http://${imageHost}/${i}.png`) };
  const before = imageReads;
  const stored = await copyPromptImages(s, fetcher, job);
  expect(stored).toEqual(
    PNGS.map((png, i) => ({
      location: `s3://${s3.bucket}/${prefix}/default/order-1/prompt-7/image-${i}.png`,
      sha256: sha256(png),
      bytes: png.length,
      content_type: 'image/png',
    })),
  );
  expect(imageReads - before).toBe(2);
  // A retry given what the first attempt checked (its heartbeats) reads each back, and no service byte.
  const checked: CheckedCopy[] = [];
  await copyPromptImages(s, fetcher, { ...job }, { checked: (c) => checked.push(c) });
  expect(imageReads - before).toBe(4);
  expect(await copyPromptImages(s, fetcher, job, { earlier: checked })).toEqual(stored);
  expect(imageReads - before).toBe(4);
  // What an earlier attempt says it checked counts only with its digest: another's is copied as any image.
  const forged = checked.map((c) => ({ ...c, stored: { ...c.stored, sha256: '0'.repeat(64) } }));
  expect(await copyPromptImages(s, fetcher, job, { earlier: forged })).toEqual(stored);
  expect(imageReads - before).toBe(6);
  // Without the look (a first attempt racing another worker): the write finds the key taken, reads back, same digest.
  expect(await copyPromptImages(s, fetcher, job)).toEqual(stored);
  const client = raw();
  const versions = await client.send(new ListObjectVersionsCommand({ Bucket: s3.bucket, Prefix: prefix }));
  expect(versions.Versions).toHaveLength(2);
  // Another image under a key of this job (not tuneflow's write): left as it is, never replaced.
  const other = { ...job, promptId: 8, urls: [`http://${imageHost}/0.png`] };
  await client.send(
    new PutObjectCommand({ Bucket: s3.bucket, Key: `${prefix}/default/order-1/prompt-8/image-0.png`, Body: PNGS[1] }),
  );
  client.destroy();
  await expect(copyPromptImages(s, fetcher, other)).rejects.toBeInstanceOf(StoredImageDiffers);
  await fetcher.close();
  s.close();
});

test('a port taken before weed binds it (weed exits "address already in use") is a fresh set of ports, not a failed store', async () => {
  // A weed that refuses its first start as a bind conflict does, then runs the real one.
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tuneflow-weed-'));
  const starts = path.join(dir, 'starts');
  const weed = path.join(dir, 'weed');
  await fs.writeFile(
    weed,
    `#!/bin/sh\necho "$@" >> '${starts}'\n` +
      `if [ "$(wc -l < '${starts}')" -eq 1 ]; then echo "listen tcp: bind: address already in use" >&2; exit 255; fi\n` +
      `exec '${await provisionWeed()}' "$@"\n`,
    { mode: 0o755 },
  );
  const again = await startS3Server({ weed });
  try {
    const lines = (await fs.readFile(starts, 'utf8')).trim().split('\n');
    expect(lines).toHaveLength(2);
    const s3Port = (line: string) => /-s3\.port=(\d+)/.exec(line)?.[1];
    expect(s3Port(lines[1]!)).not.toBe(s3Port(lines[0]!));
    expect(again.endpoint).toBe(`http://127.0.0.1:${s3Port(lines[1]!)}`);
    const client = new S3Client({
      region: 'us-east-1',
      endpoint: again.endpoint,
      forcePathStyle: true,
      credentials: again.credentials,
    });
    await client.send(new PutObjectCommand({ Bucket: again.bucket, Key: 'after-a-refused-bind', Body: 'one' }));
    client.destroy();
  } finally {
    await again.close();
    await fs.rm(dir, { recursive: true, force: true });
  }
});
