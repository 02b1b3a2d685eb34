/**
 * TuneflowPlugin: tuneflow on a user's own Temporal worker with one line. It adds the activities (over the service
 * client), supplies tuneflow's workflows when the worker has none of its own, and runs the callback receiver for
 * exactly the worker's lifetime; with `tracing`, Temporal's OpenTelemetry plugin too. `tuneflow worker`
 * (src/cli/worker.ts) is one user of it.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Client } from '@temporalio/client';
import type { DataConverter, Logger } from '@temporalio/common';
import type { ClientOptions } from '@temporalio/client';
import type { OpenTelemetryPlugin } from '@temporalio/interceptors-opentelemetry';
import { SimplePlugin } from '@temporalio/plugin';
import type { BundleOptions, ReplayWorkerOptions, Worker, WorkerOptions } from '@temporalio/worker';
import { createActivities } from './activities';
import { TunesApi, type TunesApiOptions } from './api';
import { startCallbackReceiver, temporalSignaler } from './callbacks/receiver';
import type { ReceiverLimits } from './callbacks/receiver-limits';
import { CallbackSigner } from './callbacks/signing';
import { describeProbe, probeCallbackUrl } from './callbacks/probe';
import { callbackCounter } from './metrics';
import { rememberScheduledBy } from './callbacks/trace-context';
import {
  DEFAULT_CALLBACK_PORT,
  isServiceRate,
  loadApiKey,
  loadApiUrl,
  loadCallbackConfig,
  loadServiceRate,
  loadServiceMargin,
  isServiceMargin,
  queueRateFor,
  DEFAULT_SERVICE_MARGIN,
  MAX_SERVICE_MARGIN,
  loadUploadDir,
  loadStorageSettings,
  loadCheckApiKey,
  loadCompressPayloads,
  loadVersioning,
  portProblem,
  ConfigError,
  DEFAULT_API_URL,
} from './config';
import { APIError, ErrorKind } from './api/errors';
import { openTelemetryPlugin, tracedClient, type TuneflowTracingOptions } from './tracing';
import { withPreloadedContract } from './bundling';
import { WORKFLOW_NAMES } from './contract/jobs';
import { registerCommands } from './contract/search-attributes';
import { missingSearchAttributes } from './search-attributes';
import { tuneflowServiceHandler } from './nexus/handler';
import { loadTenantSettings, Tenants, type TenantSettings } from './tenants';
import { storageOf, type ImageFetcher, type ImageStore, type StorageSettings } from './storage';
import { describeLimits, lacksQueueConfig, probeFairness, queueLimits, setQueueLimits } from './task-queue-limits';
import { BOOKKEEPING_ACTIVITIES, BOOKKEEPING_SUFFIX, bookkeepingQueueOf } from './contract/task-queues';
import { CompressionCodec } from './codec/compression';
import { describeVersioning, versioningProblem, withVersioning, type VersioningOptions } from './deployments/versions';

/**
 * The workflow bundles `npm run build` writes beside this file, without and with OpenTelemetry's workflow
 * interceptors (a bundle's interceptors are fixed when it is built); without them the worker bundles at start-up.
 */
const PREBUILT_BUNDLE = path.join(__dirname, 'workflow-bundle.js');
const PREBUILT_TRACED_BUNDLE = path.join(__dirname, 'workflow-bundle-traced.js');

/**
 * Where a worker takes tuneflow's workflow code from: the prebuilt bundle when present, the sources otherwise.
 * `traced`: the bundle with OpenTelemetry's workflow interceptors in it.
 */
export function workflowSource(traced = false): Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'> {
  const bundle = traced ? PREBUILT_TRACED_BUNDLE : PREBUILT_BUNDLE;
  if (fs.existsSync(bundle)) return { workflowBundle: { codePath: bundle } };
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
  /**
   * What the receiver holds for all clients together: connections in all and per address, idle time, body bytes.
   * @default DEFAULT_RECEIVER_LIMITS
   */
  limits?: ReceiverLimits;
  /**
   * Run the receiver in this worker. `false`: a receiver of its own receives them (`tuneflow callbacks`, behind the
   * public ingress, with the same secret); this worker only hands out URLs signed for `baseUrl`.
   * @default true
   */
  receive?: boolean;
}

/**
 * Every option left out is read from the environment variables `tuneflow worker` reads (src/config.ts), so one
 * configuration serves both; a missing or bad one throws a ConfigError naming the variable.
 */
