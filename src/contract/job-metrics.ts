/**
 * The metrics a job's run emits itself, through the workflow's metric meter (src/workflows/job-metrics.ts): their
 * names, labels and buckets. Shared by the workflows, the worker's Runtime (the buckets) and src/metrics.ts, which
 * lists them with the rest.
 */

export const JobMetricName = {
  /** Jobs that ended, by `outcome` (JobOutcome) and `failure_type`; the SDK adds `workflowType`. */
  jobs: 'tuneflow_jobs_total',
  /** A job's run from its start event to its end, in seconds, by `outcome`. */
  jobDuration: 'tuneflow_job_duration_seconds',
  /** The time a job spent in each phase it left, in seconds, by `phase` (Phase: `training`, `generating`, ...). */
  phaseDuration: 'tuneflow_job_phase_duration_seconds',
  /** Polls a job made (reads because no callback came; reads a callback asked for are not), by `outcome`. */
  jobPolls: 'tuneflow_job_polls',
  /**
   * Callbacks that came after a poll had found every object they name done, by `kind` (tune, prompt, pack-prompts).
   * With polls per job, how an operator sees callbacks that are slow or lost. One for a run already closed is the
   * receiver's `closed_run`; one for an object done at its create (a FaceID) or by an earlier callback's read is not.
   */
  lateCallbacks: 'tuneflow_callbacks_late_total',
} as const;

/**
 * What the service charged, in millicents, by `tenant`: counted by the create activities from their answers
 * (`cost_mc`), and by a job's run at its end for what its cost holds beyond those (a pack's tune and prompts, whose
 * answers name no price). Both count it under this name, this unit and this description.
 */
export const CHARGED = {
  name: 'tuneflow_charged_millicents_total',
  unit: 'millicents',
  description: 'What the service charged, in millicents',
} as const;

/** A create's answered charge as the counter takes it: a positive number, rounded; else 0 (none named). */
export function answeredChargeMc(costMc: unknown): number {
  return typeof costMc === 'number' && costMc > 0 ? Math.round(costMc) : 0;
}

/** How a job's run ended. */
export const JobOutcome = {
  completed: 'completed',
  failed: 'failed',
  cancelled: 'cancelled',
} as const;
export type JobOutcome = (typeof JobOutcome)[keyof typeof JobOutcome];

/** `failure_type` of the jobs that did not fail. */
export const NO_FAILURE = 'none';

/**
 * Histogram buckets for the Runtime's `histogramBucketOverrides`, in seconds and in polls: the SDK's defaults are not
 * made for jobs that train for minutes to hours, nor for a count of polls.
 */
export const JOB_HISTOGRAM_BUCKETS: Record<string, number[]> = {
  [JobMetricName.jobDuration]: [5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 21600, 43200],
  [JobMetricName.phaseDuration]: [1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 21600],
  [JobMetricName.jobPolls]: [0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89],
};
