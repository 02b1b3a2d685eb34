/**
 * Signed callback URLs. The service neither signs nor authenticates its callbacks (service notes), so tuneflow puts
 * an HMAC of the callback kind and the workflow ID into the URL it hands out: only URLs it made can signal a
 * workflow, and a URL made for one workflow or kind cannot be replayed for another.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { CallbackKind } from '../workflows/messages';

/** The query parameters tuneflow owns; extra context params may not reuse them. */
const RESERVED_PARAMS = new Set(['workflowId', 'sig']);
const KINDS: ReadonlySet<string> = new Set(Object.values(CallbackKind));
/** SHA-256: 32 bytes, 64 hex characters. */
const SIGNATURE_BYTES = 32;
const SIGNATURE_HEX_LENGTH = SIGNATURE_BYTES * 2;
const MIN_SECRET_LENGTH = 16;

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
   * The signed callback URL for a workflow: `<baseUrl>/callbacks/<kind>?workflowId=<id>&sig=<hex>` plus `params`
   * (context only, not signed, sorted by name). The same arguments always give the same URL, so a retried create
   * sends what the first attempt sent.
   *
   * @example
   * signer.url('prompt', 'job-42', { key: 'p3' });
   * // https://hooks.example.com/callbacks/prompt?workflowId=job-42&sig=5f0c...&key=p3
   */
  url(kind: CallbackKind, workflowId: string, params?: Record<string, string>): string {
    if (this.baseUrl === undefined)
      throw new TypeError('CallbackSigner: url() needs the baseUrl option (this signer only checks signatures)');
    if (!KINDS.has(kind))
      throw new TypeError(`kind: must be one of ${[...KINDS].join(', ')} (got ${JSON.stringify(kind)})`);
    if (typeof workflowId !== 'string' || workflowId.length === 0)
      throw new TypeError('workflowId: must be a non-empty string');
    const query = new URLSearchParams({ workflowId, sig: this.#sign(kind, workflowId).toString('hex') });
    if (params) {
      for (const name of Object.keys(params).sort()) {
        if (RESERVED_PARAMS.has(name)) throw new TypeError(`params.${name}: is set by the signer and cannot be given`);
        const value = params[name];
        if (typeof value !== 'string') throw new TypeError(`params.${name}: must be a string`);
        query.append(name, value);
      }
    }
    return `${this.baseUrl}/callbacks/${kind}?${query.toString()}`;
  }

  /**
   * Whether `signature` (hex) is the one `url()` gives for this kind and workflow ID; compared in constant time.
   *
   * @example
   * signer.verify('prompt', 'job-42', query.get('sig') ?? ''); // true or false, never throws
   */
  verify(kind: string, workflowId: string, signature: string): boolean {
    if (typeof signature !== 'string' || signature.length !== SIGNATURE_HEX_LENGTH) return false;
    // Only known kinds: they hold no newline, which keeps `kind\nworkflowId` unambiguous.
    if (!KINDS.has(kind) || typeof workflowId !== 'string') return false;
    // Buffer.from stops at the first non-hex character, so a short result means the signature was not hex.
    const given = Buffer.from(signature, 'hex');
    if (given.length !== SIGNATURE_BYTES) return false;
    return timingSafeEqual(given, this.#sign(kind, workflowId));
  }

  /** Callers pass known kinds only: none contains a newline, so `kind\nworkflowId` is unambiguous. */
  #sign(kind: string, workflowId: string): Buffer {
    // One update call: each is a crossing into native code, and this runs once per callback.
    return createHmac('sha256', this.#secret).update(`${kind}\n${workflowId}`).digest();
  }
}
