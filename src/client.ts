/**
 * Typed starters for services that start tuneflow workflows. Inputs are validated with the service's own rules
 * before anything is started; the caller's business key is the workflow ID, so a second start of the same job
 * attaches to the first instead of training twice, and a start of another job under it is refused (KeyInUseError).
 */
import { Client, WorkflowExecutionAlreadyStartedError, type WorkflowHandle } from '@temporalio/client';
import { parseInput } from './api/parse-input';
import { DEFAULT_TASK_QUEUE } from './config';
import { businessKey } from './contract/check';
import type {
  GenerateInput,
  GenerateResult,
  PackTuneInput,
  PackTuneResult,
  TrainThenGenerateInput,
  TrainThenGenerateResult,
} from './contract/inputs';
import { KeyInUseError, otherJob } from './contract/keys';
import { DEFAULT_TENANT, TENANT_MEMO, tenantNameProblem, tenantWorkflowId } from './contract/tenants';
import { progressQuery, type Progress } from './contract/messages';
import { JOBS, type WorkflowName } from './contract/jobs';
import { jobUnderKey } from './job-under-key';
import { retryingCall, type RetryingCall } from './retrying-call';
import { startPriority } from './tenants';
import { tracedClient } from './tracing';

export interface TuneflowClientOptions {
  /** A connected Temporal client. */
  client: Client;
  /**
   * The task queue the tuneflow worker polls.
   * @default 'tuneflow'
   */
  taskQueue?: string;
  /**
   * Starts (and queries, cancels) make OpenTelemetry spans in the caller's trace, and each run continues the trace of
   * the start: Temporal's OpenTelemetry client interceptor on a client over the same connection (one that has it
   * already is used as it is). Spans go to the global provider, which the application installs.
   * @default false
   */
  tracing?: boolean;
  /**
   * The tenant the starts run as: the operator's setting, never a caller's. The default tenant's jobs run under their
   * bare keys; another tenant's under `tuneflow:nexus:<tenant>:<key>`, the IDs its Nexus endpoint's jobs have, so a key
   * of a tenant names one job whichever way it is started.
   * @default 'default' (`tuneflow start` reads TUNEFLOW_TENANT)
   */
  tenant?: string;
}

/** A start that met the contract, not yet sent (`TuneflowClient.check`); `R` is the run's result. */
export interface CheckedStart<R> {
  readonly workflow: WorkflowName;
  readonly workflowId: string;
  /** The tenant it runs as. */
  readonly tenant: string;
  /** The input as checked. */
  readonly input: unknown;
  /** Types only: the result the run gives. */
  readonly result?: R;
}

/** The starts `TuneflowClient.check` made. */
const startsChecked = new WeakSet<CheckedStart<unknown>>();

/**
 * A run's progress as its handle tells it: the `progress` query's answer (Progress, what the workflow knows) and, from
 * the server, the call that is retrying, if one is (what the workflow cannot know: its activities' attempts).
 */
export interface RunProgress extends Progress {
  /**
   * A call that failed and will be tried again: which, the attempt to come and when, and why (`POST /tunes was rate
   * limited (429, Retry-After 60 s): ...`). Absent when no call is retrying.
   */
  retrying?: RetryingCall;
}

/** A started (or attached) tuneflow workflow. */
export interface TuneflowHandle<R> {
  readonly workflowId: string;
  /** True when this call started the run; false when it attached to a run of the same business key. */
  readonly started: boolean;
  /**
   * The `progress` query (phase, tune id, prompt counts, API calls and callbacks) and the call that is retrying, if one
   * is (from the run's description: its pending activities). Waits for a worker, as any query does.
   */
  progress(): Promise<RunProgress>;
  /** The workflow's result; throws WorkflowFailedError with the typed cause when it failed. */
  result(): Promise<R>;
  /** Requests cancellation (the workflow deletes what it created when `cleanupOnCancel` is set). */
  cancel(): Promise<void>;
  /** The underlying SDK handle. */
  readonly handle: WorkflowHandle;
}

/**
 * Starts tuneflow workflows by business key.
 *
 * @example
 * const tuneflow = new TuneflowClient({ client: new Client({ connection: await Connection.connect() }) });
 * const run = await tuneflow.trainThenGenerate('order-1234', {
 *   tune: { name: 'woman', image_urls: ['https://example.com/1.jpg'], branch: 'fast' },
 *   prompts: [{ text: 'ohwx woman on a beach', num_images: 2 }],
 * });
 * const { tune, prompts } = await run.result();
 */
export class TuneflowClient {
  private readonly client: Client;
  private readonly taskQueue: string;
  private readonly tenant: string;

  constructor(options: TuneflowClientOptions) {
    this.client = options.tracing ? tracedClient(options.client) : options.client;
    this.taskQueue = options.taskQueue ?? DEFAULT_TASK_QUEUE;
    this.tenant = options.tenant ?? DEFAULT_TENANT;
    const problem = tenantNameProblem(this.tenant);
    if (problem) throw new TypeError(`TuneflowClient: tenant ${problem}`);
  }

