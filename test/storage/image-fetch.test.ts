/**
 * The reader of the service's images, over real HTTP on loopback: what it sends (no API key, no header of the
 * service's client), the hosts it reads from, and its bounds (size, before and while reading; redirects; what is an
 * image), each refusal typed retryable or not for the copy's retry policy.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { solidPng } from '../../src/mock-service/png';
import { ImageFetcher, ImageFetchError } from '../../src/storage/image-fetch';

const PNG = solidPng('fetch', 32);
let server: Server;
let host: string;
const seen: IncomingHttpHeaders[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    seen.push(req.headers);
    const url = req.url ?? '/';
    if (url === '/image.png') return void res.writeHead(200, { 'content-type': 'image/png' }).end(PNG);
    if (url === '/lying.png') return void res.writeHead(200, { 'content-type': 'image/png' }).end('<html>no</html>');
    if (url === '/big.png')
      return void res.writeHead(200, { 'content-length': String(10_000) }).end(Buffer.alloc(10_000));
    if (url === '/chunked.png') {
      res.writeHead(200, { 'content-type': 'image/png' });
      res.write(PNG);
      res.write(Buffer.alloc(8_000));
      return void res.end(Buffer.alloc(8_000));
    }
    if (url === '/gone.png') return void res.writeHead(404).end();
    if (url === '/down.png') return void res.writeHead(503).end();
    if (url.startsWith('/hop/')) {
      const left = Number(url.slice('/hop/'.length));
      return void res.writeHead(302, { location: left > 0 ? `/hop/${left - 1}` : '/image.png' }).end();
    }
    if (url === '/away.png') return void res.writeHead(302, { location: 'http://elsewhere.invalid/x.png' }).end();
    res.writeHead(500).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise((resolve) => server.close(resolve)));

const fetcher = (maxBytes = 4_096) => new ImageFetcher({ hosts: [host], maxBytes, timeoutMs: 5_000 });

async function refusal(url: string, maxBytes?: number): Promise<ImageFetchError> {
  const f = fetcher(maxBytes);
  try {
    await f.fetch(url);
  } catch (err) {
    return err as ImageFetchError;
  } finally {
    await f.close();
  }
  throw new Error(`${url} was read`);
}

test('reads an image whole, typed by its bytes, and sends no authorization or cookie header', async () => {
  const f = fetcher();
  const image = await f.fetch(`http://${host}/image.png`);
  await f.close();
  expect(image).toEqual({ bytes: PNG, contentType: 'image/png', ext: 'png' });
  const headers = seen[seen.length - 1];
  expect(headers.authorization).toBeUndefined();
  expect(headers.cookie).toBeUndefined();
  expect(headers.accept).toBe('image/*');
});

test('refuses, not retried: a body that is no image whatever its content type, one over the bound by its length or as it streams', async () => {
  expect(await refusal(`http://${host}/lying.png`)).toMatchObject({
    retryable: false,
    reason: 'refused',
    message: expect.stringContaining('is not an image'),
  });
  expect(await refusal(`http://${host}/big.png`)).toMatchObject({
    retryable: false,
    message: expect.stringContaining('larger than 4096 bytes (TUNEFLOW_IMAGE_MAX_BYTES)'),
  });
  expect(await refusal(`http://${host}/chunked.png`)).toMatchObject({ retryable: false, reason: 'refused' });
});

test('a plain-http host not listed, a URL with credentials, a redirect to a host not listed, and too many redirects are refused', async () => {
  const other = new ImageFetcher({ hosts: ['images.example'], maxBytes: 4_096 });
  await expect(other.fetch(`http://${host}/image.png`)).rejects.toMatchObject({
    retryable: false,
    message: expect.stringContaining(`host ${host} is not allowed (TUNEFLOW_IMAGE_HOSTS`),
  });
  await other.close();
  expect(await refusal(`http://user:pw@${host}/image.png`)).toMatchObject({ retryable: false });
  expect(await refusal(`http://${host}/away.png`)).toMatchObject({
    message: expect.stringContaining('host elsewhere.invalid is not allowed'),
  });
  const f = fetcher();
  expect((await f.fetch(`http://${host}/hop/2`)).bytes).toEqual(PNG);
  await f.close();
  expect(await refusal(`http://${host}/hop/3`)).toMatchObject({
    message: expect.stringContaining('more than 3 redirects'),
  });
});

test('an image the service no longer has is gone, not retried; a 5xx and a host that does not answer are retried', async () => {
  expect(await refusal(`http://${host}/gone.png`)).toMatchObject({ retryable: false, reason: 'gone' });
  expect(await refusal(`http://${host}/down.png`)).toMatchObject({ retryable: true, reason: 'unreachable' });
  const closed = new ImageFetcher({ hosts: ['127.0.0.1:1'], maxBytes: 4_096 });
  await expect(closed.fetch('http://127.0.0.1:1/x.png')).rejects.toMatchObject({ retryable: true });
  await closed.close();
});

test("an error names the image's origin and path, never its query (a signed URL's signature)", async () => {
  const err = await refusal(`http://${host}/gone.png?X-Amz-Signature=secret-signature`);
  expect(err.message).toContain(`http://${host}/gone.png`);
  expect(err.message).not.toContain('secret-signature');
});
