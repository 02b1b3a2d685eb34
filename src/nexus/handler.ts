/**
 * The handlers of the tuneflow Nexus service (src/nexus/index.ts), on tuneflow's worker: each operation checks its
 * input with the job's input contract, then starts the workflow of its name as the operation's backing run, the
 * business key its workflow ID. Worker-side code: the Temporal client of the Nexus task, never the workflow sandbox.
 */
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure, WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { startWorkflow, WorkflowRunOperationHandler, getClient } from '@temporalio/nexus';
import * as nexus from 'nexus-rpc';
import { InvalidInputError } from '../api/errors';
import { businessKey, checkGenerate, checkPackTune, checkTrainThenGenerate } from '../contract/check';
import { WorkflowName } from '../contract/messages';
import { FailureType } from '../contract/failures';
import { tuneflowService, type BusinessKey, type InvalidInputDetails } from './index';

/** Checks a workflow's input (the contract's check for that workflow); throws InvalidInputError. */
type InputCheck = (workflowId: string, input: unknown) => void;

/**
 * One operation: refuses bad input synchronously, as a bad request naming the field, before anything is created;
 * attaches a second call of the same key to the run that exists; cancels the run when the caller cancels.
 */
class JobOperation<I extends BusinessKey, O> implements nexus.OperationHandler<I, O> {
  readonly #run: WorkflowRunOperationHandler<I, O>;

  constructor(
    private readonly workflow: WorkflowName,
    private readonly check: InputCheck,
  ) {
    this.#run = new WorkflowRunOperationHandler<I, O>((ctx, input) => {
      const { key, ...job } = input;
      return startWorkflow(ctx, this.workflow, {
        workflowId: key,
        args: [job],
        // A running job of this key gets the caller's completion callback (every caller of the key is answered when
        // it ends); a closed one is refused here and answered with its outcome below. Never a second run of a key.
        workflowIdConflictPolicy: 'USE_EXISTING',
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
      });
    });
  }

  async start(ctx: nexus.StartOperationContext, input: I): Promise<nexus.HandlerStartOperationResult<O>> {
    const key = this.refuseInvalid(input);
    try {
      return await this.#run.start(ctx, input);
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      return nexus.HandlerStartOperationResult.sync(await this.closedOutcome(key));
    }
  }

  cancel(ctx: nexus.CancelOperationContext, token: string): Promise<void> {
    // Cancels the run by its workflow ID, as a direct cancel does: cleanupOnCancel decides what is deleted.
    return this.#run.cancel(ctx, token);
  }

  /** The business key, once the whole input meets the contract; a BAD_REQUEST handler error naming the field if not. */
  private refuseInvalid(input: unknown): string {
    try {
      if (typeof input !== 'object' || input === null || Array.isArray(input))
        throw new InvalidInputError('input', [{ field: 'input', rule: 'must be an object' }]);
      const { key, ...job } = input as Record<string, unknown>;
      const workflowId = businessKey.safeParse(key);
      const keyIssues = workflowId.success ? [] : InvalidInputError.fromZod('key', workflowId.error).issues;
      try {
        // A new tune's title defaults to the key: a bad key is reported once, as the key, not again as the title.
        this.check(workflowId.success ? workflowId.data : 'key', job);
      } catch (err) {
        if (err instanceof InvalidInputError) throw new InvalidInputError('input', [...keyIssues, ...err.issues]);
        throw err;
      }
      if (!workflowId.success) throw new InvalidInputError('input', keyIssues);
      return workflowId.data;
    } catch (err) {
      if (!(err instanceof InvalidInputError)) throw err;
      const [first] = err.issues;
      const details: InvalidInputDetails = { field: first?.field, rule: first?.rule, issues: [...err.issues] };
      // The cause is the InvalidInput failure a run would have failed with: callers read it the same way.
      const cause = ApplicationFailure.nonRetryable(err.message, FailureType.invalidInput, details);
      throw new nexus.HandlerError('BAD_REQUEST', err.message, { cause });
    }
  }

  /**
   * The outcome of the closed run of `key`: its result, or its failure as the operation's. A closed job is not run
   * again, and its result stands for every later call of the key.
   */
  private async closedOutcome(key: string): Promise<O> {
    const handle = getClient().workflow.getHandle(key);
    const { type } = await handle.describe();
    if (type !== this.workflow)
      throw new nexus.HandlerError(
        'BAD_REQUEST',
        `Invalid input: key: ${key} is the key of a ${type} job, not a ${this.workflow} one; use a new key`,
      );
    try {
      return (await handle.result()) as O;
    } catch (err) {
      if (!(err instanceof WorkflowFailedError)) throw err;
      const cause = err.cause ?? new Error(err.message);
      throw new nexus.OperationError(cause instanceof CancelledFailure ? 'canceled' : 'failed', err.message, { cause });
    }
  }
}

/**
 * The tuneflow Nexus service's handlers, for a worker's `nexusServices` (TuneflowPlugin registers them). The runs
 * start on the task queue the Nexus request came on: the endpoint's target, where tuneflow's worker polls.
 *
 * @example
 * await Worker.create({ connection, namespace: 'images', taskQueue: 'tuneflow', nexusServices: [tuneflowServiceHandler()] });
 */
export function tuneflowServiceHandler(): nexus.ServiceHandler<(typeof tuneflowService)['operations']> {
  return nexus.serviceHandler(tuneflowService, {
    trainThenGenerate: new JobOperation(WorkflowName.trainThenGenerate, checkTrainThenGenerate),
    generate: new JobOperation(WorkflowName.generate, (_workflowId, input) => checkGenerate(input)),
    packTune: new JobOperation(WorkflowName.packTune, checkPackTune),
  });
}
