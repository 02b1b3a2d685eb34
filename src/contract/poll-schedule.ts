/**
 * When to poll, when no callback came. Callbacks normally end every wait; polls are the safety net, so the first
 * comes one interval after the moment the service expects the work done (a tune's `eta`, a prompt's start) and later
 * ones back off to a slow ceiling: a lost callback costs minutes, and a slow tune costs few requests.
 */
import type { Tune } from '../api/schemas';

/** How much longer each interval is than the one before it. */
export const POLL_GROWTH = 2;

/**
 * Polling only (no callback was asked for: a laptop behind NAT, `TUNEFLOW_CALLBACK_BASE_URL` unset): the polls are all
 * there is, so the first comes this long after the expected end (a tune's eta; a prompt's creation), and the next
 * ones twice as long each time, up to the slow ceiling.
 */
export const POLL_ONLY_FIRST_MS = 1_000;

export interface PollSchedule {
  /** The first interval, after the expected end; later ones grow from it. */
  pollIntervalMs: number;
  /** The slow ceiling of the interval. */
  maxPollIntervalMs: number;
}

/**
 * Milliseconds to wait before the next poll, given how many polls were already made and how long until the service
 * expects the work done.
 *
 * @example
 * const schedule = { pollIntervalMs: 120_000, maxPollIntervalMs: 600_000 };
 * pollDelay(0, schedule, 1_800_000); // 1_920_000: two minutes after the eta, half an hour away
 * pollDelay(1, schedule); // 240_000
 * pollDelay(5, schedule); // 600_000: the ceiling
 * pollDelay(0, schedule, 1_800_000, true); // 1_801_000: polling only, a second after the eta
 * pollDelay(3, schedule, 0, true); // 8_000
 */
export function pollDelay(pollsMade: number, schedule: PollSchedule, untilExpectedMs = 0, pollOnly = false): number {
  const { pollIntervalMs, maxPollIntervalMs } = schedule;
  if (pollOnly) {
    if (pollsMade <= 0) return Math.max(0, untilExpectedMs) + POLL_ONLY_FIRST_MS;
    return Math.min(POLL_ONLY_FIRST_MS * POLL_GROWTH ** Math.min(pollsMade, 30), maxPollIntervalMs);
  }
  if (pollsMade <= 0) return Math.max(0, untilExpectedMs) + pollIntervalMs;
  // Capped before it can overflow: 2^60 intervals is past any ceiling.
  const grown = pollIntervalMs * POLL_GROWTH ** Math.min(pollsMade, 60);
  return Math.max(pollIntervalMs, Math.min(grown, maxPollIntervalMs));
}

/**
 * How long after its creation the service expects the tune trained: `eta - created_at`, both on the service's clock,
 * so the worker's clock (and a workflow's need for one) never enters. 0 when either is missing or unreadable.
 *
 * @example
 * untilEtaMs({ created_at: '2025-01-01T00:00:00.000Z', eta: '2025-01-01T00:30:00.000Z' }); // 1_800_000
 */
export function untilEtaMs(tune: Pick<Tune, 'eta' | 'created_at'>): number {
  if (!tune.eta || !tune.created_at) return 0;
  const eta = Date.parse(tune.eta);
  const created = Date.parse(tune.created_at);
  if (!Number.isFinite(eta) || !Number.isFinite(created)) return 0;
  return Math.max(0, eta - created);
}

/**
 * The most polls one wait of `timeoutMs` can make (none sooner than the schedule allows, a last one at the
 * deadline): what bounds a workflow's history when no callback ever comes.
 *
 * @example
 * pollsWithin(6 * 3_600_000, { pollIntervalMs: 120_000, maxPollIntervalMs: 600_000 }); // 38
 */
export function pollsWithin(timeoutMs: number, schedule: PollSchedule): number {
  let polls = 0;
  let at = 0;
  for (;;) {
    const delay = pollDelay(polls, schedule);
    if (at + delay >= timeoutMs) return polls + 1;
    at += delay;
    polls++;
    // At the ceiling the rest is arithmetic.
    if (delay >= schedule.maxPollIntervalMs) return polls + Math.ceil((timeoutMs - at) / schedule.maxPollIntervalMs);
  }
}
