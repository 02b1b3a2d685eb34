/**
 * The activities as workflow code calls them, one proxy per retry policy (src/workflows/policies.ts), made once per run
 * (at its first call) for every step of a job.
 *
 * Every activity carries the run's tenant as its fairness key, so the server's matching shares the task queue (and its
 * rate limit) between tenants in proportion to their weights: one tenant's flood delays another's jobs by little.
 * The key is set explicitly, never inherited (a priority a starter set on the workflow would be otherwise), and the
 * weight is 1: the operator weighs tenants on the server (`tuneflow queue-limits --weight shop=2`), whose overrides win
 * over a task's weight. Eager dispatch is off: an activity handed to the worker with the workflow task skips the
 * server's matching, its rate limit and its fairness.
 *
 * The activities that never reach the service (the key's earlier job, the upload directory's check, the tenant's
 * ledger, the copies of images to storage) run on the bookkeeping queue beside the run's own
 * (src/contract/task-queues.ts), which every worker with the plugin polls: the server's rate limit on the run's queue
 * counts only the calls that reach the service.
 *
 * No patch: the priority, eager dispatch and task queue are options of the ScheduleActivityTask command, and replay
 * compares commands by type and activity type, not by options, so every recorded history replays
 * (test/replay.test.ts).
 */
import { proxyActivities, workflowInfo, type ActivityOptions } from '@temporalio/workflow';
import type { TuneflowActivities } from '../activities';
import { DEFAULT_TENANT, jobOfWorkflowId } from '../contract/tenants';
import { bookkeepingQueueOf } from '../contract/task-queues';
import {
  ledgerActivityOptions,
  pollActivityOptions,
  serviceActivityOptions,
  storageActivityOptions,
  temporalReadOptions,
  uploadCheckOptions,
} from './policies';

/** The weight every activity carries; the server's overrides per tenant win over it. */
export const FAIRNESS_WEIGHT = 1;

const POLICIES = {
  service: serviceActivityOptions,
  polls: pollActivityOptions,
  temporal: temporalReadOptions,
  uploads: uploadCheckOptions,
  ledger: ledgerActivityOptions,
  storage: storageActivityOptions,
} as const;
type Policy = keyof typeof POLICIES;
/** The policies of the activities that never reach the service: they run on the bookkeeping queue. */
const BOOKKEEPING: ReadonlySet<Policy> = new Set(['temporal', 'uploads', 'ledger', 'storage']);
type Calls = ReturnType<typeof proxyActivities<TuneflowActivities>>;

/** The run the proxies were made for, and the proxies: one slot, so a context shared by runs never mixes tenants. */
let made: { runId: string; calls: Record<Policy, Calls> } | undefined;

/** The tenant's share of the queue: its fairness key, weight 1, through the server's matching. */
export function fairShare(workflowId: string): Pick<ActivityOptions, 'priority' | 'allowEagerDispatch'> {
  // A run under an ID that is no job's ends at admission before any activity; its key is the default tenant's.
  const tenant = jobOfWorkflowId(workflowId)?.tenant ?? DEFAULT_TENANT;
  return { priority: { fairnessKey: tenant, fairnessWeight: FAIRNESS_WEIGHT }, allowEagerDispatch: false };
}

function callsOfThisRun(policy: Policy): Calls {
  const { runId, workflowId, taskQueue } = workflowInfo();
  if (made?.runId !== runId) {
    const share = fairShare(workflowId);
    const books = bookkeepingQueueOf(taskQueue);
    const proxy = (of: Policy) =>
      proxyActivities<TuneflowActivities>({
        ...POLICIES[of],
        ...share,
        ...(BOOKKEEPING.has(of) && { taskQueue: books }),
      });
    made = {
      runId,
      calls: {
        service: proxy('service'),
        polls: proxy('polls'),
        temporal: proxy('temporal'),
        uploads: proxy('uploads'),
        ledger: proxy('ledger'),
        storage: proxy('storage'),
      },
    };
  }
  return made.calls[policy];
}

/** The run's proxy for `policy`, made at its first use (workflowInfo() exists only inside a run). */
function perRun(policy: Policy): Calls {
  return new Proxy({} as Calls, {
    get: (_, activity) => callsOfThisRun(policy)[activity as keyof Calls],
  });
}

/** Creates, deletes and the reads a workflow cannot go on without: the service's full retry policy. */
export const service = perRun('service');
/** Polls: a few attempts; a poll that still fails is counted and the wait goes on. */
export const polls = perRun('polls');
/** Reads of Temporal (the earlier run of a claimed key). */
export const temporal = perRun('temporal');
/** The upload directory's check, before anything is created (runs whose input names files). */
export const uploads = perRun('uploads');
/** The tenant's spend ledger (runs of a tenant with a budget). */
export const ledger = perRun('ledger');
/** Copies of a job's images to the owner's storage (runs whose worker has storage). */
export const storage = perRun('storage');
