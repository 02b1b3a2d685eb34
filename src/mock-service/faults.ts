/**
 * Fault injection: status faults (500, 429, 504) and slow answers on API routes, the service's rate limit per API key,
 * lost and repeated callbacks, tunes that never train, answers without `cost_mc`. Faults are validated with zod like
 * every other input of the mock.
 */
import { z } from 'zod';
import { titleWorkflowId } from '../contract/tenants';
import { parseInput } from '../api/parse-input';

/** What may go wrong, and how often. Every rate is a probability from 0 to 1. */
export interface Faults {
  /**
   * Share of API requests answered 500 without being processed.
   * @default 0
   */
  status500Rate?: number;
  /**
   * Share of API requests answered 429 (with `Retry-After: 1`, or `status429RetryAfterSeconds`) without being
   * processed.
   * @default 0
   */
  status429Rate?: number;
  /**
   * The Retry-After (in seconds) a 429 answer carries.
   * @default 1
   */
  status429RetryAfterSeconds?: number;
  /**
   * Share of API requests that ARE processed and then answered 504, as the service does after 30 s.
   * @default 0
   */
  status504Rate?: number;
  /**
   * Share of API requests that ARE processed and then answered 200 with a body cut short (not JSON): an answer the
   * client cannot read, for a request that took effect.
   * @default 0
   */
  garbledAnswerRate?: number;
  /**
   * How long a 504 answer waits after processing, in milliseconds.
   * @default 0
   */
  status504DelayMs?: number;
  /**
   * A slow service: every API request on `faultRoutes` (every API route without them) is processed, then answered this
   * many milliseconds late. Not a status fault: not counted, not limited by `maxFaults`.
   * @default 0
   */
  answerDelayMs?: number;
  /**
   * Share of callbacks never sent.
   * @default 0
   */
  callbackDropRate?: number;
  /**
   * Share of callbacks sent twice.
   * @default 0
   */
  callbackDuplicateRate?: number;
  /**
   * Delay before each callback is sent, in milliseconds.
   * @default 0
   */
  callbackDelayMs?: number;
  /**
   * A random extra delay of up to this many milliseconds for each callback POST (each copy of a duplicate draws its
   * own): callbacks then arrive reordered.
   * @default 0
   */
  callbackJitterMs?: number;
  /**
   * Share of new tunes that never get `trained_at` (FaceID tunes, ready at creation, are not affected).
   * @default 0
   */
  neverTrainRate?: number;
  /**
   * Titles of new tunes that never train, whatever `neverTrainRate` draws: a harness picks exactly which jobs a
   * tune that never trains hits. A tuneflow title (`<workflow ID>#<run ID>`) is matched by its workflow ID too.
   * @default none
   */
  neverTrainTitles?: string[];
  /**
   * Route patterns that status faults and `answerDelayMs` apply to, e.g. `['POST /tunes', 'GET /tunes/:id']`.
   * @default every API route
   */
  faultRoutes?: string[];
  /**
   * Stop injecting status faults after this many (counted from the last time faults were set).
   * @default no limit
   */
  maxFaults?: number;
  /**
   * The service's rate limit: at most this many API requests a second per API key, each key with a bucket of a
   * second's worth (at least one request) refilled continuously, so a burst up to it passes. A request over it is
   * answered 429 with Retry-After (the whole seconds until the key's next request would pass, at least 1) without
   * being processed. Not a share, and not counted among the status faults or in `maxFaults`: the stats count these
   * apart (`rateLimited`). Setting the same limit again keeps the keys' buckets as they are.
   * @default no limit
   */
  rateLimitPerSecond?: number;
  /**
   * Route patterns whose answers leave `cost_mc` out, as the spec allows (it does not promise the field), e.g.
   * `['POST /tunes/:id/prompts']` for prompt creates answered without their price, with `'GET /tunes/:tune_id/prompts/:id'`
   * for a read of one that does not say it either. What a create makes is charged all the same (`mock.ledger`);
   * callbacks and other routes still carry `cost_mc`. Not a status fault: not counted, not limited by `faultRoutes`
   * or `maxFaults`.
   * @default every answer carries `cost_mc`
   */
  unpricedRoutes?: string[];
}

const rate = z
  .number({ error: 'must be a number from 0 to 1' })
  .min(0, { error: 'must be a number from 0 to 1' })
  .max(1, {
    error: 'must be a number from 0 to 1',
  });
const millis = z
  .number({ error: 'must be an integer number of milliseconds, at least 0' })
  .int({ error: 'must be an integer number of milliseconds, at least 0' })
  .min(0, { error: 'must be an integer number of milliseconds, at least 0' });

/** Route patterns among `known` (`faultRoutes`, `unpricedRoutes`). */
function routePatterns(known: ReadonlySet<string>) {
  return z
    .array(
      z.string().refine((r) => known.has(r), {
        error: `must be an API route pattern such as 'POST /tunes' or 'GET /tunes/:id'`,
      }),
      { error: 'must be an array of route patterns' },
    )
    .optional();
}

