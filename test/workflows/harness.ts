/**
 * Everything a workflow scenario runs on, for real: the mock service, the callback receiver signalling through
 * Temporal, the activities over the service client, and a worker with the bundled workflows. Shared by the workflow
 * tests and scripts/record-histories.ts.
 */
import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { WorkflowHandle, WorkflowStartOptions } from '@temporalio/client';
import type { Prompt, Tune } from '../../src/api/schemas';
import { Client } from '@temporalio/client';
import type { History } from '@temporalio/common/lib/proto-utils';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Worker, type WorkerOptions, type WorkflowBundle } from '@temporalio/worker';
import { TunesApi } from '../../src/api';
import { TuneflowPlugin } from '../../src/plugin';
import type { TenantSettings } from '../../src/tenants';
import { CallbackSigner } from '../../src/callbacks/signing';
import { startCallbackReceiver, temporalSignaler, type CallbackReceiver } from '../../src/callbacks/receiver';
import {
  startMockService,
  type MockJournal,
  type MockService,
  type MockServiceOptions,
  type MockStats,
} from '../../src/mock-service';
import { progressQuery, type Progress } from '../../src/contract/messages';

export { bundleWorkflows } from './bundle';

/** The API key every scenario uses against its mock: any key is an account there. */
export const API_KEY = 'tuneflow-test-key';
/** The callback secret every scenario's receiver checks signatures with. */
export const CALLBACK_SECRET = 'tuneflow-test-callback-secret';

/** The upload directory of every scenario's worker: a job's file paths name files here (TUNEFLOW_UPLOAD_DIR). */
export const UPLOAD_DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-uploads-'));

/** Which client starts and awaits a workflow. */
export type Clock = 'real' | 'skipping';

/** One scenario's world: its own mock service and task queue; the harness's receiver and clients. */
export interface Scenario {
  readonly mock: MockService;
  /** The client of the mock the activities use; also for the scenario's own requests (existing tunes). */
  readonly api: TunesApi;
  readonly taskQueue: string;
  readonly env: TestWorkflowEnvironment;
  /**
   * Runs a worker on the scenario's task queue until `fn` settles. Each call is a fresh worker: a restart.
   * @example await s.withWorker(async () => s.settle(handle));
   */
  withWorker<T>(fn: () => Promise<T>, identity?: string): Promise<T>;
  /**
   * Starts a workflow by name. `real`: a plain client, so time never skips and the mock's callbacks win their race
   * against poll timers. `skipping`: env.client, so awaiting the result skips time (retry delays, deadlines).
   */
  start(
    workflow: string,
    input: unknown,
    clock: Clock,
    workflowId?: string,
    policies?: Pick<WorkflowStartOptions, 'workflowIdReusePolicy' | 'workflowIdConflictPolicy'>,
  ): Promise<WorkflowHandle>;
  /** Waits (querying) until the workflow's progress satisfies `predicate`; needs a running worker. */
  progressUntil(handle: WorkflowHandle, predicate: (p: Progress) => boolean, timeoutMs?: number): Promise<Progress>;
  /** The workflow's outcome, its final progress, the mock's counts and the history; needs a running worker. */
  settle<R = unknown>(handle: WorkflowHandle): Promise<Outcome<R>>;
  /** What settle reads but the progress, for a workflow that has no progress query (keyClaim). */
  settleUnqueried<R = unknown>(handle: WorkflowHandle): Promise<Settled<R>>;
  /** What settle reads but the ending and the progress, of a run that goes on (a tenant's ledger). */
  settleRunning(handle: WorkflowHandle): Promise<Settled<never>>;
}

/** A run's outcome as read without the progress query (Scenario.settleUnqueried). */
export type Settled<R> = Omit<Outcome<R>, 'progress'>;

export interface Outcome<R> {
  workflowId: string;
  result?: R;
  error?: unknown;
  progress: Progress;
  stats: MockStats;
  /** What the mock charged the scenario's account (API_KEY). */
  ledger: ReturnType<MockService['ledger']>;
  /** Every tune and prompt the mock made, and every callback it sent (`mock.journal()`). */
  journal: MockJournal;
  history: History;
  /** Ids the scenario made outside the workflow (an existing tune, an older prompt), for assertions. */
  context?: Record<string, number>;
  /** What the service holds of the job at the end, read by the scenario: the truth a result is compared with. */
  served?: { tune: Tune; prompts: Prompt[] };
}

