/**
 * The HTTP receiver for the service's callbacks: a thin server around `unwrap.ts`. It checks the URL's signature
 * before reading the body, reads only the ids of the objects the callback is about, and wakes the run the URL was
 * signed for with the `callback` signal; the run reads the objects from the service itself. The service never
 * retries a callback, so every answer after the signature check is final: a callback for a closed run is answered
 * 200, never an error.
 *
 * No request costs more than a real callback: bodies are bounded per kind and refused early (413, with no
 * `100 Continue`), a flood of validly signed callbacks is coalesced per run and object and bounded per run (so it
 * cannot grow a run's history), and refusals are logged as counts, not a line each.
 *
 * A callback whose URL checks out is an OpenTelemetry server span that continues the job's trace (the URL's
 * `traceparent`, trace-context.ts) and parents the signal; a refused URL makes no span, as it makes no log line.
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { context, type Span, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { type Client, isGrpcServiceError, ServiceError, WorkflowNotFoundError } from '@temporalio/client';
import type { Logger } from '@temporalio/common';
import { isPort } from '../config';
import { type Duration, durationToMs } from '../duration';
import { createJsonLogger } from '../logging';
import { callbackSignal, type CallbackWakeUp } from '../contract/messages';
import type { CallbackRun, CallbackSigner } from './signing';
import { callbackParent } from './trace-context';
import { type CallbackRefusal, type CallbackRoute, readCallbackBody, verifyCallbackUrl } from './unwrap';
import { BufferedBytes, Connections, DEFAULT_RECEIVER_LIMITS, type ReceiverLimits } from './receiver-limits';
import { WakeUpGate } from './wake-up-gate';

const tracer = trace.getTracer('tuneflow');

/**
 * The span of a callback that passed the URL checks, ended with the answer: route, status, the run it is for (the
 * attribute names of Temporal's own spans) and, once known, what became of it. Never the URL: its signature is a
 * capability.
 */
function callbackSpan(
  res: ServerResponse,
  route: CallbackRoute,
  run: CallbackRun,
  params: Readonly<Record<string, string>>,
): Span {
  const path = `/callbacks/${route.kind}`;
  const span = tracer.startSpan(
    `POST ${path}`,
    {
      kind: SpanKind.SERVER,
      attributes: {
        'http.request.method': 'POST',
        'http.route': path,
        'tuneflow.callback.kind': route.kind,
        temporalWorkflowId: run.workflowId,
        run_id: run.runId,
      },
    },
    callbackParent(params),
  );
  if (!span.isRecording()) return span;
  res.once('close', () => {
    if (res.headersSent) {
      span.setAttribute('http.response.status_code', res.statusCode);
      if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    } else {
      span.setAttribute('error.type', 'connection closed');
    }
    span.end();
  });
  return span;
}

// ---------------------------------------------------------------------------------------------------------------
// Signalers

/** What became of a signal: sent, or its workflow is closed or unknown. */
export type SignalOutcome = 'delivered' | 'workflow-not-found';

