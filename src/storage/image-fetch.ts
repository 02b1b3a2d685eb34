/**
 * Reads one image the service made, from the hosts the operator allows, with the bounds of any answer: its size, its
 * time, its redirects. Its own connections, with no header of the service's client: the API key never goes to an
 * image host. What the bytes are is read from the bytes (their signature), not from the answer's `Content-Type`.
 */
import type { Agent, Dispatcher } from 'undici';
import type * as Undici from 'undici';
import { imageTypeOf } from '../contract/storage';

// undici's agent and its request alone, as the service client takes its pool (src/api/http.ts): its index costs every
// worker's start, and makes undici the process's default dispatcher.
/* eslint-disable @typescript-eslint/no-require-imports */
const UndiciAgent = require('undici/lib/dispatcher/agent') as typeof Undici.Agent;
const agentRequest = require('undici/lib/api/api-request') as (
  this: Agent,
  options: Dispatcher.RequestOptions,
) => Promise<Dispatcher.ResponseData>;
/* eslint-enable @typescript-eslint/no-require-imports */
export interface ImageFetchOptions {
  /**
   * Hosts (`host` or `host:port`) image URLs may name besides any `https:` host: where the service's images are on
   * plain `http:` (a local mock, a store inside the network). `https:` hosts are allowed unless `httpsAny` is false.
   */
  hosts: readonly string[];
  /** Whether any `https:` host is allowed. @default true */
  httpsAny?: boolean;
  maxBytes: number;
  /** One read's limit, its headers and each stretch of its body; the whole read has twice it. @default 30 s */
  timeoutMs?: number;
  /** @default 3 */
  maxRedirects?: number;
}

/** Why an image could not be read; `retryable` when a later attempt may (a 5xx, a lost connection, a timeout). */
export class ImageFetchError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
    /** `gone`: the service no longer has it; `refused`: what was answered is no image tuneflow stores. */
    readonly reason: 'gone' | 'refused' | 'unreachable',
  ) {
    super(message);
    this.name = 'ImageFetchError';
  }
}

export interface FetchedImage {
  bytes: Buffer;
  contentType: string;
  ext: string;
}

export class ImageFetcher {
  readonly #agent: Agent;
  readonly #options: Required<ImageFetchOptions>;
  /** The hosts as a URL names them: lower case. */
  readonly #hosts: ReadonlySet<string>;

  constructor(options: ImageFetchOptions) {
    this.#options = { httpsAny: true, timeoutMs: 30_000, maxRedirects: 3, ...options };
    this.#hosts = new Set(options.hosts.map((h) => h.toLowerCase()));
    this.#agent = new UndiciAgent({
      headersTimeout: this.#options.timeoutMs,
      bodyTimeout: this.#options.timeoutMs,
      connections: 8,
    });
  }

  /**
   * The image at `url`, whole, checked to be an image within the size bound.
   *
   * @example
   * const { bytes, contentType } = await fetcher.fetch('https://images.example/1.png', { signal });
   */
  async fetch(url: string, { signal: caller }: { signal?: AbortSignal } = {}): Promise<FetchedImage> {
    // The whole read within the limit: undici's own timeouts are per chunk, and a trickle would pass them.
    const limit = AbortSignal.timeout(this.#options.timeoutMs * 2);
    const signal = caller ? AbortSignal.any([caller, limit]) : limit;
    try {
      return await this.#fetch(url, signal);
    } catch (err) {
      if (limit.aborted && !caller?.aborted)
        throw new ImageFetchError(
          `image ${shown(url)}: not read within ${(this.#options.timeoutMs * 2) / 1000} s`,
          true,
          'unreachable',
        );
      throw err;
    }
  }

  async #fetch(url: string, signal: AbortSignal): Promise<FetchedImage> {
    let target = this.#allowed(url);
    for (let redirects = 0; ; redirects++) {
      const { origin, pathname, search } = new URL(target);
      const answer = await agentRequest
        .call(this.#agent, { origin, path: pathname + search, method: 'GET', headers: { accept: 'image/*' }, signal })
        .catch((err: unknown) => {
          if (signal.aborted) throw err;
          throw new ImageFetchError(`image ${shown(target)}: ${(err as Error).message}`, true, 'unreachable');
        });
      const { statusCode, headers, body } = answer;
      if (statusCode >= 300 && statusCode < 400 && typeof headers.location === 'string') {
        discard(body);
        if (redirects >= this.#options.maxRedirects)
          throw new ImageFetchError(`image ${shown(url)}: more than ${redirects} redirects`, false, 'refused');
        target = this.#allowed(new URL(headers.location, target).href);
        continue;
      }
      if (statusCode !== 200) {
        discard(body);
        const gone = statusCode === 404 || statusCode === 410 || statusCode === 403;
        const retryable = statusCode >= 500 || statusCode === 429 || statusCode === 408;
        throw new ImageFetchError(
          `image ${shown(target)}: answered ${statusCode}`,
          retryable,
          gone ? 'gone' : retryable ? 'unreachable' : 'refused',
        );
      }
      const bytes = await this.#body(target, headers['content-length'], body);
      const type = imageTypeOf(bytes);
      if (!type)
        throw new ImageFetchError(
          `image ${shown(target)}: is not an image (png, jpeg, gif, webp or avif by its first bytes)`,
          false,
          'refused',
        );
      return { bytes, contentType: type.type, ext: type.ext };
    }
  }

  close(): Promise<void> {
    return this.#agent.close();
  }

  /** The body, whole, refused once it passes the bound (before it is read, when its length says so). */
  async #body(target: string, length: unknown, body: Dispatcher.ResponseData['body']): Promise<Buffer> {
    const max = this.#options.maxBytes;
    const tooLarge = () =>
      new ImageFetchError(
        `image ${shown(target)}: is larger than ${max} bytes (TUNEFLOW_IMAGE_MAX_BYTES)`,
        false,
        'refused',
      );
    if (typeof length === 'string' && Number(length) > max) {
      discard(body);
      throw tooLarge();
    }
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of body) {
        size += chunk.length;
        if (size > max) {
          discard(body);
          throw tooLarge();
        }
        chunks.push(chunk);
      }
    } catch (err) {
      if (err instanceof ImageFetchError) throw err;
      throw new ImageFetchError(`image ${shown(target)}: ${(err as Error).message}`, true, 'unreachable');
    }
    return Buffer.concat(chunks, size);
  }

  /** `url` when its scheme and host are allowed; else refused, naming the host and the setting. */
  #allowed(url: string): string {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new ImageFetchError(`image URL ${JSON.stringify(url.slice(0, 200))} is not a URL`, false, 'refused');
    }
    if (parsed.username || parsed.password)
      throw new ImageFetchError(`image ${shown(url)}: a URL with credentials is not read`, false, 'refused');
    const listed = this.#hosts.has(parsed.host) || this.#hosts.has(parsed.hostname);
    const https = parsed.protocol === 'https:' && this.#options.httpsAny;
    if (!listed && !https)
      throw new ImageFetchError(
        `image ${shown(url)}: host ${parsed.host} is not allowed (TUNEFLOW_IMAGE_HOSTS lists the hosts besides https ones)`,
        false,
        'refused',
      );
    return parsed.href;
  }
}

/** Stops reading a body: undici's destroy emits an abort error of its own, which nobody waits for here. */
function discard(body: Dispatcher.ResponseData['body']): void {
  body.on('error', () => undefined);
  body.destroy();
}

/** A URL as an error shows it: its origin and path, never its query (a signed image URL's signature). */
function shown(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.origin}${parsed.pathname}`;
  } catch {
    return '(not a URL)';
  }
}
