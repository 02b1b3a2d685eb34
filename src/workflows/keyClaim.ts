/**
 * `keyClaim`: the mark a run leaves on its workflow ID before it creates anything (src/contract/keys.ts,
 * claimWorkflowId). Started as a child with "reject duplicate", it ends at once; while Temporal keeps it (the
 * namespace's retention), a later run under the same ID cannot start it again, and so learns the key had its job.
 */
import { workflowInfo } from '@temporalio/workflow';
import { InvalidInputError } from '../api/errors';
import { invalidInput } from '../contract/failures';
import { claimWorkflowId } from '../contract/keys';

export async function keyClaim(): Promise<void> {
  // Being started by the run of the key it names is the claim; started any other way (a raw start squatting a key), it
  // is no claim and ends at once, failed: the job of the key then fails fast, ClaimHeld, instead of waiting.
  const { workflowId, parent } = workflowInfo();
  if (!parent || claimWorkflowId(parent.workflowId) !== workflowId)
    throw invalidInput(
      new InvalidInputError('input', [
        {
          field: 'workflowId',
          rule: `${JSON.stringify(workflowId)} is a key's claim, which only the key's own run starts (as its child)`,
        },
      ]),
    );
}