export interface ScenarioOptions {
  /** Mock service options (short training and inference, faults). */
  mock?: MockServiceOptions;
  /**
   * Ask the service for callbacks; without, the workflows rely on polling.
   * @default true
   */
  callbacks?: boolean;
  /** Worker options beside the scenario's own: a run made as an earlier release made it (`patchActivationCallback`). */
  worker?: Pick<WorkerOptions, 'patchActivationCallback'>;
  /** The operator's tenant settings (budgets) the worker runs with. */
  tenants?: TenantSettings;
  /** The worker stores activity payloads compressed (`compressPayloads`). */
  compressPayloads?: boolean;
  /** The worker copies the images to a folder of its own (`storage`, the embedded default), made for the scenario. */
  storeImages?: boolean;
}

/** The receiver and clients every scenario of one environment shares. */
export class WorkflowHarness {
  private constructor(
    readonly env: TestWorkflowEnvironment,
    private readonly bundle: WorkflowBundle,
    /** A client that never skips time (see Scenario.start). */
    readonly realTime: Client,
    private readonly receiver: CallbackReceiver,
  ) {}

  /**
   * Starts the callback receiver for `env`.
   *
   * @example
   * const harness = await WorkflowHarness.start(env, await bundleWorkflows());
   */
  static async start(env: TestWorkflowEnvironment, bundle: WorkflowBundle): Promise<WorkflowHarness> {
    const realTime = new Client({ connection: env.connection, namespace: env.namespace });
    // The receiver only checks signatures, which do not depend on the base URL.
    const receiver = await startCallbackReceiver({
      host: '127.0.0.1',
      port: 0,
      signer: new CallbackSigner({ secret: CALLBACK_SECRET }),
      signaler: temporalSignaler(realTime),
      logger: new DefaultLogger('WARN'),
    });
    return new WorkflowHarness(env, bundle, realTime, receiver);
  }

  /**
   * Runs `fn` in a fresh scenario: a new mock service and task queue; closed afterwards.
   *
   * @example
   * const outcome = await harness.scenario({ mock: { trainingTime: '1s' } }, async (s) => ...);
   */
  async scenario<T>(options: ScenarioOptions, fn: (s: Scenario) => Promise<T>): Promise<T> {
    const mock = await startMockService({ trainingTime: '1s', inferenceTime: '500ms', ...options.mock });
    const api = new TunesApi({ apiKey: API_KEY, baseUrl: mock.url });
    // The harness's one receiver takes every scenario's callbacks, across worker restarts (its URL stays the same).
    const callbacks =
      options.callbacks === false ? undefined : { baseUrl: this.receiver.url, secret: CALLBACK_SECRET, receive: false };
    const taskQueue = `tuneflow-test-${randomUUID()}`;
    // One folder a scenario, as one mock a scenario: its keys are its own.
    const imageFolder = () => path.join(os.tmpdir(), 'tuneflow-scenario-images', taskQueue);
    const { env, bundle, realTime } = this;

    // What a settled run's outcome holds beside its ending (and its progress), read in this order.
    const readings = async (handle: WorkflowHandle) => ({
      stats: mock.stats(),
      ledger: mock.ledger(API_KEY),
      journal: mock.journal(),
      history: await handle.fetchHistory(),
    });
    const scenario: Scenario = {
      mock,
      api,
      taskQueue,
      env,
      async withWorker(fn, identity) {
        const worker = await Worker.create({
          connection: env.nativeConnection,
          namespace: env.namespace ?? 'default',
          plugins: [
            new TuneflowPlugin({
              api,
              callbacks: callbacks ?? false,
              nexus: false,
              uploadDir: UPLOAD_DIR,
              ...(options.tenants && { tenants: options.tenants }),
              compressPayloads: options.compressPayloads ?? false,
              storage: options.storeImages ? { target: { folder: imageFolder() } } : false,
            }),
          ],
          ...scenarioWorkerOptions(bundle, taskQueue, identity),
          ...options.worker,
        });
        return worker.runUntil(fn);
      },
      async start(workflow, input, clock, workflowId = `${workflow}-${randomUUID()}`, policies = {}) {
        const client = clock === 'real' ? realTime : env.client;
        return client.workflow.start(workflow, { taskQueue, workflowId, args: [input], ...policies });
      },
      progressUntil: (handle, predicate, timeoutMs = 30_000) => progressUntil(handle, predicate, timeoutMs),
      async settle<R>(handle: WorkflowHandle): Promise<Outcome<R>> {
        const ending = await endOf<R>(handle);
        return { ...ending, progress: await handle.query(progressQuery), ...(await readings(handle)) };
      },
      async settleUnqueried<R>(handle: WorkflowHandle): Promise<Settled<R>> {
        return { ...(await endOf<R>(handle)), ...(await readings(handle)) };
      },
      async settleRunning(handle: WorkflowHandle): Promise<Settled<never>> {
        return { workflowId: handle.workflowId, ...(await readings(handle)) };
      },
    };
    try {
      return await fn(scenario);
    } finally {
      await api.close();
      await mock.close();
    }
  }

