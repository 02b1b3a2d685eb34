/**
 * Real, valid PNG images: generated prompt images at the size the prompt asked, whose colours, pattern and written
 * facts tell which prompt, seed and image index made them; and small solid squares for tests. Built with node:zlib
 * and a CRC32 of our own (node:zlib's crc32 is Node 22+).
 */
import { deflateSync } from 'node:zlib';

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

/** CRC-32 (ISO 3309), the checksum of every PNG chunk. */
export function crc32(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function chunk(type: string, data: Buffer): Buffer {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, 'latin1');
  data.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}

/** FNV-1a: a cheap, stable hash for deterministic colors and inspection results. */
export function fnv1a(input: string | Uint8Array): number {
  let h = 0x811c9dc5;
  const bytes = typeof input === 'string' ? Buffer.from(input) : input;
  for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ bytes[i], 0x01000193);
  return h >>> 0;
}

/** An RGB PNG (8 bits, no interlace) of `width` x `height` from `rgb`, row after row, 3 bytes a pixel. */
function encodePng(width: number, height: number, rgb: Uint8Array, level = 6): Buffer {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 8; // bit depth
  header[9] = 2; // color type: truecolor RGB
  // bytes 10-12: compression, filter and interlace methods, all 0
  const row = 1 + width * 3;
  const raw = Buffer.alloc(row * height);
  for (let y = 0; y < height; y++) {
    raw[y * row] = 0; // filter type: none
    raw.set(rgb.subarray(y * width * 3, (y + 1) * width * 3), y * row + 1);
  }
  return Buffer.concat([
    SIGNATURE,
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(raw, { level })),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/**
 * A solid-color RGB PNG of `size` x `size` pixels; the color is derived from `seed`.
 * @example res.end(solidPng('123-0.png'));
 */
export function solidPng(seed: string, size = 16): Buffer {
  const h = fnv1a(seed);
  const rgb = Buffer.alloc(size * size * 3);
  for (let i = 0; i < size * size; i++) rgb.set([h & 0xff, (h >>> 8) & 0xff, (h >>> 16) & 0xff], i * 3);
  return encodePng(size, size, rgb);
}

/** The largest side the mock draws: requests for more get this much (a mock image needs no more). */
export const MAX_IMAGE_SIDE = 1024;

/** What a generated image shows, so a person (or a test) can tell which prompt, seed and image made it. */
export interface ImageFacts {
  width: number;
  height: number;
  /** The prompt (or pack prompt) that made it; its colours derive from it. */
  promptId: number;
  /** The image's position among the prompt's images; it picks the pattern. */
  index: number;
  /** The prompt's seed, or null when none was asked; it sets the pattern's angle and spacing. */
  seed: number | null;
  /** A first line of text, e.g. `PROMPT 123`; the default names the prompt. */
  title?: string;
}

/**
 * A generated image: the prompt's colours, a pattern picked by the image index and shaped by the seed, and the
 * facts written in (prompt id, seed, image index, size) with a 5x7 pixel font. Deterministic: the same facts always
 * give the same bytes. Sides are clamped to 8..MAX_IMAGE_SIDE.
 * @example res.end(promptImage({ width: 768, height: 1024, promptId: 123, index: 0, seed: 42 }));
 */
export function promptImage(facts: ImageFacts): Buffer {
  const width = clampSide(facts.width);
  const height = clampSide(facts.height);
  // Golden-ratio steps: consecutive prompt ids (a job's prompts) get hues far apart.
  const hue = (facts.promptId * 0.618033988749895) % 1;
  const base = hsl(hue, 0.55, 0.45);
  const accent = hsl((hue + 0.5) % 1, 0.6, 0.7);
  const seedHash = fnv1a(`seed ${facts.seed ?? 'none'}`);
  const angle = ((seedHash % 180) * Math.PI) / 180;
  const spacing = 12 + ((seedHash >>> 8) % 5) * Math.max(4, Math.round(Math.min(width, height) / 64));
  const cos = Math.cos(angle);
  const sin = Math.sin(angle);
  const cx = width / 2;
  const cy = height / 2;
  const pattern = facts.index % 4;
  const rgb = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const u = (x - cx) * cos + (y - cy) * sin;
      const v = -(x - cx) * sin + (y - cy) * cos;
      let on: boolean;
      if (pattern === 0)
        on = Math.floor(u / spacing) % 2 === 0; // stripes
      else if (pattern === 1)
        on = (Math.floor(u / spacing) + Math.floor(v / spacing)) % 2 === 0; // checks
      else if (pattern === 2)
        on = Math.floor(Math.hypot(u, v) / spacing) % 2 === 0; // rings
      else on = Math.hypot(mod2(u / spacing) - 1, mod2(v / spacing) - 1) < 0.6; // dots
      rgb.set(on ? accent : base, (y * width + x) * 3);
    }
  }
  const lines = [
    facts.title ?? `PROMPT ${facts.promptId}`,
    `SEED ${facts.seed ?? '-'}`,
    `IMAGE ${facts.index}`,
    `${width}X${height}`,
  ];
  drawLabel(rgb, width, height, lines);
  // Level 1: the images are flat colour; faster deflate matters more than a few bytes.
  return encodePng(width, height, rgb, 1);
}

