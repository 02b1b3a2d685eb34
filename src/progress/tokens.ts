/**
 * Read tokens for the progress stream: minted by the app's server for one job and a short while, checked by the
 * stream in constant time. A browser's EventSource sends no headers, so the token rides in the URL (`?token=`) or a
 * cookie: it is a capability like a signed callback URL, and never appears in a log line or an error.
 *
 * `v1.<workflow ID, base64url>.<expiry, unix seconds>.<HMAC-SHA256, base64url>`: the HMAC is over a label of its own,
 * the workflow ID and the expiry, so a callback signature made with the same secret is never a token, and a token for
 * one job or time is never one for another.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { durationToMs, type Duration } from '../duration';

const VERSION = 'v1';
const LABEL = 'tuneflow progress token';
const MIN_SECRET_LENGTH = 16;
/** Workflow IDs are bounded by the server (1,000 bytes by default); a token is read before anything else. */
const MAX_TOKEN_LENGTH = 2048;
export const DEFAULT_TOKEN_TTL = '15 minutes';
/** A token is a capability in a URL: a day at most, however the app asks. */
export const MAX_TOKEN_TTL_MS = 24 * 60 * 60 * 1000;

export interface MintProgressTokenOptions {
  /**
   * The HMAC key the stream checks with (`progressStream({ secret })`): the app's server holds it, never a browser.
   * @format at least 16 characters
   */
  secret: string;
  /** The one job the token reads: its workflow ID (a starter's `run.workflowId`). */
  workflowId: string;
  /**
   * How long the token opens a stream (a stream opened before it expires runs to the job's end).
   * @default '15 minutes'
   * @format a duration of at most 24 hours
   */
  ttl?: Duration;
  /** Now, in ms (tests). */
  now?: number;
}

/** Why a token reads nothing. */
export type TokenRefusal = 'missing' | 'malformed' | 'forged' | 'expired';

export function requireSecret(secret: unknown, where: string): string {
  if (typeof secret !== 'string' || secret.length < MIN_SECRET_LENGTH)
    throw new TypeError(`${where}: secret must be a string of at least ${MIN_SECRET_LENGTH} characters`);
  return secret;
}

/**
 * A token that opens the progress stream of one job until it expires.
 *
 * @example
 * const token = mintProgressToken({ secret: process.env.PROGRESS_SECRET!, workflowId: run.workflowId });
 * // the browser: new EventSource(`/progress?token=${encodeURIComponent(token)}`)
 */
export function mintProgressToken(options: MintProgressTokenOptions): string {
  const secret = requireSecret(options?.secret, 'mintProgressToken');
  const { workflowId } = options;
  if (typeof workflowId !== 'string' || workflowId.length === 0 || Buffer.byteLength(workflowId) > 1000)
    throw new TypeError('mintProgressToken: workflowId must be a non-empty string of at most 1000 bytes');
  const ttlMs = durationToMs(options.ttl ?? DEFAULT_TOKEN_TTL, 'mintProgressToken: ttl');
  if (!(ttlMs > 0 && ttlMs <= MAX_TOKEN_TTL_MS))
    throw new RangeError('mintProgressToken: ttl must be more than 0 and at most 24 hours');
  const expires = Math.floor(((options.now ?? Date.now()) + ttlMs) / 1000);
  const id = Buffer.from(workflowId).toString('base64url');
  return `${VERSION}.${id}.${expires}.${mac(secret, workflowId, expires)}`;
}

/**
 * The job a token reads, or why it reads none.
 *
 * @example
 * const checked = checkProgressToken(secret, token); // { workflowId: 'order-1', expires: 1796310000 } | { refused }
 */
export function checkProgressToken(
  secret: string,
  token: string | undefined,
  now = Date.now(),
): { workflowId: string; expires: number } | { refused: TokenRefusal } {
  if (!token) return { refused: 'missing' };
  if (token.length > MAX_TOKEN_LENGTH) return { refused: 'malformed' };
  const parts = token.split('.');
  if (parts.length !== 4 || parts[0] !== VERSION || !/^\d{1,12}$/.test(parts[2]!)) return { refused: 'malformed' };
  const workflowId = Buffer.from(parts[1]!, 'base64url').toString();
  const expires = Number(parts[2]);
  // Compared as bytes, in constant time: a forged token learns nothing of the right one.
  const given = Buffer.from(parts[3]!, 'base64url');
  const wanted = Buffer.from(mac(secret, workflowId, expires), 'base64url');
  if (given.length !== wanted.length || !timingSafeEqual(given, wanted)) return { refused: 'forged' };
  if (expires * 1000 <= now) return { refused: 'expired' };
  return { workflowId, expires };
}

function mac(secret: string, workflowId: string, expires: number): string {
  return createHmac('sha256', secret).update(`${LABEL}\n${workflowId}\n${expires}`).digest('base64url');
}