  /** Closes the receiver; the environment is the caller's. */
  async close(): Promise<void> {
    await this.receiver.close();
  }
}

/**
 * The options of a scenario's worker. No cache: every workflow task replays the whole history, so any nondeterminism
 * fails the scenario. Without an identity the key is left out: the SDK spreads the options over its defaults, and the
 * native worker refuses `identity: undefined` ("Missing property 'identity'").
 *
 * @example
 * await Worker.create({ connection, namespace, plugins: [plugin], ...scenarioWorkerOptions(bundle, taskQueue) });
 */
export function scenarioWorkerOptions(
  bundle: WorkflowBundle,
  taskQueue: string,
  identity?: string,
): Pick<WorkerOptions, 'taskQueue' | 'workflowBundle' | 'maxCachedWorkflows' | 'identity'> {
  return {
    taskQueue,
    workflowBundle: bundle,
    maxCachedWorkflows: 0,
    ...(identity !== undefined && { identity }),
  };
}

/** How the run ended: its result, or the error awaiting it threw. */
async function endOf<R>(handle: WorkflowHandle): Promise<Pick<Outcome<R>, 'workflowId' | 'result' | 'error'>> {
  try {
    return { workflowId: handle.workflowId, result: (await handle.result()) as R, error: undefined };
  } catch (err) {
    return { workflowId: handle.workflowId, result: undefined, error: err };
  }
}

async function progressUntil(
  handle: WorkflowHandle,
  predicate: (p: Progress) => boolean,
  timeoutMs: number,
): Promise<Progress> {
  let last: Progress | undefined;
  await waitFor(
    async () => predicate((last = await handle.query(progressQuery))),
    () => `progress of ${handle.workflowId} to match (last: ${JSON.stringify(last)})`,
    timeoutMs,
  );
  return last as Progress;
}

/**
 * Checks every 100 ms until `check` holds; a bound, not a timing assertion: it fails only when something never
 * happens.
 *
 * @example
 * await waitFor(async () => (await api.tunes.retrieve(id)).trained_at != null, () => 'the tune to train');
 */
export async function waitFor(check: () => Promise<boolean>, what: () => string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`waited ${timeoutMs} ms for ${what()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * A paid tune made outside the workflow (branch sd15, so its training is charged), once trained: what `generate` and
 * a pack on existing tunes start from.
 *
 * @example
 * const tune = await trainedPaidTune(s.api, IMAGE_URLS);
 */
export async function trainedPaidTune(api: TunesApi, imageUrls: string[]): Promise<Tune> {
  const created = await api.tunes.create({ title: 'paid-dog', name: 'dog', branch: 'sd15', image_urls: imageUrls });
  await waitFor(
    async () => !!(await api.tunes.retrieve(created.id)).trained_at,
    () => `tune ${created.id} to train`,
  );
  return created;
}

/**
 * The result of a scenario that should have succeeded; its error, thrown, when it did not.
 *
 * @example
 * const { tune, prompts } = resultOf<TrainThenGenerateResult>(await play(harness(), scenarios.fluxLora));
 */
export function resultOf<R>(outcome: Outcome<R>): R {
  if (outcome.error) throw outcome.error;
  return outcome.result as R;
}
