/**
 * The handlers of the tuneflow Nexus service (src/nexus/index.ts), on tuneflow's worker: each operation checks its
 * input with the job's input contract, then starts the workflow of its name as the operation's backing run, the
 * business key its workflow ID. Worker-side code: the Temporal client of the Nexus task, never the workflow sandbox.
 */
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure, WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { getClient, operationInfo, startWorkflow, WorkflowRunOperationHandler } from '@temporalio/nexus';
import * as nexus from 'nexus-rpc';
import { InvalidInputError } from '../api/errors';
import { businessKey } from '../contract/check';
import { JOBS, type WorkflowName } from '../contract/jobs';
import { FailureType } from '../contract/failures';
import { KeyInUseError, otherJob, type KeyInUseDetails } from '../contract/keys';
import { DEFAULT_TENANT, jobOfWorkflowId, TENANT_MEMO, tenantWorkflowId } from '../contract/tenants';
import { jobUnderKey, type JobUnderKey } from '../job-under-key';
import { startPriority, type Tenants } from '../tenants';
import { tuneflowService, type BusinessKey, type InvalidInputDetails } from './index';

/**
 * One operation: refuses bad input synchronously, as a bad request naming the field, before anything is created;
 * runs the caller's key as the tenant the operator mapped its endpoint to (nothing the caller sends, links and
 * headers included, changes it); attaches a second call of the same key and input to the run that exists, refuses one
 * with other input; cancels the run when the caller cancels.
 */
class JobOperation<I extends BusinessKey, O> implements nexus.OperationHandler<I, O> {
  /** Starts a new run, refused when the key has one (running, or closed). */
  readonly #start: WorkflowRunOperationHandler<I, O>;
  /** Attaches the caller's completion callback to the running run of the key. */
  readonly #attach: WorkflowRunOperationHandler<I, O>;

  constructor(
    private readonly workflow: WorkflowName,
    private readonly tenants: Tenants,
  ) {
    // `key` here is the tenant's workflow ID (start below); the memo tells the run its tenant's starter made the ID.
    const run = (conflict: 'FAIL' | 'USE_EXISTING') =>
      new WorkflowRunOperationHandler<I, O>((ctx, input) => {
        const { key, ...job } = input;
        const tenant = this.tenantOf();
        return startWorkflow(ctx, this.workflow, {
          workflowId: key,
          args: [job],
          workflowIdConflictPolicy: conflict,
          workflowIdReusePolicy: 'REJECT_DUPLICATE',
          priority: startPriority(tenant),
          ...(tenant !== DEFAULT_TENANT && { memo: { [TENANT_MEMO]: tenant } }),
        });
      });
    this.#start = run('FAIL');
    this.#attach = run('USE_EXISTING');
  }

  async start(ctx: nexus.StartOperationContext, input: I): Promise<nexus.HandlerStartOperationResult<O>> {
    const tenant = this.tenantOf();
    const key = this.refuseInvalid(input);
    const workflowId = tenantWorkflowId(tenant, key);
    const scoped = { ...input, key: workflowId };
    try {
      return await this.#start.start(ctx, scoped);
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
    // The key has a job: this one (attach, or its outcome), or another (refused, naming what differs).
    const holder = await jobUnderKey(getClient(), workflowId);
    if (holder) refuseOtherJob(key, holder, this.workflow, omitKey(input));
    try {
      if (holder?.running) return await this.#attach.start(ctx, scoped);
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
    return nexus.HandlerStartOperationResult.sync(await this.closedOutcome(workflowId));
  }

  cancel(ctx: nexus.CancelOperationContext, token: string): Promise<void> {
    // The token names a workflow ID, unsigned: only a run of the endpoint's own tenant is cancelled through it. Then
    // as a direct cancel does: cleanupOnCancel decides what is deleted.
    const tenant = this.tenantOf();
    const workflowId = workflowIdOfToken(token);
    if (!workflowId || jobOfWorkflowId(workflowId)?.tenant !== tenant)
      throw new nexus.HandlerError('UNAUTHORIZED', `the operation is no job of tenant ${JSON.stringify(tenant)}`);
    return this.#start.cancel(ctx, token);
  }

  /** The tenant of the endpoint the request came through; one the operator mapped to no tenant is refused. */
  private tenantOf(): string {
    const { endpoint } = operationInfo();
    const tenant = this.tenants.ofEndpoint(endpoint);
    if (tenant === undefined)
      throw new nexus.HandlerError(
        'UNAUTHORIZED',
        endpoint
          ? `the endpoint ${JSON.stringify(endpoint)} is no tenant's: the operator maps each endpoint to a tenant (TUNEFLOW_TENANT_ENDPOINTS)`
          : 'this server does not say which endpoint the request came through (servers before 1.30), and the operator set no tenant for that (TUNEFLOW_TENANT_FALLBACK)',
      );
    return tenant;
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
        // The key stands in for a new tune's title in the check: a bad key is reported once, as the key, not as a title.
        JOBS[this.workflow].check(workflowId.success ? workflowId.data : 'key', job);
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
  private async closedOutcome(workflowId: string): Promise<O> {
    const handle = getClient().workflow.getHandle(workflowId);
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
 * const tenants = new Tenants({ endpoints: { 'tuneflow-shop': 'shop' } });
 * await Worker.create({ connection, namespace: 'images', taskQueue: 'tuneflow', nexusServices: [tuneflowServiceHandler(tenants)] });
 */
export function tuneflowServiceHandler(tenants: Tenants): nexus.ServiceHandler<(typeof tuneflowService)['operations']> {
  return nexus.serviceHandler(tuneflowService, {
    trainThenGenerate: new JobOperation('trainThenGenerate', tenants),
    generate: new JobOperation('generate', tenants),
    packTune: new JobOperation('packTune', tenants),
  });
}

/** The workflow ID a workflow-run operation token names (base64url JSON, `wid`); undefined for another token. */
function workflowIdOfToken(token: string): string | undefined {
  try {
    const { wid } = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as { wid?: unknown };
    return typeof wid === 'string' ? wid : undefined;
  } catch {
    return undefined;
  }
}

function omitKey(input: object): unknown {
  const { key: _key, ...job } = input as Record<string, unknown>;
  return job;
}

/** A key held by another job (another workflow, or other input) refuses the call: a bad request naming the key. */
function refuseOtherJob(key: string, holder: JobUnderKey, workflow: WorkflowName, job: unknown): void {
  const other = otherJob(workflow, job, holder);
  if (!other) return;
  const err = new KeyInUseError(key, { workflow: other.workflow, runId: holder.runId }, other.fields);
  const details: KeyInUseDetails = { key, ...other };
  const cause = ApplicationFailure.nonRetryable(err.message, FailureType.keyInUse, details);
  throw new nexus.HandlerError('BAD_REQUEST', err.message, { cause });
}
