/**
 * What a run checks before it creates anything: its input (the contract, with the bounds), its key (one job a key,
 * whoever starts it), and the files its input names (inside the worker's upload directory).
 */
import { ActivityFailure, ApplicationFailure, startChild, workflowInfo } from '@temporalio/workflow';
import { patchedOrFolded } from './patches';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { InvalidInputError, type InputIssue } from '../api/errors';
import type { CheckedInput, CheckOptions } from '../contract/check';
import { uploadPathsOf } from '../contract/bounds';
import { claimWorkflowId, RESERVED_KEY_PREFIX } from '../contract/keys';
import { workflowIdProblem } from '../contract/tenants';
import { claimHeld, FailureType, invalidInput, jobEnded, keyInUse, requireValidInput } from '../contract/failures';
import type { ResolvedOptions } from '../contract/options';
import { temporal, uploads } from './activity-calls';

/**
 * Runs with this marker are held to the input bounds (src/contract/bounds.ts: lengths and counts, file paths inside
 * the upload directory, refused attributes). Decided only where a bound refuses an input the first releases took: a
 * run started before with such an input goes on as it started.
 */
export const INPUT_BOUNDED = 'input-bounded';

/**
 * Runs with this marker claim their workflow ID (a `keyClaim` child, "reject duplicate") before they create anything;
 * a run that finds it claimed creates nothing and ends with the earlier job's outcome. Runs started before it created
 * at once.
 */
export const KEY_CLAIMED = 'key-claimed';

/** True for runs that claim their key (see KEY_CLAIMED); false when replaying a run started before. */
export const claimsKey = (): boolean => patchedOrFolded(KEY_CLAIMED);

/**
 * Runs with this marker check the file paths of their input against the worker's upload directory (an activity) before
 * anything is created; only runs whose input names files. Runs started before it read them when they sent them.
 */
export const UPLOADS_CHECKED = 'uploads-checked';

/**
 * Runs with this marker were refused for their workflow ID: a `tuneflow:` ID that no tuneflow starter made (a claim's,
 * or a tenant's without its starter's memo). Asked only for such an ID: runs started before it went on under it.
 */
export const WORKFLOW_ID_OWNED = 'workflow-id-owned';

/**
 * Refuses a run under a workflow ID it does not own (InvalidInput naming `workflowId`, nothing created): IDs that
 * start with `tuneflow:` are made by tuneflow's starters alone (src/contract/tenants.ts, workflowIdProblem).
 */
export function requireOwnWorkflowId(): void {
  const { workflowId, memo } = workflowInfo();
  if (!workflowId.startsWith(RESERVED_KEY_PREFIX)) return;
  const problem = workflowIdProblem(workflowId, memo);
  if (problem && patchedOrFolded(WORKFLOW_ID_OWNED))
    throw invalidInput(new InvalidInputError('input', [{ field: 'workflowId', rule: problem }]));
}

/**
 * The run's options, resolved once from the whole input checked by the contract: a bad option fails InvalidOptions, as
 * documented; the rest InvalidInput. Before any call to the service.
 */
export function checkedOptions(checkInput: (options: CheckOptions) => CheckedInput<unknown>): ResolvedOptions {
  return requireValidInput(() => optionsFirst(() => bounded(checkInput))).options;
}

/**
 * Claims the run's workflow ID before anything is created. A run that finds it claimed (its key's job ran before:
 * a raw start with "allow duplicate" after it closed, a terminate-and-restart, a workflow retry) creates nothing:
 * it ends with that job's outcome when it was the same job (its result, or its failure), fails KeyInUse when it
 * had other input, and JobEnded when it closed without a result.
 */
export async function claimKey(input: unknown): Promise<{ result: unknown } | undefined> {
  const { workflowId, workflowType } = workflowInfo();
  try {
    await startChild('keyClaim', {
      workflowId: claimWorkflowId(workflowId),
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      parentClosePolicy: 'ABANDON',
      staticSummary: 'claim the key: a key runs one job',
    });
    return undefined;
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
  const prior = await temporal.priorJob.executeWithOptions({ summary: 'read the earlier job of this key' }, [
    { workflowId, workflow: workflowType, input },
  ]);
  switch (prior.verdict) {
    case 'claim-held':
      throw claimHeld({ key: workflowId, claimRunId: prior.claimRunId });
    case 'completed':
      return { result: prior.result };
    case 'other-job':
      throw keyInUse({ key: workflowId, workflow: prior.workflow, runId: prior.runId, fields: prior.fields });
    case 'failed':
      throw ApplicationFailure.create({
        ...prior.failure,
        type: prior.failure.type ?? undefined,
        message: `The job of this key ran before (run ${prior.runId}) and failed: ${prior.failure.message}`,
      });
    case 'ended':
      throw jobEnded({ key: workflowId, runId: prior.runId, status: prior.status });
  }
}

/** The input's file paths against the worker's upload directory, before anything is created. */
export async function checkUploads(input: unknown): Promise<void> {
  const paths = uploadPathsOf(input);
  if (!paths.length || !patchedOrFolded(UPLOADS_CHECKED)) return;
  try {
    await uploads.checkUploads.executeWithOptions({ summary: 'check the file paths against the upload directory' }, [
      { paths },
    ]);
  } catch (err) {
    throw refusedInput(err);
  }
}

/**
 * An activity's refusal of the input (InvalidInput: a path outside the upload directory, a tune that is not the
 * tenant's) as the run's own InvalidInput failure, as for any input the contract refuses (its details name the first
 * field, and every one); any other error as it is.
 *
 * @example
 * await service.retrieveTune(...).catch((err) => { throw refusedInput(err); });
 */
export function refusedInput(err: unknown): unknown {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (!(cause instanceof ApplicationFailure) || cause.type !== FailureType.invalidInput) return err;
  const { issues } = (cause.details?.[0] ?? {}) as { issues?: InputIssue[] };
  return invalidInput(new InvalidInputError('input', issues ?? [{ field: 'input', rule: cause.message }]));
}

/**
 * The contract with its bounds; an input that only a bound refuses is taken as it was by a run started before the
 * bounds (no INPUT_BOUNDED marker), so its history replays.
 */
function bounded(check: (options: CheckOptions) => CheckedInput<unknown>): CheckedInput<unknown> {
  try {
    return check({ bounds: true });
  } catch (err) {
    if (!(err instanceof InvalidInputError) || err.cause !== undefined) throw err;
    let unbounded: CheckedInput<unknown>;
    try {
      unbounded = check({ bounds: false });
    } catch {
      throw err;
    }
    if (patchedOrFolded(INPUT_BOUNDED)) throw err;
    return unbounded;
  }
}

/** A bad option fails the run InvalidOptions whatever else is wrong, as documented: the check's cause, thrown first. */
function optionsFirst<T>(check: () => T): T {
  try {
    return check();
  } catch (err) {
    if (err instanceof InvalidInputError && err.cause instanceof ApplicationFailure) throw err.cause;
    throw err;
  }
}
