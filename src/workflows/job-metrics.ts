/**
 * A job's own metrics (src/contract/job-metrics.ts), through the workflow's metric meter: the SDK emits nothing while a
 * run replays, so a worker that picks a run up after another (a restart, an eviction) counts only what happens from
 * then on, and no command is made: recorded histories replay unchanged. The SDK adds `namespace`, `taskQueue` and
 * `workflowType`. A run that is terminated or times out runs no more workflow code: it is not counted.
 */
import { metricMeter, workflowInfo } from '@temporalio/workflow';
import { CHARGED, JobMetricName, NO_FAILURE, type JobOutcome } from '../contract/job-metrics';
import type { CallbackKind, Phase } from '../contract/messages';
import { now } from './waits';

/** A failure type as a label: the project's types and the errors' names; anything else is `other` (bounded). */
export function failureLabel(type: string): string {
  return /^[A-Za-z][A-Za-z0-9_.]{0,63}$/.test(type) ? type : 'other';
}

const seconds = (fromMs: number) => Math.max(0, now() - fromMs) / 1000;

/** The time spent in `phase`, left now, begun at `sinceMs` (workflow time). */
export function recordPhase(phase: Phase, sinceMs: number): void {
  metricMeter
    .createHistogram(JobMetricName.phaseDuration, 'float', 's', 'Time a job spent in each phase it left, in seconds')
    .record(seconds(sinceMs), { phase });
}

/**
 * A job's end: counted by outcome and failure type, its duration since its start event, its polls; and the charge its
 * cost holds that no create's answer named (`unansweredMc`: a pack's tune and prompts), for `tenant`.
 */
export function recordJobEnd(
  outcome: JobOutcome,
  polls: number,
  charge: { tenant: string; unansweredMc: number },
  failureType?: string,
): void {
  if (charge.unansweredMc > 0)
    metricMeter
      .createCounter(CHARGED.name, CHARGED.unit, CHARGED.description)
      .add(Math.round(charge.unansweredMc), { tenant: charge.tenant });
  const failure_type = failureType === undefined ? NO_FAILURE : failureLabel(failureType);
  metricMeter.createCounter(JobMetricName.jobs, '', 'Jobs that ended, by outcome and failure type').add(1, {
    outcome,
    failure_type,
  });
  metricMeter
    .createHistogram(JobMetricName.jobDuration, 'float', 's', "A job's run from its start to its end, in seconds")
    .record(seconds(workflowInfo().startTime.getTime()), { outcome });
  metricMeter
    .createHistogram(JobMetricName.jobPolls, 'int', '', 'Polls a job made because no callback came')
    .record(polls, { outcome });
}

/** A callback about objects the run already knew were done (a poll found them first). */
export function recordLateCallback(kind: CallbackKind): void {
  metricMeter
    .createCounter(JobMetricName.lateCallbacks, '', 'Callbacks that came after a poll found what they name done')
    .add(1, { kind });
}
