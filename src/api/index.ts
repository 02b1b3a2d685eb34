/**
 * The service client: `new TunesApi({ apiKey })`, then `api.tunes`, `api.prompts`, `api.packs`, `api.likes`,
 * `api.images`, `api.themes`. Knows HTTP, zod and the spec; nothing of Temporal.
 */
import { durationToMs, type Duration } from '../duration';
import { DEFAULT_CONNECTIONS, DEFAULT_TIMEOUT_MS, HttpClient } from './http';
import { Images } from './images';
import { Likes } from './likes';
import { Packs } from './packs';
import { Prompts } from './prompts';
import { httpUrl } from './schemas';
import { Themes } from './themes';
import { Tunes } from './tunes';

export * from './errors';
export { parseInput } from './parse-input';
export * from './schemas';
export { PagedList, type PageSource } from './pagination';
export { HttpClient, FormBody, Upload, type HttpClientOptions, type Query, type RequestOptions } from './http';
export { Images, Likes, Packs, Prompts, Themes, Tunes };
export type { Duration };

/** Options of TunesApi. */
export interface TunesApiOptions {
  /** The account's API key (API settings of the account). Sent only in the Authorization header. */
  apiKey: string;
  /**
   * Where the service lives.
   * @default 'https://api.astria.ai'
   */
  baseUrl?: string;
  /**
   * How long one request may wait for an answer (for its headers, then between body chunks) before it fails with
   * TimeoutError. Just above the service's own 30 s, after which it answers 504 itself. Counted from when the request
   * is sent (not while it waits for a free connection), on undici's timers: they fire up to about a second late.
   * @default '35 seconds'
   * @format Duration ('35 seconds', '2s', or a number of milliseconds)
   */
  timeout?: Duration;
  /**
   * Keep-alive connections to the service at most.
   * @default 32
   */
  connections?: number;
  /**
   * The client's own pace, in requests a second, under the service's rate limit: a request waits its turn, and at
   * most a tenth of a second's worth leave the pace at once (each may then wait for a free connection). One client's
   * pace, not a whole deployment's: a worker's calls are spaced by its task queue's limit (TUNEFLOW_SERVICE_RATE), and
   * the plugin paces its own client at that rate so a worker's held event loop does not send them bunched.
   * @default no pace
   */
  requestsPerSecond?: number;
}

export const DEFAULT_BASE_URL = 'https://api.astria.ai';

/**
 * The client of the fine-tuning service. Validates every input against the spec before sending, never retries
 * (retries belong to Temporal), and never puts the API key in an error.
 *
 * @example
 * const api = new TunesApi({ apiKey: process.env.TUNES_API_KEY! });
 * const tune = await api.tunes.create({ title: 'order-42', name: 'woman', branch: 'fast', image_urls: urls });
 * const prompt = await api.prompts.create(tune.id, { text: 'ohwx woman, studio portrait', num_images: 2 });
 * for await (const p of api.prompts.list(tune.id)) console.log(p.id, p.images);
 * await api.close();
 */
export class TunesApi {
  readonly tunes: Tunes;
  readonly prompts: Prompts;
  readonly packs: Packs;
  readonly likes: Likes;
  readonly images: Images;
  readonly themes: Themes;
  /** Where the service lives: scheme, host and port (an origin holds no credentials of the base URL's). */
  readonly origin: string;
  readonly #http: HttpClient;

  constructor(options: TunesApiOptions) {
    const {
      apiKey,
      baseUrl = DEFAULT_BASE_URL,
      timeout,
      connections = DEFAULT_CONNECTIONS,
      requestsPerSecond,
    } = options ?? {};
    // Messages name the option and never echo the key.
    if (typeof apiKey !== 'string' || apiKey.trim() === '')
      throw new TypeError('TunesApiOptions.apiKey: must be a non-empty string (the API key of the account)');
    if (typeof baseUrl !== 'string' || !httpUrl.safeParse(baseUrl).success)
      throw new TypeError("TunesApiOptions.baseUrl: must be an http(s) URL such as 'https://api.astria.ai'");
    if (!Number.isInteger(connections) || connections < 1)
      throw new TypeError('TunesApiOptions.connections: must be a positive integer');
    const timeoutMs = timeout === undefined ? DEFAULT_TIMEOUT_MS : durationToMs(timeout, 'TunesApiOptions.timeout');
    if (timeoutMs <= 0) throw new TypeError('TunesApiOptions.timeout: must be longer than zero');
    if (requestsPerSecond !== undefined && !(Number.isFinite(requestsPerSecond) && requestsPerSecond > 0))
      throw new TypeError('TunesApiOptions.requestsPerSecond: must be a positive number of requests a second');

    this.#http = new HttpClient({ apiKey, baseUrl, timeoutMs, connections, requestsPerSecond });
    this.origin = new URL(baseUrl).origin;
    this.tunes = new Tunes(this.#http);
    this.prompts = new Prompts(this.#http);
    this.packs = new Packs(this.#http);
    this.likes = new Likes(this.#http);
    this.images = new Images(this.#http);
    this.themes = new Themes(this.#http);
  }

  /**
   * Closes the connections once in-flight requests are done; closing again is harmless.
   *
   * @example
   * await api.close();
   */
  close(): Promise<void> {
    return this.#http.close();
  }
}
