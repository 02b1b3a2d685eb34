/**
 * Typed starters for services that start tuneflow workflows. Inputs are validated with the service's own rules
 * before anything is started; the caller's business key is the workflow ID, so a second start of the same job
 * attaches to the first instead of training twice.
 */
import { Client, WorkflowExecutionAlreadyStartedError, type WorkflowHandle } from '@temporalio/client';
import type { ApplicationFailure } from '@temporalio/common';
import { z } from 'zod';
import { InvalidInputError, parseInput } from './api/errors';
import { PackTuneCreateInput, PromptCreateInput, ResourceId, TuneCreateInput } from './api/schemas';
import { DEFAULT_TASK_QUEUE } from './config';
import { MAX_PROMPTS_PER_RUN } from './workflows/failures';
import { resolveOptions } from './workflows/options';
import type {
  GenerateInput,
  GenerateResult,
  PackTuneInput,
  PackTuneResult,
  TrainThenGenerateInput,
  TrainThenGenerateResult,
  TuneflowOptions,
} from './workflows/inputs';
import { progressQuery, type Progress } from './workflows/messages';

/** The workflow type names: the public contract. */
export const WorkflowName = {
  trainThenGenerate: 'trainThenGenerate',
  generate: 'generate',
  packTune: 'packTune',
} as const;
export type WorkflowName = (typeof WorkflowName)[keyof typeof WorkflowName];

export interface TuneflowClientOptions {
  /** A connected Temporal client. */
  client: Client;
  /**
   * The task queue the tuneflow worker polls.
   * @default 'tuneflow'
   */
  taskQueue?: string;
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

const businessKey = z
  .string({ error: 'must be a string' })
  .min(1, { error: 'must be a non-empty business key' })
  .max(1000, { error: 'must be at most 1000 characters' });

/** Paths and URLs only: image bytes never enter a workflow's history. */
const pathsOnly = z.array(z.string({ error: 'must be a path the worker can read (bytes never enter history)' }));

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
    this.client = options.client;
    this.taskQueue = options.taskQueue ?? DEFAULT_TASK_QUEUE;
  }

  /** Trains a tune, then generates the prompts with it. `key` is the job's business key (the workflow ID). */
  async trainThenGenerate(
    key: string,
    input: TrainThenGenerateInput,
  ): Promise<TuneflowHandle<TrainThenGenerateResult>> {
    const workflowId = parseInput(businessKey, 'workflowId', key);
    validateTrainThenGenerate(workflowId, input);
    return this.start(WorkflowName.trainThenGenerate, workflowId, input);
  }

  /** Generates prompts on an existing tune. */
  async generate(key: string, input: GenerateInput): Promise<TuneflowHandle<GenerateResult>> {
    const workflowId = parseInput(businessKey, 'workflowId', key);
    validateGenerate(input);
    return this.start(WorkflowName.generate, workflowId, input);
  }

  /** Creates a tune from a pack (spec 4.9) and waits for its prompts. */
  async packTune(key: string, input: PackTuneInput): Promise<TuneflowHandle<PackTuneResult>> {
    const workflowId = parseInput(businessKey, 'workflowId', key);
    validatePackTune(workflowId, input);
    return this.start(WorkflowName.packTune, workflowId, input);
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
        // A second start of a running job attaches to it; a closed job is not run again (use a new key).
        workflowIdConflictPolicy: 'USE_EXISTING',
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
      });
      return toTuneflowHandle<R>(handle, true);
    } catch (err) {
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

// ---------------------------------------------------------------------------------------------------------------
// Validation with the service's rules, before anything is started (exported for the command line)

export function validateTrainThenGenerate(workflowId: string, input: TrainThenGenerateInput): void {
  requireObject(input, 'input');
  parseInput(TuneCreateInput, 'tune', {
    title: workflowId,
    ...input.tune,
    images: paths(input.tune?.images, 'tune.images'),
  });
  validatePrompts(input.prompts, true);
  validateOptions(input.options);
}

export function validateGenerate(input: GenerateInput): void {
  requireObject(input, 'input');
  parseInput(ResourceId, 'tuneId', input.tuneId);
  validatePrompts(input.prompts, false);
  validateOptions(input.options);
}

export function validatePackTune(workflowId: string, input: PackTuneInput): void {
  requireObject(input, 'input');
  parseInput(ResourceId, 'packId', input.packId);
  const tune = input.tune ?? {};
  const withTitle = tune.tune_ids === undefined ? { title: workflowId, ...tune } : tune;
  parseInput(PackTuneCreateInput, 'tune', { ...withTitle, images: paths(tune.images, 'tune.images') });
  validateOptions(input.options);
}

/** The workflows' own option rules (defaults, durations, the poll bound), checked before starting. */
export function validateOptions(options: TuneflowOptions | undefined): void {
  try {
    resolveOptions(options);
  } catch (err) {
    const details = (err as ApplicationFailure).details?.[0] as { option?: string; rule?: string } | undefined;
    if (!details?.option) throw err;
    throw new InvalidInputError('input', [{ field: `options.${details.option}`, rule: details.rule ?? 'is invalid' }]);
  }
}

function validatePrompts(prompts: unknown, allowEmpty: boolean): void {
  if (!Array.isArray(prompts) || (!allowEmpty && prompts.length === 0))
    throw new InvalidInputError('input', [
      { field: 'prompts', rule: `must be a${allowEmpty ? 'n' : ' non-empty'} array of prompts` },
    ]);
  if (prompts.length > MAX_PROMPTS_PER_RUN)
    throw new InvalidInputError('input', [
      { field: 'prompts', rule: `must hold at most ${MAX_PROMPTS_PER_RUN} prompts (one list page); start more runs` },
    ]);
  prompts.forEach((prompt, i) => parseInput(PromptCreateInput, `prompts[${i}]`, prompt));
}

function paths(images: unknown, field: string): string[] | undefined {
  return images === undefined ? undefined : parseInput(pathsOnly, field, images);
}

function requireObject(value: unknown, subject: string): void {
  if (!value || typeof value !== 'object' || Array.isArray(value))
    throw new InvalidInputError(subject, [{ field: subject, rule: 'must be an object' }]);
}