  /**
   * Checks a start against the contract and contacts nothing: a bad key or input throws InvalidInputError here. What
   * it returns is started with `start`, which does not check again (a command line checks before it connects).
   *
   * @example
   * const checked = TuneflowClient.check('trainThenGenerate', 'order-1234', input); // throws on bad input
   * const run = await new TuneflowClient({ client: await connect() }).start(checked);
   */
  static check(
    workflow: 'trainThenGenerate',
    key: string,
    input: TrainThenGenerateInput,
    tenant?: string,
  ): CheckedStart<TrainThenGenerateResult>;
  static check(workflow: 'generate', key: string, input: GenerateInput, tenant?: string): CheckedStart<GenerateResult>;
  static check(workflow: 'packTune', key: string, input: PackTuneInput, tenant?: string): CheckedStart<PackTuneResult>;
  static check(workflow: WorkflowName, key: string, input: unknown, tenant = DEFAULT_TENANT): CheckedStart<unknown> {
    const problem = tenantNameProblem(tenant);
    if (problem) throw new TypeError(`TuneflowClient.check: tenant ${problem}`);
    const workflowId = tenantWorkflowId(tenant, parseInput(businessKey, 'workflowId', key));
    const checked: CheckedStart<unknown> = {
      workflow,
      workflowId,
      tenant,
      input: JOBS[workflow].check(workflowId, input).input,
    };
    startsChecked.add(checked);
    return checked;
  }

  /** Trains a tune, then generates the prompts with it. `key` is the job's business key (the workflow ID). */
  async trainThenGenerate(
    key: string,
    input: TrainThenGenerateInput,
  ): Promise<TuneflowHandle<TrainThenGenerateResult>> {
    return this.start(TuneflowClient.check('trainThenGenerate', key, input, this.tenant));
  }

  /** Generates prompts on an existing tune. */
  async generate(key: string, input: GenerateInput): Promise<TuneflowHandle<GenerateResult>> {
    return this.start(TuneflowClient.check('generate', key, input, this.tenant));
  }

  /** Creates a tune from a pack (spec 4.9) and waits for its prompts. */
  async packTune(key: string, input: PackTuneInput): Promise<TuneflowHandle<PackTuneResult>> {
    return this.start(TuneflowClient.check('packTune', key, input, this.tenant));
  }

  /** A handle to a run by its business key (of this client's tenant). */
  getHandle<R = unknown>(key: string): TuneflowHandle<R> {
    return toTuneflowHandle<R>(this.client.workflow.getHandle(tenantWorkflowId(this.tenant, key)), false);
  }

  /** Starts (or attaches to) a run `TuneflowClient.check` checked. */
  async start<R>(checked: CheckedStart<R>): Promise<TuneflowHandle<R>> {
    // Only what the check made: a hand-built start would skip the contract.
    if (!startsChecked.has(checked)) throw new TypeError('start: takes what TuneflowClient.check returns');
    const { workflow: name, workflowId, tenant, input } = checked;
    try {
      const handle = await this.client.workflow.start(name, {
        taskQueue: this.taskQueue,
        workflowId,
        args: [input],
        // A running or closed run of the same key refuses the start atomically on the server, and the refusal is how
        // we know it: SDK 1.24's start() drops the server's `started` flag, so USE_EXISTING would report every
        // attach as a start. A closed job is not run again (use a new key).
        workflowIdConflictPolicy: 'FAIL',
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
        // Its workflow tasks share the queue by tenant, as its activities do.
        priority: startPriority(tenant),
        // The run refuses a tenant's ID that its tenant's starter did not make (src/contract/tenants.ts).
        ...(tenant !== DEFAULT_TENANT && { memo: { [TENANT_MEMO]: tenant } }),
      });
      return toTuneflowHandle<R>(handle, true);
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      // The key has a job: this one (attached: the running run, or the closed one, whose result stands), or another,
      // refused before anything is created, naming what differs.
      const holder = await jobUnderKey(this.client, workflowId);
      const other = holder && otherJob(name, input, holder);
      if (other) throw new KeyInUseError(workflowId, { workflow: other.workflow, runId: holder?.runId }, other.fields);
      return toTuneflowHandle<R>(this.client.workflow.getHandle(workflowId), false);
    }
  }
}

function toTuneflowHandle<R>(handle: WorkflowHandle, started: boolean): TuneflowHandle<R> {
  return {
    workflowId: handle.workflowId,
    started,
    handle,
    progress: async () => {
      const [progress, description] = await Promise.all([handle.query(progressQuery), handle.describe()]);
      const retrying = retryingCall(description);
      return retrying ? { ...progress, retrying } : progress;
    },
    result: () => handle.result() as Promise<R>,
    cancel: async () => {
      await handle.cancel();
    },
  };
}
