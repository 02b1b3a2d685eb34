/**
 * A callback, unwrapped with no HTTP server in sight: which run it is for (the signed URL), and which objects it is
 * about (the body). A callback is a wake-up: only the objects' ids are read from the body, never their state, so a
 * forged body can wake a run (which then reads the objects from the service) but cannot write its result.
 *
 * Every callback kind is one row of `CALLBACK_ROUTES`: its path, what the body is called, and the largest body a real
 * callback of that kind needs. Reading is bounded before it starts: the body's size, the number of objects, and the
 * issues reported, whatever the body holds.
 */
import { CallbackKind, callbackPath, type CallbackWakeUp } from '../contract/messages';
import type { CallbackRun, CallbackSigner } from './signing';

/** One callback kind's row. */
export interface CallbackRoute {
  kind: CallbackKind;
  /** What the body is called in answers (`tune.id: ...`), and the key of a wrapped body (`{"tune": {...}}`). */
  subject: 'tune' | 'prompt' | 'prompts';
  /** The largest body taken: a real callback is a few KB (a pack's, a few KB per prompt). */
  maxBodyBytes: number;
}

const KIB = 1024;

/** The callback kinds, by path. */
export const CALLBACK_ROUTES: ReadonlyMap<string, CallbackRoute> = new Map([
  [callbackPath(CallbackKind.tune), { kind: CallbackKind.tune, subject: 'tune', maxBodyBytes: 64 * KIB }],
  [callbackPath(CallbackKind.prompt), { kind: CallbackKind.prompt, subject: 'prompt', maxBodyBytes: 64 * KIB }],
  [
    callbackPath(CallbackKind.packPrompts),
    { kind: CallbackKind.packPrompts, subject: 'prompts', maxBodyBytes: 512 * KIB },
  ],
]);

/** The most objects one callback names: a pack's prompts (a run waits for at most 120). */
export const MAX_CALLBACK_OBJECTS = 256;
/** Issues named in a refusal: the first few are enough to act on, and the rest cost nothing to skip. */
const MAX_ISSUES = 3;
/** Form bodies: parameters read, and the depth of `a[b][c]` keys. */
const MAX_FORM_PARAMS = 2_000;
const MAX_FORM_DEPTH = 4;

/** Why a callback is refused: the HTTP status, a short reason for the tally of refusals, and what the answer says. */
export interface CallbackRefusal {
  status: 400 | 403 | 404 | 405 | 413 | 415 | 422;
  reason: string;
  error: string;
  issues?: string[];
}

/** A callback that passed every check: the run to wake, and what to wake it with. */
export interface UnwrappedCallback {
  run: CallbackRun;
  wakeUp: CallbackWakeUp;
}

const refused = (status: CallbackRefusal['status'], reason: string, error = reason): CallbackRefusal => ({
  status,
  reason,
  error,
});

/**
 * The run a callback URL is for, when its path is a callback kind and its signature is right; else the refusal.
 * Checked before the body is read: a stranger's body is never parsed.
 *
 * @example
 * verifyCallbackUrl('POST', '/callbacks/tune?workflowId=w&runId=r&sig=...', signer); // { route, run }
 */
export function verifyCallbackUrl(
  method: string | undefined,
  url: string,
  signer: CallbackSigner,
): { route: CallbackRoute; run: CallbackRun; params: Record<string, string> } | CallbackRefusal {
  const q = url.indexOf('?');
  const route = CALLBACK_ROUTES.get(q === -1 ? url : url.slice(0, q));
  if (route === undefined) return refused(404, 'unknown path', 'not found');
  if (method !== 'POST') return refused(405, 'method', 'method not allowed');
  const query = new URLSearchParams(q === -1 ? '' : url.slice(q + 1));
  const run = { workflowId: query.get('workflowId') ?? '', runId: query.get('runId') ?? '' };
  const sig = query.get('sig') ?? '';
  const params: Record<string, string> = {};
  let repeated = false;
  for (const [name, value] of query)
    if (!SIGNED_BY_NAME.has(name)) {
      repeated ||= name in params;
      params[name] = value;
    }
  if (!repeated && signer.verify(route.kind, run, sig, params)) return { route, run, params };
  // A URL signed before its parameters were (runs in flight across the upgrade): taken, its parameters not trusted.
  if (signer.verify(route.kind, run, sig)) return { route, run, params: {} };
  return refused(403, 'signature', 'invalid or missing signature');
}

