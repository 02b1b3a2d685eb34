/**
 * Request bodies with files: a body holding an Upload (or a FormBody) goes as multipart form data in the service's
 * bracket notation (`tune[images][]`, `tune[prompts_attributes][0][text]`); the files are read at request time.
 */
import { openAsBlob } from 'node:fs';
import { basename } from 'node:path';
import type { FormData } from 'undici';
import type * as Undici from 'undici';
import { InvalidInputError, type InputIssue } from './errors';
import type { FileInput } from './schemas';

/* eslint-disable @typescript-eslint/no-require-imports */
// undici's own module, not its index (see http.ts): the class the index exports.
const loadFormData = (): typeof Undici.FormData =>
  (require('undici/lib/web/fetch/formdata') as { FormData: typeof Undici.FormData }).FormData;
/* eslint-enable @typescript-eslint/no-require-imports */

/**
 * Marks a value of a request body as a file part. A body holding one is sent as multipart form data with the
 * service's bracket notation (`tune[images][]`); a body without one is sent as JSON.
 */
export class Upload {
  constructor(
    /** A path (read at request time with `fs.openAsBlob`), bytes, or a Blob. */
    readonly file: FileInput,
  ) {}
}

/** A body sent as multipart form data even without a file (image inspection takes forms only). */
export class FormBody {
  constructor(readonly fields: Readonly<Record<string, unknown>>) {}
}

export function containsUpload(value: unknown): boolean {
  if (value instanceof Upload) return true;
  if (Array.isArray(value)) return value.some(containsUpload);
  if (value !== null && typeof value === 'object') {
    for (const key in value) if (containsUpload((value as Record<string, unknown>)[key])) return true;
  }
  return false;
}

/** `{ tune: { images: [a], prompts_attributes: [{ text }] } }` -> `tune[images][]`, `tune[prompts_attributes][0][text]`. */
export async function toFormData(body: Readonly<Record<string, unknown>>): Promise<FormData> {
  // Every field is read before any file is: the caller's objects (checked as they are) may change while files are read.
  const parts: { key: string; field: string; value: string | Upload }[] = [];
  const collect = (key: string, field: string, value: unknown): void => {
    if (value === undefined) return;
    if (value instanceof Upload) parts.push({ key, field, value });
    else if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        const item: unknown = value[i];
        // Rails-style: scalars and files repeat `key[]`, objects need their index to stay together.
        const itemKey = isPlainObject(item) ? `${key}[${i}]` : `${key}[]`;
        collect(itemKey, `${field}[${i}]`, item);
      }
    } else if (isPlainObject(value)) {
      for (const [k, v] of Object.entries(value)) collect(`${key}[${k}]`, `${field}.${k}`, v);
    } else {
      // A null (e.g. model_type: null, a checkpoint) is sent as an empty field, as HTML forms do.
      parts.push({ key, field, value: value === null ? '' : String(value) });
    }
  };
  for (const [key, value] of Object.entries(body)) collect(key, key, value);

  const form = new (loadFormData())();
  const unreadable: InputIssue[] = [];
  for (const { key, field, value } of parts) {
    if (typeof value === 'string') {
      form.append(key, value);
      continue;
    }
    try {
      const { blob, filename } = await toBlob(value.file);
      form.append(key, blob, filename);
    } catch (err) {
      unreadable.push({ field, rule: `must be a readable file (${(err as Error).message})` });
    }
  }
  if (unreadable.length) throw new InvalidInputError(Object.keys(body)[0] ?? 'body', unreadable);
  return form;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !(value instanceof Upload) && !Array.isArray(value);
}

async function toBlob(file: FileInput): Promise<{ blob: Blob; filename: string }> {
  if (typeof file === 'string') return { blob: await openAsBlob(file), filename: basename(file) };
  if (file instanceof Blob) {
    const name = (file as Blob & { name?: unknown }).name;
    return { blob: file, filename: typeof name === 'string' && name !== '' ? name : 'image' };
  }
  const type = sniffImageType(file);
  return {
    blob: new Blob([file], type ? { type: type.mime } : undefined),
    filename: type ? `image.${type.ext}` : 'image',
  };
}

/** Bytes carry no name: a type from the magic number lets the service treat the part as the image it is. */
function sniffImageType(bytes: Uint8Array): { mime: string; ext: string } | undefined {
  if (bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return { mime: 'image/jpeg', ext: 'jpg' };
  if (bytes[0] === 0x89 && bytes[1] === 0x50 && bytes[2] === 0x4e && bytes[3] === 0x47)
    return { mime: 'image/png', ext: 'png' };
  if (bytes[0] === 0x52 && bytes[1] === 0x49 && bytes[8] === 0x57 && bytes[9] === 0x45)
    return { mime: 'image/webp', ext: 'webp' };
  return undefined;
}
