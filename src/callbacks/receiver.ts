/**
 * The HTTP receiver for the service's callbacks: checks the URL's signature, reads and validates the body, and turns
 * the callback into the matching workflow signal. The service never retries a callback, so every answer after the
 * signature check is final: a callback for a closed workflow is answered 200 and logged, never an error.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Client, isGrpcServiceError, ServiceError, WorkflowNotFoundError } from '@temporalio/client';
import type { Logger } from '@temporalio/common';
import { z } from 'zod';
import { acceptsAsIs } from '../api/answer-check';
import { answerIssues, created, Prompt, Tune } from '../api/schemas';
import { type Duration, durationToMs } from '../duration';
import { createJsonLogger } from '../logging';
import { CallbackKind, packPromptsSettledSignal, promptSettledSignal, tuneTrainedSignal } from '../workflows/messages';
import type { CallbackSigner } from './signing';

// ---------------------------------------------------------------------------------------------------------------
// Signalers

/** What became of a signal: sent, or its workflow is closed or unknown. */
export type SignalOutcome = 'delivered' | 'workflow-not-found';

/** Sends a callback's payload to its workflow as a signal. */
export interface Signaler {
  signal(workflowId: string, kind: CallbackKind, payload: Tune | Prompt | Prompt[]): Promise<SignalOutcome>;
}

/** Temporal could not be reached (or did not answer in time): the receiver answers 503. */
export class SignalerUnavailableError extends Error {
  /** The workflow the signal was for, when the thrower knew it. */
  readonly workflowId?: string;
  constructor(message?: string, options?: { cause?: unknown; workflowId?: string }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'SignalerUnavailableError';
    this.workflowId = options?.workflowId;
  }
}

export interface TemporalSignalerOptions {
  /**
   * Deadline of one signal, the client's own retries of an unreachable server included; past it the callback is
   * answered 503. The answer can come up to one retry interval (at most about 6 s) after the deadline, since the
   * client checks the deadline when it retries.
   * @default '10 seconds'
   */
  timeout?: Duration;
}

/**
 * gRPC status codes that mean "the server was not reached or did not answer", not "the server said no"
 * (numbers from the gRPC spec; @grpc/grpc-js is not a direct dependency).
 */
const UNAVAILABLE_CODES: ReadonlySet<number> = new Set([
  1, // CANCELLED: the connection was closed under the call
  4, // DEADLINE_EXCEEDED
  8, // RESOURCE_EXHAUSTED
  10, // ABORTED
  14, // UNAVAILABLE
]);

function isTemporalUnavailable(err: unknown): boolean {
  if (isGrpcServiceError(err)) return UNAVAILABLE_CODES.has(err.code);
  if (err instanceof ServiceError) {
    // A ServiceError without a gRPC status never reached the server (closed channel, transport failure).
    return isGrpcServiceError(err.cause) ? UNAVAILABLE_CODES.has(err.cause.code) : true;
  }
  return false;
}

/**
 * A Signaler that signals workflows through a Temporal client, with the signal definitions of messages.ts.
 *
 * @example
 * const client = new Client({ connection: await Connection.connect({ address: 'localhost:7233' }) });
 * const receiver = await startCallbackReceiver({ signer, signaler: temporalSignaler(client) });
 */