/** The parameters the signature is over by name (the run), and the signature itself. */
const SIGNED_BY_NAME: ReadonlySet<string> = new Set(['workflowId', 'runId', 'sig']);

/**
 * The wake-up a callback's body asks for: the ids of the objects it is about, read from JSON (flat, wrapped as
 * `{"tune": {...}}`, or a one-element array), from a form (`id=…`, `tune[id]=…`, `prompts[][id]=…`), with or without
 * a UTF-8 byte order mark; any other type or charset is 415. Nothing else in the body is read.
 *
 * @example
 * readCallbackBody(route, 'application/json', Buffer.from('{"id": 7, "images": ["a.png"]}')); // { kind: 'prompt', ids: [7] }
 */
export function readCallbackBody(
  route: CallbackRoute,
  contentType: string | undefined,
  body: Buffer,
): CallbackWakeUp | CallbackRefusal {
  if (body.length > route.maxBodyBytes) return refused(413, 'body too large');
  const type = mediaType(contentType);
  if (type === undefined) return refused(415, 'content type', 'body must be JSON or a form, in UTF-8');
  const text = utf8Text(body);
  if (text === undefined) return refused(415, 'content type', 'body must be JSON or a form, in UTF-8');
  let parsed: unknown;
  if (type === 'form') parsed = formObject(text);
  else {
    try {
      parsed = JSON.parse(text);
    } catch {
      return refused(400, 'not JSON', 'body is not JSON');
    }
  }
  const read = route.kind === CallbackKind.packPrompts ? idsOfList(parsed, route.subject) : idOfObject(parsed, route);
  if ('status' in read) return read;
  return { kind: route.kind, ids: read.ids };
}

/**
 * A whole callback, URL and body, as the receiver sees it; for tests and for receivers of other shapes.
 *
 * @example
 * unwrapCallback({ method: 'POST', url, contentType: 'application/json', body }, signer);
 */
export function unwrapCallback(
  request: { method: string; url: string; contentType?: string; body: Buffer },
  signer: CallbackSigner,
): UnwrappedCallback | CallbackRefusal {
  const target = verifyCallbackUrl(request.method, request.url, signer);
  if ('status' in target) return target;
  const wakeUp = readCallbackBody(target.route, request.contentType, request.body);
  if ('status' in wakeUp) return wakeUp;
  return { run: target.run, wakeUp };
}

/** 'json' or 'form' for the types a callback may come as (no type: JSON, as the service sends it); else undefined. */
function mediaType(contentType: string | undefined): 'json' | 'form' | undefined {
  if (contentType === undefined || contentType.trim() === '') return 'json';
  const [type, ...params] = contentType.toLowerCase().split(';');
  for (const param of params) {
    const [name, value] = param.split('=').map((part) => part.trim().replace(/^"|"$/g, ''));
    if (name === 'charset' && value !== 'utf-8' && value !== 'utf8') return undefined;
  }
  const media = type.trim();
  if (media === 'application/json' || media === 'text/json' || media.endsWith('+json')) return 'json';
  if (media === 'application/x-www-form-urlencoded') return 'form';
  return undefined;
}

