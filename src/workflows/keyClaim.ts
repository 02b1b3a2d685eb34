/**
 * `keyClaim`: the mark a run leaves on its workflow ID before it creates anything (src/contract/keys.ts,
 * claimWorkflowId). Started as a child with "reject duplicate", it ends at once; while Temporal keeps it (the
 * namespace's retention), a later run under the same ID cannot start it again, and so learns the key had its job.
 */
export async function keyClaim(): Promise<void> {
  // Nothing to do: being started is the claim.
}
