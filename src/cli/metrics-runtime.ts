/**
 * The SDK's Runtime for a tuneflow command: its logger, and Prometheus's `/metrics` where TUNEFLOW_METRICS_ADDRESS
 * says. The worker's and the receiver's business metrics (src/metrics.ts) go through this Runtime's meter.
 */
import type { Logger, MetricMeter } from '@temporalio/common';
import { ConfigError } from '../config';
import { JOB_HISTOGRAM_BUCKETS } from '../metrics';
import { portIsFree } from '../temporal-server/dev-server';
import { portTaken } from './command-line';

/** Before anything binds: the SDK's own error for a taken metrics port is a stack trace. */
export async function checkMetricsPortFree(address: string | undefined): Promise<void> {
  const bound = address?.match(/^(.*):(\d+)$/);
  if (bound && Number(bound[2]) !== 0 && !(await portIsFree(Number(bound[2]), bound[1])))
    throw portTaken('TUNEFLOW_METRICS_ADDRESS', address!, 'choose another port, or "off"');
}

/**
 * Installs the process's Runtime: `logger`, and metrics served on `address` unless it is undefined ("off"); gives
 * its meter. Loaded when called: the receiver alone loads the SDK's native Runtime only for metrics.
 */
export async function installRuntime(
  logger: Logger,
  address: string | undefined,
  // The worker's: the Runtime drains the worker on them. The receiver stops on its own (none here).
  shutdownSignals?: NodeJS.Signals[],
): Promise<MetricMeter> {
  const { Runtime } = await import('@temporalio/worker');
  try {
    return Runtime.install({
      logger,
      ...(shutdownSignals && { shutdownSignals }),
      telemetryOptions: address
        ? { metrics: { prometheus: { bindAddress: address, histogramBucketOverrides: JOB_HISTOGRAM_BUCKETS } } }
        : {},
    }).metricMeter;
  } catch (err) {
    throw new ConfigError('TUNEFLOW_METRICS_ADDRESS', `cannot serve metrics on ${address}: ${(err as Error).message}`);
  }
}
