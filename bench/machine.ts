/**
 * The machine's CPU, for benches on a shared machine: how busy all cores were (Linux: /proc/stat), and how much of
 * that other processes took.
 */
import { readFileSync } from 'node:fs';

/**
 * Busy time of all cores together, in seconds since boot (Linux), or undefined.
 *
 * @example
 * const before = machineCpu(); // ... work ...; othersSince(before, ownCpuSeconds, elapsedSeconds)
 */
export function machineCpu(): number | undefined {
  try {
    const ticks = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0].trim().split(/\s+/).slice(1).map(Number);
    // Every state but idle and iowait, in USER_HZ (100 per second).
    return (ticks.reduce((a, b) => a + b, 0) - ticks[3] - ticks[4]) / 100;
  } catch {
    return undefined;
  }
}

/**
 * Milliseconds of CPU all processes together used since `before` (a machineCpu reading); undefined where the OS does not
 * tell.
 *
 * @example
 * const before = machineCpu(); // ... a run ...; machineCpuMsSince(before); // 118_800: every core's busy time
 */
export function machineCpuMsSince(before: number | undefined): number | undefined {
  const now = machineCpu();
  return before === undefined || now === undefined ? undefined : (now - before) * 1000;
}

/**
 * Cores kept busy by other processes since `before` (a machineCpu reading), on average over `seconds`, given the CPU
 * seconds this process used meanwhile; NaN where the OS does not tell.
 *
 * @example
 * othersSince(before, (user + system) / 1e6, elapsedMs / 1000); // 0.03: the machine was quiet
 */
export function othersSince(before: number | undefined, ownCpuSeconds: number, seconds: number): number {
  const now = machineCpu();
  if (before === undefined || now === undefined) return NaN;
  return Math.max(0, now - before - ownCpuSeconds) / seconds;
}