export function temporalSignaler(client: Client, options: TemporalSignalerOptions = {}): Signaler {
  const timeoutMs = durationToMs(options.timeout ?? '10 seconds', 'timeout');
  const send = (workflowId: string, kind: CallbackKind, payload: Tune | Prompt | Prompt[]): Promise<void> => {
    const handle = client.workflow.getHandle(workflowId);
    switch (kind) {
      case CallbackKind.tune:
        return handle.signal(tuneTrainedSignal, payload as Tune);
      case CallbackKind.prompt:
        return handle.signal(promptSettledSignal, payload as Prompt);
      case CallbackKind.packPrompts:
        return handle.signal(packPromptsSettledSignal, payload as Prompt[]);
      default:
        throw new TypeError(`kind: must be one of ${Object.values(CallbackKind).join(', ')}`);
    }
  };
  return {
    async signal(workflowId, kind, payload) {
      // A deadline, not a timer raced against the call: it ends the client's retries too, so no retry is left
      // pending (and firing on a closed connection) once this returns.
      try {
        await client.withDeadline(Date.now() + timeoutMs, () => send(workflowId, kind, payload));
        return 'delivered';
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return 'workflow-not-found';
        if (isTemporalUnavailable(err))
          throw new SignalerUnavailableError(`Temporal is unavailable: ${(err as Error).message}`, {
            cause: err,
            workflowId,
          });
        throw err;
      }
    },
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Receiver

export interface CallbackReceiverOptions {
  /**
   * Port to listen on; 0 picks a free one (read it from the returned `url`).
   * @default 0
   */
  port?: number;
  /**
   * Interface to listen on. All interfaces, because the service (or the proxy in front of the receiver) must reach
   * it; every callback is authenticated by its signature. Use '127.0.0.1' to keep it local.
   * @default '0.0.0.0'
   */
  host?: string;
  /** Checks the signature of every callback URL. */
  signer: CallbackSigner;
  /** Receives every callback that passes the checks. */
  signaler: Signaler;
  /**
   * Largest body accepted; larger ones are answered 413 without being read into memory.
   * @default 1048576 (1 MiB)
   */
  maxBodyBytes?: number;
  /**
   * Where the structured log lines go (never signatures or the secret).
   * @default createJsonLogger(process.stderr, 'INFO')
   */
  logger?: Logger;
}

/** A running receiver. */
export interface CallbackReceiver {
  /** Local address it answers on, e.g. `http://127.0.0.1:3001`. */
  url: string;
  /** Stops accepting connections; resolves once open requests are answered and their signal calls have ended. */
  close(): Promise<void>;
}

interface Route {
  kind: CallbackKind;
  /** What the 422 answer and the logs call the payload. */
  subject: string;
  schema: z.ZodType<Tune | Prompt | Prompt[]>;
  unwrap(body: unknown): unknown;
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** `{"tune": {...}}` is a wrapped tune; a tune object itself has an `id` and no `tune` field. */
const unwrapObject =
  (key: string) =>
  (body: unknown): unknown =>
    isRecord(body) && body.id === undefined && isRecord(body[key]) ? body[key] : body;

const PromptList = z.array(Prompt);

/** Keyed by the whole path, so routing is one Map look-up. */
const ROUTES: ReadonlyMap<string, Route> = new Map<string, Route>([
  // The client's answer schemas: numeric strings read as numbers, one object in an array taken as that object.
  [
    '/callbacks/tune',
    { kind: CallbackKind.tune, subject: 'tune', schema: created(Tune), unwrap: unwrapObject('tune') },
  ],
  [
    '/callbacks/prompt',
    { kind: CallbackKind.prompt, subject: 'prompt', schema: created(Prompt), unwrap: unwrapObject('prompt') },
  ],
  [
    '/callbacks/pack-prompts',
    {
      kind: CallbackKind.packPrompts,
      subject: 'prompts',
      schema: PromptList,
      unwrap: (body) => (isRecord(body) && Array.isArray(body.prompts) ? body.prompts : body),
    },
  ],
]);

const MAX_ISSUES_SHOWN = 5;
const MAX_LOGGED_CHARS = 200;
/** How much of a refused body is read and thrown away so the client sees the answer instead of a reset. */
const DRAIN_LIMIT_BYTES = 8 * 1024 * 1024;
const DRAIN_LIMIT_MS = 2_000;

const JSON_TYPE = 'application/json';
const answers = {
  delivered: JSON.stringify({ outcome: 'delivered' }),
  workflowNotFound: JSON.stringify({ outcome: 'workflow-not-found' }),
  notFound: JSON.stringify({ error: 'not found' }),
  methodNotAllowed: JSON.stringify({ error: 'method not allowed' }),
  forbidden: JSON.stringify({ error: 'invalid or missing signature' }),
  tooLarge: JSON.stringify({ error: 'body too large' }),
  notJson: JSON.stringify({ error: 'body is not JSON' }),
  unavailable: JSON.stringify({ error: 'temporal unavailable' }),
  internal: JSON.stringify({ error: 'internal error' }),
} as const;

/**
 * Starts the callback receiver: `POST /callbacks/<kind>?workflowId=...&sig=...` and `GET /healthz`.
 *
 * Answers: 200 once signalled (or when the workflow is closed or unknown: the service never retries), 403 for a
 * missing or wrong signature, 404 for an unknown path, 405 for another method, 413 for a body over
 * `maxBodyBytes`, 400 for a body that is not JSON, 422 for JSON that is not the kind's object, 503 when Temporal is
 * unavailable, 500 for anything else. Only a 200 "delivered" has signalled.
 *
 * @example
 * const receiver = await startCallbackReceiver({ port: 3001, signer, signaler: temporalSignaler(client) });
 * console.log(receiver.url); // http://127.0.0.1:3001
 * await receiver.close();
 */
export async function startCallbackReceiver(options: CallbackReceiverOptions): Promise<CallbackReceiver> {
  const { signer, signaler } = options;
  const port = options.port ?? 0;
  const host = options.host ?? '0.0.0.0';
  const maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024;
  const logger = options.logger ?? createJsonLogger();
  if (!signer || typeof signer.verify !== 'function') throw new TypeError('signer: must be a CallbackSigner');
  if (!signaler || typeof signaler.signal !== 'function') throw new TypeError('signaler: must be a Signaler');
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new TypeError('port: must be an integer from 0 to 65535');
  if (!Number.isInteger(maxBodyBytes) || maxBodyBytes < 1)
    throw new TypeError('maxBodyBytes: must be a positive integer');

  // Signals under way: close() waits for them even when their client hung up, so nothing still runs on a
  // Temporal connection its owner closes next.
  let delivering = 0;
  let idle: Array<() => void> = [];
  const delivered = (): void => {
    if (--delivering === 0 && idle.length > 0) {
      for (const resolve of idle) resolve();
      idle = [];
    }
  };
  const allDelivered = (): Promise<void> =>
    delivering === 0 ? Promise.resolve() : new Promise<void>((resolve) => idle.push(resolve));

  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const route = ROUTES.get(path);
    if (route === undefined) {
      if (path === '/healthz') return health(req, res);
      logger.debug('callback refused', { path: clip(path), method: req.method, status: 404 });
      return refuse(req, res, 404, answers.notFound);
    }
    if (req.method !== 'POST') {
      logger.debug('callback refused', { kind: route.kind, method: req.method, status: 405 });
      res.setHeader('allow', 'POST');
      return refuse(req, res, 405, answers.methodNotAllowed);
    }
    const query = new URLSearchParams(q === -1 ? '' : url.slice(q + 1));
    const workflowId = query.get('workflowId');
    const signature = query.get('sig');
    // Checked before the body is read: a stranger's body is never parsed.
    if (!workflowId || !signature || !signer.verify(route.kind, workflowId, signature)) {
      logger.warn('callback refused', {
        kind: route.kind,
        workflowId: clip(workflowId),
        status: 403,
        reason: 'signature',
      });
      return refuse(req, res, 403, answers.forbidden);
    }
    const declared = Number(req.headers['content-length']);
    if (declared > maxBodyBytes) return tooLarge(req, res, route, workflowId);

    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > maxBodyBytes) {
        req.off('data', onData);
        req.off('end', onEnd);
        chunks.length = 0;
        tooLarge(req, res, route, workflowId);
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
      delivering++;
      deliver(res, route, workflowId, body).then(delivered, (err: unknown) => {
        delivered();
        logger.error('callback handling failed', { kind: route.kind, workflowId, error: err });
      });
    };
    req.on('data', onData);
    req.on('end', onEnd);
    // A client that hangs up mid-body has sent nothing to signal.
    req.on('error', (err) => logger.debug('callback aborted', { kind: route.kind, workflowId, error: err.message }));
  };

  const deliver = async (res: ServerResponse, route: Route, workflowId: string, body: Buffer): Promise<void> => {
    const { kind } = route;
    let json: unknown;
    try {
      json = JSON.parse(body.toString('utf8'));
    } catch {
      logger.warn('callback refused', { kind, workflowId, status: 400, reason: 'not JSON' });
      return send(res, 400, answers.notJson);
    }
    const payload = route.unwrap(json);
    // Bodies that fit (nearly all) pass the client's check compiled from the same schema, which accepts only what zod
    // would return unchanged; zod judges the rest, and its issues name what is wrong.
    const parsed = acceptsAsIs(route.schema, payload)
      ? { success: true as const, data: payload as Tune | Prompt | Prompt[] }
      : route.schema.safeParse(payload);
    if (!parsed.success) {
      const issues = answerIssues(parsed.error)
        .slice(0, MAX_ISSUES_SHOWN)
        .map((i) => `${[route.subject, ...i.path].join('.')}: ${i.message}`);
      logger.warn('callback refused', { kind, workflowId, status: 422, reason: 'invalid object', issues });
      return send(res, 422, JSON.stringify({ error: `body is not a valid ${route.subject} object`, issues }));
    }
    let outcome: SignalOutcome;
    try {
      outcome = await signaler.signal(workflowId, kind, parsed.data);
    } catch (err) {
      if (err instanceof SignalerUnavailableError) {
        logger.error('callback not signalled: Temporal unavailable', { kind, workflowId, status: 503, error: err });
        return send(res, 503, answers.unavailable);
      }
      logger.error('callback not signalled', { kind, workflowId, status: 500, error: err });
      return send(res, 500, answers.internal);
    }
    if (outcome === 'workflow-not-found') {
      // The workflow closed (or never was): nothing to wake, and the service would not retry anyway.
      logger.warn('callback for a closed or unknown workflow', { kind, workflowId, status: 200, outcome });
      return send(res, 200, answers.workflowNotFound);
    }
    logger.info('callback delivered', { kind, workflowId, status: 200, outcome });
    send(res, 200, answers.delivered);
  };

  const tooLarge = (req: IncomingMessage, res: ServerResponse, route: Route, workflowId: string): void => {
    logger.warn('callback refused', {
      kind: route.kind,
      workflowId,
      status: 413,
      reason: 'body too large',
      maxBodyBytes,
    });
    refuse(req, res, 413, answers.tooLarge);
  };

  const server = createServer({ requestTimeout: 30_000, headersTimeout: 10_000 }, handle);
  server.on('clientError', (err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
    else socket.destroy();
    logger.debug('bad HTTP request', { error: (err as Error).message });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', (err) => logger.error('callback receiver error', { error: err }));
  const address = server.address() as AddressInfo;
  return {
    url: `http://${reachableHost(address.address)}:${address.port}`,
    close: async () => {
      const closed = new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
      server.closeIdleConnections();
      await Promise.all([closed, allDelivered()]);
    },
  };
}

/** `GET /healthz`: the process is up and listening. */
function health(req: IncomingMessage, res: ServerResponse): void {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('allow', 'GET, HEAD');
    return refuse(req, res, 405, answers.methodNotAllowed);
  }
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 2 });
  res.end('ok');
}

