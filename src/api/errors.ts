/**
 * One error class per failure kind. Each carries what a caller needs to decide and to log (status, method, path,
 * the response body) and never the API key: requests are described by method and path only.
 */
import type { z } from 'zod';
import { ErrorKind } from './error-kinds';

export { ErrorKind, isNonRetryableKind, NON_RETRYABLE_KINDS } from './error-kinds';

/** Base of every error the client throws. */
export abstract class TunesError extends Error {
  abstract readonly kind: ErrorKind;
}

export interface InputIssue {
  /** The field, as a path: `tune.prompts_attributes[0].w`. */
  readonly field: string;
  /** The rule it breaks: `must be a positive integer multiple of 8`. */
  readonly rule: string;
}

/** Input that breaks a rule of the spec, refused before anything is sent. */
export class InvalidInputError extends TunesError {
  readonly kind = ErrorKind.invalidInput;
  constructor(
    /** What was being validated, e.g. `tune` or `prompt`. */
    readonly subject: string,
    readonly issues: readonly InputIssue[],
  ) {
    super(`Invalid ${subject}: ${issues.map((i) => `${i.field}: ${i.rule}`).join('; ')}`);
    this.name = 'InvalidInputError';
  }

  static fromZod(subject: string, error: z.ZodError): InvalidInputError {
    const issues: InputIssue[] = [];
    for (const issue of error.issues) {
      if (issue.code === 'unrecognized_keys') {
        for (const key of issue.keys)
          issues.push({
            field: formatPath(subject, [...issue.path, key]),
            rule: 'is not an attribute the service knows',
          });
      } else if (issue.code === 'invalid_union' && closestOption(issue.errors)) {
        // The value took one of the union's forms (an object, not the JSON string): name what is wrong inside it.
        const inner = InvalidInputError.fromZod(subject, {
          issues: closestOption(issue.errors)!.map((i) => ({ ...i, path: [...issue.path, ...i.path] })),
        } as z.ZodError);
        issues.push(...inner.issues);
      } else {
        issues.push({ field: formatPath(subject, issue.path), rule: issue.message });
      }
    }
    return new InvalidInputError(subject, issues);
  }
}

/** The one option of a failed union whose issues are not all "wrong type here": the form the value took. */
function closestOption(options: z.core.$ZodIssue[][]): z.core.$ZodIssue[] | undefined {
  const near = options.filter((o) => o.some((i) => i.path.length > 0 || i.code !== 'invalid_type'));
  return near.length === 1 ? near[0] : undefined;
}

function formatPath(subject: string, path: readonly PropertyKey[]): string {
  let out = subject;
  for (const part of path) out += typeof part === 'number' ? `[${part}]` : `.${String(part)}`;
  return out;
}

export interface RequestDescription {
  readonly method: string;
  readonly path: string;
}

/** An HTTP answer the client treats as a failure. */
export class APIError extends TunesError {
  readonly kind: ErrorKind = ErrorKind.badRequest;
  constructor(
    readonly status: number,
    readonly method: string,
    readonly path: string,
    /** The parsed JSON body, or the text when it was not JSON. */
    readonly body: unknown,
    message?: string,
    /** What happened, after the method and path: `failed with 500` unless a subclass says more. */
    headline = `failed with ${status}`,
  ) {
    super(`${method} ${path} ${headline}: ${message ?? describeBody(body)}`);
    this.name = new.target.name;
  }

  /** The error class for a status, like openai-node's APIError.generate. */
  static generate(
    status: number,
    request: RequestDescription,
    body: unknown,
    headers: Record<string, string | string[] | undefined> = {},
  ): APIError {
    const { method, path } = request;
    if (status === 400 && /before_id|offset/i.test(describeBody(body)))
      return new OffsetTooDeepError(status, method, path, body);
    if (status === 401 || status === 403) return new UnauthorizedError(status, method, path, body);
    if (status === 404) return new NotFoundError(status, method, path, body);
    if (status === 422) return new ValidationError(status, method, path, body);
    if (status === 429) return new RateLimitError(status, method, path, body, parseRetryAfter(headers['retry-after']));
    if (status === 504) return new GatewayTimeoutError(status, method, path, body);
    if (status >= 500) return new ServerError(status, method, path, body);
    return new APIError(status, method, path, body);
  }
}

/** 400: an offset above the list bound; page with `before_id` instead. */
export class OffsetTooDeepError extends APIError {
  override readonly kind = ErrorKind.offsetTooDeep;
}
/**
 * 401 or 403: the API key is missing, wrong, or not allowed this. Its message names the setting to fix, never the key:
 * `POST /tunes failed with 401: Unauthorized; the service refused the API key: check it (TUNEFLOW_API_KEY ...)`.
 */
