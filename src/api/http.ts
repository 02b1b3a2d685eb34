/**
 * The HTTP layer of the service client: one keep-alive undici Pool per base URL, the Bearer header, JSON or
 * multipart (bracket-notation) bodies, timeouts, and the mapping of every failure to an error class of errors.ts.
 * It never retries (retries belong to Temporal) and never lets the API key into an error.
 *
 * Every request is an OpenTelemetry client span (through @opentelemetry/api alone: a no-op until the application
 * installs an SDK) named by its method and route, `GET /tunes/{id}`. It records the method, route, server, status and
 * retry attempt; never a header, a query, a body or an error's message (the key, or a signed callback URL the
 * service echoes, could be in them).
 */
import { type Attributes, context, type Span, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { Dispatcher, FormData, Pool } from 'undici';
import type * as Undici from 'undici';
import type { IncomingHttpHeaders } from 'undici/types/header';
import type { z } from 'zod';
import { APIError, ConnectionError, TimeoutError, TunesError, UnexpectedResponseError } from './errors';
import { acceptsAsIs } from './answer-check';
import { parseInput } from './parse-input';
import { answerIssues, ResourceId } from './schemas';
import { containsUpload, FormBody, toFormData } from './form-body';
import { RequestPace } from './pacing';

export { FormBody, Upload } from './form-body';

// undici's index loads all of it (fetch, WebSocket, caches, mock agents: 3 MiB of heap in every worker, at start-up,
// which V8 then sizes the main thread's old generation from), and makes undici's Agent the process's default HTTP
// dispatcher, Node's own fetch included. A request needs the pool and the errors, an upload FormData: their own
// modules, the same classes the index exports (one pinned undici). The pool is then only what these modules define:
// `dispatch` and `close`, not the index's `request` and `stream`: hence `RawPool`.
/* eslint-disable @typescript-eslint/no-require-imports */
const UndiciPool = require('undici/lib/dispatcher/pool') as typeof Undici.Pool;
const errors = require('undici/lib/core/errors') as typeof Undici.errors;
/* eslint-enable @typescript-eslint/no-require-imports */
type RawPool = Pick<Pool, 'dispatch' | 'close'>;

/** Options of one HttpClient (TunesApiOptions holds the user-facing form, with Duration strings). */
export interface HttpClientOptions {
  /** The account's API key, sent as `Authorization: Bearer <key>` and nowhere else. */
  apiKey: string;
  /** Where the service lives, e.g. `https://api.astria.ai`; a path prefix (`http://host/api`) is kept. */
  baseUrl: string;
  /**
   * How long a request may wait for its headers, and then between body chunks, before it fails with TimeoutError
   * (undici's headersTimeout and bodyTimeout: counted from when the request is sent, about a second coarse).
   * @default 35_000 (just above the service's own 30 s limit, after which it answers 504)
   */
  timeoutMs?: number;
  /**
   * Keep-alive connections to the service at most.
   * @default 32
   */
  connections?: number;
  /**
   * This client's requests a second at most, a tenth of a second's worth at once (RequestPace); a request waits its
   * turn before it is sent (then, if every connection is busy, for a connection), and an abort while it waits sends
   * nothing; close() lets the waiting ones go first.
   * @default no pace
   */
  requestsPerSecond?: number;
}

/** Per-call options, always the last argument of a resource method. */
export interface RequestOptions {
  /**
   * Aborts the call; its abort reason is rethrown as is (an abort is not a service failure).
   * @default none
   */
  signal?: AbortSignal;
  /**
   * This call's timeout, in milliseconds (a Temporal activity passes what is left of its own).
   * @default the client's `timeout`
   */
  timeoutMs?: number;
  /**
   * Which attempt of a retried call this is (a Temporal activity passes its attempt), for the request's span.
   * @default 1
   */
  attempt?: number;
  /**
   * Told of every request this call sends, once it is answered or failed: its method, its route (ids as `{id}`) and
   * the answer's status (undefined: no answer). A Temporal worker counts them in its metrics (src/metrics.ts).
   * @default none
   */
  observe?: RequestObserver;
}

/** What `RequestOptions.observe` is told: never a query, a body or a header. */
export type RequestObserver = (method: string, route: string, status: number | undefined) => void;

/** Query parameters of a list call; undefined values are left out. */
export type Query = Readonly<Record<string, string | number | boolean | undefined>>;

type Method = 'GET' | 'POST' | 'DELETE';
type Headers = Readonly<Record<string, string>>;

export const DEFAULT_TIMEOUT_MS = 35_000;
export const DEFAULT_CONNECTIONS = 32;

/** The global provider's tracer, looked up per span: an SDK installed after the client was made is still used. */
const tracer = trace.getTracer('tuneflow');
const CLIENT_SPAN = { kind: SpanKind.CLIENT } as const;
/** Ids in a path: `/tunes/42/prompts/7` is the route `/tunes/{id}/prompts/{id}`. */
const ID_SEGMENT = /\/\d+(?=\/|$)/g;

/**
 * Sends requests to one service base URL and turns answers into validated objects or typed errors.
 *
 * @example
 * const http = new HttpClient({ apiKey: process.env.TUNES_API_KEY!, baseUrl: 'https://api.astria.ai' });
 * const tune = await http.request('GET', '/tunes/1504944', Tune);
 * await http.close();
 */
export class HttpClient {
  readonly #pool: RawPool;
  readonly #prefix: string;
  /** Where the service lives, for failures to name: scheme, host and port (a URL's origin holds no credentials). */
  readonly #origin: string;
  readonly #timeoutMs: number;
  // Built once: the hot path allocates no header objects. Private (#) so that no inspect or log shows the key.
  readonly #plainHeaders: Headers;
  readonly #jsonHeaders: Headers;
  /** The attributes every span of this client has: the server (never the base URL, which may hold credentials). */
  readonly #serverAttributes: Attributes;
  readonly #pace: RequestPace | undefined;
  #closing?: Promise<void>;

  constructor(options: HttpClientOptions) {
    const url = new URL(options.baseUrl);
    this.#prefix = url.pathname.replace(/\/+$/, '');
    this.#origin = url.origin;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#pace = options.requestsPerSecond === undefined ? undefined : new RequestPace(options.requestsPerSecond);
    this.#pool = new UndiciPool(url.origin, {
      connections: options.connections ?? DEFAULT_CONNECTIONS,
      headersTimeout: this.#timeoutMs,
      bodyTimeout: this.#timeoutMs,
    });
    const authorization = `Bearer ${options.apiKey}`;
    this.#plainHeaders = { authorization };
    this.#jsonHeaders = { authorization, 'content-type': 'application/json' };
    this.#serverAttributes = {
      'server.address': url.hostname,
      'server.port': Number(url.port) || (url.protocol === 'https:' ? 443 : 80),
    };
  }

  /**
   * Sends one request and returns its 2xx body validated by `schema` (an empty body is `undefined`).
   *
   * @example
   * const tunes = await http.request('GET', '/tunes', z.array(Tune), undefined, { limit: 10 });
   */
  request<S extends z.ZodType>(
    method: Method,
    path: string,
    schema: S,
    body?: Readonly<Record<string, unknown>> | FormBody,
    query?: Query,
    options?: RequestOptions,
  ): Promise<z.output<S>> {
    const span = tracer.startSpan(method, CLIENT_SPAN, context.active());
    // Without an SDK the span records nothing: the request goes out as if untraced.
    if (!span.isRecording()) return this.#send(method, path, schema, body, query, options);
    const route = path.replace(ID_SEGMENT, '/{id}');
    span.updateName(`${method} ${route}`);
    span.setAttributes(this.#serverAttributes);
    span.setAttribute('http.request.method', method);
    span.setAttribute('url.template', route);
    const attempt = options?.attempt;
    // OpenTelemetry's name for it: how many times this request was sent before (the first attempt has none).
    if (attempt !== undefined && attempt > 1) span.setAttribute('http.request.resend_count', attempt - 1);
    return this.#send(method, path, schema, body, query, options, span).then(
      (value) => {
        span.end();
        return value;
      },
      (err: unknown) => {
        // A kind, never a message: the service's error text can echo what the request sent.
        span.setAttribute('error.type', err instanceof APIError ? String(err.status) : errorType(err));
        span.setStatus({ code: SpanStatusCode.ERROR });
        span.end();
        throw err;
      },
    );
  }

  async #send<S extends z.ZodType>(
    method: Method,
    path: string,
    schema: S,
    body?: Readonly<Record<string, unknown>> | FormBody,
    query?: Query,
    options?: RequestOptions,
    span?: Span,
  ): Promise<z.output<S>> {
    const fullPath = query === undefined ? this.#prefix + path : this.#prefix + path + queryString(query);
    let headers = this.#plainHeaders;
    let payload: string | FormData | undefined;
    if (body !== undefined) {
      if (body instanceof FormBody) {
        payload = await toFormData(body.fields);
      } else if (containsUpload(body)) {
        payload = await toFormData(body);
      } else {
        payload = JSON.stringify(body);
        headers = this.#jsonHeaders;
      }
    }
    const signal = options?.signal;
    const timeoutMs = options?.timeoutMs ?? this.#timeoutMs;
    // Its turn under the pace first (not counted in its timeout, as a wait for a connection is not).
    // Once closing, none: the closed pool refuses it at once, as it would unpaced.
    if (this.#pace && !this.#closing) await this.#pace.turn(signal).catch(() => Promise.reject(abortReason(signal!)));

    let answer: Answer;
    try {
      // The common call (no body, signal or own timeout) sends the smallest options object: the pool already holds
      // the client's timeouts, and undici's hot functions stay monomorphic.
      answer = await exchange(
        this.#pool,
        payload === undefined && signal === undefined && timeoutMs === this.#timeoutMs
          ? { method, path: fullPath, headers }
          : { method, path: fullPath, headers, body: payload, headersTimeout: timeoutMs, bodyTimeout: timeoutMs },
        signal,
      );
    } catch (err) {
      options?.observe?.(method, path.replace(ID_SEGMENT, '/{id}'), undefined);
      throw failure(err, method, fullPath, timeoutMs, this.#origin, signal);
    }
    const { statusCode, headers: responseHeaders, text } = answer;
    options?.observe?.(method, path.replace(ID_SEGMENT, '/{id}'), statusCode);
    span?.setAttribute('http.response.status_code', statusCode);

    if (statusCode < 200 || statusCode >= 300) {
      throw APIError.generate(statusCode, { method, path: fullPath }, parseErrorBody(text), responseHeaders);
    }
    let value: unknown;
    if (text !== '') {
      try {
        value = JSON.parse(text);
      } catch {
        throw new UnexpectedResponseError(method, fullPath, text, 'the body is not JSON');
      }
    }
    // Answers that fit (nearly all) pass a check compiled from the same schema; zod itself judges the rest, so its
    // verdict and message stand wherever the two could differ.
    if (acceptsAsIs(schema, value)) return value as z.output<S>;
    const result = schema.safeParse(value);
    if (!result.success) {
      throw new UnexpectedResponseError(method, fullPath, value, describeIssue(result.error));
    }
    return result.data;
  }

  /**
   * Closes the pool once in-flight requests are done; later calls return the same promise.
   *
   * @example
   * await http.close();
   */
  async close(): Promise<void> {
    // undici rejects a second close: closing twice (a worker's shutdown path and a finally) must not fail. Requests
    // waiting their turn under the pace were sent before the close: they go first.
    this.#closing ??= (this.#pace?.idle() ?? Promise.resolve()).then(() => this.#pool.close());
    await this.#closing;
  }
}

/** A whole answer: status, headers, and the body decoded as UTF-8 (a byte order mark dropped, as undici does). */
interface Answer {
  statusCode: number;
  headers: IncomingHttpHeaders;
  text: string;
}

/**
 * One request through `pool.dispatch`, with a handler that gathers the body. This is what `Pool.request` does, without
 * the Readable stream it builds for every response body: 5 to 7 us less CPU per request, of about 30, measured by
 * bench/client.ts. Timeouts stay undici's (headersTimeout, bodyTimeout). An abort rejects with the
 * signal's reason at once, whether the request waits for a connection, for its answer, or in the middle of the body,
 * and ends the request (one still waiting is never sent).
 */
function exchange(
  pool: RawPool,
  options: Dispatcher.DispatchOptions,
  signal: AbortSignal | undefined,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) reject(abortReason(signal));
    else pool.dispatch(options, new AnswerHandler(resolve, reject, signal));
  });
}