export interface TuneflowPluginOptions {
  /**
   * The service: its settings (the plugin opens the client and closes it when the worker stops), or a TunesApi of
   * the caller's own (left open). The API key stays in the worker: it never enters a workflow's input or history.
   * @default TUNEFLOW_API_KEY (required) and TUNEFLOW_API_URL (default the public service)
   */
  api?: TunesApiOptions | TunesApi;
  /**
   * Ask the service for callbacks, received by a receiver that runs as long as the worker does. `false`: none, the
   * workflows rely on polling.
   * @default from TUNEFLOW_CALLBACK_BASE_URL, _SECRET, _PORT, _HOST and the receiver's limits; none when the base URL
   *   is unset
   */
  callbacks?: TuneflowCallbackOptions | false;
  /**
   * Where the receiver's log lines go, and the worker's word at start on missing search attributes.
   * @default the receiver's JSON logger on stderr; the worker's Runtime logger for the word at start
   */
  logger?: Logger;
  /**
   * One trace per job: composes Temporal's OpenTelemetryPlugin (client, activity and workflow spans), and the service
   * requests and callbacks join the trace. Spans outside workflow code go to the global OpenTelemetry provider (the
   * application installs the SDK); the workflows' to `spanProcessor`. A worker that brings its own workflow bundle
   * must build it with OpenTelemetry's workflow interceptors (`bundleWorkflowCode({ plugins: [plugin] })`).
   * @default off: the workflows' interceptors cost CPU in every workflow task and add a header to every activity
   *   in the history, which a worker with nowhere to send spans should not pay for
   */
  tracing?: TuneflowTracingOptions;
  /**
   * Serve the tuneflow Nexus service (`tuneflow-temporal/nexus`) on the worker's task queue, so workflows in other
   * namespaces call the jobs through an endpoint. Nothing arrives until an operator creates an endpoint that targets
   * this namespace and task queue; the worker then also polls for Nexus tasks.
   * @default true
   */
  nexus?: boolean;
  /**
   * Who the tenants are: the tenant of each Nexus endpoint (a request through any other endpoint is refused), and the
   * tunes the operator gives tenants besides those their jobs made. A job reads, generates on and deletes only its
   * tenant's tunes (src/tenants.ts).
   * @default TUNEFLOW_TENANT_ENDPOINTS, TUNEFLOW_TENANT_FALLBACK and TUNEFLOW_TENANT_TUNES; unset: no endpoint is any
   *   tenant's, and every tenant owns only the tunes its jobs made
   */
  tenants?: TenantSettings;
  /**
   * The only directory a job's file paths (`tune.images`, a prompt's `input_image`, `mask_image`) may name: each file
   * is opened once, checked on that handle (a regular file, its size, inside the directory after every link) and read
   * from it. Jobs come from starters tuneflow does not control.
   * @default TUNEFLOW_UPLOAD_DIR; unset: jobs send image URLs only, and a job with a file path fails InvalidInput
   *   having created nothing
   */
  uploadDir?: string;
  /**
   * Where each settled prompt's images are copied, as they settle: a folder (`{ target: { folder: '/srv/images' } }`,
   * the embedded default), an S3-compatible bucket (`{ target: { s3: { bucket, endpoint } } }`, through the AWS SDK's
   * S3 client and its credential chain), or an `ImageStore` of the caller's. Each copy is written once under a key
   * that names the tenant, the job, the prompt and the image, and checked by the SHA-256 of the bytes read back; the
   * result names where each is (`stored_images`). Image URLs are read from https hosts, the service's own host and
   * `imageHosts`, without the API key. A job opts out with `options.storeImages: false`.
   * @default TUNEFLOW_STORAGE (with TUNEFLOW_STORAGE_ENDPOINT, TUNEFLOW_IMAGE_HOSTS, TUNEFLOW_IMAGE_MAX_BYTES);
   *   unset or `false`: images are not copied, and a job's result holds the service's URLs only
   */
  storage?: StorageSettings | false;
  /**
   * Activities per second the worker's task queue starts, all its workers together, under the service's rate limit.
   * The worker sets it at start as the task queue's limit on the Temporal server (UpdateTaskQueueConfig, the same as
   * `tuneflow queue-limits --rate`), which every worker on the queue then obeys: a worker started without it, or with
   * another `maxTaskQueueActivitiesPerSecond`, changes nothing (the server's limit overrides a worker's). The latest
   * worker to start with a value sets it, and says so when it replaces another. Polls and creates share it; the
   * activities that do not call the service (the ledger's reservations, checkUploads, priorJob) run on the queue's
   * bookkeeping queue beside it (`<taskQueue>.bookkeeping`, which the worker polls too) and take none of it. The worker
   * then probes how the server shares the queue between tenants and says so (fairness on or off). Where the server
   * holds no task queue limits (an older server, the time-skipping test server) the worker says so at start and
   * limits the queue itself, as before: `maxTaskQueueActivitiesPerSecond`, the lower one when the worker sets its
   * own, the same on every worker.
   * `false`: the worker sets no limit, whatever the variable says (the server's, if any, still holds).
   * The queue's limit is this less `serviceMargin` of it: 25 sets 22.5/s. The worker's own client is paced at this
   * rate too (a tenth of a second's worth at once, `TunesApiOptions.requestsPerSecond`), so what the server dispatched
   * while the worker's event loop was held leaves at the service's rate, not all at once over its burst; a `TunesApi`
   * given as `api`, or `api.requestsPerSecond`, keeps its own.
   * @default TUNEFLOW_SERVICE_RATE; unset: the worker sets none
   */
  serviceRate?: number | false;
  /**
   * The share of `serviceRate` the queue leaves unused, 0 to 0.5. The server's limiter and the service's are both a
   * second's worth of requests, and each activity reaches the service after its worker's own varying delay: at the
   * service's own rate some arrive bunched and are 429s (18 in 7,000 requests, docs/scale.md); at 0.1 none did.
   * @default TUNEFLOW_SERVICE_MARGIN, else 0.1
   */
  serviceMargin?: number;
  /**
   * Check the API key with the service when the worker starts, before it polls: one `GET /tunes?limit=1`. A key the
   * service refuses (401, 403) stops the worker with a ConfigError naming the setting; a service it cannot reach is
   * said in the start report, and the worker starts all the same (its jobs retry, as they would).
   * @default TUNEFLOW_CHECK_API_KEY (`on` or `off`); off: a worker starting makes no request of the service
   */
  checkApiKey?: boolean;
  /**
   * Store activity payloads (the requests to the service and its answers, which only tuneflow reads) compressed:
   * every activity's on this worker, since a payload's context names no activity type, so leave it off on a worker
   * whose own workflows call activities that workers without this codec run.
   * the answers take a third of their bytes, a job's history a sixth less (docs/scale.md). Workflow inputs, results, failures and signals stay plain, for
   * Nexus callers, other languages and the Web UI. Every worker, replayer and client given the plugin decodes
   * compressed payloads whatever this says, so turn it on once every worker of the namespace runs a release that
   * decodes them; `tuneflow codec-server` shows them in the Web UI and `temporal workflow show --codec-endpoint`.
   * The codec goes first among the data converter's codecs: it compresses before any codec of the worker's own
   * (encryption, say) encodes.
   * @default TUNEFLOW_COMPRESS_PAYLOADS (`on` or `off`); off
   */
  compressPayloads?: boolean;
  /**
   * More fields for the one line the worker logs when it starts ("tuneflow worker started", with the service URL,
   * callbacks, the receiver's address, the upload directory, the rate, Nexus, tracing, the key check and, with
   * callbacks, what a signed probe through their public base URL found (`callbackProbe`): a command
   * line adds its metrics address, say. `false`: no line.
   * @default {}
   */
  startReport?: Record<string, string | number | boolean> | false;
  /**
   * Worker Versioning: the worker is a build of a worker deployment (`deploymentName`, and `buildId`, by default the
   * package version and the workflow bundle's hash), and the server routes each job to the build it started on
   * (`behavior` PINNED, the default) or to the current build (AUTO_UPGRADE). A versioned worker takes new jobs only
   * once its build is the deployment's current or ramping version (`temporal worker deployment set-current-version`);
   * the old build's workers stay up until their pinned jobs drain (README "Versioned deploys"). The spend ledger always
   * moves to the current build. A worker's own `workerDeploymentOptions` win over this. `false`: unversioned, whatever
   * the variables say.
   * @default TUNEFLOW_DEPLOYMENT_NAME, TUNEFLOW_BUILD_ID and TUNEFLOW_VERSIONING_BEHAVIOR; unset: unversioned
   */
  versioning?: VersioningOptions | false;
}

