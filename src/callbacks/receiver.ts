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
import { answers, answerUnreadable, busy, drain, health, send } from './answers';
import { SignalerUnavailableError, type SignalOutcome } from './signaler';
import { PROBE_PATH, type CallbackRun } from './signing';
import { answerProbe } from './probe';
import { CallbackOutcome } from '../metrics';
import { callbackPath } from '../contract/messages';
import { listen, localUrl } from '../listening';
import { callbackParent } from './trace-context';
import { type CallbackRefusal, type CallbackRoute, readCallbackBody, verifyCallbackUrl } from './unwrap';
import { receiverSettings, type CallbackReceiverOptions, type ReceiverSettings } from './receiver-options';

export type { CallbackReceiverOptions } from './receiver-options';
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

/** A running receiver. */
export interface CallbackReceiver {
  /** Local address it answers on, e.g. `http://127.0.0.1:3001`. */
  url: string;
  /** Stops accepting connections; resolves once open requests are answered and their signal calls have ended. */
  close(): Promise<void>;
}

/**
 * Starts the callback receiver: `POST /callbacks/<kind>?workflowId=...&runId=...&sig=...`, `GET /healthz`, and a
 * worker's start-up probe `POST /callbacks/probe?nonce=...&sig=...` (answered 200 with its nonce, no signal).
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
    url: localUrl(address.address, address.port),
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

/** Whose bytes a request holds: the run its signed URL names. */
const runKey = (run: CallbackRun): string => `${run.workflowId}\n${run.runId}`;

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
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz' || path === PROBE_PATH) return this.handle(req, res);
    const target = this.check(req, res);
    if (!target) return;
    res.writeContinue();
    this.handle(req, res, target);
  }

  handle(req: IncomingMessage, res: ServerResponse, checked?: Target): void {
    const { connections, buffered, refusals, logger } = this.s;
    connections.busy(req.socket);
    res.once('close', () => connections.rest(req.socket));
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz') return health(req, res, this.refuse);
    // A worker's start-up probe (probe.ts): answered, never a signal.
    if (path === PROBE_PATH)
      return answerProbe(req, res, this.s.signer, (status, reason, error) =>
        this.refuse(req, res, { status, reason, error }),
      );
    const target = checked ?? this.check(req, res);
    if (!target) return;
    const span = callbackSpan(res, target.route, target.run, target.params);
    const limit = this.s.limitOf(target.route);
    const chunks: Buffer[] = [];
    let size = 0;
    const holder = runKey(target.run);
    // The body's bytes count against what all requests, and this run's, may hold until this request is done.
    req.once('close', () => buffered.give(holder, size));
    const onData = (chunk: Buffer): void => {
      if (!buffered.take(holder, chunk.length)) {
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
    if (!this.s.buffered.fits(runKey(target.run), declared)) {
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
      this.s.countCallback(decision.skip === 'coalesced' ? CallbackOutcome.duplicated : CallbackOutcome.closedRun);
      logger.debug('callback not signalled', { kind, workflowId: run.workflowId, outcome: decision.skip });
      return send(res, 200, decision.skip === 'coalesced' ? answers.coalesced : answers.workflowNotFound);
    }
    let outcome: SignalOutcome;
    try {
      // The signal is the span's child: the run's handling of it joins the trace.
      outcome = await context.with(trace.setSpan(context.active(), span), () => signaler.signal(run, decision.signal));
    } catch (err) {
      gate.release(run, decision.signal, digest);
      this.s.countCallback(CallbackOutcome.failed);
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
      this.s.countCallback(CallbackOutcome.closedRun);
      logger.info('callback for a closed or unknown run', { kind, workflowId: run.workflowId, outcome });
      return send(res, 200, answers.workflowNotFound);
    }
    this.s.countCallback(CallbackOutcome.accepted);
    logger.info('callback delivered', { kind, workflowId: run.workflowId, ids: decision.signal.ids, outcome });
    send(res, 200, answers.delivered);
  }
}