function send(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/**
 * Answers without reading the body. A body still on its way is read and thrown away, within limits, so the client
 * gets the answer rather than a connection reset; past the limits the connection is cut.
 */
function refuse(req: IncomingMessage, res: ServerResponse, status: number, body: string): void {
  if (!req.complete) drain(req);
  send(res, status, body);
}

function drain(req: IncomingMessage): void {
  let drained = 0;
  const stop = (): void => {
    req.socket.destroy();
  };
  const timer = setTimeout(stop, DRAIN_LIMIT_MS);
  req.on('data', (chunk: Buffer) => {
    drained += chunk.length;
    if (drained > DRAIN_LIMIT_BYTES) stop();
  });
  req.on('end', () => clearTimeout(timer));
  req.on('close', () => clearTimeout(timer));
  req.resume();
}

/** Unverified values from a URL go into logs shortened: a stranger chooses their length. */
function clip(value: string | null): string | null {
  return value !== null && value.length > MAX_LOGGED_CHARS ? `${value.slice(0, MAX_LOGGED_CHARS)}...` : value;
}

/** An address a local client can use: the wildcard addresses are not. */
function reachableHost(address: string): string {
  if (address === '0.0.0.0') return '127.0.0.1';
  if (address === '::') return '[::1]';
  return address.includes(':') ? `[${address}]` : address;
}