const abortReason = (signal: AbortSignal): Error =>
  (signal.reason as Error | undefined) ?? new errors.RequestAbortedError();

class AnswerHandler implements Dispatcher.DispatchHandler {
  #controller: Dispatcher.DispatchController | undefined;
  #statusCode = 0;
  #headers: IncomingHttpHeaders = {};
  readonly #chunks: Buffer[] = [];
  #size = 0;
  readonly #onAbort: (() => void) | undefined;

  constructor(
    private readonly resolve: (answer: Answer) => void,
    private readonly reject: (reason: unknown) => void,
    private readonly signal: AbortSignal | undefined,
  ) {
    if (signal !== undefined) {
      this.#onAbort = () => {
        if (this.#controller !== undefined) return this.#controller.abort(abortReason(signal));
        // Still waiting for a connection: the caller hears at once, and onRequestStart ends the request unsent.
        this.#done();
        this.reject(abortReason(signal));
      };
      signal.addEventListener('abort', this.#onAbort, { once: true });
    }
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    if (this.signal?.aborted) controller.abort(abortReason(this.signal));
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    // 1xx answers are informational: the real one follows.
    if (statusCode < 200) return;
    this.#statusCode = statusCode;
    this.#headers = headers;
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.#chunks.push(chunk);
    this.#size += chunk.length;
  }

  onResponseEnd(): void {
    this.#done();
    this.resolve({ statusCode: this.#statusCode, headers: this.#headers, text: decodeBody(this.#chunks, this.#size) });
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: Error): void {
    this.#done();
    this.reject(error);
  }

  #done(): void {
    if (this.#onAbort !== undefined) this.signal!.removeEventListener('abort', this.#onAbort);
  }
}

/** A failure's kind for a span: its class name (TimeoutError, ConnectionError, an abort's reason). */
function errorType(err: unknown): string {
  return err instanceof Error ? err.name : typeof err;
}

/** UTF-8, without a leading byte order mark: what undici's `body.text()` gives. */
function decodeBody(chunks: Buffer[], size: number): string {
  if (size === 0) return '';
  const bytes = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
  const start = bytes.length > 2 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0;
  return bytes.toString('utf8', start);
}

/** The caller's abort stays as is; timeouts and network failures become typed errors; misuse is rethrown. */
function failure(
  err: unknown,
  method: string,
  path: string,
  timeoutMs: number,
  origin: string,
  signal?: AbortSignal,
): unknown {
  if (signal?.aborted) return err;
  if (err instanceof TunesError) return err;
  switch ((err as { code?: unknown } | null)?.code) {
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
      return new TimeoutError(method, path, timeoutMs);
    // A closed client or a bad argument is a bug in the caller, not a failure of the service or the network.
    case 'UND_ERR_CLOSED':
    case 'UND_ERR_DESTROYED':
    case 'UND_ERR_INVALID_ARG':
    case 'UND_ERR_NOT_SUPPORTED':
      return err;
    default:
      return new ConnectionError(method, path, err, origin);
  }
}

/**
 * An id for a path, validated by ResourceId: the common case costs one compiled check, a bad id gets parseInput's
 * InvalidInputError naming `subject`.
 */
export function resourceId(value: unknown, subject: string): number {
  return acceptsAsIs(ResourceId, value) ? (value as number) : parseInput(ResourceId, subject, value);
}

function parseErrorBody(text: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function describeIssue(error: z.ZodError): string {
  const issue = answerIssues(error)[0];
  const where = issue.path.length ? issue.path.map(String).join('.') : 'the body';
  return `${where}: ${issue.message}`;
}

function queryString(query: Query): string {
  let out = '';
  for (const key in query) {
    const value = query[key];
    if (value === undefined) continue;
    out += `${out === '' ? '?' : '&'}${encodeURIComponent(key)}=${encodeURIComponent(String(value))}`;
  }
  return out;
}
