/**
 * The HTTP side of the mock, on node:http: routing by pattern, authentication (one account per API key), the rate
 * limit per API key, status faults and slow answers on API routes, request stats, generated images and uploaded files,
 * and the `/__mock/*` control routes. Kept light per request (no framework, no URL object, validation only where input
 * arrives) so it sustains thousands of requests a second.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { InvalidInputError } from '../api/errors';
import { ARRAY_ANSWER_ROUTES, AnswerStyle, railsStyle } from './answer-style';
import type { CallbackStats } from './callbacks';
import type { FaultInjector, InjectedByKind, RateLimitRefusal, StatusFault } from './faults';
import { ImageMaker } from './images';
import type { MockJournal } from './journal';
import { invalidInput, notFound, RequestContext, ServiceError, type Reply, type RouteDefinition } from './requests';
import type { Account, Store } from './store';

/** Counts since the mock started. */
export interface MockStats {
  /**
   * Requests per route pattern that the service took up, e.g. `{ 'POST /tunes': 3, 'GET /tunes/:id': 12 }`: a request
   * answered 429 is in `refused`, not here, so 150 tunes created read `POST /tunes: 150` however often one was refused.
   */
  routes: Record<string, number>;
  /** API requests answered 429 unprocessed (the rate limit, or an injected 429), per route pattern. */
  refused: Record<string, number>;
  callbacks: CallbackStats;
  /** Status faults injected since faults were last set, in all and by kind. */
  faults: { injected: number; byKind: InjectedByKind };
  /** API requests answered 429 by the rate limit (`rateLimitPerSecond`) since the mock started. */
  rateLimited: number;
  /** The first of them (up to 500): when, their route, and how bunched the requests before them came. */
  rateLimitRefusals: RateLimitRefusal[];
}

interface CompiledRoute extends RouteDefinition {
  readonly key: string;
  readonly segments: readonly string[];
}

interface Match {
  readonly route: CompiledRoute;
  readonly params: string[];
}

/** Routes grouped by method and segment count, so a request compares against a handful of patterns. */
export class Router {
  private readonly shapes = new Map<string, CompiledRoute[]>();
  readonly routes: CompiledRoute[] = [];

  constructor(definitions: readonly RouteDefinition[]) {
    for (const definition of definitions) {
      const segments = definition.pattern.split('/').slice(1);
      const route: CompiledRoute = { ...definition, key: `${definition.method} ${definition.pattern}`, segments };
      this.routes.push(route);
      const shape = `${definition.method} ${segments.length}`;
      const list = this.shapes.get(shape) ?? [];
      list.push(route);
      // Static segments win over parameters: the route with fewer parameters is tried first.
      list.sort((a, b) => paramCount(a) - paramCount(b));
      this.shapes.set(shape, list);
    }
  }

  /**
   * The route for a method and path, with its parameters.
   * @example router.match('GET', '/tunes/12') // { route: GET /tunes/:id, params: ['12'] }
   */
  match(method: string, path: string): Match | undefined {
    const segments = path.split('/');
    segments.shift();
    const candidates = this.shapes.get(`${method} ${segments.length}`);
    if (!candidates) return undefined;
    outer: for (const route of candidates) {
      const params: string[] = [];
      for (let i = 0; i < segments.length; i++) {
        const expected = route.segments[i];
        if (expected.charCodeAt(0) === 58 /* : */) params.push(decodeSegment(segments[i]));
        else if (expected !== segments[i]) continue outer;
      }
      return { route, params };
    }
    return undefined;
  }
}

function paramCount(route: CompiledRoute): number {
  return route.segments.filter((s) => s.startsWith(':')).length;
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

const JSON_TYPE = 'application/json; charset=utf-8';

export interface ServerParts {
  readonly store: Store;
  readonly faults: FaultInjector;
  readonly router: Router;
  /** Keys accepted; undefined accepts every key, each its own account. */
  readonly apiKeys: ReadonlySet<string> | undefined;
  readonly delay: (ms: number, fn: () => void) => void;
  readonly log: ((line: string) => void) | undefined;
  /** How answers are rendered. */
  readonly answerStyle: AnswerStyle;
}

/** Counts requests per route, taken up or refused with a 429; Maps, as route keys are not trusted object keys. */
export class RouteCounter {
  private readonly counts = new Map<string, number>();
  private readonly refusals = new Map<string, number>();

  /** Counts one request to `key`. */
  add(key: string): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  /** Counts one request to `key` answered 429, unprocessed, instead. */
  refuse(key: string): void {
    this.counts.set(key, this.counts.get(key)! - 1);
    if (this.counts.get(key) === 0) this.counts.delete(key);
    this.refusals.set(key, (this.refusals.get(key) ?? 0) + 1);
  }

  /** The requests taken up, as a JSON object. */
  toJSON(): Record<string, number> {
    return Object.fromEntries(this.counts);
  }

  /** The requests refused with a 429, as a JSON object. */
  refused(): Record<string, number> {
    return Object.fromEntries(this.refusals);
  }
}

/**
 * Serves the mock on a node:http server.
 * @example const server = createServer(); serveMock(server, parts, counter); server.listen(0, '127.0.0.1');
 */
export function serveMock(server: Server, parts: ServerParts, counter: RouteCounter): void {
  const log = parts.log;
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    handle(req, res, parts, counter).catch((error: unknown) =>
      send(req, res, failure(error, req, log), performance.now(), log),
    );
  });
}

