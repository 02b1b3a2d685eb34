/**
 * Signed callback URLs. The service neither signs nor authenticates its callbacks (service notes), so tuneflow puts
 * an HMAC of the callback kind and the run (workflow ID and run ID) into the URL it hands out: only URLs it made can
 * wake a run, a URL made for one run or kind cannot be replayed for another, and a later run that reuses the workflow
 * ID does not accept an earlier run's URLs.
 *
 * A signed URL is a capability: it never enters a history, a result or a log line (`redactCallbackSignatures`).
 * URLs carry no expiry: a tune may train for hours, and the URL dies with its run instead (the receiver signals that
 * run only, and a closed run takes no signal). Rotating the secret retires every URL at once.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { CallbackKind, callbackPath } from '../contract/messages';

/** The query parameters tuneflow owns; extra context params may not reuse them. */
const RESERVED_PARAMS = new Set(['workflowId', 'runId', 'sig']);
const KINDS: ReadonlySet<string> = new Set(Object.values(CallbackKind));
/** SHA-256: 32 bytes, 64 hex characters. */
const SIGNATURE_BYTES = 32;
const SIGNATURE_HEX_LENGTH = SIGNATURE_BYTES * 2;
const MIN_SECRET_LENGTH = 16;
/** Run IDs are UUIDs; anything with a newline would make the signed text ambiguous. */
const MAX_RUN_ID_LENGTH = 128;
/** Where a start-up probe is posted (src/callbacks/probe.ts): beside the kinds' paths, and none of them. */
export const PROBE_PATH = '/callbacks/probe';

/** The run a callback URL is for. */
export interface CallbackRun {
  workflowId: string;
  runId: string;
}

export interface CallbackSignerOptions {
  /**
   * Public base URL the service can reach; callback URLs are `<baseUrl>/callbacks/<kind>?...`. A path is kept
   * (`https://example.com/hooks` gives `https://example.com/hooks/callbacks/tune`), so a proxy in front of the
   * receiver must strip it. Leave it out where URLs are only checked (a receiver): `url()` then throws.
   * @format http(s) URL without query or fragment
   */
  baseUrl?: string;
  /**
   * The HMAC key. Shared by every worker that hands out URLs and every receiver that checks them.
   * @format at least 16 characters
   */
  secret: string;
}

/** Makes and checks signed callback URLs. */
export class CallbackSigner {
  readonly baseUrl: string | undefined;
  readonly #secret: string;

  /**
   * Validates the options; errors name the option and the rule (never the secret).
   *
   * @example
   * const signer = new CallbackSigner({ baseUrl: 'https://hooks.example.com', secret: process.env.SECRET! });
   */
  constructor(options: CallbackSignerOptions) {
    const { baseUrl, secret } = options ?? ({} as CallbackSignerOptions);
    let parsed: URL | undefined;
    try {
      parsed = typeof baseUrl === 'string' ? new URL(baseUrl) : undefined;
    } catch {
      parsed = undefined;
    }
    const valid =
      parsed && (parsed.protocol === 'http:' || parsed.protocol === 'https:') && !parsed.search && !parsed.hash;
    if (baseUrl !== undefined && !valid)
      throw new TypeError(
        `CallbackSigner: baseUrl must be an http(s) URL without query or fragment (got ${JSON.stringify(baseUrl)})`,
      );
    if (typeof secret !== 'string' || secret.length < MIN_SECRET_LENGTH)
      throw new TypeError(`CallbackSigner: secret must be a string of at least ${MIN_SECRET_LENGTH} characters`);
    this.baseUrl = parsed?.href.replace(/\/+$/, '');
    this.#secret = secret;
  }

  /**
   * The signed callback URL for a run: `<baseUrl>/callbacks/<kind>?workflowId=<id>&runId=<id>&sig=<hex>` plus
   * `params` (context only, not signed, sorted by name). The same arguments always give the same URL, so a retried
   * create sends what the first attempt sent.
   *
   * @example
   * signer.url('prompt', { workflowId: 'job-42', runId: '0190b7c1-...' }, { key: 'p3' });
   * // https://hooks.example.com/callbacks/prompt?workflowId=job-42&runId=0190b7c1-...&sig=5f0c...&key=p3
   */
  url(kind: CallbackKind, run: CallbackRun, params?: Record<string, string>): string {
    if (this.baseUrl === undefined)
      throw new TypeError('CallbackSigner: url() needs the baseUrl option (this signer only checks signatures)');
    if (!KINDS.has(kind))
      throw new TypeError(`kind: must be one of ${[...KINDS].join(', ')} (got ${JSON.stringify(kind)})`);
    const { workflowId, runId } = run ?? ({} as CallbackRun);
    if (typeof workflowId !== 'string' || workflowId.length === 0)
      throw new TypeError('run.workflowId: must be a non-empty string');
    if (!isRunId(runId)) throw new TypeError(`run.runId: must be a run ID (1 to ${MAX_RUN_ID_LENGTH} characters)`);
    const extra: Record<string, string> = {};
    for (const name of Object.keys(params ?? {}).sort()) {
      if (RESERVED_PARAMS.has(name)) throw new TypeError(`params.${name}: is set by the signer and cannot be given`);
      const value = params![name];
      if (typeof value !== 'string') throw new TypeError(`params.${name}: must be a string`);
      extra[name] = value;
    }
    // Every parameter is signed: a URL holder can change none of them (the trace a callback's span continues).
    const query = new URLSearchParams({
      workflowId,
      runId,
      sig: this.#sign(kind, workflowId, runId, extra).toString('hex'),
    });
    for (const [name, value] of Object.entries(extra)) query.append(name, value);
    return `${this.baseUrl}${callbackPath(kind)}?${query.toString()}`;
  }

