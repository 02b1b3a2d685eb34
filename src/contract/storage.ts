/**
 * The copies of a job's images in the owner's storage, as the history and the result carry them: where each is, its
 * SHA-256 and its size, never its bytes. Workflow-safe: no I/O.
 */
/** One image of a prompt as stored: beside the service's URL (the prompt's `images`, same position) in the result. */
export interface StoredImage {
  /** Where the copy is: `s3://bucket/key`, or `file:///folder/key` on the embedded default. */
  location: string;
  /** The SHA-256 of the bytes read from the service, which the bytes read back from storage matched. */
  sha256: string;
  bytes: number;
  content_type: string;
}

/** The most bytes an image may have unless the operator says (TUNEFLOW_IMAGE_MAX_BYTES). */
export const DEFAULT_IMAGE_MAX_BYTES = 32 * 1024 * 1024;
/** The most an operator may allow: an image is held in memory while it is checked and written. */
export const MAX_IMAGE_MAX_BYTES = 256 * 1024 * 1024;

/** The types an image may have, by the bytes it starts with (the service's `Content-Type` is not trusted). */
const SIGNATURES: readonly { type: string; ext: string; test: (b: Uint8Array) => boolean }[] = [
  { type: 'image/png', ext: 'png', test: (b) => starts(b, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]) },
  { type: 'image/jpeg', ext: 'jpg', test: (b) => starts(b, [0xff, 0xd8, 0xff]) },
  { type: 'image/gif', ext: 'gif', test: (b) => starts(b, [0x47, 0x49, 0x46, 0x38]) },
  {
    type: 'image/webp',
    ext: 'webp',
    test: (b) => starts(b, [0x52, 0x49, 0x46, 0x46]) && starts(b.subarray(8), [0x57, 0x45, 0x42, 0x50]),
  },
  {
    type: 'image/avif',
    ext: 'avif',
    test: (b) => starts(b.subarray(4), [0x66, 0x74, 0x79, 0x70, 0x61, 0x76, 0x69]),
  },
];

function starts(bytes: Uint8Array, prefix: readonly number[]): boolean {
  return bytes.length >= prefix.length && prefix.every((byte, i) => bytes[i] === byte);
}

/**
 * The image type of `bytes` by their signature; undefined when they are no image tuneflow stores.
 *
 * @example imageTypeOf(png); // { type: 'image/png', ext: 'png' }
 */
export function imageTypeOf(bytes: Uint8Array): { type: string; ext: string } | undefined {
  const found = SIGNATURES.find((s) => s.test(bytes));
  return found && { type: found.type, ext: found.ext };
}
