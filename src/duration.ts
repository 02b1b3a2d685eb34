/**
 * Durations as tuneflow's options and flags take them: Temporal's Duration ('90 seconds', '2s', '1h', or a number
 * of milliseconds). Pure, so workflows may use it.
 */
import ms, { type StringValue } from 'ms';

export type Duration = StringValue | number;

/** Milliseconds of a Duration; throws a message that names `field` when it is not one. */
export function durationToMs(value: Duration | string, field: string): number {
  const n = typeof value === 'number' ? value : ms(value as StringValue);
  if (typeof n !== 'number' || !Number.isFinite(n) || n < 0)
    throw new TypeError(
      `${field}: must be a duration such as '90 seconds', '2s' or a number of milliseconds (got ${JSON.stringify(value)})`,
    );
  return n;
}