/** The zod schema of Faults; `faultRoutes` and `unpricedRoutes` must name routes among `apiRoutes`. */
function faultsSchema(known: ReadonlySet<string>) {
  return z
    .strictObject({
      status500Rate: rate.optional(),
      status429Rate: rate.optional(),
      status504Rate: rate.optional(),
      status429RetryAfterSeconds: z
        .number({ error: 'must be an integer number of seconds, at least 0' })
        .int({ error: 'must be an integer number of seconds, at least 0' })
        .min(0, { error: 'must be an integer number of seconds, at least 0' })
        .optional(),
      garbledAnswerRate: rate.optional(),
      status504DelayMs: millis.optional(),
      answerDelayMs: millis.optional(),
      callbackDropRate: rate.optional(),
      callbackDuplicateRate: rate.optional(),
      callbackDelayMs: millis.optional(),
      callbackJitterMs: millis.optional(),
      neverTrainRate: rate.optional(),
      neverTrainTitles: z.array(z.string(), { error: 'must be an array of tune titles' }).optional(),
      faultRoutes: routePatterns(known),
      unpricedRoutes: routePatterns(known),
      maxFaults: z
        .number({ error: 'must be an integer of at least 0' })
        .int({ error: 'must be an integer of at least 0' })
        .min(0, { error: 'must be an integer of at least 0' })
        .optional(),
      rateLimitPerSecond: z
        .number({ error: 'must be a positive number of requests per second' })
        .positive({ error: 'must be a positive number of requests per second' })
        .refine(Number.isFinite, { error: 'must be a positive number of requests per second' })
        .optional(),
    })
    .superRefine((f, ctx) => {
      // Refinements also run after field errors: judge the sum only of rates that are valid on their own.
      const rates = [f.status500Rate, f.status429Rate, f.status504Rate, f.garbledAnswerRate].map((r) =>
        typeof r === 'number' && r >= 0 && r <= 1 ? r : 0,
      );
      if (rates[0] + rates[1] + rates[2] + rates[3] > 1)
        ctx.addIssue({
          code: 'custom',
          path: ['status500Rate'],
          message: 'the three status rates and garbledAnswerRate must add up to at most 1',
        });
    }) satisfies z.ZodType<Faults>;
}

/** A status fault, or `garbled`: processed, then answered with a body that is not JSON. */
export type StatusFault = 500 | 429 | 504 | 'garbled';

/** Status faults injected, by kind. */
export interface InjectedByKind {
  status500: number;
  status429: number;
  status504: number;
  garbled: number;
}

const KIND_OF = { 500: 'status500', 429: 'status429', 504: 'status504', garbled: 'garbled' } as const;
const noneInjected = (): InjectedByKind => ({ status500: 0, status429: 0, status504: 0, garbled: 0 });

/** One API key's requests under the rate limit: tokens left, and when they were counted (ms). */
interface Bucket {
  tokens: number;
  at: number;
}

/** One request the rate limit refused: when, its route, and how many requests of the limit came just before. */
export interface RateLimitRefusal {
  /** When, in epoch milliseconds. */
  at: number;
  /** Its route pattern, `POST /tunes/:id/prompts`. */
  route: string;
  /** Requests under the limit (every key's, this one included) in the 100 ms and in the second up to it. */
  inLast100Ms: number;
  inLastSecond: number;
}

/** The refusals kept (the first ones): enough to see when and how bunched, bounded in a long soak. */
export const KEPT_REFUSALS = 500;

/** Decides, request by request and callback by callback, whether a fault happens. */
export class FaultInjector {
  private faults: Faults = {};
  private routes: Set<string> | undefined;
  private unpriced: Set<string> | undefined;
  private injected = 0;
  private byKind = noneInjected();
  private readonly schema: ReturnType<typeof faultsSchema>;
  /** Per API key, under `rateLimitPerSecond`; emptied when the limit changes. */
  private readonly buckets = new Map<string, Bucket>();
  private limited = 0;
  /** When the requests under the limit in the last second came (the limit's clock, ms), oldest first. */
  private readonly arrivals: number[] = [];
  private readonly refusals: RateLimitRefusal[] = [];

  constructor(
    /** The API route keys (`'POST /tunes'`); read when faults are set, so it may be filled in later. */
    apiRoutes: ReadonlySet<string>,
    /** Injectable for deterministic tests of the injector itself; also draws the callbacks' jitter. */
    readonly random: () => number = Math.random,
    /** The rate limit's clock, in milliseconds; injectable for deterministic tests of the limit. */
    private readonly now: () => number = () => performance.now(),
  ) {
    this.schema = faultsSchema(apiRoutes);
  }

  /**
   * Validates and replaces the faults (`{}` resets); throws InvalidInputError naming the field and rule.
   * @example injector.set({ status500Rate: 1, maxFaults: 2 });
   */
  set(faults: unknown): Faults {
    // A copy: the faults in force change only through set().
    const parsed = { ...parseInput(this.schema, 'faults', faults) };
    if (parsed.rateLimitPerSecond !== this.faults.rateLimitPerSecond) this.buckets.clear();
    this.faults = parsed;
    this.routes = parsed.faultRoutes ? new Set(parsed.faultRoutes) : undefined;
    this.unpriced = parsed.unpricedRoutes?.length ? new Set(parsed.unpricedRoutes) : undefined;
    this.injected = 0;
    this.byKind = noneInjected();
    return parsed;
  }

