/**
 * Real, small, valid PNG images for generated prompt images: a solid color that varies with the image name, so
 * different prompts visibly differ. Built with node:zlib and a CRC32 of our own (node:zlib's crc32 is Node 22+).
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

/**
 * A solid-color RGB PNG of `size` x `size` pixels; the color is derived from `seed`.
 * @example res.end(solidPng('123-0.png'));
 */
export function solidPng(seed: string, size = 16): Buffer {
  const h = fnv1a(seed);
  const rgb = [h & 0xff, (h >>> 8) & 0xff, (h >>> 16) & 0xff];
  const header = Buffer.alloc(13);
  header.writeUInt32BE(size, 0);
  header.writeUInt32BE(size, 4);
  header[8] = 8; // bit depth
  header[9] = 2; // color type: truecolor RGB
  // bytes 10-12: compression, filter and interlace methods, all 0
  const row = 1 + size * 3;
  const raw = Buffer.alloc(row * size);
  for (let y = 0; y < size; y++) {
    raw[y * row] = 0; // filter type: none
    for (let x = 0; x < size; x++) raw.set(rgb, y * row + 1 + x * 3);
  }
  return Buffer.concat([
    SIGNATURE,
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
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
