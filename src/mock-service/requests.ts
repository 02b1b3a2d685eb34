/**
 * What a route handler receives and answers, and the service's error answers: 404 `{error}`, 400 `{error}` for a
 * malformed body, 422 `{ "error": "<field>: <rule>", "<field>": ["<rule>"] }` naming every broken rule.
 */
import type { IncomingMessage } from 'node:http';
import type { z } from 'zod';
import { InvalidInputError } from '../api/errors';
import { parseInput } from '../api/parse-input';
import { ResourceId } from '../api/schemas';
import { coerceToSchema, unfoldForm } from './multipart';
import type { FaultInjector } from './faults';
import type { Simulation } from './simulation';
import type { Account, Store } from './store';

/** A handler's answer: JSON, or raw bytes with a content type. */
export interface Reply {
  status: number;
  body?: unknown;
  bytes?: Buffer;
  type?: string;
  headers?: Record<string, string>;
}

/** An error answer; handlers throw it. */
export class ServiceError extends Error {
  constructor(
    readonly status: number,
    readonly body: Record<string, unknown>,
  ) {
    super(typeof body.error === 'string' ? body.error : `HTTP ${status}`);
  }
}

/** 404: no such object, another account's object, or an id that is not a positive integer. */
export function notFound(what = 'Record'): ServiceError {
  return new ServiceError(404, { error: `${what} not found` });
}

/**
 * 422 for one field and rule, in the same shape as schema errors.
 * @example throw unprocessable('tune.name', 'must be a class the pack supports: man, woman');
 */
export function unprocessable(field: string, rule: string): ServiceError {
  return new ServiceError(422, { error: `${field}: ${rule}`, [field]: [rule] });
}

/** 422 body for schema errors. Top-level inputs have no subject: their fields lose the leading dot. */
export function invalidInput(error: InvalidInputError): ServiceError {
  const body: Record<string, unknown> = {};
  const lines: string[] = [];
  for (const issue of error.issues) {
    const field = issue.field.replace(/^\./, '') || error.subject || 'body';
    lines.push(`${field}: ${issue.rule}`);
    const list = (body[field] as string[] | undefined) ?? [];
    list.push(issue.rule);
    body[field] = list;
  }
  return new ServiceError(422, { error: lines.join('; '), ...body });
}

/** Validates with a schema of schemas.ts; a failure becomes the 422 answer. */
export function validate<S extends z.ZodType>(schema: S, subject: string, value: unknown): z.output<S> {
  try {
    return parseInput(schema, subject, value);
  } catch (error) {
    if (error instanceof InvalidInputError) throw invalidInput(error);
    throw error;
  }
}

const ID = /^[1-9]\d{0,15}$/;

/** A body as read: JSON, or a form unfolded from bracket notation (its leaves still strings and Blobs). */
export interface RequestBody {
  readonly value: Record<string, unknown>;
  readonly form: boolean;
}

/** Large enough for a set of training images; anything bigger is refused with 413. */
const MAX_BODY_BYTES = 64 * 1024 * 1024;

export class RequestContext {
  private bodyPromise: Promise<RequestBody> | undefined;

  constructor(
    readonly req: IncomingMessage,
    private readonly caller: Account | undefined,
    /** The `:params` of the route pattern, in order, as they came. */
    readonly params: readonly string[],
    /** The raw query string, without `?`. */
    readonly query: string,
  ) {}

  /** The caller's account; only API routes (which require a key) have one. */
  get account(): Account {
    if (!this.caller) throw new Error('this route has no account: it is not an API route');
    return this.caller;
  }

  /**
   * The path parameter `index` as a positive integer id; anything else is a 404 like an unknown id.
   * @example const tuneId = ctx.id(0);
   */
  id(index: number, what = 'Record'): number {
    const raw = this.params[index];
    if (!ID.test(raw)) throw notFound(what);
    const id = Number(raw);
    if (!ResourceId.safeParse(id).success) throw notFound(what);
    return id;
  }

  /**
   * The query parameters validated by `schema` (numbers coerced from strings).
   * @example const window = ctx.queryInput(TuneListParams);
   */
  queryInput<S extends z.ZodType>(schema: S): z.output<S> {
    const raw = this.query ? unfoldForm(new URLSearchParams(this.query)) : {};
    return validate(schema, '', coerceToSchema(schema, raw));
  }