/** One request: routed, refused by a fault or the rate limit, or handled; then answered as the faults say. */
async function handle(req: IncomingMessage, res: ServerResponse, parts: ServerParts, counter: RouteCounter) {
  const { faults, log } = parts;
  const started = performance.now();
  const reply = (answer: Reply) => send(req, res, answer, started, log);
  const { path, query } = splitUrl(req.url ?? '/');
  const match = parts.router.match(req.method ?? 'GET', path);
  if (!match) return reply({ status: 404, body: { error: 'Not found' } });
  const { route, params } = match;
  if (route.kind !== 'mock') counter.add(route.key);

  let fault: StatusFault | undefined;
  let answer: Reply;
  try {
    let account: Account | undefined;
    if (route.kind === 'api') {
      const refused = refusedUnprocessed(req, route.key, faults);
      if (refused) {
        counter.refuse(route.key);
        return reply(refused);
      }
      fault = faults.statusFault(route.key);
      if (fault === 500) return reply({ status: 500, body: { error: 'Internal server error (injected fault)' } });
      if (fault === 429) {
        counter.refuse(route.key);
        return reply({
          status: 429,
          body: { error: 'Too many requests (injected fault): use callbacks' },
          headers: { 'retry-after': String(faults.current.status429RetryAfterSeconds ?? 1) },
        });
      }
      account = authenticate(req, parts);
    }
    answer = await route.handle(new RequestContext(req, account, params, query));
  } catch (error) {
    answer = failure(error, req, log);
  }
  if (route.kind === 'api' && answer.status < 300 && faults.unpricedAnswer(route.key)) answer = withoutCost(answer);
  if (parts.answerStyle === AnswerStyle.rails && answer.body !== undefined) {
    const body = railsStyle(answer.body);
    answer = { ...answer, body: answer.status < 300 && ARRAY_ANSWER_ROUTES.has(route.key) ? [body] : body };
  }
  if (fault === 'garbled' && answer.status < 300) {
    // Processed, but the answer that arrives is cut short: the client cannot tell what was made.
    const json = JSON.stringify(answer.body ?? {});
    return reply({ status: 200, bytes: Buffer.from(json.slice(0, Math.ceil(json.length / 2))), type: JSON_TYPE });
  }
  if (fault === 504) {
    // Processed, but the answer is lost, as when the service passes its 30 s limit.
    const timeout: Reply = {
      status: 504,
      body: { error: 'Gateway timeout: the request exceeded 30 seconds (injected fault)' },
    };
    const delay = faults.current.status504DelayMs ?? 0;
    if (delay > 0) parts.delay(delay, () => reply(timeout));
    else reply(timeout);
    return;
  }
  // A slow service: processed now, answered later.
  const slow = route.kind === 'api' ? faults.answerDelayMs(route.key) : 0;
  if (slow > 0) parts.delay(slow, () => reply(answer));
  else reply(answer);
}

/** An answer without `cost_mc` in the object it holds, or in each of a list (`unpricedRoutes`). */
function withoutCost(answer: Reply): Reply {
  const drop = (object: unknown): unknown => {
    if (object === null || typeof object !== 'object' || Array.isArray(object) || !('cost_mc' in object)) return object;
    const copy: Record<string, unknown> = { ...object };
    delete copy.cost_mc;
    return copy;
  };
  const body = answer.body;
  return { ...answer, body: Array.isArray(body) ? body.map(drop) : drop(body) };
}

/** The path (a trailing `.json` or slash dropped, as the service's object URLs allow) and the query of a URL. */
function splitUrl(url: string): { path: string; query: string } {
  const q = url.indexOf('?');
  let path = q === -1 ? url : url.slice(0, q);
  // The service's object URLs may end in .json; a trailing slash is tolerated.
  if (path.endsWith('.json')) path = path.slice(0, -5);
  else if (path.length > 1 && path.endsWith('/')) path = path.slice(0, -1);
  return { path, query: q === -1 ? '' : url.slice(q + 1) };
}