export class UnauthorizedError extends APIError {
  override readonly kind = ErrorKind.unauthorized;
  constructor(status: number, method: string, path: string, body: unknown) {
    const refusal =
      status === 403 ? 'the service did not allow this to the API key' : 'the service refused the API key';
    super(
      status,
      method,
      path,
      body,
      `${describeBody(body)}; ${refusal}: check it (TUNEFLOW_API_KEY for \`tuneflow worker\` and the plugin's api.apiKey)`,
    );
  }
}
/** 404: no such object, or another account's. */
export class NotFoundError extends APIError {
  override readonly kind = ErrorKind.notFound;
}
/** 422: the service refused the input. Never retry; log the body. */
export class ValidationError extends APIError {
  override readonly kind = ErrorKind.validation;
  /** Field-keyed messages, e.g. `{ images: ['must contain at least one image'] }`. */
  readonly fieldErrors: Readonly<Record<string, readonly string[]>>;
  constructor(status: number, method: string, path: string, body: unknown) {
    super(status, method, path, body);
    this.fieldErrors = fieldErrorsOf(body);
  }
}
/**
 * 429: too many requests, typically from polling. Its message says the Retry-After the service sent, as a wait names
 * its cause: `POST /tunes was rate limited (429, Retry-After 60 s): Too many requests`.
 */
export class RateLimitError extends APIError {
  override readonly kind = ErrorKind.rateLimited;
  constructor(
    status: number,
    method: string,
    path: string,
    body: unknown,
    /** From the Retry-After header, when the service sent one. */
    readonly retryAfterMs?: number,
  ) {
    const retryAfter = retryAfterMs === undefined ? 'no Retry-After' : `Retry-After ${formatSeconds(retryAfterMs)} s`;
    super(status, method, path, body, undefined, `was rate limited (${status}, ${retryAfter})`);
  }
}

/** Milliseconds as whole seconds, or tenths below ten seconds: `60`, `1.5`. */
function formatSeconds(ms: number): string {
  const seconds = ms / 1000;
  return String(seconds >= 10 ? Math.round(seconds) : Math.round(seconds * 10) / 10);
}
/** 500 and other 5xx but 504: retry with backoff from 30 s. */
export class ServerError extends APIError {
  override readonly kind = ErrorKind.server;
}
/** 504: the request exceeded 30 s and was most likely processed. Look before retrying. */
export class GatewayTimeoutError extends APIError {
  override readonly kind = ErrorKind.gatewayTimeout;
}

/**
 * The request never got an answer: refused, reset, DNS. Its message names where the service was looked for (the base
 * URL's origin: scheme, host and port, never a path, query or credentials), as a wait names its cause:
 * `POST /tunes could not reach the service at http://127.0.0.1:8080: connect ECONNREFUSED 127.0.0.1:8080`.
 */
export class ConnectionError extends TunesError {
  readonly kind = ErrorKind.connection;
  constructor(
    readonly method: string,
    readonly path: string,
    override readonly cause: unknown,
    /** The service's origin (`https://api.example.com`), when known. */
    readonly origin?: string,
  ) {
    super(`${method} ${path} could not reach the service${origin ? ` at ${origin}` : ''}: ${networkReason(cause)}`);
    this.name = 'ConnectionError';
  }
}

/** A network error's reason: its message, or its code when it has none (an AggregateError of several addresses). */
function networkReason(cause: unknown): string {
  // Read by shape: an error of another realm (a vm context, Jest's sandbox) is no `instanceof Error` here.
  const error = cause as { message?: unknown; code?: unknown; name?: unknown } | null | undefined;
  if (typeof error !== 'object' || error === null) return String(cause);
  if (typeof error.message === 'string' && error.message) return error.message;
  if (typeof error.code === 'string') return error.code;
  return typeof error.name === 'string' ? error.name : String(cause);
}

/** The client gave up waiting (its timeout, just above the service's 30 s). */
export class TimeoutError extends TunesError {
  readonly kind = ErrorKind.timeout;
  constructor(
    readonly method: string,
    readonly path: string,
    readonly timeoutMs: number,
  ) {
    super(`${method} ${path} got no answer within ${timeoutMs} ms`);
    this.name = 'TimeoutError';
  }
}

/** A 2xx answer whose body is not what the spec describes. */
export class UnexpectedResponseError extends TunesError {
  readonly kind = ErrorKind.unexpectedResponse;
  constructor(
    readonly method: string,
    readonly path: string,
    readonly body: unknown,
    detail: string,
  ) {
    super(`${method} ${path} answered with an unexpected body: ${detail}`);
    this.name = 'UnexpectedResponseError';
  }
}

/** Reads `error`, then `message`, then field errors (service notes). */
export function describeBody(body: unknown): string {
  if (body === undefined || body === null || body === '') return 'no body';
  if (typeof body === 'string') return body.slice(0, 500);
  if (typeof body === 'object') {
    const o = body as Record<string, unknown>;
    if (typeof o.error === 'string') return o.error;
    if (typeof o.message === 'string') return o.message;
    const fields = fieldErrorsOf(body);
    const keys = Object.keys(fields);
    if (keys.length) return keys.map((k) => `${k} ${fields[k].join(', ')}`).join('; ');
  }
  return JSON.stringify(body).slice(0, 500);
}

function fieldErrorsOf(body: unknown): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  if (!body || typeof body !== 'object' || Array.isArray(body)) return out;
  for (const [key, value] of Object.entries(body)) {
    if (Array.isArray(value) && value.every((v) => typeof v === 'string')) out[key] = value;
  }
  return out;
}

/** Retry-After is seconds or an HTTP date. */
export function parseRetryAfter(header: string | string[] | undefined, now = Date.now()): number | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return Math.round(seconds * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}
