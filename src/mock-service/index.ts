/**
 * A faithful in-memory implementation of the fine-tuning service (spec + service notes) for tests, demos and
 * local development: tunes that train in simulated time, prompts with real PNG images, packs, callbacks, the
 * account's idempotency setting, and fault injection.
 *
 * Test hooks: a prompt whose text contains the word `__fail__` settles with `user_error`; `neverTrainRate` makes
 * tunes that never train; `rateLimitPerSecond` holds each API key to the service's rate limit (429 above it); `POST /__mock/faults` and `GET /__mock/stats` control and observe the mock over HTTP.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { durationToMs, type Duration } from '../duration';
import { listen, localUrl } from '../listening';
import { AnswerStyle, railsStyle } from './answer-style';
import { CallbackSender } from './callbacks';
import { Clock } from './clock';
import { FaultInjector, type Faults } from './faults';
import type { MockJournal } from './journal';
import { inspectionRoutes } from './inspection';
import { packRoutes } from './packs';
import type { Charge } from './pricing';
import { promptRoutes } from './prompts';
import type { MockSettings, ServiceParts } from './requests';
import { mockRoutes, RouteCounter, Router, serveMock, type MockStats } from './server';
import { Simulation } from './simulation';
import { Store } from './store';
import { themeRoutes } from './themes';
import { tuneRoutes } from './tunes';

export { AnswerStyle } from './answer-style';
export type { CallbackStats } from './callbacks';
export type { Faults, InjectedByKind } from './faults';
export { IMAGE_MC, TUNE_TRAINING_MC, type Charge } from './pricing';
export type { JournalCallback, JournalPrompt, JournalTune, JournalUpload, MockJournal } from './journal';
export { FLUX_BASE_TUNE, GALLERY_TUNES, PACKS } from './fixtures';
export type { MockStats } from './server';

/** How to start the mock service. */
export interface MockServiceOptions {
  /**
   * Port to listen on; 0 picks a free one.
   * @default 0
   */
  port?: number;
  /**
   * Interface to listen on.
   * @default '127.0.0.1'
   */
  host?: string;
  /**
   * How long a tune trains (`eta` = creation + this).
   * @default '2s'
   */
  trainingTime?: Duration;
  /**
   * How long a prompt takes once its tune is trained.
   * @default '1s'
   */
  inferenceTime?: Duration;
  /**
   * The accounts' idempotency setting (spec 4.11): same tune title, or same considered prompt attributes,
   * returns the existing object.
   * @default false
   */
  idempotency?: boolean;
  /**
   * API keys accepted; any other is a 401. Each key is its own account.
   * @default every key is accepted (each distinct key is its own account)
   */
  apiKeys?: string[];
  /**
   * Faults to inject from the start.
   * @default {} (none)
   */
  faults?: Faults;
  /**
   * Base of the URLs in answers (object URLs, image URLs, uploaded files), for a mock behind a proxy.
   * @default the listening URL
   */
  publicUrl?: string;
  /**
   * A prompt posted to a LoRA tune: `base` runs it on the LoRA's base tune (the answer's `tune_id` is the base), as
   * production clients report; `refuse` answers 422 ("model_type=lora is not supported"), as the service notes say.
   * @default 'base'
   */
  loraPrompts?: MockSettings['loraPrompts'];
  /**
   * How answers and callbacks are rendered: `plain` JSON as the spec shows it, or `rails` as the live service has
   * been seen to send it (decimals as strings such as `"cfg_scale": "3.0"`, `""` for an empty text, a prompt create
   * answered as a one-element array).
   * @default 'plain'
   */
  answerStyle?: AnswerStyle;
  /**
   * Receives one short line per request, and callback failures.
   * @default silent
   */
  log?: (line: string) => void;
}

/** A callback URL the service holds for one of its objects. */
export interface HeldCallback {
  kind: 'tune' | 'prompt';
  id: number;
  url: string;
}

