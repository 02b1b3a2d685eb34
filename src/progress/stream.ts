/**
 * The progress stream a web app mounts: one job's progress as server-sent events, for a browser's EventSource. Two
 * shapes of one handler: `node(req, res)` for node:http (Express, Fastify's raw request), and `fetch(request)` for the
 * fetch `Request`/`Response` (Hono, Next.js route handlers, Bun, Deno). The token (src/progress/tokens.ts) names the
 * job; the watch (src/progress/watch.ts) is shared by the job's viewers.
 *
 * Bounded like the callback receiver: viewers and watched jobs in all, and one event held per viewer at most (a slow
 * viewer gets the newest state, not a backlog). Every event is the whole state, so a viewer that reconnects with
 * `Last-Event-ID` gets the state once if it changed since, and a closed job's last event once; after that, 204 (an
 * EventSource stops reconnecting).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Client } from '@temporalio/client';
import { jobOfWorkflowId } from '../contract/tenants';
import { durationToMs, type Duration } from '../duration';
import { checkProgressToken, requireSecret, type TokenRefusal } from './tokens';
import { JobWatch, type ProgressUpdate, type WatchSettings } from './watch';

export interface ProgressStreamLimits {
  /**
   * Streams open at once, across all jobs; a newcomer past it is answered 503 with Retry-After.
   * @default 10000
   */
  maxViewers?: number;
  /**
   * Jobs watched at once (a long poll each); a viewer of one more is answered 503.
   * @default 1000
   */
  maxJobs?: number;
}

export interface ProgressStreamOptions {
  /** A client of the namespace the jobs run in. */
  client: Client;
  /**
   * The key tokens are checked with: the one the app's server mints them with (`mintProgressToken`).
   * @format at least 16 characters
   */
  secret: string;
  /**
   * The tenant whose jobs this stream shows, as the operator's configuration says: a token for another tenant's job
   * reads nothing (403). Unset: the default tenant's jobs (plain business keys) and every tenant's.
   */
  tenant?: string;
  /**
   * A stored copy's location (`s3://bucket/key`, `file:///...`) to a URL the browser may load (a CDN in front of the
   * bucket, a presigned URL); undefined shows the service's URL. Locations themselves never reach a viewer.
   */
  storedImageUrl?: WatchSettings['storedImageUrl'];
  limits?: ProgressStreamLimits;
  /**
   * How long a query for a job's progress may take (a job whose worker is gone answers none).
   * @default '3 seconds'
   */
  queryDeadline?: Duration;
  /**
   * A comment line to every viewer this often, so proxies keep an idle stream open.
   * @default '15 seconds'
   */
  heartbeat?: Duration;
  /**
   * How long a job is watched after its last viewer left (an EventSource reconnects within seconds).
   * @default '10 seconds'
   */
  linger?: Duration;
}

/** What the stream holds and has cost, for an app's metrics and the benchmark. */
export interface ProgressStreamStats {
  viewers: number;
  jobs: number;
  /** Calls made to Temporal since the stream began: history long polls, progress queries, results read. */
  temporalCalls: { history: number; query: number; result: number };
  /** Viewers refused: by their token, their tenant, a missing job, or the bounds. */
  refused: number;
}

export interface ProgressStream {
  /** node:http: `server.on('request', (req, res) => stream.node(req, res))`, or an Express route. */
  node(req: IncomingMessage, res: ServerResponse): void;
  /** The fetch shape: `app.get('/progress', (c) => stream.fetch(c.req.raw))`. */
  fetch(request: Request): Promise<Response>;
  stats(): ProgressStreamStats;
  /** Ends every stream and watch. */
  close(): void;
}

/** The cookie the stream reads a token from when the URL has none. */
export const PROGRESS_TOKEN_COOKIE = 'tuneflow_progress';
const DEFAULT_LIMITS = { maxViewers: 10_000, maxJobs: 1_000 } as const;

/** An answer that is not a stream: a status and a short reason (never the token). */
interface Refusal {
  status: number;
  reason: string;
  retryAfter?: number;
}

/** Where a stream writes: node's response or a ReadableStream's controller. */
interface Sink {
  /** Writes now; false when the sink holds more than it should (the next event waits for `ready`). */
  write(text: string): boolean;
  end(): void;
}

/**
 * The progress stream for a web app's server.
 *
 * @example
 * const stream = progressStream({ client, secret: process.env.PROGRESS_SECRET! });
 * http.createServer((req, res) => (req.url?.startsWith('/progress') ? stream.node(req, res) : app(req, res)));
 */
