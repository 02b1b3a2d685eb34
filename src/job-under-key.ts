/**
 * The job a business key holds, read from Temporal: its workflow, its input (the first event of its history, one page
 * of one event) and how it ended. The starters (client.ts, the Nexus handler) compare a start with it, and so does a
 * run that finds its key claimed by an earlier run (the `priorJob` activity). Worker- and client-side code.
 */
import type { Client } from '@temporalio/client';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { decodeFromPayloadsAtIndex } from '@temporalio/common/lib/internal-non-workflow';
import { claimWorkflowId, otherJob } from './contract/keys';

/** The run that holds a key: its workflow, its input, and whether it still runs. */
export interface JobUnderKey {
  workflow: string;
  runId: string;
  input: unknown;
  running: boolean;
}

/**
 * The run of `workflowId` (its latest, or `runId`), or undefined when there is none.
 *
 * @example
 * const holder = await jobUnderKey(client, 'order-1234');
 * if (holder && differingFields(input, holder.input).length) refuse();
 */
export async function jobUnderKey(
  client: Client,
  workflowId: string,
  runId?: string,
): Promise<JobUnderKey | undefined> {
  const { namespace, loadedDataConverter } = client.options;
  let history;
  try {
    history = await client.workflowService.getWorkflowExecutionHistory({
      namespace,
      execution: { workflowId, runId },
      maximumPageSize: 1,
    });
  } catch (err) {
    if ((err as { code?: number }).code === 5) return undefined; // NOT_FOUND
    throw err;
  }
  const started = history.history?.events?.[0]?.workflowExecutionStartedEventAttributes;
  if (!started) return undefined;
  const description = await client.workflow.getHandle(workflowId, runId).describe();
  return {
    workflow: description.type,
    runId: description.runId,
    input: await decodeFromPayloadsAtIndex(loadedDataConverter, 0, started.input?.payloads),
    running: description.status.name === 'RUNNING',
  };
}

/** What a run learns of the earlier run that claimed its key (see claimWorkflowId). */
export type PriorJob =
  | { verdict: 'other-job'; runId: string; workflow: string; fields: string[] }
  | { verdict: 'completed'; runId: string; result: unknown }
  | {
      verdict: 'failed';
      runId: string;
      failure: { type?: string | null; message: string; details?: unknown[]; nonRetryable: boolean };
    }
  | { verdict: 'ended'; runId: string; status: string }
  /** The claim was started by no run of the key (a raw start squatting it): there is no earlier job to read. */
  | { verdict: 'claim-held'; claimRunId: string };

/**
 * The earlier run of `workflowId`, the one that claimed it: whether it was this job (the same workflow and input), and
 * its outcome. That run has closed (a workflow ID has one run open at a time).
 *
 * @example
 * const prior = await priorJob(client, { workflowId, workflow: 'trainThenGenerate', input });
 */
export async function priorJob(
  client: Client,
  { workflowId, workflow, input }: { workflowId: string; workflow: string; input: unknown },
): Promise<PriorJob> {
  const claim = await client.workflow.getHandle(claimWorkflowId(workflowId)).describe();
  const runId = claim.parentExecution?.runId;
  if (!runId || claim.parentExecution?.workflowId !== workflowId)
    return { verdict: 'claim-held', claimRunId: claim.runId };
  const earlier = await jobUnderKey(client, workflowId, runId);
  if (!earlier) throw new Error(`the run ${runId} that claimed ${workflowId} is gone`);
  const other = otherJob(workflow, input, earlier);
  if (other) return { verdict: 'other-job', runId, ...other };
  const handle = client.workflow.getHandle(workflowId, runId, { followRuns: false });
  try {
    return { verdict: 'completed', runId, result: await handle.result() };
  } catch (err) {
    if (!(err instanceof WorkflowFailedError)) throw err;
    let cause: unknown = err.cause;
    while (cause instanceof Error && !(cause instanceof ApplicationFailure)) cause = cause.cause;
    if (cause instanceof ApplicationFailure)
      return {
        verdict: 'failed',
        runId,
        failure: {
          type: cause.type,
          message: cause.message,
          details: cause.details ? [...cause.details] : undefined,
          nonRetryable: true,
        },
      };
    const { status } = await handle.describe();
    return { verdict: 'ended', runId, status: status.name };
  }
}