/** The rate limit, first, per key (a request without one is not limited: it is a 401): a 429, refused unprocessed. */
function refusedUnprocessed(req: IncomingMessage, routeKey: string, faults: ServerParts['faults']): Reply | undefined {
  const key = bearerKey(req);
  const retryAfter = key === undefined ? undefined : faults.rateLimit(key, routeKey);
  if (retryAfter === undefined) return undefined;
  return {
    status: 429,
    body: {
      error: `Too many requests: over ${faults.current.rateLimitPerSecond} a second for this API key (rate limit)`,
    },
    headers: { 'retry-after': String(retryAfter) },
  };
}

function authenticate(req: IncomingMessage, { store, apiKeys }: ServerParts): Account {
  const key = bearerKey(req);
  if (key === undefined)
    throw new ServiceError(401, { error: 'Unauthorized: send the header Authorization: Bearer <API key>' });
  if (apiKeys && !apiKeys.has(key)) throw new ServiceError(401, { error: 'Unauthorized: unknown API key' });
  return store.account(key);
}

function send(req: IncomingMessage, res: ServerResponse, reply: Reply, started: number, log: ServerParts['log']): void {
  if (res.destroyed || res.headersSent) return;
  if (reply.bytes) {
    res.writeHead(reply.status, {
      'content-type': reply.type ?? 'application/octet-stream',
      'content-length': reply.bytes.length,
      ...reply.headers,
    });
    res.end(reply.bytes);
  } else if (reply.body === undefined) {
    res.writeHead(reply.status, { 'content-length': 0, ...reply.headers });
    res.end();
  } else {
    const json = JSON.stringify(reply.body);
    res.writeHead(reply.status, {
      'content-type': JSON_TYPE,
      'content-length': Buffer.byteLength(json),
      ...reply.headers,
    });
    res.end(json);
  }
  if (log) log(`${req.method} ${pathOf(req.url)} ${reply.status} ${(performance.now() - started).toFixed(1)}ms`);
}

function failure(error: unknown, req: IncomingMessage, log: ServerParts['log']): Reply {
  if (error instanceof ServiceError) return { status: error.status, body: error.body };
  if (error instanceof InvalidInputError) {
    const e = invalidInput(error);
    return { status: e.status, body: e.body };
  }
  const message = error instanceof Error ? error.message : String(error);
  // A bug of the mock itself: always visible.
  (log ?? console.error)(
    `mock service: ${req.method} ${pathOf(req.url)} failed: ${error instanceof Error ? error.stack : message}`,
  );
  return { status: 500, body: { error: `internal error of the mock service: ${message}` } };
}

/** The API key of `Authorization: Bearer <key>`, or undefined when the header is missing or malformed. */
function bearerKey(req: IncomingMessage): string | undefined {
  const header = req.headers.authorization;
  const match = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
  return match ? match[1] : undefined;
}

function pathOf(url: string | undefined): string {
  const q = (url ?? '/').indexOf('?');
  return q === -1 ? (url ?? '/') : (url ?? '/').slice(0, q);
}

/**
 * The routes that are not the service's API: generated images, uploaded files, and the mock's own controls.
 * @example new Router([...apiRoutes, ...mockRoutes(parts, stats)])
 */
export function mockRoutes(
  store: Store,
  faults: FaultInjector,
  stats: () => MockStats,
  journal: () => MockJournal,
): RouteDefinition[] {
  const images = new ImageMaker(store);
  return [
    {
      method: 'GET',
      pattern: '/images/:name',
      kind: 'public',
      handle(ctx) {
        const bytes = images.png(ctx.params[0]);
        if (!bytes) throw notFound('Image');
        return { status: 200, bytes, type: 'image/png' };
      },
    },
    {
      method: 'GET',
      pattern: '/files/:name',
      kind: 'public',
      handle(ctx) {
        const file = store.files.get(ctx.params[0]);
        if (!file) throw notFound('File');
        return { status: 200, bytes: file.bytes, type: file.type };
      },
    },
    {
      method: 'POST',
      pattern: '/__mock/faults',
      kind: 'mock',
      async handle(ctx) {
        // JSON as sent by the README's `curl -d '{...}'`, which labels it a form.
        const body = await ctx.jsonBody();
        return { status: 200, body: faults.set(body.value) };
      },
    },
    { method: 'GET', pattern: '/__mock/faults', kind: 'mock', handle: () => ({ status: 200, body: faults.current }) },
    { method: 'GET', pattern: '/__mock/stats', kind: 'mock', handle: () => ({ status: 200, body: stats() }) },
    { method: 'GET', pattern: '/__mock/journal', kind: 'mock', handle: () => ({ status: 200, body: journal() }) },
  ];
}