export function progressStream(options: ProgressStreamOptions): ProgressStream {
  const secret = requireSecret(options?.secret, 'progressStream');
  if (!options.client) throw new TypeError('progressStream: client is required (a Temporal Client)');
  const limits = { ...DEFAULT_LIMITS, ...options.limits };
  for (const [name, value] of Object.entries(limits))
    if (!Number.isInteger(value) || value < 1)
      throw new RangeError(`progressStream: limits.${name} must be a whole number of at least 1 (got ${value})`);
  const heartbeatMs = durationToMs(options.heartbeat ?? '15 seconds', 'progressStream: heartbeat');
  const lingerMs = durationToMs(options.linger ?? '10 seconds', 'progressStream: linger');
  const calls = { history: 0, query: 0, result: 0 };
  const settings: WatchSettings = {
    client: options.client,
    storedImageUrl: options.storedImageUrl,
    queryDeadlineMs: durationToMs(options.queryDeadline ?? '3 seconds', 'progressStream: queryDeadline'),
    counted: (call) => calls[call]++,
  };
  const watches = new Map<string, JobWatch>();
  /** Each open stream, and whether its last write is still unsent (then nothing more is written to it until it drains). */
  const sinks = new Map<Sink, { blocked: boolean }>();
  let refused = 0;
  let closed = false;

  const sweep = setInterval(
    () => {
      const now = Date.now();
      for (const [id, watch] of watches)
        if (watch.idleSince !== undefined && now - watch.idleSince >= lingerMs) {
          watch.stop();
          watches.delete(id);
        }
    },
    Math.min(lingerMs, 1000),
  ).unref();
  const heartbeat = setInterval(() => {
    for (const [sink, state] of sinks) if (!state.blocked) state.blocked = !sink.write(': \n\n');
  }, heartbeatMs).unref();

  /** Checks the request; the job's watch, or why not. */
  async function admit(
    method: string | undefined,
    url: URL,
    header: (name: string) => string | undefined,
  ): Promise<{ watch: JobWatch; after: number } | Refusal> {
    if (closed) return { status: 503, reason: 'the stream is closing', retryAfter: 5 };
    if (method !== 'GET' && method !== 'HEAD') return { status: 405, reason: 'only GET' };
    const token = url.searchParams.get('token') ?? bearerOf(header('authorization')) ?? cookieOf(header('cookie'));
    const checked = checkProgressToken(secret, token ?? undefined);
    if ('refused' in checked) return { status: 401, reason: REFUSALS[checked.refused] };
    const job = jobOfWorkflowId(checked.workflowId);
    if (!job) return { status: 403, reason: 'the token names no tuneflow job' };
    if (options.tenant !== undefined && job.tenant !== options.tenant)
      return { status: 403, reason: "the token names another tenant's job" };
    if (sinks.size >= limits.maxViewers) return { status: 503, reason: 'too many viewers', retryAfter: 5 };
    let watch = watches.get(checked.workflowId);
    if (!watch) {
      if (watches.size >= limits.maxJobs) return { status: 503, reason: 'too many jobs watched', retryAfter: 5 };
      watch = new JobWatch(checked.workflowId, settings);
      watches.set(checked.workflowId, watch);
    }
    // Held while the history is first read: no one leaves it idle to be swept.
    const hold = watch.subscribe(() => {});
    const found = await watch.found;
    hold();
    if (!found) {
      watch.stop();
      watches.delete(checked.workflowId);
      return { status: 404, reason: 'no such job' };
    }
    const after = Number(header('last-event-id') ?? url.searchParams.get('lastEventId') ?? NaN);
    // A closed job's last event, already had: nothing more will come.
    if (watch.ended && Number.isFinite(after) && after >= watch.latest!.id) return { status: 204, reason: '' };
    return { watch, after: Number.isFinite(after) ? after : -1 };
  }

  /** Follows the watch into the sink until the job ends or the viewer leaves (`leave`); `ready` once it drained. */
  function follow(watch: JobWatch, after: number, sink: Sink): { leave(): void; ready(): void } {
    const state = { blocked: false };
    sinks.set(sink, state);
    let held: ProgressUpdate | undefined;
    let done = false;
    const deliver = (next: ProgressUpdate) => {
      if (done) return;
      // A viewer who had the end already (it came back to a watch that had not read it yet) is let go with it.
      if (next.id <= after) return void (next.end && leave());
      if (state.blocked) {
        held = next; // the newest state replaces one not sent yet
        return;
      }
      after = next.id;
      state.blocked = !sink.write(next.text);
      if (next.end) leave();
    };
    const unsubscribe = watch.subscribe(deliver);
    const leave = () => {
      if (done) return;
      done = true;
      unsubscribe();
      sinks.delete(sink);
      sink.end();
    };
    sink.write('retry: 2000\n\n');
    if (watch.latest) deliver(watch.latest);
    const ready = () => {
      state.blocked = false;
      const next = held;
      held = undefined;
      if (next) deliver(next);
    };
    return { leave, ready };
  }

  const refusal = (r: Refusal) => {
    if (r.status !== 204) refused++;
    return r;
  };

  return {
    node(req, res) {
      const url = new URL(req.url ?? '/', 'http://stream.invalid');
      void admit(req.method, url, (name) => headerOf(req.headers[name])).then(
        (admitted) => {
          if ('status' in admitted) {
            const r = refusal(admitted);
            res.writeHead(r.status, {
              'content-type': 'text/plain; charset=utf-8',
              'cache-control': 'no-store',
              ...(r.retryAfter ? { 'retry-after': String(r.retryAfter) } : {}),
            });
            return res.end(r.reason ? `${r.reason}\n` : undefined);
          }
          res.writeHead(200, SSE_HEADERS);
          if (req.method === 'HEAD') return res.end();
          res.socket?.setNoDelay(true);
          const viewer = follow(admitted.watch, admitted.after, {
            write: (text) => res.write(text),
            end: () => res.end(),
          });
          res.on('drain', viewer.ready);
          res.on('close', viewer.leave);
        },
        () => {
          res.writeHead(500).end();
        },
      );
    },

    async fetch(request) {
      const url = new URL(request.url);
      const admitted = await admit(request.method, url, (name) => request.headers.get(name) ?? undefined);
      if ('status' in admitted) {
        const r = refusal(admitted);
        const headers: Record<string, string> = {
          'content-type': 'text/plain; charset=utf-8',
          'cache-control': 'no-store',
        };
        if (r.retryAfter) headers['retry-after'] = String(r.retryAfter);
        return new Response(r.status === 204 ? null : `${r.reason}\n`, { status: r.status, headers });
      }
      if (request.method === 'HEAD') return new Response(null, { status: 200, headers: SSE_HEADERS });
      const encoder = new TextEncoder();
      let viewer: { leave(): void; ready(): void } | undefined;
      const body = new ReadableStream<Uint8Array>(
        {
          start(controller) {
            viewer = follow(admitted.watch, admitted.after, {
              write: (text) => {
                controller.enqueue(encoder.encode(text));
                return (controller.desiredSize ?? 1) > 0;
              },
              end: () => {
                try {
                  controller.close();
                } catch {
                  // already closed by the viewer
                }
              },
            });
            request.signal?.addEventListener('abort', () => viewer?.leave());
          },
          pull() {
            viewer?.ready();
          },
          cancel() {
            viewer?.leave();
          },
        },
        { highWaterMark: 4 },
      );
      return new Response(body, { status: 200, headers: SSE_HEADERS });
    },

    stats() {
      return { viewers: sinks.size, jobs: watches.size, temporalCalls: { ...calls }, refused };
    },

    close() {
      closed = true;
      clearInterval(sweep);
      clearInterval(heartbeat);
      for (const sink of [...sinks.keys()]) sink.end();
      sinks.clear();
      for (const watch of watches.values()) watch.stop();
      watches.clear();
    },
  };
}

const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-store',
  // nginx and its kin buffer responses unless told not to: an event would wait for the buffer to fill.
  'x-accel-buffering': 'no',
};

const REFUSALS: Record<TokenRefusal, string> = {
  missing: 'a token is required (?token=, a Bearer header or the tuneflow_progress cookie)',
  malformed: 'the token is not a progress token',
  forged: 'the token was not minted with this stream',
  expired: 'the token has expired: ask the app for a new one',
};

function headerOf(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function bearerOf(header: string | undefined): string | undefined {
  const match = header && /^Bearer\s+(\S+)$/i.exec(header);
  return match ? match[1] : undefined;
}

function cookieOf(header: string | undefined): string | undefined {
  for (const part of header?.split(';') ?? []) {
    const [name, ...value] = part.trim().split('=');
    if (name === PROGRESS_TOKEN_COOKIE) return decodeURIComponent(value.join('='));
  }
  return undefined;
}