/** The body as text: UTF-8, a byte order mark dropped; UTF-16 (by its mark) is not taken. */
function utf8Text(body: Buffer): string | undefined {
  if (body.length >= 2 && ((body[0] === 0xfe && body[1] === 0xff) || (body[0] === 0xff && body[1] === 0xfe)))
    return undefined;
  const start = body.length >= 3 && body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf ? 3 : 0;
  return body.toString('utf8', start);
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** An id as the service writes it: an integer, or its decimal string ("42", "42.0"). */
function readId(value: unknown): number | undefined {
  const n = typeof value === 'string' && /^\d{1,16}(\.0+)?$/.test(value.trim()) ? Number(value) : value;
  return Number.isSafeInteger(n) && (n as number) > 0 ? (n as number) : undefined;
}

/** A tune or prompt callback: the object flat, wrapped under its subject, or alone in an array. */
function idOfObject(body: unknown, route: CallbackRoute): { ids: number[] } | CallbackRefusal {
  let object = body;
  if (Array.isArray(object) && object.length === 1) object = object[0];
  if (isRecord(object) && object.id === undefined && isRecord(object[route.subject])) object = object[route.subject];
  if (!isRecord(object)) return invalid(route.subject, [`${route.subject}: must be a ${route.subject} object`]);
  const id = readId(object.id);
  if (id === undefined) return invalid(route.subject, [`${route.subject}.id: must be a positive integer`]);
  return { ids: [id] };
}

/** A pack's prompts callback: the list flat or wrapped as `{"prompts": [...]}`; every element needs an id. */
function idsOfList(body: unknown, subject: string): { ids: number[] } | CallbackRefusal {
  const list = isRecord(body) && Array.isArray(body.prompts) ? body.prompts : body;
  if (!Array.isArray(list)) return invalid(subject, [`${subject}: must be a list of prompt objects`]);
  if (list.length > MAX_CALLBACK_OBJECTS)
    return { ...refused(413, 'too many objects'), error: `${subject}: at most ${MAX_CALLBACK_OBJECTS} prompts` };
  const ids: number[] = [];
  const issues: string[] = [];
  for (let i = 0; i < list.length && issues.length < MAX_ISSUES; i++) {
    const id = isRecord(list[i]) ? readId(list[i].id) : undefined;
    if (id === undefined) issues.push(`${subject}.${i}.id: must be a positive integer`);
    else ids.push(id);
  }
  if (issues.length) return invalid(subject, issues);
  return { ids };
}

function invalid(subject: string, issues: string[]): CallbackRefusal {
  return { status: 422, reason: 'invalid object', error: `body is not a valid ${subject} object`, issues };
}

/**
 * A form body in the bracket notation of the service's requests (Rails): `a=1`, `a[b]=1`, `a[][b]=1` (a new element
 * whenever the last one has `b` already), `a[0][b]=1`. Bounded: at most `MAX_FORM_PARAMS` parameters and
 * `MAX_FORM_DEPTH` levels; the rest is not read.
 */
function formObject(text: string): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  let count = 0;
  for (const [key, value] of new URLSearchParams(text)) {
    if (++count > MAX_FORM_PARAMS) break;
    const path = formPath(key);
    if (path === undefined) continue;
    assign(root, path, value);
  }
  return root;
}

/** `a[b][][c]` → ['a', 'b', '', 'c']; undefined when malformed or too deep. */
function formPath(key: string): string[] | undefined {
  const open = key.indexOf('[');
  if (open === -1) return UNSAFE_KEYS.has(key) ? undefined : [key];
  const path = [key.slice(0, open)];
  const rest = key.slice(open);
  const segment = /\[([^\][]*)\]/gy;
  let match: RegExpExecArray | null;
  let consumed = 0;
  while ((match = segment.exec(rest)) !== null) {
    path.push(match[1]);
    consumed = segment.lastIndex;
    if (path.length > MAX_FORM_DEPTH) return undefined;
  }
  if (consumed !== rest.length || path.some((name) => UNSAFE_KEYS.has(name))) return undefined;
  return path;
}

/** Keys that would reach an object's prototype. */
const UNSAFE_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

function assign(container: Record<string, unknown> | unknown[], path: string[], value: string): void {
  const [head, ...rest] = path;
  if (Array.isArray(container)) {
    // `[]`: the last element, unless it already has this key (then a new one); `[n]`: element n.
    const index = head === '' ? undefined : Number(head);
    if (index !== undefined && !(Number.isInteger(index) && index >= 0 && index < MAX_CALLBACK_OBJECTS)) return;
    if (rest.length === 0) {
      if (index === undefined) container.push(value);
      else container[index] = value;
      return;
    }
    let element = index === undefined ? container[container.length - 1] : container[index];
    const fresh = !isRecord(element) || (index === undefined && rest.length === 1 && rest[0] in element);
    if (fresh) {
      if (container.length >= MAX_CALLBACK_OBJECTS) return;
      element = {};
      if (index === undefined) container.push(element);
      else container[index] = element;
    }
    assign(element as Record<string, unknown>, rest, value);
    return;
  }
  if (rest.length === 0) {
    container[head] = value;
    return;
  }
  const nextIsList = rest[0] === '' || /^\d+$/.test(rest[0]);
  let child = container[head];
  if (nextIsList ? !Array.isArray(child) : !isRecord(child)) container[head] = child = nextIsList ? [] : {};
  assign(child as Record<string, unknown> | unknown[], rest, value);
}
