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
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { context, type Span, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { Logger } from '@temporalio/common';
import { isPort } from '../config';
import { type Duration, durationToMs } from '../duration';
import { answers, answerUnreadable, busy, drain, health, RefusalTally, send } from './answers';
import { type Signaler, SignalerUnavailableError, type SignalOutcome } from './signaler';
import { createJsonLogger } from '../logging';
import type { CallbackRun, CallbackSigner } from './signing';
import { callbackPath } from '../contract/messages';
import { callbackParent } from './trace-context';
import { type CallbackRefusal, type CallbackRoute, readCallbackBody, verifyCallbackUrl } from './unwrap';
import { BufferedBytes, Connections, DEFAULT_RECEIVER_LIMITS, type ReceiverLimits } from './receiver-limits';
import { WakeUpGate } from './wake-up-gate';

export {
  SignalerUnavailableError,
  temporalSignaler,
  type SignalOutcome,
  type Signaler,
  type TemporalSignalerOptions,
} from './signaler';

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
  const path = callbackPath(route.kind);
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
  const settings = receiverSettings(options);
  const handler = new CallbackHandler(settings);
  // Node checks the timeouts every connectionsCheckingInterval (30 s by default): often enough that they hold.
  const server = createServer(
    {
      requestTimeout: settings.requestTimeout,
      headersTimeout: settings.headersTimeout,
      keepAliveTimeout: settings.idleTimeout,
      connectionsCheckingInterval: Math.max(10, Math.min(settings.headersTimeout / 4, 5_000)),
    },
    (req, res) => handler.handle(req, res),
  );
  server.on('connection', (socket: Socket) => settings.connections.admit(socket));
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => handler.handleExpectingContinue(req, res));
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) =>
    answerUnreadable(err, socket, settings.refusals),
  );
  await listen(server, settings.port, settings.host);
  server.on('error', (err) => settings.logger.error('callback receiver error', { error: err }));
  const address = server.address() as AddressInfo;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${reachableHost(address.address)}:${address.port}`,
    // Closing twice waits for the same close.
    close: () =>
      (closing ??= (async () => {
        const closed = new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
        server.closeIdleConnections();
        await Promise.all([closed, handler.allDelivered()]);
        settings.refusals.close();
      })()),
  };
}

/** What the receiver runs with: every option checked, and named when wrong, before anything listens. */
interface ReceiverSettings {
  signer: CallbackSigner;
  signaler: Signaler;
  port: number;
  host: string;
  logger: Logger;
  /** The largest body of a route: the option for every kind, or the route's own. */
  limitOf(route: CallbackRoute): number;
  gate: WakeUpGate;
  refusals: RefusalTally;
  headersTimeout: number;
  requestTimeout: number;
  idleTimeout: number;
  connections: Connections;
  buffered: BufferedBytes;
}

function receiverSettings(options: CallbackReceiverOptions): ReceiverSettings {
  const { signer, signaler } = options;
  const port = options.port ?? 0;
  const maxBodyBytes = options.maxBodyBytes;
  if (!signer || typeof signer.verify !== 'function') throw new TypeError('signer: must be a CallbackSigner');
  if (!signaler || typeof signaler.signal !== 'function') throw new TypeError('signaler: must be a Signaler');
  if (!isPort(port)) throw new TypeError('port: must be an integer from 0 to 65535');
  if (maxBodyBytes !== undefined && !(Number.isInteger(maxBodyBytes) && maxBodyBytes >= 1))
    throw new TypeError('maxBodyBytes: must be a positive integer');
  const budget = options.runBudget;
  if (budget !== undefined && !(Number.isInteger(budget.burst) && budget.burst >= 1 && budget.perMinute >= 0))
    throw new TypeError('runBudget: burst must be a positive integer and perMinute a number of 0 or more');
  const coalesceMs = durationToMs(options.coalesceWindow ?? '10 seconds', 'coalesceWindow');
  const refusalLogMs = durationToMs(options.refusalLogInterval ?? '1 minute', 'refusalLogInterval');
  const headersTimeout = durationToMs(options.clientTimeouts?.headers ?? '10 seconds', 'clientTimeouts.headers');
  const requestTimeout = durationToMs(options.clientTimeouts?.request ?? '30 seconds', 'clientTimeouts.request');
  if (!(headersTimeout >= 1 && requestTimeout >= headersTimeout))
    throw new TypeError('clientTimeouts: headers must be positive and request at least as long as headers');
  const limits = { ...DEFAULT_RECEIVER_LIMITS, ...options.limits };
  for (const name of ['maxConnections', 'maxConnectionsPerPeer', 'maxBufferedBytes'] as const)
    if (!(Number.isInteger(limits[name]) && limits[name] >= 1))
      throw new TypeError(`limits.${name}: must be a positive integer`);
  const idleTimeout = durationToMs(limits.idleTimeout, 'limits.idleTimeout');
  const logger = options.logger ?? createJsonLogger();
  return {
    signer,
    signaler,
    port,
    host: options.host ?? '0.0.0.0',
    logger,
    limitOf: (route) => maxBodyBytes ?? route.maxBodyBytes,
    gate: new WakeUpGate({ coalesceMs, ...budget }),
    refusals: new RefusalTally(logger, refusalLogMs),
    headersTimeout,
    requestTimeout,
    idleTimeout,
    connections: new Connections(limits.maxConnections, limits.maxConnectionsPerPeer),
    buffered: new BufferedBytes(limits.maxBufferedBytes),
  };
}

/** A callback URL that checked out: its route, the run it was signed for, its query. */
type Target = Exclude<ReturnType<typeof verifyCallbackUrl>, CallbackRefusal>;

/**
 * A request's way through the receiver, top-down: `check` what can be decided before the body (path, method,
 * signature, declared length), `handle` the body within the route's and the receiver's limits, then `deliver` the
 * wake-up (coalesced, budgeted, signalled) and answer.
 */
class CallbackHandler {
  /**
   * Signals under way: close() waits for them even when their client hung up, so nothing still runs on a Temporal
   * connection its owner closes next.
   */
  private delivering = 0;
  private idle: Array<() => void> = [];

  constructor(private readonly s: ReceiverSettings) {}

  allDelivered(): Promise<void> {
    return this.delivering === 0 ? Promise.resolve() : new Promise<void>((resolve) => this.idle.push(resolve));
  }

  private delivered(): void {
    if (--this.delivering === 0 && this.idle.length > 0) {
      for (const resolve of this.idle) resolve();
      this.idle = [];
    }
  }

  /** `Expect: 100-continue`: only a request whose body would be read is told to send it. */
  handleExpectingContinue(req: IncomingMessage, res: ServerResponse): void {
    if ((req.url ?? '/').split('?')[0] === '/healthz') return this.handle(req, res);
    const target = this.check(req, res);
    if (!target) return;
    res.writeContinue();
    this.handle(req, res, target);
  }

  handle(req: IncomingMessage, res: ServerResponse, checked?: Target): void {
    const { connections, buffered, refusals, logger } = this.s;
    connections.busy(req.socket);
    res.once('close', () => connections.rest(req.socket));
    if ((req.url ?? '/').split('?')[0] === '/healthz') return health(req, res, this.refuse);
    const target = checked ?? this.check(req, res);
    if (!target) return;
    const span = callbackSpan(res, target.route, target.run, target.params);
    const limit = this.s.limitOf(target.route);
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
        this.refuse(req, res, { status: 413, reason: 'body too large', error: 'body too large' });
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
      this.delivering++;
      this.deliver(req, res, target, body, span).then(
        () => this.delivered(),
        (err: unknown) => {
          this.delivered();
          logger.error('callback handling failed', { kind: target.route.kind, error: err });
        },
      );
    };
    req.on('data', onData);
    req.on('end', onEnd);
    // A client that hangs up mid-body has sent nothing to signal.
    req.on('error', () => refusals.count(400, 'aborted'));
  }

  /** Everything that can be decided before the body: path, method, signature, declared length. */
  private check(req: IncomingMessage, res: ServerResponse): Target | undefined {
    const target = verifyCallbackUrl(req.method, req.url ?? '/', this.s.signer);
    if ('status' in target) return this.refuse(req, res, target);
    const declared = Number(req.headers['content-length']) || 0;
    if (declared > this.s.limitOf(target.route))
      return this.refuse(req, res, { status: 413, reason: 'body too large', error: 'body too large' });
    // A body that cannot fit beside the others being read is turned away before a byte of it is.
    if (!this.s.buffered.fits(declared)) {
      this.s.refusals.count(503, 'bodies held at the limit');
      busy(res);
      return undefined;
    }
    return target;
  }

  private readonly refuse = (req: IncomingMessage, res: ServerResponse, refusal: CallbackRefusal): undefined => {
    this.s.refusals.count(refusal.status, refusal.reason);
    if (refusal.status === 405) res.setHeader('allow', 'POST');
    const body = JSON.stringify(
      refusal.issues ? { error: refusal.error, issues: refusal.issues } : { error: refusal.error },
    );
    // A body still on its way is read and thrown away, within limits, so the client gets the answer, not a reset;
    // one that waits for `100 Continue` is never sent, and the connection ends with the answer.
    if (req.headers.expect !== undefined) res.setHeader('connection', 'close');
    else if (!req.complete) drain(req);
    send(res, refusal.status, body);
    return undefined;
  };

  private async deliver(
    req: IncomingMessage,
    res: ServerResponse,
    { route, run }: Target,
    body: Buffer,
    span: Span,
  ): Promise<void> {
    const { gate, logger, refusals, signaler } = this.s;
    const wakeUp = readCallbackBody(route, req.headers['content-type'], body);
    if ('status' in wakeUp) return void this.refuse(req, res, wakeUp);
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
  }
}

/** Listens on `port` and `host`; an error while binding (a taken port) rejects. */
function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** An address a local client can use: the wildcard addresses are not. */
function reachableHost(address: string): string {
  if (address === '0.0.0.0') return '127.0.0.1';
  if (address === '::') return '[::1]';
  return address.includes(':') ? `[${address}]` : address;
}
