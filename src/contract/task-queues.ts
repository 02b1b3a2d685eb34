/**
 * Where a job's activities run. The calls that reach the service run on the job's own task queue, whose activity rate
 * the server holds at the service's (src/task-queue-limits.ts); the others (the key's earlier job, the upload
 * directory's check, the tenant's spend ledger, the copies of images to storage) run on a bookkeeping queue beside it,
 * which every worker with the plugin polls too, so they never take a share of the service's rate. Sandbox-safe: the
 * workflows and the plugin both read it.
 */

/** What names a job queue's bookkeeping queue: `tuneflow` keeps its books on `tuneflow.bookkeeping`. */
export const BOOKKEEPING_SUFFIX = '.bookkeeping';

/**
 * The job's activities that never reach the service: they run on the bookkeeping queue. The workflows schedule them
 * there (src/workflows/activity-calls.ts), the plugin's bookkeeper polls for them. The ledger's read of its ceiling,
 * which the reservations wait on, stays on the jobs' queue (src/workflows/spendLedger.ts).
 */
export const BOOKKEEPING_ACTIVITIES = [
  'priorJob',
  'checkUploads',
  'reserveSpend',
  'commitSpend',
  'releaseSpend',
  'storeImages',
] as const;
export type BookkeepingActivity = (typeof BOOKKEEPING_ACTIVITIES)[number];

/**
 * The bookkeeping queue of the jobs on `taskQueue`.
 *
 * @example
 * bookkeepingQueueOf('tuneflow'); // 'tuneflow.bookkeeping'
 */
export function bookkeepingQueueOf(taskQueue: string): string {
  return taskQueue.endsWith(BOOKKEEPING_SUFFIX) ? taskQueue : `${taskQueue}${BOOKKEEPING_SUFFIX}`;
}

/**
 * The jobs' queue of `taskQueue`, a bookkeeping queue or the jobs' own: where a job's ledger workflow runs, whichever
 * queue the activity that starts it was taken from (a worker of an earlier release schedules it on the jobs' queue).
 *
 * @example
 * jobQueueOf('tuneflow.bookkeeping'); // 'tuneflow'
 */
export function jobQueueOf(taskQueue: string): string {
  return taskQueue.endsWith(BOOKKEEPING_SUFFIX) ? taskQueue.slice(0, -BOOKKEEPING_SUFFIX.length) : taskQueue;
}