/**
 * tuneflow's activities, workflows, Nexus service and callback receiver on a Temporal worker. One plugin per worker:
 * the service client it opens is closed when that worker stops.
 *
 * @example
 * const worker = await Worker.create({
 *   connection,
 *   taskQueue: 'tuneflow',
 *   plugins: [new TuneflowPlugin()], // the service and callbacks from TUNEFLOW_API_KEY, TUNEFLOW_CALLBACK_BASE_URL, ...
 * });
 * await worker.run();
 */
export class TuneflowPlugin extends SimplePlugin {
  readonly #api: TunesApi;
  /** The activities that never reach the service, for the bookkeeper beside each worker. */
  readonly #bookkeeping: Record<string, unknown>;
  readonly #ownsApi: boolean;
  readonly #storage: { store: ImageStore; fetcher: ImageFetcher } | undefined;
  readonly #callbacks: TuneflowCallbackOptions | undefined;
  readonly #signer: CallbackSigner | undefined;
  readonly #logger: Logger | undefined;
  readonly #otel: OpenTelemetryPlugin | undefined;
  readonly #serviceRate: number | undefined;
  /** The task queue's activity limit: `serviceRate` less its margin. */
  readonly #queueRate: number | undefined;
  /** What names the receiver's port in an error: the variable, or the option given in code. */
  readonly #callbackPortSetting: string;
  /** What names the API key in an error: the variable, or the option given in code. */
  readonly #apiKeySetting: string;
  readonly #checkApiKey: boolean;
  /** The start report's settings (no secret among them), and the fields the caller adds; false: none. */
  readonly #report: Record<string, string | number | boolean> | false;
  readonly #versioning: VersioningOptions | undefined;
  /** What names the build ID in an error: the variable, or the option given in code. */
  readonly #buildIdSetting: string;

