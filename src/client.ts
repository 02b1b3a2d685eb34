/**
 * Typed starters for services that start tuneflow workflows. Inputs are validated with the service's own rules
 * before anything is started; the caller's business key is the workflow ID, so a second start of the same job
 * attaches to the first instead of training twice.
 */
import { Client, WorkflowExecutionAlreadyStartedError, type WorkflowHandle } from '@temporalio/client';
import { parseInput } from './api/errors';
import { DEFAULT_TASK_QUEUE } from './config';
import { businessKey, checkGenerate, checkPackTune, checkTrainThenGenerate } from './contract/check';
import type {
  GenerateInput,
  GenerateResult,
  PackTuneInput,
  PackTuneResult,
  TrainThenGenerateInput,
  TrainThenGenerateResult,
} from './contract/inputs';
import { progressQuery, WorkflowName, type Progress } from './contract/messages';
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
}

/** A started (or attached) tuneflow workflow. */
export interface TuneflowHandle<R> {
  readonly workflowId: string;
  /** True when this call started the run; false when it attached to a run of the same business key. */
  readonly started: boolean;
  /** The `progress` query: phase, tune id, prompt counts, API calls and callbacks. */
  progress(): Promise<Progress>;
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

  constructor(options: TuneflowClientOptions) {
    this.client = options.tracing ? tracedClient(options.client) : options.client;
    this.taskQueue = options.taskQueue ?? DEFAULT_TASK_QUEUE;
  }

  /** Trains a tune, then generates the prompts with it. `key` is the job's business key (the workflow ID). */
  async trainThenGenerate(
    key: string,
    input: TrainThenGenerateInput,
  ): Promise<TuneflowHandle<TrainThenGenerateResult>> {
    const workflowId = parseInput(businessKey, 'workflowId', key);
    const { input: checked } = checkTrainThenGenerate(workflowId, input);
    return this.start(WorkflowName.trainThenGenerate, workflowId, checked);
  }

  /** Generates prompts on an existing tune. */
  async generate(key: string, input: GenerateInput): Promise<TuneflowHandle<GenerateResult>> {
    const workflowId = parseInput(businessKey, 'workflowId', key);
    const { input: checked } = checkGenerate(input);
    return this.start(WorkflowName.generate, workflowId, checked);
  }

  /** Creates a tune from a pack (spec 4.9) and waits for its prompts. */
  async packTune(key: string, input: PackTuneInput): Promise<TuneflowHandle<PackTuneResult>> {
    const workflowId = parseInput(businessKey, 'workflowId', key);
    const { input: checked } = checkPackTune(workflowId, input);
    return this.start(WorkflowName.packTune, workflowId, checked);
  }

  /** A handle to a run by its business key. */
  getHandle<R = unknown>(key: string): TuneflowHandle<R> {
    return toTuneflowHandle<R>(this.client.workflow.getHandle(key), false);
  }

  private async start<R>(name: WorkflowName, workflowId: string, input: unknown): Promise<TuneflowHandle<R>> {
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
      });
      return toTuneflowHandle<R>(handle, true);
    } catch (err) {
      // Attached: the running run (or the closed one, whose result stands).
      if (err instanceof WorkflowExecutionAlreadyStartedError)
        return toTuneflowHandle<R>(this.client.workflow.getHandle(workflowId), false);
      throw err;
    }
  }
}

function toTuneflowHandle<R>(handle: WorkflowHandle, started: boolean): TuneflowHandle<R> {
  return {
    workflowId: handle.workflowId,
    started,
    handle,
    progress: () => handle.query(progressQuery),
    result: () => handle.result() as Promise<R>,
    cancel: async () => {
      await handle.cancel();
    },
  };
}
