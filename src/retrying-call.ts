/**
 * A run's call that failed and waits for its next attempt, read from Temporal's description of the run (its pending
 * activities): which call, why it failed, the attempt to come and when. The workflow cannot see its activities'
 * attempts, so its progress query cannot say this; the client (`TuneflowHandle.progress`) and the command line read it
 * from the server, which also shows it in the Web UI's pending-activity panel. Client-side code.
 */
import { optionalTsToDate } from '@temporalio/common/lib/time';

/** A call of the run's that failed and waits for its next attempt: which, why, and when it tries again. */
export interface RetryingCall {
  /** The activity (`createTune`, `listPrompts`, ...). */
  activity: string;
  /** The attempt under way or next (2 after one failure). */
  attempt: number;
  /**
   * The last attempt's failure, as the activity put it: `POST /tunes could not reach the service at
   * http://127.0.0.1:8080: ...`, `POST /tunes was rate limited (429, Retry-After 60 s): ...`, `POST /tunes failed with
   * 500: ...`.
   */
  cause: string;
  /** The failure's type, an ErrorKind (`ConnectionFailure`, `RateLimited`, `ServerError`, ...), when it has one. */
  type?: string;
  /** When the last attempt failed, when Temporal said. */
  failedAt?: Date;
  /**
   * When the next attempt starts, when Temporal said (not while an attempt is under way): after a 429, its Retry-After
   * from `failedAt` (or the retry policy's longer backoff).
   */
  nextAt?: Date;
}

/** The fields of a pending activity (DescribeWorkflowExecution's `pendingActivities`) read here. */
export interface PendingActivity {
  activityType?: { name?: string | null } | null;
  attempt?: number | null;
  lastFailure?: { message?: string | null; applicationFailureInfo?: { type?: string | null } | null } | null;
  lastAttemptCompleteTime?: Parameters<typeof optionalTsToDate>[0];
  nextAttemptScheduleTime?: Parameters<typeof optionalTsToDate>[0];
}

/**
 * The run's activity that is retrying (a failed attempt and another to come), from its description: what a wait
 * waits on when the service is unreachable, refuses, or answers 429, 500 or 504. Undefined when none is.
 * @example const retrying = retryingCall(await handle.describe()); // { activity: 'createTune', attempt: 3, ... }
 */
export function retryingCall(description: {
  raw: { pendingActivities?: PendingActivity[] | null };
}): RetryingCall | undefined {
  for (const pending of description.raw.pendingActivities ?? []) {
    const cause = pending.lastFailure?.message;
    if (!cause) continue;
    const type = pending.lastFailure?.applicationFailureInfo?.type;
    return {
      activity: pending.activityType?.name ?? 'an activity',
      attempt: pending.attempt ?? 2,
      cause,
      ...(type ? { type } : {}),
      failedAt: optionalTsToDate(pending.lastAttemptCompleteTime) ?? undefined,
      nextAt: optionalTsToDate(pending.nextAttemptScheduleTime) ?? undefined,
    };
  }
  return undefined;
}
