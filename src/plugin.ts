/**
 * TuneflowPlugin: tuneflow on a user's own Temporal worker with one line. It adds the activities (over the service
 * client), supplies tuneflow's workflows when the worker has none of its own, and runs the callback receiver for
 * exactly the worker's lifetime. `tuneflow worker` (src/worker.ts) is one user of it.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Client } from '@temporalio/client';
import type { Logger } from '@temporalio/common';
import { SimplePlugin } from '@temporalio/plugin';
import type { ReplayWorkerOptions, Worker, WorkerOptions } from '@temporalio/worker';
import { createActivities } from './activities';
import { TunesApi, type TunesApiOptions } from './api';
import { startCallbackReceiver, temporalSignaler } from './callbacks/receiver';
import { CallbackSigner } from './callbacks/signing';
import { DEFAULT_CALLBACK_PORT } from './config';

/** The workflow bundle `npm run build` writes beside this file; without it the worker bundles at start-up. */
const PREBUILT_BUNDLE = path.join(__dirname, 'workflow-bundle.js');

/** Where a worker takes tuneflow's workflow code from: the prebuilt bundle when present, the sources otherwise. */
export function workflowSource(): Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'> {
  if (fs.existsSync(PREBUILT_BUNDLE)) return { workflowBundle: { codePath: PREBUILT_BUNDLE } };
  return { workflowsPath: require.resolve('./workflows') };
}

/** Where the service's callbacks arrive. */
export interface TuneflowCallbackOptions {
  /**
   * Public base URL the service can reach the receiver at; callback URLs are `<baseUrl>/callbacks/<kind>?...`.
   * @format http(s) URL
   */
  baseUrl: string;
  /**
   * The HMAC key of callback URLs.
   * @format at least 16 characters
   */
  secret: string;
  /**
   * Port the receiver listens on.
   * @default 3001
   */
  port?: number;
  /**
   * Interface the receiver binds.
   * @default '0.0.0.0'
   */
  host?: string;
  /**
   * The client the receiver signals workflows through.
   * @default the worker's own client (its connection and namespace)
   */
  client?: Client;
}

export interface TuneflowPluginOptions {
  /**
   * The service: its settings (the plugin opens the client and closes it when the worker stops), or a TunesApi of
   * the caller's own (left open). The API key stays in the worker: it never enters a workflow's input or history.
   */
  api: TunesApiOptions | TunesApi;
  /**
   * Ask the service for callbacks, received by a receiver that runs as long as the worker does.
   * @default none: the workflows rely on polling
   */
  callbacks?: TuneflowCallbackOptions;
  /**
   * Where the receiver's log lines go.
   * @default the receiver's JSON logger on stderr
   */
  logger?: Logger;
}

/**
 * tuneflow's activities, workflows and callback receiver on a Temporal worker. One plugin per worker: the service
 * client it opens is closed when that worker stops.
 *
 * @example
 * const worker = await Worker.create({
 *   connection,
 *   taskQueue: 'tuneflow',
 *   plugins: [new TuneflowPlugin({ api: { apiKey: process.env.TUNEFLOW_API_KEY! } })],
 * });
 * await worker.run();
 */
export class TuneflowPlugin extends SimplePlugin {
  readonly #api: TunesApi;
  readonly #ownsApi: boolean;
  readonly #callbacks: TuneflowCallbackOptions | undefined;
  readonly #signer: CallbackSigner | undefined;
  readonly #logger: Logger | undefined;

  constructor(options: TuneflowPluginOptions) {
    const ownsApi = !(options.api instanceof TunesApi);
    const api = options.api instanceof TunesApi ? options.api : new TunesApi(options.api);
    const callbacks = options.callbacks;
    const signer = callbacks ? new CallbackSigner({ baseUrl: callbacks.baseUrl, secret: callbacks.secret }) : undefined;
    super({ name: 'tuneflow', activities: createActivities({ api, callbacks: signer }) });
    this.#api = api;
    this.#ownsApi = ownsApi;
    this.#callbacks = callbacks;
    this.#signer = signer;
    this.#logger = options.logger;
  }

  /** Adds the activities; tuneflow's workflows when the worker brings none (else its own must export them). */
  override configureWorker(options: WorkerOptions): WorkerOptions {
    return withTuneflowWorkflows(super.configureWorker(options));
  }

  /** The replay worker gets the same workflows as the worker. */
  override configureReplayWorker(options: ReplayWorkerOptions): ReplayWorkerOptions {
    return withTuneflowWorkflows(super.configureReplayWorker(options));
  }

  /**
   * Runs the callback receiver while the worker runs: started before it polls (a port in use stops the worker
   * before it takes a task), closed after it stopped, then the service client.
   */
  override async runWorker(worker: Worker, next: (w: Worker) => Promise<void>): Promise<void> {
    try {
      const callbacks = this.#callbacks;
      if (!callbacks || !this.#signer) return await super.runWorker(worker, next);
      const client = callbacks.client ?? worker.client;
      if (!client) throw new TypeError('TuneflowPlugin: the worker has no connection to signal workflows through');
      const receiver = await startCallbackReceiver({
        port: callbacks.port ?? DEFAULT_CALLBACK_PORT,
        host: callbacks.host,
        signer: this.#signer,
        signaler: temporalSignaler(client),
        logger: this.#logger,
      });
      try {
        await super.runWorker(worker, next);
      } finally {
        await receiver.close();
      }
    } finally {
      if (this.#ownsApi) await this.#api.close();
    }
  }
}

function withTuneflowWorkflows<T extends WorkerOptions | ReplayWorkerOptions>(options: T): T {
  if (options.workflowsPath !== undefined || options.workflowBundle !== undefined) return options;
  return { ...options, ...workflowSource() };
}