  /**
   * The body (or its `key` member: `tune`, `prompt`) validated by `schema`; form strings are coerced first.
   * @example const input = await ctx.bodyInput(TuneCreateInput, 'tune');
   */
  async bodyInput<S extends z.ZodType>(schema: S, key?: string): Promise<{ input: z.output<S>; form: boolean }> {
    const body = await this.body();
    const value = key === undefined ? body.value : body.value[key];
    const input = validate(schema, key ?? '', body.form ? coerceToSchema(schema, value) : value);
    return { input, form: body.form };
  }

  /** The body, read and parsed once. */
  body(): Promise<RequestBody> {
    this.bodyPromise ??= readBody(this.req);
    return this.bodyPromise;
  }

  /**
   * The body read as JSON whatever its content type: `curl -d '{...}'` sends JSON labelled as a form. The mock's own
   * control routes take it so; a body that is no JSON is read as the form it says it is.
   * @example const faults = (await ctx.jsonBody()).value;
   */
  jsonBody(): Promise<RequestBody> {
    this.bodyPromise ??= readBody(this.req, true);
    return this.bodyPromise;
  }
}

function isJsonText(bytes: Buffer): boolean {
  try {
    JSON.parse(bytes.toString('utf8'));
    return true;
  } catch {
    return false;
  }
}

async function readBody(req: IncomingMessage, jsonFirst = false): Promise<RequestBody> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new ServiceError(413, { error: `body larger than ${MAX_BODY_BYTES} bytes` });
    chunks.push(chunk);
  }
  const bytes = Buffer.concat(chunks);
  const type = String(req.headers['content-type'] ?? '').toLowerCase();
  const formType = type.startsWith('multipart/form-data') || type.startsWith('application/x-www-form-urlencoded');
  if (formType && !(jsonFirst && isJsonText(bytes))) {
    let form: FormData;
    try {
      // The platform's parser, the same one fetch uses.
      form = await new Request('http://mock.invalid/', {
        method: 'POST',
        headers: { 'content-type': req.headers['content-type'] as string },
        body: bytes,
      }).formData();
    } catch (error) {
      throw new ServiceError(400, {
        error: `malformed form body: ${error instanceof Error ? error.message : String(error)}`,
      });
    }
    return { value: unfoldForm(form as unknown as Iterable<[string, unknown]>), form: true };
  }
  if (bytes.length === 0) return { value: {}, form: false };
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch (error) {
    throw new ServiceError(400, {
      error: `malformed JSON body: ${error instanceof Error ? error.message : String(error)}`,
    });
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new ServiceError(400, { error: 'the JSON body must be an object' });
  return { value: value as Record<string, unknown>, form: false };
}

/** What handlers work with. */
export interface ServiceParts {
  readonly store: Store;
  readonly simulation: Simulation;
  readonly faults: FaultInjector;
  readonly settings: MockSettings;
}

/** How the mock answers where production clients and the service notes disagree. */
export interface MockSettings {
  /**
   * A prompt posted to a LoRA tune: `base` runs it on the LoRA's base tune with the LoRA loaded (`<lora:ID:1>`), and
   * answers with the prompt there, as production clients report; `refuse` answers 422, as the service notes say.
   */
  loraPrompts: 'base' | 'refuse';
}

/** Where a route belongs: API routes need a key and may get faults; the others never do. */
export type RouteKind = 'api' | 'public' | 'mock';

export interface RouteDefinition {
  readonly method: 'GET' | 'POST' | 'DELETE';
  /** Like `/tunes/:id/prompts`; with the method it is the route's key in stats and `faultRoutes`. */
  readonly pattern: string;
  readonly kind: RouteKind;
  handle(ctx: RequestContext): Reply | Promise<Reply>;
}

/**
 * 400 when `offset` is above the list bound (spec 4.3, 4.7), checked before the schema (which would say 422).
 * @example checkOffset(ctx, LIMITS.tuneOffsetMax, 'tune');
 */
export function checkOffset(ctx: RequestContext, max: number, what: string): void {
  if (!ctx.query.includes('offset')) return;
  const raw = new URLSearchParams(ctx.query).get('offset');
  if (raw !== null && Number(raw) > max)
    throw new ServiceError(400, {
      error: `offset must be at most ${max} for ${what} lists: page with before_id (the id of the last ${what} of the previous page) instead`,
    });
}
