/**
 * The service's error policies (spec 7) as Temporal activity options: retries belong to Temporal, not to loops.
 *
 * - 500 and other transient failures back off from 30 seconds, doubling, up to 10 minutes between attempts.
 * - 504 and 429 retry after the delay the activity sets on its failure (`nextRetryDelay`: 60 s, or Retry-After).
 * - 422, 401/403, 404 and a too-deep offset never retry: the same request would fail the same way.
 * - Every attempt fits the service's 30 s request limit plus the client's margin, and attempts are bounded, so a
 *   service that stays down ends the activity with the last typed failure instead of retrying forever.
 */
import { ActivityFailure, ApplicationFailure, isCancellation } from '@temporalio/workflow';
import type { ActivityOptions, LocalActivityOptions, RetryPolicy } from '@temporalio/workflow';
import { isNonRetryableKind, NON_RETRYABLE_KINDS } from '../api/error-kinds';

/**
 * The service's retry policy: 30 s, 1, 2, 4, 8 minutes, then every 10 minutes; eight attempts span about 35 minutes
 * of waiting, long enough to ride out an outage, short enough that a dead service fails the job with a typed cause.
 */
export const serviceRetryPolicy: RetryPolicy = {
  initialInterval: '30 seconds',
  backoffCoefficient: 2,
  maximumInterval: '10 minutes',
  maximumAttempts: 8,
  nonRetryableErrorTypes: [...NON_RETRYABLE_KINDS],
};

/**
 * One attempt's limit. The client gives up on a request after 35 s (the service answers 504 at 30 s); a retried create
 * first reads a page or two to find what an earlier attempt made, and a list may span pages.
 */
const ATTEMPT_TIMEOUT = '2 minutes';

/**
 * The activities heartbeat every few seconds while a call is under way (src/activities), so an attempt whose worker
 * died (SIGKILL, a lost host) is retried after this, not after the whole 2-minute attempt timeout. Calls that answer
 * within it never heartbeat at all.
 */
export const HEARTBEAT_TIMEOUT = '10 seconds';

/** Creates and deletes: what changes the service. Retried under the full policy. */
export const serviceActivityOptions: ActivityOptions = {
  startToCloseTimeout: ATTEMPT_TIMEOUT,
  heartbeatTimeout: HEARTBEAT_TIMEOUT,
  retry: serviceRetryPolicy,
};

/**
 * Retrieves and lists used as polls. Polls are the safety net under callbacks: three attempts (30 s, then 60 s apart),
 * after which the workflow counts the poll as failed and waits for the next callback or poll; its deadline still
 * bounds the wait.
 */
export const pollActivityOptions: ActivityOptions = {
  startToCloseTimeout: ATTEMPT_TIMEOUT,
  heartbeatTimeout: HEARTBEAT_TIMEOUT,
  retry: { ...serviceRetryPolicy, maximumAttempts: 3 },
};

/**
 * True when an activity failed for a reason that may heal (its retries ran out on a 500, a timeout, a lost
 * connection): a poll that failed so is worth trying again later. Cancellation and non-retryable failures are not.
 *
 * @example
 * isTransientFailure(new ActivityFailure(..., ApplicationFailure.retryable('500', 'ServerError'))); // true
 */
export function isTransientFailure(err: unknown): boolean {
  if (!(err instanceof ActivityFailure) || isCancellation(err)) return false;
  const cause = err.cause;
  if (cause instanceof ApplicationFailure) return !cause.nonRetryable && !isNonRetryableKind(cause.type);
  return true;
}

/**
 * Reads of Temporal itself (the earlier run of a claimed key): retried as any call to a server that may be busy, a
 * bounded number of times; they never reach the service.
 */
export const temporalReadOptions: ActivityOptions = {
  startToCloseTimeout: '30 seconds',
  // A bounded read: a run whose earlier job cannot be read fails (about 3 minutes), it never waits without end.
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 10 },
};

/**
 * The namespace's search attributes, asked once at a run's start (a local activity: answered from the worker's memory
 * after the first ask). A server that does not answer counts as without them, so a few quick attempts are enough.
 */
export const searchAttributesCheckOptions: LocalActivityOptions = {
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '1 second', maximumAttempts: 3 },
};

/**
 * The operator's ceiling for a ledger's tenant, read from the worker's configuration, so a ledger never takes its
 * ceiling from whoever sends it an update. Retried until a worker answers. An activity, not a local one: a local
 * activity holds the workflow task open, and one begun beside an update's acceptance timed the task out (10 s) on a
 * worker without a cache (SDK 1.13: "outgoing commands ... activation was only an eviction").
 */
export const ledgerCeilingOptions: ActivityOptions = {
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
};

/**
 * The tenant's ledger (reserve, commit, release: updates of a workflow, never the service). A busy ledger refuses
 * updates past the server's limit in flight (ResourceExhausted): retried, bounded; OverBudget is the ledger's answer.
 */
export const ledgerActivityOptions: ActivityOptions = {
  startToCloseTimeout: '30 seconds',
  retry: {
    initialInterval: '200 milliseconds',
    backoffCoefficient: 1.5,
    maximumInterval: '5 seconds',
    maximumAttempts: 100,
    nonRetryableErrorTypes: ['OverBudget'],
  },
};

/** The upload directory's check: it reads the file system only, on whichever worker takes it. */
export const uploadCheckOptions: ActivityOptions = {
  startToCloseTimeout: '30 seconds',
  retry: { maximumAttempts: 3, nonRetryableErrorTypes: [...NON_RETRYABLE_KINDS] },
};

/**
 * Copies of a prompt's images to the owner's storage: the image host and the store, never the service's API. Retried
 * from 2 s, doubling to a minute between attempts, 12 attempts (about 8 minutes): a storage outage delays the job,
 * and one that lasts fails it ImagesNotStored with what was copied. An image over the size bound, or no image, and a
 * stored object that is another image, never mend: not retried. Heartbeats while it copies, so a killed worker's copy
 * is taken again after the heartbeat timeout.
 */
export const storageActivityOptions: ActivityOptions = {
  startToCloseTimeout: '5 minutes',
  heartbeatTimeout: HEARTBEAT_TIMEOUT,
  retry: {
    initialInterval: '2 seconds',
    backoffCoefficient: 2,
    maximumInterval: '1 minute',
    maximumAttempts: 12,
    nonRetryableErrorTypes: ['ImageNotStorable', 'StoredImageDiffers'],
  },
};
