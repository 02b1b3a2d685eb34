/**
 * tuneflow's business metrics: what the service was asked and answered, what it charged, what callbacks came. They go
 * through the SDK's metric meter (an activity's `Context.current().metricMeter`, the Runtime's for the receiver), so
 * they appear wherever the worker's Runtime exports metrics: `tuneflow worker`'s `/metrics`, or a user's own worker
 * with the plugin and its own `Runtime.install({ telemetryOptions: { metrics: ... } })`. Names follow Prometheus's
 * conventions (`_total`, base units); labels are bounded: no job ID, key, URL or tune id. The SDK adds `namespace` and
 * `taskQueue`, and in an activity `activityType`.
 *
 * Counted here outside workflow code; a job's own (jobs by outcome, durations, polls per job) are counted by its run,
 * through the workflow's meter, replay-safe (src/workflows/job-metrics.ts), under the names listed here too.
 */
import type { MetricMeter } from '@temporalio/common';
import type { RequestObserver } from './api/http';
import type { InspectionFlag } from './contract/inspection';
import { answeredChargeMc, CHARGED, JobMetricName } from './contract/job-metrics';

export { JOB_HISTOGRAM_BUCKETS, JobOutcome } from './contract/job-metrics';

/** The metrics' names, as a scrape shows them. */
export const MetricName = {
  /** Requests to the service, by `operation` (`POST /tunes/{id}/prompts`) and `status_class` (2xx..5xx, `none`). */
  serviceRequests: 'tuneflow_service_requests_total',
  /** Requests the service answered 429, by `operation`. */
  serviceRateLimited: 'tuneflow_service_rate_limited_total',
  /** Activity attempts after the first (Temporal's retries), by `activityType`. */
  activityRetries: 'tuneflow_activity_retries_total',
  /**
   * What the service charged, in millicents, by `tenant`: from the creates' answers (`cost_mc`), and at a job's end
   * what its cost holds beyond them (a pack's, whose answers name no price).
   */
  chargedMillicents: CHARGED.name,
  /** Training images inspected, by `flagged` (`true` when the service raised any flag). */
  imagesInspected: 'tuneflow_images_inspected_total',
  /** Flags the service raised on inspected images, by `flag` (the service's known flags). */
  imageFlags: 'tuneflow_image_flags_total',
  /** Callbacks the receiver answered, by `outcome` (CallbackOutcome). */
  callbacks: 'tuneflow_callbacks_total',
  ...JobMetricName,
} as const;

/** What became of a callback at the receiver. */
export const CallbackOutcome = {
  /** Signalled its run. */
  accepted: 'accepted',
  /** The same callback woke the run moments ago: answered, not signalled again. */
  duplicated: 'duplicated',
  /** Refused: a bad signature, path, method or body (4xx). */
  refused: 'refused',
  /** For a run that is closed or unknown: answered 200, nothing to wake. */
  closedRun: 'closed_run',
  /** The run's budget of signals was spent: answered 200, not signalled. */
  overBudget: 'over_budget',
  /** Temporal unavailable, the receiver at its limits, or an error: 5xx. */
  failed: 'failed',
} as const;
export type CallbackOutcome = (typeof CallbackOutcome)[keyof typeof CallbackOutcome];

/** A status as its class: `2xx`, `4xx`, ...; `none` when no answer came (a timeout, a lost connection). */
export function statusClass(status: number | undefined): string {
  return status === undefined ? 'none' : `${Math.floor(status / 100)}xx`;
}

type Counter = ReturnType<MetricMeter['createCounter']>;

/** Each meter's counters, by name: an activity attempt's meter lives as long as its context. */
const counters = new WeakMap<MetricMeter, Map<string, Counter>>();

/** `meter`'s counter `name`, made once (each make is a call into the Runtime). */
function counter(meter: MetricMeter, name: string, description: string, unit = ''): Counter {
  let made = counters.get(meter);
  if (!made) counters.set(meter, (made = new Map()));
  let found = made.get(name);
  if (!found) made.set(name, (found = meter.createCounter(name, unit, description)));
  return found;
}

/** Counts each request of one activity attempt with the activity's meter, so each carries its activity type. */
export function requestCounter(meter: MetricMeter): RequestObserver {
  return (method, route, status) => {
    const operation = `${method} ${route}`;
    counter(meter, MetricName.serviceRequests, 'Requests to the service').add(1, {
      operation,
      status_class: statusClass(status),
    });
    if (status === 429)
      counter(meter, MetricName.serviceRateLimited, 'Requests the service answered 429').add(1, { operation });
  };
}

/** An activity attempt after the first. */
export function countRetry(meter: MetricMeter): void {
  counter(meter, MetricName.activityRetries, 'Activity attempts after the first').add(1);
}

/** A create's charge (`cost_mc`), for the job's tenant; nothing when the answer names none. */
export function countCharge(meter: MetricMeter, tenant: string, costMc: number | null | undefined): void {
  const mc = answeredChargeMc(costMc);
  if (mc) counter(meter, CHARGED.name, CHARGED.description, CHARGED.unit).add(mc, { tenant });
}

/** An inspected image and the flags it raised. */
export function countInspection(meter: MetricMeter, flags: readonly InspectionFlag[]): void {
  counter(meter, MetricName.imagesInspected, 'Training images inspected').add(1, { flagged: String(flags.length > 0) });
  if (!flags.length) return;
  const raised = counter(meter, MetricName.imageFlags, 'Flags the service raised on inspected images');
  for (const flag of flags) raised.add(1, { flag });
}

/** The receiver's counter of callbacks by outcome. */
export function callbackCounter(meter: MetricMeter): (outcome: CallbackOutcome) => void {
  const callbacks = counter(meter, MetricName.callbacks, 'Callbacks the receiver answered, by outcome');
  return (outcome) => callbacks.add(1, { outcome });
}
