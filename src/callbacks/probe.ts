/**
 * The callback URL proven at start. The commonest failure of an integration with the service is callbacks that never
 * arrive (a public URL behind a redirect, an auth wall, plain http, the wrong host): the runs then finish by polling,
 * late and at more calls. At start the worker posts one signed probe through its own public base URL; a tuneflow
 * receiver with the same secret answers it with the probe's nonce and signals no run. The worker says what it found in
 * its start report and starts whatever it found: a probe from inside proves less than one from the service's side
 * (split DNS, a firewall open only to the service).
 *
 * The probe's URL is signed, so never printed: the report names the base URL, and a redirect's host only.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import type * as Undici from 'undici';
import type { IncomingHttpHeaders } from 'undici/types/header';
import type { CallbackSigner } from './signing';

// undici's client module alone, as src/api/http.ts loads its pool: not the index, which loads all of undici.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const UndiciClient = require('undici/lib/dispatcher/client') as typeof Undici.Client;

/** What the probe found. */
export const ProbeOutcome = {
  /** A tuneflow receiver with this worker's secret answered it. */
  arrived: 'arrived',
  /** A 3xx: the service follows no redirect. */
  redirected: 'redirected',
  /** Any other answer: an auth wall (401, 403), another receiver's secret (403), the wrong host (404), ... */
  refused: 'refused',
  /** No answer: the connection failed or timed out. */
  unreachable: 'unreachable',
  /** Plain http to a host other than this machine: the service calls https only, and nothing was sent. */
  notHttps: 'not https',
} as const;
export type ProbeOutcome = (typeof ProbeOutcome)[keyof typeof ProbeOutcome];

export interface ProbeResult {
  outcome: ProbeOutcome;
  /** The status (refused, redirected), the redirect's host, or the network error's code (unreachable). */
  status?: number;
  host?: string;
  code?: string;
}

/** How long the one request may take, connecting and answering each. */
export const PROBE_TIMEOUT_MS = 5_000;
/** A probe's answer is a few bytes; anything longer is read no further. */
const MAX_ANSWER_BYTES = 4096;

/**
 * Posts one signed probe through `signer.baseUrl` and says what came back; never throws, never retries. Plain http is
 * sent only to this machine (localhost, 127.0.0.0/8, ::1): anywhere else it is `not https`, and nothing is sent.
 *
 * @example
 * describeProbe(await probeCallbackUrl(signer)); // 'arrived', 'refused (401)', 'redirected (302 to login.example.com)'
 */
export async function probeCallbackUrl(
  signer: CallbackSigner,
  timeoutMs: number = PROBE_TIMEOUT_MS,
): Promise<ProbeResult> {
  const base = new URL(signer.baseUrl!);
  if (base.protocol === 'http:' && !isLoopback(base.hostname)) return { outcome: ProbeOutcome.notHttps };
  const nonce = randomBytes(16).toString('hex');
  const url = new URL(signer.probeUrl(nonce));
  const client = new UndiciClient(url.origin, {
    connect: { timeout: timeoutMs },
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });
  try {
    const answer = await post(client, `${url.pathname}${url.search}`);
    if (answer.statusCode >= 300 && answer.statusCode < 400)
      return { outcome: ProbeOutcome.redirected, status: answer.statusCode, host: locationHost(answer.headers, url) };
    if (answer.statusCode === 200 && answeredNonce(answer.text) === nonce) return { outcome: ProbeOutcome.arrived };
    return { outcome: ProbeOutcome.refused, status: answer.statusCode };
  } catch (err) {
    return { outcome: ProbeOutcome.unreachable, code: errorCode(err) };
  } finally {
    await client.destroy().catch(() => undefined);
  }
}

/**
 * The probe's result as the start report says it: `arrived`, `redirected (302 to login.example.com)`, `refused (401)`,
 * `refused (200, not a tuneflow receiver)`, `unreachable (ECONNREFUSED)`, `not https (nothing sent)`.
 */
export function describeProbe(result: ProbeResult): string {
  switch (result.outcome) {
    case ProbeOutcome.redirected:
      return `redirected (${result.status} to ${result.host ?? 'no location'})`;
    case ProbeOutcome.refused:
      return result.status === 200 ? 'refused (200, not a tuneflow receiver)' : `refused (${result.status})`;
    case ProbeOutcome.unreachable:
      return `unreachable (${result.code})`;
    case ProbeOutcome.notHttps:
      return 'not https (nothing sent)';
    default:
      return result.outcome;
  }
}

/**
 * The receiver's side: `POST /callbacks/probe?nonce=...&sig=...` signed with its secret is answered 200 with the nonce
 * (and signals nothing); a wrong signature 403, another method 405, as a callback's would be.
 */
export function answerProbe(
  req: IncomingMessage,
  res: ServerResponse,
  signer: CallbackSigner,
  refuse: (status: 403 | 405, reason: string, error: string) => void,
): void {
  if (req.method !== 'POST') return refuse(405, 'method', 'method not allowed');
  const query = new URLSearchParams((req.url ?? '').split('?')[1] ?? '');
  const nonce = query.get('nonce') ?? '';
  if (!signer.verifyProbe(nonce, query.get('sig') ?? '')) return refuse(403, 'probe signature', 'bad signature');
  req.resume();
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ outcome: 'probe', nonce }));
}

/** This machine, where plain http never leaves it. */
export function isLoopback(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  return (
    host === 'localhost' ||
    host.endsWith('.localhost') ||
    host === '::1' ||
    /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host)
  );
}

interface Answer {
  statusCode: number;
  headers: IncomingHttpHeaders;
  text: string;
}

/** One POST of an empty JSON object, as a callback is posted; redirects are not followed. */
function post(client: Pick<Undici.Client, 'dispatch'>, path: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    let statusCode = 0;
    let headers: IncomingHttpHeaders = {};
    let text = '';
    const handler: Dispatcher.DispatchHandler = {
      // Its presence is what tells undici this handler takes the controller API.
      onRequestStart() {},
      onResponseStart(_controller, status, responseHeaders) {
        if (status < 200) return;
        statusCode = status;
        headers = responseHeaders as IncomingHttpHeaders;
      },
      onResponseData(controller, chunk) {
        if (text.length < MAX_ANSWER_BYTES) text += chunk.toString('utf8');
        else controller.abort(new Error('answer too long'));
      },
      onResponseEnd: () => resolve({ statusCode, headers, text }),
      onResponseError: (_controller, error) => (statusCode ? resolve({ statusCode, headers, text }) : reject(error)),
    };
    client.dispatch({ method: 'POST', path, headers: { 'content-type': 'application/json' }, body: '{}' }, handler);
  });
}

function answeredNonce(text: string): unknown {
  try {
    return (JSON.parse(text) as { nonce?: unknown } | null)?.nonce;
  } catch {
    return undefined;
  }
}

/** Where a redirect points, host only: its path and query may carry the probe's signature. */
function locationHost(headers: IncomingHttpHeaders, from: URL): string | undefined {
  const location = headers.location;
  const value = Array.isArray(location) ? location[0] : location;
  if (!value) return undefined;
  try {
    return new URL(value, from).host;
  } catch {
    return 'an unreadable location';
  }
}

/** The network error's code (ECONNREFUSED, ENOTFOUND, UND_ERR_CONNECT_TIMEOUT, ...): never its message, nor the URL. */
function errorCode(err: unknown): string {
  const e = err as { code?: unknown; cause?: { code?: unknown }; name?: unknown } | null;
  const code = e?.code ?? e?.cause?.code ?? e?.name;
  return typeof code === 'string' ? code : 'unknown error';
}