  /** The faults in force. */
  get current(): Faults {
    return this.faults;
  }

  /** Status faults injected since the faults were last set. */
  get injectedCount(): number {
    return this.injected;
  }

  /** The same, by kind. */
  get injectedByKind(): InjectedByKind {
    return { ...this.byKind };
  }

  /**
   * The status fault for one request to `route`, if any.
   * @example injector.statusFault('POST /tunes') // 500 | 429 | 504 | 'garbled' | undefined
   */
  statusFault(route: string): StatusFault | undefined {
    const f = this.faults;
    const total = (f.status500Rate ?? 0) + (f.status429Rate ?? 0) + (f.status504Rate ?? 0) + (f.garbledAnswerRate ?? 0);
    if (total === 0) return undefined;
    if (this.routes && !this.routes.has(route)) return undefined;
    if (f.maxFaults !== undefined && this.injected >= f.maxFaults) return undefined;
    // One draw, split by cumulative rates, so each rate is exactly the share given.
    const r = this.random();
    let fault: StatusFault | undefined;
    if (r < (f.status500Rate ?? 0)) fault = 500;
    else if (r < (f.status500Rate ?? 0) + (f.status429Rate ?? 0)) fault = 429;
    else if (r < (f.status500Rate ?? 0) + (f.status429Rate ?? 0) + (f.status504Rate ?? 0)) fault = 504;
    else if (r < total) fault = 'garbled';
    if (fault) {
      this.injected++;
      this.byKind[KIND_OF[fault]]++;
    }
    return fault;
  }

  /** The first KEPT_REFUSALS requests the rate limit refused since the mock started, oldest first. */
  get rateLimitRefusals(): RateLimitRefusal[] {
    return [...this.refusals];
  }

  /** API requests refused by the rate limit since the mock started (setting faults does not reset it). */
  get rateLimitedCount(): number {
    return this.limited;
  }

  /**
   * Takes one request of `apiKey` under the rate limit: undefined when it may pass (or there is no limit), else the
   * Retry-After in whole seconds, the request refused and counted.
   * @example const retryAfter = injector.rateLimit('key'); if (retryAfter !== undefined) answer429(retryAfter);
   */
  rateLimit(apiKey: string, route = ''): number | undefined {
    const rate = this.faults.rateLimitPerSecond;
    if (rate === undefined) return undefined;
    const capacity = Math.max(1, rate);
    const now = this.now();
    this.arrivals.push(now);
    let first = 0;
    while (this.arrivals[first] < now - 1000) first++;
    if (first > 0) this.arrivals.splice(0, first);
    const bucket = this.buckets.get(apiKey) ?? { tokens: capacity, at: now };
    bucket.tokens = Math.min(capacity, bucket.tokens + ((now - bucket.at) / 1000) * rate);
    bucket.at = now;
    this.buckets.set(apiKey, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return undefined;
    }
    this.limited++;
    if (this.refusals.length < KEPT_REFUSALS)
      this.refusals.push({
        at: Date.now(),
        route,
        inLast100Ms: this.arrivals.filter((at) => at >= now - 100).length,
        inLastSecond: this.arrivals.length,
      });
    return Math.max(1, Math.ceil((1 - bucket.tokens) / rate));
  }

  /**
   * How late an answer of `route` comes (`answerDelayMs`), in milliseconds; 0 when the route is not slow.
   * @example injector.answerDelayMs('POST /images/inspect') // 15000
   */
  answerDelayMs(route: string): number {
    const delay = this.faults.answerDelayMs ?? 0;
    return delay > 0 && (!this.routes || this.routes.has(route)) ? delay : 0;
  }

  /**
   * True when the answers of `route` leave `cost_mc` out (`unpricedRoutes`).
   * @example if (injector.unpricedAnswer('POST /tunes/:id/prompts')) answer = withoutCost(answer);
   */
  unpricedAnswer(route: string): boolean {
    return this.unpriced?.has(route) ?? false;
  }

  /**
   * True when a new tune titled `title` must never train: its title is listed, or `neverTrainRate` draws it.
   * @example if (!injector.neverTrains(spec.title)) startTraining();
   */
  neverTrains(title: string): boolean {
    // tuneflow titles a tune `<workflow ID>#<run ID>`: a harness names the workflow ID, which it knows before the run.
    const listed = this.faults.neverTrainTitles;
    const workflowId = titleWorkflowId(title);
    return listed?.includes(title) || listed?.includes(workflowId) || false || this.chance('neverTrainRate');
  }

  /**
   * True with the probability of the named rate.
   * @example if (injector.chance('callbackDropRate')) return;
   */
  chance(name: 'callbackDropRate' | 'callbackDuplicateRate' | 'neverTrainRate'): boolean {
    const p = this.faults[name] ?? 0;
    return p > 0 && this.random() < p;
  }
}
