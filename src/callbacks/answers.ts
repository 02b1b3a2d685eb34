/**
 * What the receiver answers, and how: the bodies of its answers, 503 at its limits, refused requests counted and
 * logged once a minute, a refused body drained within limits, unreadable requests closed, `GET /healthz`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from '@temporalio/common';
import type { CallbackRefusal } from './unwrap';
import { CallbackOutcome } from '../metrics';

/** How much of a refused body is read and thrown away so the client sees the answer instead of a reset. */
const DRAIN_LIMIT_BYTES = 1024 * 1024;
const DRAIN_LIMIT_MS = 2_000;

const JSON_TYPE = 'application/json';
export const answers = {
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
 * Refused requests, counted by status and reason and logged once per interval: a flood of forgeries is one line a
 * minute, not one line each, and a refused request's URL (whatever it holds) is never logged.
 */
export class RefusalTally {
  private counts = new Map<string, number>();
  private since = Date.now();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly logger: Logger,
    intervalMs: number,
    /** Each refusal as the metrics count it: 200 (a run's budget spent), 5xx (failed), else refused. */
    private readonly counted: (outcome: CallbackOutcome) => void = () => undefined,
  ) {
    this.timer = setInterval(() => this.flush(), intervalMs);
    this.timer.unref();
  }

  count(status: number, reason: string): void {
    this.counted(
      status === 200 ? CallbackOutcome.overBudget : status >= 500 ? CallbackOutcome.failed : CallbackOutcome.refused,
    );
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
export function health(
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
export function busy(res: ServerResponse): void {
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

export function send(res: ServerResponse, status: number, body: string): void {
  if (res.headersSent) return;
  res.writeHead(status, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

export function drain(req: IncomingMessage): void {
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

/**
 * A request Node could not read (headers too large, too slow, a bad chunk): its status, and the connection closed. A
 * reset by the client, or a socket answered already (Node may report a timed-out socket again as it closes), gets
 * nothing more.
 */
export function answerUnreadable(err: NodeJS.ErrnoException, socket: Socket, refusals: RefusalTally): void {
  if (!socket.writable || err.code === 'ECONNRESET') return void socket.destroy();
  const status = CLIENT_ERROR_STATUS[err.code ?? ''] ?? 400;
  refusals.count(status, 'unreadable request');
  socket.end(`HTTP/1.1 ${status} ${STATUS_TEXT[status]}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
}