  constructor(options: TuneflowPluginOptions = {}) {
    // Every setting is read before anything is opened, so a bad one leaves nothing behind.
    const serviceRate =
      options.serviceRate === undefined
        ? loadServiceRate()
        : options.serviceRate === false
          ? undefined
          : options.serviceRate;
    if (serviceRate !== undefined && !isServiceRate(serviceRate))
      throw new TypeError(
        `TuneflowPlugin: serviceRate must be a positive number of requests per second or false, got ${String(serviceRate)}`,
      );
    const serviceMargin = options.serviceMargin ?? loadServiceMargin() ?? DEFAULT_SERVICE_MARGIN;
    if (!isServiceMargin(serviceMargin))
      throw new TypeError(
        `TuneflowPlugin: serviceMargin must be a number from 0 to ${MAX_SERVICE_MARGIN}, got ${String(serviceMargin)}`,
      );
    const given = options.api ?? apiFromEnvironment();
    const callbacks = options.callbacks === undefined ? loadCallbackConfig() : options.callbacks || undefined;
    const uploadDir = options.uploadDir ?? loadUploadDir();
    const storageSettings = options.storage === undefined ? loadStorageSettings() : options.storage || undefined;
    const checkApiKey = options.checkApiKey ?? loadCheckApiKey();
    const tenants = new Tenants(options.tenants ?? loadTenantSettings());
    const ownsApi = !(given instanceof TunesApi);
    const otel = options.tracing === undefined ? undefined : openTelemetryPlugin(options.tracing);
    const api =
      given instanceof TunesApi
        ? given
        : new TunesApi({ ...given, requestsPerSecond: given.requestsPerSecond ?? serviceRate });
    const signer = callbacks ? new CallbackSigner({ baseUrl: callbacks.baseUrl, secret: callbacks.secret }) : undefined;
    const storage = storageSettings && storageOf(storageSettings, api.origin);
    const activities = createActivities({ api, callbacks: signer, uploadDir, tenants, storage });
    const compressPayloads = options.compressPayloads ?? loadCompressPayloads();
    const versioning = options.versioning === undefined ? loadVersioning() : options.versioning || undefined;
    const versioningIssue = options.versioning ? versioningProblem(options.versioning) : undefined;
    if (versioningIssue) throw new TypeError(`TuneflowPlugin: ${versioningIssue[0]} ${versioningIssue[1]}`);
    super({
      name: 'tuneflow',
      dataConverter: withCompression(compressPayloads),
      // All of them, the bookkeeping ones too: a worker of an earlier release schedules those on the jobs' queue.
      activities,
      // On every worker, traced or not, so a retried activity hands out the callback URLs its first attempt did.
      workerInterceptors: { activity: [rememberScheduledBy] },
      nexusServices: options.nexus === false ? undefined : [tuneflowServiceHandler(tenants)],
    });
    this.#api = api;
    this.#storage = storage;
    this.#bookkeeping = Object.fromEntries(BOOKKEEPING_ACTIVITIES.map((name) => [name, activities[name]]));
    this.#ownsApi = ownsApi;
    this.#callbacks = callbacks;
    this.#signer = signer;
    this.#logger = options.logger;
    this.#otel = otel;
    this.#serviceRate = serviceRate;
    this.#queueRate = serviceRate === undefined ? undefined : queueRateFor(serviceRate, serviceMargin);
    this.#callbackPortSetting = options.callbacks === undefined ? 'TUNEFLOW_CALLBACK_PORT' : 'callbacks.port';
    this.#apiKeySetting = options.api === undefined ? 'TUNEFLOW_API_KEY' : 'api.apiKey';
    this.#checkApiKey = checkApiKey;
    this.#versioning = versioning;
    this.#buildIdSetting = options.versioning === undefined ? 'TUNEFLOW_BUILD_ID' : 'versioning.buildId';
    this.#report =
      options.startReport === false
        ? false
        : {
            apiUrl: given instanceof TunesApi ? "the caller's TunesApi" : (given.baseUrl ?? DEFAULT_API_URL),
            callbacks: callbacks ? callbacks.baseUrl : 'off (polling only)',
            ...(callbacks && {
              receiver:
                (callbacks as TuneflowCallbackOptions).receive === false
                  ? 'elsewhere (callbacks.receive: false)'
                  : `${callbacks.host ?? '0.0.0.0'}:${callbacks.port ?? DEFAULT_CALLBACK_PORT}`,
            }),
            uploadDir: uploadDir ?? 'off (image URLs only)',
            storage: storage ? storage.store.name : 'off (the service keeps the images)',
            serviceRate:
              serviceRate === undefined
                ? "not set (the server's, if any)"
                : `${serviceRate}/s, the task queue at ${queueRateFor(serviceRate, serviceMargin)}/s`,
            nexus: options.nexus === false ? 'off' : 'on',
            tracing: otel ? 'on' : 'off',
            compressPayloads: compressPayloads ? 'on' : 'off (decoded all the same)',
            ...options.startReport,
          };
  }

