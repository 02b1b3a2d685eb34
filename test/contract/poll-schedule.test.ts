import { resolveOptions } from '../../src/contract/options';
import { POLL_GROWTH, pollDelay, pollsWithin, untilEtaMs } from '../../src/contract/poll-schedule';

const schedule = { pollIntervalMs: 120_000, maxPollIntervalMs: 600_000 };

describe('pollDelay', () => {
  test('the first poll comes one interval after the expected end', () => {
    expect(pollDelay(0, schedule)).toBe(120_000);
    expect(pollDelay(0, schedule, 1_800_000)).toBe(1_920_000);
    // An eta in the past (or unknown) means "now", never a negative wait.
    expect(pollDelay(0, schedule, -60_000)).toBe(120_000);
  });

  test('later polls back off by POLL_GROWTH to the ceiling and stay there', () => {
    expect(POLL_GROWTH).toBe(2);
    const delays = Array.from({ length: 8 }, (_, i) => pollDelay(i + 1, schedule));
    expect(delays).toEqual([240_000, 480_000, 600_000, 600_000, 600_000, 600_000, 600_000, 600_000]);
    // The eta counts only for the first poll.
    expect(pollDelay(1, schedule, 1_800_000)).toBe(240_000);
  });

  test('never below the first interval, never above the ceiling, even after very many polls', () => {
    for (const polls of [1, 10, 100, 10_000]) {
      const d = pollDelay(polls, schedule);
      expect(d).toBeGreaterThanOrEqual(schedule.pollIntervalMs);
      expect(d).toBeLessThanOrEqual(schedule.maxPollIntervalMs);
      expect(Number.isFinite(d)).toBe(true);
    }
    expect(pollDelay(3, { pollIntervalMs: 60_000, maxPollIntervalMs: 60_000 })).toBe(60_000);
  });

  test('with the defaults, a tune that never trains costs few polls over its six hours', () => {
    const options = resolveOptions({});
    let elapsed = 0;
    let polls = 0;
    while (elapsed < options.trainingTimeoutMs) elapsed += pollDelay(polls++, options, 30 * 60_000);
    // 30 min eta + 2 min, then 4, 8 and every 10 minutes: about 34 polls in 6 hours.
    expect(polls).toBeLessThanOrEqual(40);
    expect(polls).toBeGreaterThanOrEqual(30);
  });
});

describe('untilEtaMs', () => {
  test('eta minus creation, on the service clock', () => {
    expect(untilEtaMs({ created_at: '2025-01-01T00:00:00.000Z', eta: '2025-01-01T00:30:00.000Z' })).toBe(1_800_000);
    expect(untilEtaMs({ created_at: '2025-01-01T00:00:00.000Z', eta: '2025-01-01T00:00:02.500Z' })).toBe(2_500);
  });

  test('0 when either is missing, unreadable or the eta is before creation', () => {
    expect(untilEtaMs({ created_at: '2025-01-01T00:00:00.000Z', eta: null })).toBe(0);
    expect(untilEtaMs({ created_at: undefined, eta: '2025-01-01T00:30:00.000Z' })).toBe(0);
    expect(untilEtaMs({ created_at: 'yesterday', eta: '2025-01-01T00:30:00.000Z' })).toBe(0);
    expect(untilEtaMs({ created_at: '2025-01-01T01:00:00.000Z', eta: '2025-01-01T00:30:00.000Z' })).toBe(0);
  });
});

describe('pollsWithin', () => {
  /** Counts by walking the schedule one poll at a time. */
  function walk(timeoutMs: number, s: { pollIntervalMs: number; maxPollIntervalMs: number }): number {
    let polls = 0;
    let at = 0;
    for (;;) {
      const delay = pollDelay(polls, s);
      if (at + delay >= timeoutMs) return polls + 1; // the last look at the deadline
      at += delay;
      polls++;
    }
  }

  test('the defaults: 38 polls in a six-hour training wait, 8 in a one-hour prompt wait', () => {
    expect(pollsWithin(6 * 3600_000, schedule)).toBe(38);
    expect(pollsWithin(3600_000, schedule)).toBe(8);
  });

  test.each([
    [20_000, { pollIntervalMs: 5_000, maxPollIntervalMs: 10_000 }],
    [120_000, { pollIntervalMs: 1_000, maxPollIntervalMs: 2_000 }],
    [1_000, { pollIntervalMs: 1_000, maxPollIntervalMs: 1_000 }],
    [1_001, { pollIntervalMs: 1_000, maxPollIntervalMs: 1_000 }],
    [7 * 24 * 3600_000, { pollIntervalMs: 60_000, maxPollIntervalMs: 3600_000 }],
    [1, { pollIntervalMs: 120_000, maxPollIntervalMs: 600_000 }],
  ])('a wait of %p ms at %p polls as often as walking the schedule says', (timeoutMs, s) => {
    expect(pollsWithin(timeoutMs, s)).toBe(walk(timeoutMs, s));
  });
});