/** `a` modulo 2, in [0, 2) for negative `a` too. */
function mod2(a: number): number {
  return ((a % 2) + 2) % 2;
}

function clampSide(side: number): number {
  return Number.isFinite(side) ? Math.min(MAX_IMAGE_SIDE, Math.max(8, Math.round(side))) : 512;
}

function hsl(h: number, s: number, l: number): [number, number, number] {
  const a = s * Math.min(l, 1 - l);
  const f = (n: number) => {
    const k = (n + h * 12) % 12;
    return Math.round(255 * (l - a * Math.max(-1, Math.min(k - 3, 9 - k, 1))));
  };
  return [f(0), f(8), f(4)];
}

/** 5x7 glyphs, one string of 7 rows of 5 bits each: only the characters the labels use. */
const FONT: Record<string, string> = {
  '0': '01110100011001110101110011000101110',
  '1': '00100011000010000100001000010001110',
  '2': '01110100010000100010001000100011111',
  '3': '11111000100010000010000011000101110',
  '4': '00010001100101010010111110001000010',
  '5': '11111100001111000001000011000101110',
  '6': '00110010001000011110100011000101110',
  '7': '11111000010001000100010000100001000',
  '8': '01110100011000101110100011000101110',
  '9': '01110100011000101111000010001001100',
  A: '01110100011000111111100011000110001',
  D: '11100100101000110001100011001011100',
  E: '11111100001000011110100001000011111',
  G: '01110100011000010111100011000101111',
  I: '01110001000010000100001000010001110',
  M: '10001110111010110101100011000110001',
  N: '10001100011100110101100111000110001',
  O: '01110100011000110001100011000101110',
  P: '11110100011000111110100001000010000',
  R: '11110100011000111110101001001010001',
  S: '01111100001000001110000010000111110',
  T: '11111001000010000100001000010000100',
  X: '10001100010101000100010101000110001',
  '-': '00000000000000011111000000000000000',
  ' ': '00000000000000000000000000000000000',
};

/** Writes `lines` in white on a dark panel in the top-left corner, as large as fits (clipped on tiny images). */
function drawLabel(rgb: Buffer, width: number, height: number, lines: string[]): void {
  const longest = Math.max(...lines.map((l) => l.length));
  const scale = Math.max(
    1,
    Math.min(Math.floor((width * 0.8) / (longest * 6)), Math.floor((height * 0.5) / (lines.length * 9))),
  );
  const pad = 2 * scale;
  const panelW = Math.min(width, longest * 6 * scale + 2 * pad);
  const panelH = Math.min(height, lines.length * 9 * scale + 2 * pad);
  for (let y = 0; y < panelH; y++)
    for (let x = 0; x < panelW; x++) {
      const i = (y * width + x) * 3;
      rgb[i] >>= 2;
      rgb[i + 1] >>= 2;
      rgb[i + 2] >>= 2;
    }
  lines.forEach((line, row) => {
    [...line].forEach((char, col) => {
      const glyph = FONT[char] ?? FONT[' '];
      for (let gy = 0; gy < 7; gy++)
        for (let gx = 0; gx < 5; gx++) {
          if (glyph[gy * 5 + gx] !== '1') continue;
          const x0 = pad + (col * 6 + gx) * scale;
          const y0 = pad + (row * 9 + gy) * scale;
          for (let y = y0; y < Math.min(height, y0 + scale); y++)
            for (let x = x0; x < Math.min(width, x0 + scale); x++)
              rgb.fill(255, (y * width + x) * 3, (y * width + x) * 3 + 3);
        }
    });
  });
}

/**
 * Width and height of a PNG, or undefined when the bytes are not one.
 * @example pngSize(bytes)?.width
 */
export function pngSize(bytes: Uint8Array): { width: number; height: number } | undefined {
  if (bytes.length < 24 || !SIGNATURE.equals(Buffer.from(bytes.subarray(0, 8)))) return undefined;
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.toString('latin1', 12, 16) !== 'IHDR') return undefined;
  return { width: view.readUInt32BE(16), height: view.readUInt32BE(20) };
}