  /**
   * Adds the activities; tuneflow's workflows when the worker brings none (else its own must export them). The
   * workflows are chosen before OpenTelemetry's plugin runs: it adds its workflow interceptors to a worker that bundles
   * at start-up, and leaves a prebuilt bundle (the traced one has them) alone.
   */
  override configureWorker(options: WorkerOptions): WorkerOptions {
    const configured = withVersioning(
      withServiceRate(
        withFailingConversions(withTuneflowWorkflows(super.configureWorker(options), this.#otel !== undefined)),
        this.#queueRate,
      ),
      this.#versioning,
      this.#buildIdSetting,
    );
    return this.#otel ? this.#otel.configureWorker(configured) : configured;
  }

  /** The replay worker gets the same workflows (and interceptors) as the worker. */
  override configureReplayWorker(options: ReplayWorkerOptions): ReplayWorkerOptions {
    const configured = withFailingConversions(
      withTuneflowWorkflows(super.configureReplayWorker(options), this.#otel !== undefined),
    );
    return this.#otel ? this.#otel.configureReplayWorker(configured) : configured;
  }

  /** A client given this plugin traces its workflow calls when tracing is on. */
  override configureClient(options: ClientOptions): ClientOptions {
    const configured = super.configureClient(options);
    return this.#otel ? this.#otel.configureClient(configured) : configured;
  }

  /**
   * `bundleWorkflowCode({ plugins: [plugin] })` preloads the input contract (SimplePlugin does not pass that option on:
   * evaluated once per worker, not once per run), and bundles OpenTelemetry's workflow interceptors when tracing is on.
   */
  override configureBundler(options: BundleOptions): BundleOptions {
    const configured = withPreloadedContract(super.configureBundler(options));
    return this.#otel ? this.#otel.configureBundler(configured) : configured;
  }

  /**
   * Runs the callback receiver while the worker runs: started before it polls (a port in use stops the worker
   * before it takes a task), closed after it stopped, then the service client.
   */
  override async runWorker(worker: Worker, next: (w: Worker) => Promise<void>): Promise<void> {
    // A bookkeeper given the plugin through its connection runs as it is: no bookkeeper of its own.
    if (worker.options.taskQueue.endsWith(BOOKKEEPING_SUFFIX)) return next(worker);
    // Beside the start, not before it: the receiver and the polls do not wait on the namespace's answer.
    void this.#sayIfUnfindable(worker).catch(() => undefined);
    // Only with a rate: a worker without one opens its receiver as soon as before.
    if (this.#queueRate !== undefined) await this.#holdServiceRate(worker);
    try {
      const keyCheck = this.#checkApiKey ? await this.#checkKey(worker, next) : 'off';
      const callbacks = this.#callbacks;
      if (!callbacks || !this.#signer || callbacks.receive === false)
        return await this.#run(worker, next, keyCheck, this.#probe());
      const client = callbacks.client ?? worker.client;
      if (!client) throw new TypeError('TuneflowPlugin: the worker has no connection to signal workflows through');
      // Traced, the signal is a span of the callback's trace and carries it into the run.
      const port = callbacks.port ?? DEFAULT_CALLBACK_PORT;
      // The Runtime's meter, tagged as the worker's own metrics are: the callbacks appear where the worker's do.
      const meter = (await import('@temporalio/worker')).Runtime.instance().metricMeter.withTags({
        namespace: worker.options.namespace,
        taskQueue: worker.options.taskQueue,
      });
      const receiver = await startCallbackReceiver({
        port,
        host: callbacks.host,
        signer: this.#signer,
        signaler: temporalSignaler(this.#otel ? tracedClient(client) : client),
        logger: this.#logger,
        limits: callbacks.limits,
        countCallback: callbackCounter(meter),
      }).catch(async (err: unknown) => {
        // The worker never ran: it lets go of its connection (which the caller closes next) before the error goes up.
        await releaseUnrun(worker, next);
        throw portProblem(err, this.#callbackPortSetting, `port ${port}`, CALLBACK_PORT_ADVICE) ?? err;
      });
      try {
        // Once the receiver listens: the probe may come back to it.
        await this.#run(worker, next, keyCheck, this.#probe());
      } finally {
        await receiver.close();
      }
    } finally {
      try {
        if (this.#ownsApi) await this.#api.close();
      } finally {
        this.#storage?.store.close?.();
        await this.#storage?.fetcher.close();
      }
    }
  }

  /**
   * Sets `serviceRate` less its margin as the task queue's activity limit on the server, before the worker polls, and
   * says what the server then holds; where the server cannot hold it, says so once: the worker's own limit is then the
   * only one.
   */
  async #holdServiceRate(worker: Worker): Promise<void> {
    const rate = this.#queueRate;
    const service = worker.client?.connection.workflowService;
    if (rate === undefined || !service) return;
    const logger = this.#logger ?? (await import('@temporalio/worker')).Runtime.instance().logger;
    const target = { service, namespace: worker.options.namespace, taskQueue: worker.options.taskQueue };
    try {
      const before = await queueLimits(target);
      const now = await setQueueLimits({ ...target, identity: worker.options.identity }, { queueRate: rate });
      const replaced =
        before.queueRate !== undefined && before.queueRate !== rate ? ` (was ${before.queueRate}/s)` : '';
      logger.info(
        `task queue ${target.taskQueue}: activities limited to ${rate}/s for every worker (the service's ` +
          `${this.#serviceRate}/s less its margin), held by the server${replaced}; ${describeLimits(now)}`,
        { taskQueue: target.taskQueue, serviceRate: this.#serviceRate, queueRate: rate, ...now },
      );
      // Beside the start: the polls do not wait on it.
      const connection = worker.client?.connection;
      if (connection) void this.#sayFairness(logger, connection, worker).catch(() => undefined);
    } catch (err) {
      logger.warn(
        `task queue ${target.taskQueue}: the server holds no task queue limit or fairness ` +
          `(${lacksQueueConfig(err) ? 'not implemented on this server' : (err as Error).message}): this worker limits ` +
          `the queue's activities to ${rate}/s itself, and every worker on the queue needs the same TUNEFLOW_SERVICE_RATE`,
        { taskQueue: target.taskQueue, serviceRate: this.#serviceRate, queueRate: rate },
      );
    }
  }

  /**
   * Says how the server shares the rate-limited queue between tenants (src/task-queue-limits.ts, probeFairness): by
   * tenant, or not, where one tenant's flood holds up everyone's jobs and the operator should turn
   * fairness on; or that the probe could not tell.
   */
  async #sayFairness(logger: Logger, connection: Client['connection'], worker: Worker): Promise<void> {
    const { namespace, taskQueue, identity } = worker.options;
    const probe = await probeFairness(connection, namespace, taskQueue, identity);
    const fields = { taskQueue, fairness: probe.fairness, ...(probe.reason && { reason: probe.reason }) };
    if (probe.fairness === 'on')
      logger.info(`task queue ${taskQueue}: the server shares it by tenant (fairness on, by a probe)`, fields);
    else if (probe.fairness === 'off')
      logger.warn(
        `task queue ${taskQueue}: the server does not share it by tenant (fairness off, by a probe): one tenant's ` +
          "flood holds up every other tenant's jobs; turn on the server's dynamic config " +
          'matching.enableFairness (`tuneflow dev-server` and the compose file do)',
        fields,
      );
    else
      logger.warn(
        `task queue ${taskQueue}: whether the server shares it by tenant is unknown (${probe.reason})`,
        fields,
      );
  }

  /**
   * The API key, checked with one read before the worker polls: a key the service refuses stops it (the worker lets go
   * of its connection first); any other failure is said in the start report, and the worker starts.
   */
  async #checkKey(worker: Worker, next: (w: Worker) => Promise<void>): Promise<string> {
    try {
      await this.#api.tunes.list({ limit: 1 });
      return 'accepted';
    } catch (err) {
      if (!(err instanceof APIError) || err.kind !== ErrorKind.unauthorized)
        return `not checked: ${(err as Error).message}`;
      await releaseUnrun(worker, next);
      const said = describeRefusal(err.body);
      const rule = `the service refused it at start (${err.status}${said ? `: ${said}` : ''})`;
      throw Object.assign(new ConfigError(this.#apiKeySetting, rule), { cause: err });
    }
  }

  /**
   * Runs the worker, and says it started: the one line a worker logs then, its settings (never a secret) and how the
   * key check went. Said once the run began (the worker is RUNNING before its first wait), not before it: a caller may
   * shut the worker down as soon as it runs.
   */
  async #run(
    worker: Worker,
    next: (w: Worker) => Promise<void>,
    keyCheck: string,
    probe: Promise<string> | undefined,
  ): Promise<void> {
    const running = this.#withBookkeeper(worker, () => super.runWorker(worker, next));
    // Its failure is awaited below, after the line.
    running.catch(() => undefined);
    if (this.#report !== false) {
      const { taskQueue, namespace } = worker.options;
      const report = {
        taskQueue,
        bookkeeping: bookkeepingQueueOf(taskQueue),
        namespace,
        versioning: describeVersioning(worker.options),
        ...this.#report,
      };
      // The worker polls meanwhile: the line waits for the probe (a few seconds at most), the jobs do not.
      const callbackProbe = await probe;
      const logger = this.#logger ?? (await import('@temporalio/worker')).Runtime.instance().logger;
      logger.info('tuneflow worker started', {
        ...report,
        apiKeyCheck: keyCheck,
        ...(callbackProbe !== undefined && { callbackProbe }),
      });
    }
    await running;
  }

  /**
   * Runs `run` (the worker) with its bookkeeper: a worker of the activities that never reach the service, on the
   * bookkeeping queue beside the worker's (src/contract/task-queues.ts), so the server's rate limit on the worker's
   * queue counts only the calls that reach the service. Both stop when either does; the first failure is thrown.
   */
  async #withBookkeeper(worker: Worker, run: () => Promise<void>): Promise<void> {
    const { Worker: Workers } = await import('@temporalio/worker');
    let bookkeeper: Worker;
    try {
      bookkeeper = await Workers.create({
        connection: worker.connection,
        namespace: worker.options.namespace,
        taskQueue: bookkeepingQueueOf(worker.options.taskQueue),
        identity: worker.options.identity,
        activities: this.#bookkeeping,
        // The worker's data converter (tuneflow's codec, and any of the worker's own): the bookkeeping activities'
        // payloads are encoded as the worker's are.
        dataConverter: worker.options.dataConverter,
        // The worker's own activity interceptors (tracing's spans among them) on its bookkeeping too.
        interceptors: { activity: worker.options.interceptors.activity },
        shutdownGraceTime: worker.options.shutdownGraceTime,
        // The same build of the same deployment: a pinned job's bookkeeping runs on the build the job runs on.
        workerDeploymentOptions: worker.options.workerDeploymentOptions,
      });
    } catch (err) {
      await releaseUnrun(worker, run);
      throw err;
    }
    quietAboutWorkflows(bookkeeper);
    const main = run();
    const books = bookkeeper.run();
    const settled = (p: Promise<void>) => p.then(noop, noop);
    const mainEndedFirst = await Promise.race([settled(main).then(() => true), settled(books).then(() => false)]);
    if (mainEndedFirst) await shutdownOnceRunning(bookkeeper, books);
    else await shutdownOnceRunning(worker, main);
    const [ran, kept] = await Promise.allSettled([main, books]);
    if (ran.status === 'rejected') throw ran.reason;
    if (kept.status === 'rejected') throw kept.reason;
  }

  /**
   * One signed probe through the callbacks' public base URL, for the start report (none without one): what it found,
   * never the signed URL. It never stops the worker.
   */
  #probe(): Promise<string> | undefined {
    if (!this.#signer || this.#report === false) return undefined;
    return probeCallbackUrl(this.#signer).then(describeProbe);
  }

  /**
   * Says, once at start, when the worker's namespace lacks tuneflow's search attributes, naming the command that
   * registers them. Runs go on without them (unlisted); a server that cannot tell, such as the time-skipping test
   * server, gets no word.
   */
  async #sayIfUnfindable(worker: Worker): Promise<void> {
    const connection = worker.client?.connection;
    if (!connection) return;
    const namespace = worker.options.namespace;
    const missing = await missingSearchAttributes(connection.operatorService, namespace).catch(() => []);
    if (!missing.length) return;
    const logger = this.#logger ?? (await import('@temporalio/worker')).Runtime.instance().logger;
    logger.warn(
      `namespace ${namespace} lacks tuneflow's search attributes ${missing.join(', ')}: jobs run, but cannot be ` +
        `found by phase, tune or cost. Register them with \`tuneflow search-attributes\` ` +
        `(or: ${registerCommands(namespace).join(' && ')}); running workers take them within 10 s`,
      { namespace, missing },
    );
  }
}

/**
 * A replayer's options as a worker with the plugin has them, without opening anything: tuneflow's workflows (unless
 * `options` names its own), the codec that decodes compressed payloads, and the failure types the workers fail runs
 * with. For `tuneflow replay` and replay tests of a user's own.
 *
 * @example
 * await Worker.runReplayHistory(tuneflowReplayOptions(), history);
 */
export function tuneflowReplayOptions(options: ReplayWorkerOptions = {}): ReplayWorkerOptions {
  return withFailingConversions(
    withTuneflowWorkflows({ ...options, dataConverter: withCompression(false)(options.dataConverter) }, false),
  );
}

/** What to change when the receiver's port is taken, beside the setting itself. */
export const CALLBACK_PORT_ADVICE =
  'stop what listens there (a `tuneflow worker`?), or choose another port and point TUNEFLOW_CALLBACK_BASE_URL at it';

/**
 * A worker that will not run lets go of its connection: one created and never run holds a reference to it, and
 * `connection.close()` would then throw IllegalStateError in place of the error that stopped it. It is run and
 * stopped at once (the run sets it RUNNING before its first wait, so it stops before it polls for long).
 */
/**
 * Shuts `worker` down once it runs (`running`: its `run()`). The plugin holds the queue's limit, checks the key and
 * opens its receiver before the worker polls: asked to stop then, a worker is still INITIALIZED, where `shutdown()`
 * throws, and left so it would run on. Gives up when the run ends first.
 *
 * @example
 * const running = worker.run();
 * process.once('SIGTERM', () => void shutdownOnceRunning(worker, running));
 */
export async function shutdownOnceRunning(worker: Worker, running: Promise<unknown>): Promise<void> {
  let ended = false;
  void running.then(
    () => (ended = true),
    () => (ended = true),
  );
  while (!ended && worker.getState() === 'INITIALIZED') await new Promise((resolve) => setTimeout(resolve, 20));
  if (worker.getState() === 'RUNNING') worker.shutdown();
}

const noop = (): void => undefined;

/** The SDK's warning that a worker registers no workflows, which a bookkeeper never does on purpose. */
const NO_WORKFLOWS = 'No workflows registered, not polling for workflow tasks';

/**
 * Drops the SDK's one warning that `bookkeeper` polls no workflow tasks (every start would say it to the operator),
 * passing every other line on. The worker's logger is an SDK field; should it move, the warning shows again, no more.
 */
function quietAboutWorkflows(bookkeeper: Worker): void {
  const held = bookkeeper as unknown as { logger?: Logger };
  const logger = held.logger;
  if (!logger) return;
  held.logger = {
    log: (level, message, meta) => (message === NO_WORKFLOWS ? undefined : logger.log(level, message, meta)),
    trace: (message, meta) => logger.trace(message, meta),
    debug: (message, meta) => logger.debug(message, meta),
    info: (message, meta) => logger.info(message, meta),
    warn: (message, meta) => (message === NO_WORKFLOWS ? undefined : logger.warn(message, meta)),
    error: (message, meta) => logger.error(message, meta),
  };
}

async function releaseUnrun(worker: Worker, next: (w: Worker) => Promise<void>): Promise<void> {
  const running = next(worker);
  if (worker.getState() === 'RUNNING') worker.shutdown();
  await running.catch(() => undefined);
}

/** What the service said when it refused a key (its `error`, or its text), short; it never echoes the key. */
function describeRefusal(body: unknown): string | undefined {
  const said = typeof body === 'string' ? body : (body as { error?: unknown } | undefined)?.error;
  return typeof said === 'string' && said.trim() ? said.trim().slice(0, 200) : undefined;
}

function apiFromEnvironment(): TunesApiOptions {
  return { apiKey: loadApiKey(), baseUrl: loadApiUrl() };
}

/**
 * The worker's own limit for `serviceRate` less its margin, the fallback where the server holds no queue limit (one the server holds
 * overrides it): the lower one when the worker sets its own. The SDK then turns eager activity dispatch off too.
 */
function withServiceRate(options: WorkerOptions, serviceRate: number | undefined): WorkerOptions {
  if (serviceRate === undefined) return options;
  const own = options.maxTaskQueueActivitiesPerSecond;
  return { ...options, maxTaskQueueActivitiesPerSecond: own === undefined ? serviceRate : Math.min(own, serviceRate) };
}

/**
 * The data converter with tuneflow's codec first among its codecs (compressing before any of the worker's own encodes,
 * decoding after they decoded), and its other fields as they were.
 */
function withCompression(compress: boolean): (existing: DataConverter | undefined) => DataConverter {
  return (existing) => ({
    ...existing,
    payloadCodecs: [
      new CompressionCodec({ compress }),
      ...(existing?.payloadCodecs ?? []).filter((codec) => !(codec instanceof CompressionCodec)),
    ],
  });
}

/** tuneflow's workflow types: its jobs, and the claim a job leaves on its key. */
const TUNEFLOW_WORKFLOW_TYPES: readonly string[] = [...WORKFLOW_NAMES, 'keyClaim'];

/**
 * A tuneflow run that throws the SDK's ValueError (a value no payload can carry: "Unable to convert ... to payload")
 * fails, typed by that name, instead of failing its workflow task on every attempt. The net under the runs' own
 * conversion to UnconvertiblePayload (src/workflows/job.ts), for tuneflow's workflow types only, beside the worker's
 * own choices; the replay worker gets the same, so such a run replays as it ran.
 */
function withFailingConversions<T extends WorkerOptions | ReplayWorkerOptions>(options: T): T {
  const own: Record<string, string[]> = options.workflowFailureErrorTypes ?? {};
  const ours = TUNEFLOW_WORKFLOW_TYPES.map((type) => [type, [...new Set([...(own[type] ?? []), 'ValueError'])]]);
  return { ...options, workflowFailureErrorTypes: { ...own, ...Object.fromEntries(ours) } };
}

function withTuneflowWorkflows<T extends WorkerOptions | ReplayWorkerOptions>(options: T, traced: boolean): T {
  const sourced =
    options.workflowsPath !== undefined || options.workflowBundle !== undefined
      ? options
      : { ...options, ...workflowSource(traced) };
  // A worker that bundles at start-up preloads the input contract too; a prebuilt bundle has it built in.
  if (sourced.workflowBundle !== undefined) return sourced;
  return { ...sourced, bundlerOptions: withPreloadedContract(sourced.bundlerOptions ?? {}) };
}