/** Wakes a run with a callback's wake-up, as a signal. */
export interface Signaler {
  signal(run: CallbackRun, wakeUp: CallbackWakeUp): Promise<SignalOutcome>;
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
 * A Signaler that signals runs through a Temporal client: the `callback` signal, to the run the URL was signed for
 * (a closed run, or a later run with the same workflow ID, takes nothing).
 *
 * @example
 * const client = new Client({ connection: await Connection.connect({ address: 'localhost:7233' }) });
 * const receiver = await startCallbackReceiver({ signer, signaler: temporalSignaler(client) });
 */
export function temporalSignaler(client: Client, options: TemporalSignalerOptions = {}): Signaler {
  const timeoutMs = durationToMs(options.timeout ?? '10 seconds', 'timeout');
  return {
    async signal({ workflowId, runId }, wakeUp) {
      // A deadline, not a timer raced against the call: it ends the client's retries too, so no retry is left
      // pending (and firing on a closed connection) once this returns.
      try {
        await client.withDeadline(Date.now() + timeoutMs, () =>
          client.workflow.getHandle(workflowId, runId).signal(callbackSignal, wakeUp),
        );
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
  /** Wakes the runs. */
  signaler: Signaler;
  /**
   * Largest body accepted, for every kind; larger ones are answered 413 without being read into memory.
   * @default 64 KiB for a tune or a prompt, 512 KiB for a pack's prompts (a real callback is a few KB)
   */
  maxBodyBytes?: number;
  /**
   * A callback that repeats one (same objects, same body) that woke its run within this time is answered 200 without
   * a signal.
   * @default '10 seconds'
   */
  coalesceWindow?: Duration;
  /**
   * Signals one run may be sent: `burst` at once, then `perMinute` more each minute; past it, 200 and no signal (the
   * service never retries: a callback is never made to fail for what others spent).
   * @default { burst: 256, perMinute: 2 }
   */
  runBudget?: { burst: number; perMinute: number };
  /**
   * How long a client may take to send its headers, and its whole request; a slower one is answered 408 and closed,
   * so slow clients hold no connection for long.
   * @default { headers: '10 seconds', request: '30 seconds' }
   */
  clientTimeouts?: { headers: Duration; request: Duration };
  /**
   * What the receiver holds for all clients together: connections in all and per address, idle time, and the body
   * bytes of requests being read (receiver-limits.ts).
   * @default DEFAULT_RECEIVER_LIMITS: 1000 connections, 256 per address, 8 MiB of bodies, 5 seconds idle
   */
  limits?: ReceiverLimits;
  /**
   * Refused requests are logged as counts, one line per interval, never a line each (nor their URLs).
   * @default '1 minute'
   */
  refusalLogInterval?: Duration;
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

/** How much of a refused body is read and thrown away so the client sees the answer instead of a reset. */
const DRAIN_LIMIT_BYTES = 1024 * 1024;
const DRAIN_LIMIT_MS = 2_000;

const JSON_TYPE = 'application/json';
const answers = {
  delivered: JSON.stringify({ outcome: 'delivered' }),
  coalesced: JSON.stringify({ outcome: 'coalesced' }),
  workflowNotFound: JSON.stringify({ outcome: 'workflow-not-found' }),
  overBudget: JSON.stringify({ outcome: 'over-budget' }),
  busy: JSON.stringify({ error: 'the receiver is at its limits: try again shortly' }),
  unavailable: JSON.stringify({ error: 'temporal unavailable' }),
  internal: JSON.stringify({ error: 'internal error' }),
} as const;

/** Statuses of HTTP-level errors (the client's request could not be read). */
const CLIENT_ERROR_STATUS: Readonly<Record<string, number>> = {
  HPE_HEADER_OVERFLOW: 431,
  ERR_HTTP_REQUEST_TIMEOUT: 408,
  ERR_HTTP_HEADERS_TIMEOUT: 408,
  HPE_CHUNK_EXTENSIONS_OVERFLOW: 413,
};
const STATUS_TEXT: Readonly<Record<number, string>> = {
  400: 'Bad Request',
  408: 'Request Timeout',
  413: 'Payload Too Large',
  431: 'Request Header Fields Too Large',
};

/**
 * Starts the callback receiver: `POST /callbacks/<kind>?workflowId=...&runId=...&sig=...` and `GET /healthz`.
 *
 * Answers: 200 once the run is woken (`delivered`), when the same callback woke it moments ago (`coalesced`), or
 * when the run is closed (`workflow-not-found`: the service never retries); 403 for a missing or wrong signature, 404
 * for an unknown path, 405 for another method, 413 for a body over the kind's limit (before it is read), 415 for a
 * body that is neither JSON nor a form in UTF-8, 400 for a body that is not JSON, 422 for one without the objects' ids,
 * 200 without a signal when the run's budget of signals is spent (`over-budget`), 503 when Temporal is unavailable or the receiver is at its limits
 * (`Retry-After: 1`, the connection closed), 500 for anything else; 408 and 431
 * for requests that could not be read. Only `delivered` has signalled.
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
  const maxBodyBytes = options.maxBodyBytes;
  const logger = options.logger ?? createJsonLogger();
  if (!signer || typeof signer.verify !== 'function') throw new TypeError('signer: must be a CallbackSigner');
  if (!signaler || typeof signaler.signal !== 'function') throw new TypeError('signaler: must be a Signaler');
  if (!isPort(port)) throw new TypeError('port: must be an integer from 0 to 65535');
  if (maxBodyBytes !== undefined && !(Number.isInteger(maxBodyBytes) && maxBodyBytes >= 1))
    throw new TypeError('maxBodyBytes: must be a positive integer');
  const budget = options.runBudget;
  if (budget !== undefined && !(Number.isInteger(budget.burst) && budget.burst >= 1 && budget.perMinute >= 0))
    throw new TypeError('runBudget: burst must be a positive integer and perMinute a number of 0 or more');
  const gate = new WakeUpGate({
    coalesceMs: durationToMs(options.coalesceWindow ?? '10 seconds', 'coalesceWindow'),
    ...budget,
  });
  const refusals = new RefusalTally(
    logger,
    durationToMs(options.refusalLogInterval ?? '1 minute', 'refusalLogInterval'),
  );
  const limitOf = (route: CallbackRoute): number => maxBodyBytes ?? route.maxBodyBytes;
  const headersTimeout = durationToMs(options.clientTimeouts?.headers ?? '10 seconds', 'clientTimeouts.headers');
  const requestTimeout = durationToMs(options.clientTimeouts?.request ?? '30 seconds', 'clientTimeouts.request');
  if (!(headersTimeout >= 1 && requestTimeout >= headersTimeout))
    throw new TypeError('clientTimeouts: headers must be positive and request at least as long as headers');
  const limits = { ...DEFAULT_RECEIVER_LIMITS, ...options.limits };
  for (const name of ['maxConnections', 'maxConnectionsPerPeer', 'maxBufferedBytes'] as const)
    if (!(Number.isInteger(limits[name]) && limits[name] >= 1))
      throw new TypeError(`limits.${name}: must be a positive integer`);
  const idleTimeout = durationToMs(limits.idleTimeout, 'limits.idleTimeout');
  const connections = new Connections(limits.maxConnections, limits.maxConnectionsPerPeer);
  const buffered = new BufferedBytes(limits.maxBufferedBytes);

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

  const refuse = (req: IncomingMessage, res: ServerResponse, refusal: CallbackRefusal): void => {
    refusals.count(refusal.status, refusal.reason);
    if (refusal.status === 405) res.setHeader('allow', 'POST');
    const body = JSON.stringify(
      refusal.issues ? { error: refusal.error, issues: refusal.issues } : { error: refusal.error },
    );
    // A body still on its way is read and thrown away, within limits, so the client gets the answer, not a reset;
    // one that waits for `100 Continue` is never sent, and the connection ends with the answer.
    if (req.headers.expect !== undefined) res.setHeader('connection', 'close');
    else if (!req.complete) drain(req);
    send(res, refusal.status, body);
  };

  /** Everything that can be decided before the body: path, method, signature, declared length. */
  const check = (req: IncomingMessage, res: ServerResponse) => {
    const target = verifyCallbackUrl(req.method, req.url ?? '/', signer);
    if ('status' in target) return refuse(req, res, target);
    const declared = Number(req.headers['content-length']) || 0;
    if (declared > limitOf(target.route))
      return refuse(req, res, { status: 413, reason: 'body too large', error: 'body too large' });
    // A body that cannot fit beside the others being read is turned away before a byte of it is.
    if (!buffered.fits(declared)) {
      refusals.count(503, 'bodies held at the limit');
      return busy(res);
    }
    return target;
  };

  const handle = (req: IncomingMessage, res: ServerResponse, checked?: ReturnType<typeof check>): void => {
    connections.busy(req.socket);
    res.once('close', () => connections.rest(req.socket));
    if ((req.url ?? '/').split('?')[0] === '/healthz') return health(req, res, refuse);
    const target = checked ?? check(req, res);
    if (!target) return;
    const span = callbackSpan(res, target.route, target.run, target.params);
    const limit = limitOf(target.route);
    const chunks: Buffer[] = [];
    let size = 0;
    // The body's bytes count against what all requests together may hold until this request is done, either way.
    req.once('close', () => buffered.give(size));
    const onData = (chunk: Buffer): void => {
      if (!buffered.take(chunk.length)) {
        req.off('data', onData);
        req.off('end', onEnd);
        chunks.length = 0;
        refusals.count(503, 'bodies held at the limit');
        return busy(res);
      }
      size += chunk.length;
      if (size > limit) {
        req.off('data', onData);
        req.off('end', onEnd);
        chunks.length = 0;
        refuse(req, res, { status: 413, reason: 'body too large', error: 'body too large' });
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
      delivering++;
      deliver(req, res, target.route, target.run, body, span).then(delivered, (err: unknown) => {
        delivered();
        logger.error('callback handling failed', { kind: target.route.kind, error: err });
      });
    };
    req.on('data', onData);
    req.on('end', onEnd);
    // A client that hangs up mid-body has sent nothing to signal.
    req.on('error', () => refusals.count(400, 'aborted'));
  };

  const deliver = async (
    req: IncomingMessage,
    res: ServerResponse,
    route: CallbackRoute,
    run: CallbackRun,
    body: Buffer,
    span: Span,
  ): Promise<void> => {
    const wakeUp = readCallbackBody(route, req.headers['content-type'], body);
    if ('status' in wakeUp) return refuse(req, res, wakeUp);
    const { kind } = wakeUp;
    // Only a repeat of the same body is coalesced: a forged body cannot swallow the genuine one that follows it.
    const digest = createHash('sha256').update(body).digest('base64');
    const decision = gate.admit(run, wakeUp, digest, Date.now());
    if ('skip' in decision) {
      span.setAttribute('tuneflow.callback.outcome', decision.skip);
      if (decision.skip === 'over-budget') {
        // 200, not 429: the service never retries, and a genuine callback must not fail for what others spent. The
        // run goes on by its reads, bounded per object, and its polls.
        refusals.count(200, 'run budget spent: dropped');
        return send(res, 200, answers.overBudget);
      }
      logger.debug('callback not signalled', { kind, workflowId: run.workflowId, outcome: decision.skip });
      return send(res, 200, decision.skip === 'coalesced' ? answers.coalesced : answers.workflowNotFound);
    }
    let outcome: SignalOutcome;
    try {
      // The signal is the span's child: the run's handling of it joins the trace.
      outcome = await context.with(trace.setSpan(context.active(), span), () => signaler.signal(run, decision.signal));
    } catch (err) {
      gate.release(run, decision.signal, digest);
      if (err instanceof SignalerUnavailableError) {
        logger.error('callback not signalled: Temporal unavailable', {
          kind,
          workflowId: run.workflowId,
          status: 503,
          error: err,
        });
        return send(res, 503, answers.unavailable);
      }
      logger.error('callback not signalled', { kind, workflowId: run.workflowId, status: 500, error: err });
      return send(res, 500, answers.internal);
    }
    span.setAttribute('tuneflow.callback.outcome', outcome);
    if (outcome === 'workflow-not-found') {
      // The run closed (or never was): nothing to wake, and the service would not retry anyway.
      gate.closed(run, Date.now());
      logger.info('callback for a closed or unknown run', { kind, workflowId: run.workflowId, outcome });
      return send(res, 200, answers.workflowNotFound);
    }
    logger.info('callback delivered', { kind, workflowId: run.workflowId, ids: decision.signal.ids, outcome });
    send(res, 200, answers.delivered);
  };

  // Node checks the timeouts every connectionsCheckingInterval (30 s by default): often enough that they hold.
  const server = createServer(
    {
      requestTimeout,
      headersTimeout,
      keepAliveTimeout: idleTimeout,
      connectionsCheckingInterval: Math.max(10, Math.min(headersTimeout / 4, 5_000)),
    },
    (req, res) => handle(req, res),
  );
  server.on('connection', (socket: Socket) => connections.admit(socket));
  // `Expect: 100-continue`: only a request whose body would be read is told to send it.
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    if ((req.url ?? '/').split('?')[0] === '/healthz') return handle(req, res);
    const target = check(req, res);
    if (!target) return;
    res.writeContinue();
    handle(req, res, target);
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    // Reset by the client, or answered already (Node may report a timed-out socket again as it closes): nothing
    // more to say, nor to count.
    if (!socket.writable || err.code === 'ECONNRESET') return void socket.destroy();
    const status = CLIENT_ERROR_STATUS[err.code ?? ''] ?? 400;
    refusals.count(status, 'unreadable request');
    socket.end(`HTTP/1.1 ${status} ${STATUS_TEXT[status]}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
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
  let closing: Promise<void> | undefined;
  return {
    url: `http://${reachableHost(address.address)}:${address.port}`,
    // Closing twice waits for the same close.
    close: () =>
      (closing ??= (async () => {
        const closed = new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
        server.closeIdleConnections();
        await Promise.all([closed, allDelivered()]);
        refusals.close();
      })()),
  };
}

/**
 * Refused requests, counted by status and reason and logged once per interval: a flood of forgeries is one line a
 * minute, not one line each, and a refused request's URL (whatever it holds) is never logged.
 */
class RefusalTally {
  private counts = new Map<string, number>();
  private since = Date.now();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly logger: Logger,
    intervalMs: number,
  ) {
    this.timer = setInterval(() => this.flush(), intervalMs);
    this.timer.unref();
  }

  count(status: number, reason: string): void {
    const key = `${status} ${reason}`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  flush(): void {
    if (this.counts.size === 0) return;
    const refused = Object.fromEntries(this.counts);
    const total = [...this.counts.values()].reduce((a, b) => a + b, 0);
    this.logger.warn('callbacks refused', { total, refused, seconds: Math.round((Date.now() - this.since) / 1000) });
    this.counts = new Map();
    this.since = Date.now();
  }

  close(): void {
    clearInterval(this.timer);
    this.flush();
  }
}

/** `GET /healthz`: the process is up and listening. */
function health(
  req: IncomingMessage,
  res: ServerResponse,
  refuse: (req: IncomingMessage, res: ServerResponse, refusal: CallbackRefusal) => void,
): void {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('allow', 'GET, HEAD');
    return refuse(req, res, { status: 405, reason: 'method', error: 'method not allowed' });
  }
  // A health check holds no connection: each one is answered and closed.
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 2, connection: 'close' });
  res.end('ok');
}

/** 503 at the limits: the request's body is not read further, and its connection closes once the answer is out. */
function busy(res: ServerResponse): void {
  if (res.headersSent) return;
  const body = answers.busy;
  res.writeHead(503, {
    'content-type': JSON_TYPE,
    'content-length': Buffer.byteLength(body),
    'retry-after': '1',
    connection: 'close',
  });
  res.end(body, () => res.socket?.destroy());
}

function send(res: ServerResponse, status: number, body: string): void {
  if (res.headersSent) return;
  res.writeHead(status, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(body) });
  res.end(body);
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

/** An address a local client can use: the wildcard addresses are not. */
function reachableHost(address: string): string {
  if (address === '0.0.0.0') return '127.0.0.1';
  if (address === '::') return '[::1]';
  return address.includes(':') ? `[${address}]` : address;
}