/** A running mock service. */
export interface MockService {
  /** Where it listens, e.g. `http://127.0.0.1:41234`. */
  readonly url: string;
  /**
   * Replaces the faults (`{}` resets); throws InvalidInputError on bad values.
   * @example mock.setFaults({ status500Rate: 1, maxFaults: 1, faultRoutes: ['POST /tunes'] });
   */
  setFaults(faults: Faults): void;
  /**
   * Requests per route, callbacks sent, duplicated, dropped and failed, faults injected, requests over the rate limit.
   * @example mock.stats().routes['POST /tunes']
   */
  stats(): MockStats;
  /**
   * What the account of `apiKey` was charged (src/mock-service/pricing.ts): each tune and prompt it created, with
   * its `cost_mc`, and the total in millicents.
   * @example expect(result.cost.mc).toBe(mock.ledger('key').totalMc);
   */
  ledger(apiKey: string): { totalMc: number; charges: Charge[] };
  /**
   * Every tune and prompt created (of every account, deleted ones included) and every callback sent, with times: what
   * a soak run is judged by (`GET /__mock/journal`).
   * @example mock.journal().tunes.filter((t) => t.title === workflowId).length // 1
   */
  journal(): MockJournal;
  /**
   * The callback URLs the service holds for an account's tunes and prompts, as whoever reads those objects sees them
   * (the service echoes `callback` in every object): where a signed URL leaks. For forgeries made with valid URLs.
   * @example mock.heldCallbacks('key') // [{ kind: 'tune', id: 7, url: 'https://hooks.example.com/callbacks/tune?...' }]
   */
  heldCallbacks(apiKey: string): HeldCallback[];
  /**
   * Stops listening, clears every timer and closes keep-alive and callback connections.
   * @example await mock.close();
   */
  close(): Promise<void>;
}

/**
 * Starts the mock service.
 * @example
 * const mock = await startMockService({ trainingTime: '300ms', inferenceTime: '100ms' });
 * // ... requests to mock.url with `Authorization: Bearer any-key`
 * await mock.close();
 */
export async function startMockService(options: MockServiceOptions = {}): Promise<MockService> {
  const trainingMs = durationToMs(options.trainingTime ?? '2s', 'trainingTime');
  const inferenceMs = durationToMs(options.inferenceTime ?? '1s', 'inferenceTime');
  const log = options.log;
  const quiet = log ?? (() => undefined);

  const apiRouteKeys = new Set<string>();
  const faults = new FaultInjector(apiRouteKeys);
  const clock = new Clock();
  const answerStyle = options.answerStyle ?? AnswerStyle.plain;
  const store = new Store(options.idempotency ?? false);
  const callbacks = new CallbackSender(
    clock,
    faults,
    quiet,
    answerStyle === AnswerStyle.rails ? railsStyle : undefined,
    store.journal,
  );
  const counter = new RouteCounter();
  const stats = (): MockStats => ({
    routes: counter.toJSON(),
    refused: counter.refused(),
    callbacks: { ...callbacks.stats },
    faults: { injected: faults.injectedCount, byKind: faults.injectedByKind },
    rateLimited: faults.rateLimitedCount,
    rateLimitRefusals: faults.rateLimitRefusals,
  });

  const simulation = new Simulation(store, clock, callbacks, faults, { trainingMs, inferenceMs });
  const parts: ServiceParts = { store, simulation, faults, settings: { loraPrompts: options.loraPrompts ?? 'base' } };
  const router = new Router([
    ...tuneRoutes(parts),
    ...promptRoutes(parts),
    ...packRoutes(parts),
    ...themeRoutes(parts),
    ...inspectionRoutes(),
    ...mockRoutes(store, faults, stats, () => store.journal.toJSON()),
  ]);
  for (const route of router.routes) if (route.kind === 'api') apiRouteKeys.add(route.key);
  faults.set(options.faults ?? {});

  const host = options.host ?? '127.0.0.1';
  const server = createServer();
  serveMock(
    server,
    {
      store,
      faults,
      router,
      apiKeys: options.apiKeys && new Set(options.apiKeys),
      delay: (ms, fn) => clock.after(ms, fn),
      log,
      answerStyle,
    },
    counter,
  );
  await listen(server, options.port ?? 0, host);
  const url = localUrl(host, (server.address() as AddressInfo).port);
  store.baseUrl = (options.publicUrl ?? url).replace(/\/+$/, '');

  let closing: Promise<void> | undefined;
  return {
    url,
    setFaults: (f) => void faults.set(f),
    stats,
    ledger(apiKey) {
      const charges = store.account(apiKey).charges.map((c) => ({ ...c }));
      return { totalMc: charges.reduce((sum, c) => sum + c.mc, 0), charges };
    },
    journal: () => store.journal.toJSON(),
    heldCallbacks: (apiKey) => heldCallbacks(store, apiKey),
    close() {
      closing ??= (async () => {
        clock.stop();
        await callbacks.close();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
      })();
      return closing;
    },
  };
}

/** The callback URLs the service holds for the account of `apiKey` (see MockService.heldCallbacks). */
function heldCallbacks(store: Store, apiKey: string): HeldCallback[] {
  const account = store.account(apiKey);
  const held: HeldCallback[] = [];
  for (const id of account.tuneIds) {
    const url = store.tunes.get(id)?.callback;
    if (url) held.push({ kind: 'tune', id, url });
  }
  for (const id of account.promptIds) {
    const url = store.prompts.get(id)?.attributes.callback;
    if (typeof url === 'string') held.push({ kind: 'prompt', id, url });
  }
  return held;
}
