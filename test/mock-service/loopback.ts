/**
 * What the mock service tests share: plain undici calls to the mock (not the tuneflow client, written in parallel),
 * a loopback callback receiver that records what arrives, and polling until something is true.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { FormData, request } from 'undici';

/** A tune as the mock answers it (the fields the tests read). */
export interface TuneJson {
  id: number;
  title: string;
  name: string | null;
  token: string;
  branch: string;
  model_type: string | null;
  base_tune_id: number | null;
  eta: string;
  trained_at: string | null;
  started_training_at: string | null;
  expires_at: string;
  created_at: string;
  updated_at: string;
  callback: string | null;
  url: string;
  orig_images: string[];
  [field: string]: unknown;
}

/** A prompt as the mock answers it (the fields the tests read). */
export interface PromptJson {
  id: number;
  tune_id: number;
  text: string;
  callback: string | null;
  num_images: number;
  images: string[];
  user_error: string | null;
  trained_at: string | null;
  started_training_at: string | null;
  created_at: string;
  pack_id: number | null;
  orig_prompt_id: number | null;
  [field: string]: unknown;
}

/** An error answer: `error`, and on 422 one list of rules per field. */
export interface ErrorJson {
  error: string;
  [field: string]: unknown;
}

export interface Answer<T = Record<string, unknown>> {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: T;
}

/**
 * One request to the mock with `Authorization: Bearer <key>` (no header when key is null); JSON in and out.
 * @example const { status, body } = await call(mock.url, 'k1', 'POST', '/tunes', { tune: {...} });
 */
export async function call<T = Record<string, unknown>>(
  base: string,
  key: string | null,
  method: 'GET' | 'POST' | 'DELETE',
  path: string,
  body?: unknown,
): Promise<Answer<T>> {
  const headers: Record<string, string> = {};
  if (key !== null) headers.authorization = `Bearer ${key}`;
  let payload: string | FormData | undefined;
  if (body !== undefined && typeof (body as FormData).append === 'function') payload = body as FormData;
  else if (typeof body === 'string') {
    headers['content-type'] = 'application/json';
    payload = body;
  } else if (body !== undefined) {
    headers['content-type'] = 'application/json';
    payload = JSON.stringify(body);
  }
  const res = await request(`${base}${path}`, { method, headers, body: payload });
  const text = await res.body.text();
  let parsed: unknown = text;
  if (String(res.headers['content-type'] ?? '').startsWith('application/json')) parsed = JSON.parse(text);
  return { status: res.statusCode, headers: res.headers, body: parsed as T };
}

/** One part of a multipart body: a field's name in bracket notation and its value, or a file with its name. */
export type Part = readonly [name: string, value: string] | readonly [name: string, file: Blob, fileName: string];

/**
 * A multipart body of `parts` in their order (a name given again is appended again, as `tune[images][]` is).
 * @example call(mock.url, key, 'POST', '/tunes', multipart([['tune[title]', 't'], ['tune[images][]', blob, 'a.png']]))
 */
export function multipart(parts: readonly Part[]): FormData {
  const form = new FormData();
  for (const part of parts) {
    if (part.length === 3) form.append(part[0], part[1], part[2]);
    else form.append(part[0], part[1]);
  }
  return form;
}

/**
 * Polls `read` until `done` holds for its value; fails with the last value after `timeoutMs`.
 * @example const tune = await until(() => getTune(id), (t) => t.trained_at !== null);
 */
export async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline)
      throw new Error(`still not done after ${timeoutMs} ms: ${JSON.stringify(value).slice(0, 500)}`);
    await new Promise((r) => setTimeout(r, 15));
  }
}

export interface ReceivedCallback {
  path: string;
  query: URLSearchParams;
  body: unknown;
  at: number;
}

/** A loopback HTTP server that records every callback POSTed to it; answers `status` (200 by default). */
export class CallbackReceiver {
  readonly received: ReceivedCallback[] = [];
  status = 200;
  private server: Server | undefined;
  url = '';

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const [path, query = ''] = (req.url ?? '/').split('?');
        this.received.push({
          path,
          query: new URLSearchParams(query),
          body: JSON.parse(Buffer.concat(chunks).toString() || 'null'),
          at: Date.now(),
        });
        res.writeHead(this.status).end();
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /** The callbacks that arrived at `path`. */
  at(path: string): ReceivedCallback[] {
    return this.received.filter((c) => c.path === path);
  }

  /**
   * Waits until `count` callbacks arrived at `path`.
   * @example const [tuneCallback] = await receiver.waitFor('/tune', 1);
   */
  async waitFor(path: string, count: number): Promise<ReceivedCallback[]> {
    return until(
      async () => this.at(path),
      (list) => list.length >= count,
    );
  }

  async close(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }
}
