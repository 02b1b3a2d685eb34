/**
 * A codec server for tuneflow's compressed payloads (compression.ts): the HTTP endpoint the Temporal Web UI and
 * `temporal workflow show --codec-endpoint` send payloads to, so they show what a worker stored compressed.
 * `POST /decode` and `POST /encode` take and answer `{ "payloads": [...] }` in the proto3 JSON of Temporal's
 * Payloads (metadata values and data in base64), as Temporal's remote codec protocol has it.
 *
 * Compression hides nothing (anyone holding the history can inflate it), so the server needs no key of its own: it
 * only turns back what it is given. It is bounded all the same, as every server of tuneflow is: a request's bytes,
 * its payloads, its time, and the connections it holds. The Web UI calls it from the browser: only the origins the
 * operator names get CORS answers (the dev server's UI, http://localhost:8233, by default).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Payload } from '@temporalio/common';
import { z } from 'zod';
import { CompressionCodec } from './compression';
import { listen, localUrl } from '../listening';

/** The port `tuneflow codec-server` listens on unless told. */
export const DEFAULT_CODEC_PORT = 8888;
/** The Web UI of `tuneflow dev-server` (and of the CLI's dev server). */
export const DEFAULT_CORS_ORIGINS: readonly string[] = ['http://localhost:8233', 'http://127.0.0.1:8233'];
/** A request's body: Temporal's gRPC messages stop at 4 MB; base64 and JSON add a third. */
export const MAX_CODEC_BODY_BYTES = 8 * 1024 * 1024;
/** Payloads in one request: the Web UI sends an event's, the CLI a history's few at a time. */
export const MAX_CODEC_PAYLOADS = 10_000;
/** Connections held at once; one more is refused by the socket. */
export const MAX_CODEC_CONNECTIONS = 256;
/** How long a request may take to arrive whole. */
const REQUEST_TIMEOUT_MS = 30_000;

export interface CodecServerOptions {
  /** @default DEFAULT_CODEC_PORT; 0 picks a free one */
  port?: number;
  /** @default '127.0.0.1': a Web UI on this machine; an address of the network for one elsewhere */
  host?: string;
  /** Origins whose pages may call it (the Web UI's address); `*` any. @default DEFAULT_CORS_ORIGINS */
  corsOrigins?: readonly string[];
}

export interface CodecServer {
  /** Where it listens, as a local client reaches it: the `--codec-endpoint`. */
  url: string;
  close(): Promise<void>;
}

const Base64 = z.base64();
const Payloads = z.object({
  payloads: z
    .array(
      z.object({
        metadata: z.record(z.string(), Base64).optional(),
        data: Base64.optional(),
      }),
    )
    .max(MAX_CODEC_PAYLOADS),
});

/** A request the server refuses: its status and what to fix. */
class Refusal extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Starts the codec server.
 *
 * @example
 * const server = await startCodecServer({ port: 8888 });
 * // temporal workflow show --workflow-id job-1 --codec-endpoint http://127.0.0.1:8888
 */
export async function startCodecServer(options: CodecServerOptions = {}): Promise<CodecServer> {
  const { port = DEFAULT_CODEC_PORT, host = '127.0.0.1', corsOrigins = DEFAULT_CORS_ORIGINS } = options;
  const codec = new CompressionCodec();
  const server = createServer({ requestTimeout: REQUEST_TIMEOUT_MS }, (req, res) => {
    void answer(req, res, codec, corsOrigins).catch(() => {
      if (!res.headersSent) send(res, 500, { error: 'the codec server failed' });
      else res.destroy();
    });
  });
  server.maxConnections = MAX_CODEC_CONNECTIONS;
  server.keepAliveTimeout = 5_000;
  await listen(server, port, host);
  const bound = (server.address() as AddressInfo).port;
  return {
    url: localUrl(host, bound),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function answer(
  req: IncomingMessage,
  res: ServerResponse,
  codec: CompressionCodec,
  corsOrigins: readonly string[],
): Promise<void> {
  const origin = req.headers.origin;
  if (origin !== undefined && (corsOrigins.includes('*') || corsOrigins.includes(origin))) {
    res.setHeader('Access-Control-Allow-Origin', origin);
    res.setHeader('Access-Control-Allow-Credentials', 'true');
    res.setHeader('Vary', 'Origin');
  }
  const path = new URL(req.url ?? '/', 'http://codec').pathname.replace(/\/+$/, '');
  const operation = path.endsWith('/decode') ? 'decode' : path.endsWith('/encode') ? 'encode' : undefined;
  if (req.method === 'GET' && (path === '/healthz' || path === '')) return send(res, 200, { ok: true });
  if (!operation) return send(res, 404, { error: 'not found: POST /decode or /encode' });
  if (req.method === 'OPTIONS') {
    // The Web UI's preflight: it sends its namespace, and the user's token when told to pass it.
    res.setHeader('Access-Control-Allow-Methods', 'POST, OPTIONS');
    res.setHeader('Access-Control-Allow-Headers', 'content-type, x-namespace, authorization');
    res.setHeader('Access-Control-Max-Age', '600');
    res.writeHead(204).end();
    return;
  }
  if (req.method !== 'POST') {
    res.setHeader('Allow', 'POST, OPTIONS');
    return send(res, 405, { error: `${req.method ?? 'this method'} is not served: POST ${operation}` });
  }
  let payloads: Payload[];
  try {
    payloads = parsePayloads(await readBody(req));
  } catch (err) {
    if (err instanceof Refusal) {
      // A body left unread would hold the connection: the answer closes it.
      res.setHeader('Connection', 'close');
      return send(res, err.status, { error: err.message });
    }
    throw err;
  }
  // Encoding here has no run to say whose payload it is: what the Web UI sends (a signal, a start) is a workflow's,
  // which tuneflow stores plain; so `/encode` answers its payloads as they came.
  const answered = operation === 'decode' ? await codec.decode(payloads) : await codec.encode(payloads);
  send(res, 200, { payloads: answered.map(payloadJson) });
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > MAX_CODEC_BODY_BYTES)
    return Promise.reject(new Refusal(413, `body over ${MAX_CODEC_BODY_BYTES} bytes`));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let length = 0;
    req.on('data', (chunk: Buffer) => {
      length += chunk.length;
      if (length > MAX_CODEC_BODY_BYTES) {
        reject(new Refusal(413, `body over ${MAX_CODEC_BODY_BYTES} bytes`));
        req.pause();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function parsePayloads(body: Buffer): Payload[] {
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch {
    throw new Refusal(400, 'body: must be JSON, { "payloads": [{ "metadata": {...}, "data": "<base64>" }] }');
  }
  const parsed = Payloads.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Refusal(400, `${['body', ...issue.path].join('.')}: ${issue.message}`);
  }
  return parsed.data.payloads.map((payload) => ({
    metadata: Object.fromEntries(
      Object.entries(payload.metadata ?? {}).map(([key, value]) => [key, Buffer.from(value, 'base64')]),
    ),
    data: Buffer.from(payload.data ?? '', 'base64'),
  }));
}

/** A payload in proto3 JSON: metadata values and data in base64. */
function payloadJson(payload: Payload): { metadata: Record<string, string>; data: string } {
  return {
    metadata: Object.fromEntries(
      Object.entries(payload.metadata ?? {}).map(([key, value]) => [key, Buffer.from(value).toString('base64')]),
    ),
    data: Buffer.from(payload.data ?? new Uint8Array()).toString('base64'),
  };
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}
