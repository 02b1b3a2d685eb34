/**
 * The mock's generated images: PNGs at the size the prompt asked (bounded), drawn when fetched, the same bytes every
 * time, and different for another prompt, seed or image index (colours, pattern and the facts written in).
 */
import { inflateSync } from 'node:zlib';
import { request } from 'undici';
import { startMockService, type MockService } from '../../src/mock-service';
import { MAX_IMAGE_SIDE, pngSize, promptImage, type ImageFacts } from '../../src/mock-service/png';
import { call, until, type PromptJson, type TuneJson } from './loopback';

jest.setTimeout(30_000);

let mock: MockService;
beforeAll(async () => (mock = await startMockService({ trainingTime: '50ms', inferenceTime: '50ms' })));
afterAll(() => mock.close());

/** The pixels of an unfiltered 8-bit RGB PNG of ours: rows without their filter byte. */
function pixels(png: Buffer): Buffer {
  const { width, height } = pngSize(png)!;
  const idats: Buffer[] = [];
  for (let at = 8; at < png.length; ) {
    const length = png.readUInt32BE(at);
    if (png.toString('latin1', at + 4, at + 8) === 'IDAT') idats.push(png.subarray(at + 8, at + 8 + length));
    at += 12 + length;
  }
  const raw = inflateSync(Buffer.concat(idats));
  expect(raw.length).toBe(height * (1 + width * 3));
  const out = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) {
    expect(raw[y * (1 + width * 3)]).toBe(0);
    raw.copy(out, y * width * 3, y * (1 + width * 3) + 1, (y + 1) * (1 + width * 3));
  }
  return out;
}

function distinctColours(rgb: Buffer): number {
  const seen = new Set<number>();
  for (let i = 0; i < rgb.length; i += 3) seen.add((rgb[i] << 16) | (rgb[i + 1] << 8) | rgb[i + 2]);
  return seen.size;
}

async function fetchPng(url: string): Promise<Buffer> {
  const res = await request(url);
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toBe('image/png');
  return Buffer.from(await res.body.arrayBuffer());
}

async function settledPrompt(key: string, attributes: Record<string, unknown>): Promise<PromptJson> {
  const tune = await call<TuneJson>(mock.url, key, 'POST', '/tunes', {
    tune: { title: `images-${Math.random()}`, name: 'dog', branch: 'fast', image_urls: ['https://images.test/1.jpg'] },
  });
  const created = await call<PromptJson>(mock.url, key, 'POST', `/tunes/${tune.body.id}/prompts`, {
    prompt: { text: 'sks dog on a beach', ...attributes },
  });
  expect(created.status).toBe(201);
  return until(
    async () =>
      (await call<PromptJson>(mock.url, key, 'GET', `/tunes/${tune.body.id}/prompts/${created.body.id}`)).body,
    (p) => p.images.length > 0,
  );
}

const facts: ImageFacts = { width: 64, height: 48, promptId: 1504951, index: 0, seed: 42 };

describe('promptImage', () => {
  test('draws the asked size with a pattern and written facts, deterministically', () => {
    const png = promptImage(facts);
    expect(pngSize(png)).toEqual({ width: 64, height: 48 });
    expect(promptImage({ ...facts }).equals(png)).toBe(true);
    // Two pattern colours, the darkened panel behind the text, and the text itself: not a flat square.
    expect(distinctColours(pixels(png))).toBeGreaterThanOrEqual(4);
  });

  test('another prompt, seed or image index gives other pixels', () => {
    const base = pixels(promptImage(facts));
    for (const other of [{ promptId: 1504952 }, { seed: 43 }, { seed: null }, { index: 1 }])
      expect(pixels(promptImage({ ...facts, ...other })).equals(base)).toBe(false);
  });

  test(`sides are bounded to 8..${MAX_IMAGE_SIDE}`, () => {
    expect(pngSize(promptImage({ ...facts, width: 4096, height: 2 }))).toEqual({ width: MAX_IMAGE_SIDE, height: 8 });
  });
});

describe('GET /images/:name', () => {
  test("serves each image of a prompt at the prompt's w x h, the same bytes on every fetch", async () => {
    const prompt = await settledPrompt('images-1', { w: 768, h: 1024, seed: 7, num_images: 2 });
    const [first, second] = await Promise.all(prompt.images.map(fetchPng));
    expect(pngSize(first)).toEqual({ width: 768, height: 1024 });
    expect(pngSize(second)).toEqual({ width: 768, height: 1024 });
    expect(first.equals(second)).toBe(false);
    expect((await fetchPng(prompt.images[0])).equals(first)).toBe(true);
    expect(first.equals(promptImage({ width: 768, height: 1024, promptId: prompt.id, index: 0, seed: 7 }))).toBe(true);
  });

  test('a prompt without w and h gets 512x512; one asking more than the bound gets the bound', async () => {
    const plain = await settledPrompt('images-2', {});
    expect(pngSize(await fetchPng(plain.images[0]))).toEqual({ width: 512, height: 512 });
    const large = await settledPrompt('images-2', { w: 2048, h: 512 });
    expect(pngSize(await fetchPng(large.images[0]))).toEqual({ width: MAX_IMAGE_SIDE, height: 512 });
  });

  test('other names are drawn at the default size; names that are no PNG are 404', async () => {
    expect(pngSize(await fetchPng(`${mock.url}/images/training-1.png`))).toEqual({ width: 512, height: 512 });
    expect((await request(`${mock.url}/images/training-1.jpg`)).statusCode).toBe(404);
  });
});