  /**
   * Whether `signature` (hex) is the one `url()` gives for this kind, run and `params` (the URL's other parameters);
   * compared in constant time.
   *
   * @example
   * signer.verify('prompt', { workflowId: 'job-42', runId }, query.get('sig') ?? '', { key: '0' }); // never throws
   */
  verify(kind: string, run: CallbackRun, signature: string, params: Readonly<Record<string, string>> = {}): boolean {
    if (typeof signature !== 'string' || signature.length !== SIGNATURE_HEX_LENGTH) return false;
    const { workflowId, runId } = run ?? ({} as CallbackRun);
    if (!KINDS.has(kind) || typeof workflowId !== 'string' || !isRunId(runId)) return false;
    // Buffer.from stops at the first non-hex character, so a short result means the signature was not hex.
    const given = Buffer.from(signature, 'hex');
    if (given.length !== SIGNATURE_BYTES) return false;
    return timingSafeEqual(given, this.#sign(kind, workflowId, runId, params));
  }

  /**
   * The signed URL of a start-up probe (`<baseUrl>/callbacks/probe?nonce=...&sig=...`): a callback the receiver answers
   * as a probe, signalling no run. Its signed text starts `probe\n`, which no callback kind's does.
   *
   * @example
   * signer.probeUrl('5f0c2a...'); // https://hooks.example.com/callbacks/probe?nonce=5f0c2a...&sig=...
   */
  probeUrl(nonce: string): string {
    if (this.baseUrl === undefined)
      throw new TypeError('CallbackSigner: probeUrl() needs the baseUrl option (this signer only checks signatures)');
    if (!isNonce(nonce)) throw new TypeError('nonce: must be 1 to 64 letters, digits, - or _');
    const query = new URLSearchParams({ nonce, sig: this.#signProbe(nonce).toString('hex') });
    return `${this.baseUrl}${PROBE_PATH}?${query.toString()}`;
  }

  /** Whether `signature` (hex) is the one `probeUrl(nonce)` gives; compared in constant time, never throws. */
  verifyProbe(nonce: string, signature: string): boolean {
    if (!isNonce(nonce) || typeof signature !== 'string' || signature.length !== SIGNATURE_HEX_LENGTH) return false;
    const given = Buffer.from(signature, 'hex');
    if (given.length !== SIGNATURE_BYTES) return false;
    return timingSafeEqual(given, this.#signProbe(nonce));
  }

  #signProbe(nonce: string): Buffer {
    return createHmac('sha256', this.#secret).update(`probe\n${nonce}`).digest();
  }

  /**
   * Known kinds and run IDs hold no newline, and the workflow ID comes last: `kind\nrunId\nworkflowId` is unambiguous.
   * The old form (`kind\nworkflowId`, no run) can never equal it, so old URLs are refused. The other parameters, when
   * there are any, go before the workflow ID as one URL-encoded line starting with `?` (no newline inside); without
   * any, the text is the one the releases before them signed, so their URLs still verify (with no parameter trusted).
   */
  #sign(kind: string, workflowId: string, runId: string, params: Readonly<Record<string, string>> = {}): Buffer {
    const names = Object.keys(params).sort();
    const line = names.length
      ? `?${names.map((name) => `${encodeURIComponent(name)}=${encodeURIComponent(params[name])}`).join('&')}\n`
      : '';
    // One update call: each is a crossing into native code, and this runs once per callback.
    return createHmac('sha256', this.#secret).update(`${kind}\n${runId}\n${line}${workflowId}`).digest();
  }
}

function isNonce(value: unknown): value is string {
  return typeof value === 'string' && /^[\w-]{1,64}$/.test(value);
}

function isRunId(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0 && value.length <= MAX_RUN_ID_LENGTH && !value.includes('\n');
}

/** `sig=` followed by a signature, in a URL as given or percent-encoded once. */
const SIGNATURE_IN_TEXT = /(sig(?:=|%3D))[0-9a-fA-F]{64}/g;
/** Objects the service answers with are shallow; deeper values are left as they are, not walked without end. */
const MAX_REDACT_DEPTH = 8;

/**
 * `value` with every callback signature replaced by `redacted`: the service echoes callback URLs in its objects
 * (`callback`, `prompts_callback`, `prompt_attributes.callback`), and what an activity returns enters the history.
 * Strings without a signature, and objects without one, are returned as they are (no copy).
 *
 * @example
 * redactCallbackSignatures({ callback: 'https://h/callbacks/tune?workflowId=w&runId=r&sig=5f0c...' });
 * // { callback: 'https://h/callbacks/tune?workflowId=w&runId=r&sig=redacted' }
 */
export function redactCallbackSignatures<T>(value: T, depth = 0): T {
  if (typeof value === 'string')
    return (value.includes('sig') ? value.replace(SIGNATURE_IN_TEXT, '$1redacted') : value) as T;
  if (typeof value !== 'object' || value === null || depth >= MAX_REDACT_DEPTH) return value;
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    value.forEach((item, i) => {
      const redacted = redactCallbackSignatures(item, depth + 1);
      if (redacted !== item) (copy ??= [...value])[i] = redacted;
    });
    return (copy ?? value) as T;
  }
  // for...in rather than Object.entries: no [key, value] pair allocated per field of every answer (JSON objects have
  // no inherited enumerable keys).
  const record = value as Record<string, unknown>;
  let copy: Record<string, unknown> | undefined;
  for (const key in record) {
    const item = record[key];
    const redacted = redactCallbackSignatures(item, depth + 1);
    if (redacted !== item) (copy ??= { ...record })[key] = redacted;
  }
  return (copy ?? value) as T;
}
