import { ApplicationFailure } from '@temporalio/common';
import { checkGenerate } from '../../src/contract/check';
import { FailureType } from '../../src/contract/failures';
import type { TuneflowOptions } from '../../src/contract/inputs';
import {
  DEFAULT_OPTIONS,
  MAX_POLLS_PER_WAIT,
  MAX_PROMPT_CONCURRENCY,
  resolveOptions,
} from '../../src/contract/options';

/** The failure resolveOptions throws for `options`. */
function failureOf(options: unknown): ApplicationFailure {
  try {
    resolveOptions(options as TuneflowOptions);
  } catch (err) {
    expect(err).toBeInstanceOf(ApplicationFailure);
    return err as ApplicationFailure;
  }
  throw new Error(`resolveOptions accepted ${JSON.stringify(options)}`);
}

describe('resolveOptions', () => {
  test("storeImages: true, false, or unset (the worker's storage decides); anything else is InvalidOptions naming it", () => {
    expect(resolveOptions({}).storeImages).toBeUndefined();
    expect(resolveOptions({ storeImages: true }).storeImages).toBe(true);
    expect(resolveOptions({ storeImages: false }).storeImages).toBe(false);
    for (const bad of ['yes', 1, {}]) {
      const failure = failureOf({ storeImages: bad } as unknown as TuneflowOptions);
      expect(failure.type).toBe(FailureType.invalidOptions);
      expect(failure.message).toContain('storeImages: must be true or false');
    }
  });

  test('defaults suit the real service: minutes between polls, hours to train', () => {
    const resolved = resolveOptions(undefined);
    expect(resolved).toEqual({
      pollIntervalMs: 2 * 60_000,
      maxPollIntervalMs: 10 * 60_000,
      trainingTimeoutMs: 6 * 3600_000,
      promptTimeoutMs: 3600_000,
      promptConcurrency: 4,
      cleanupOnCancel: false,
      maxCostMc: undefined, // no limit
      tuneCostMc: undefined, // no price stated
    });
    expect(resolveOptions({})).toEqual(resolved);
    expect(resolveOptions(null)).toEqual(resolved);
  });

  test.each(['maxCostMc', 'tuneCostMc'] as const)(
    '%s: a whole number of millicents, 0 or more; anything else is InvalidOptions naming it',
    (option) => {
      expect(resolveOptions({ [option]: 155_000 })[option]).toBe(155_000);
      expect(resolveOptions({ [option]: 0 })[option]).toBe(0);
      for (const bad of [-1, 1.5, '1000', Number.NaN, true]) {
        const failure = failureOf({ [option]: bad });
        expect(failure.type).toBe(FailureType.invalidOptions);
        expect(failure.message).toContain(`${option}: must be a whole number of millicents`);
        expect(failure.details?.[0]).toMatchObject({ option });
      }
    },
  );

  test('the documented defaults are the ones applied', () => {
    expect(DEFAULT_OPTIONS).toEqual({
      pollInterval: '2 minutes',
      maxPollInterval: '10 minutes',
      trainingTimeout: '6 hours',
      promptTimeout: '1 hour',
      promptConcurrency: 4,
      cleanupOnCancel: false,
    });
  });

  test('takes Duration strings and numbers of milliseconds', () => {
    expect(
      resolveOptions({
        pollInterval: '90 seconds',
        maxPollInterval: '5m',
        trainingTimeout: 7_200_000,
        promptTimeout: '45 minutes',
        promptConcurrency: 8,
        cleanupOnCancel: true,
      }),
    ).toEqual({
      pollIntervalMs: 90_000,
      maxPollIntervalMs: 300_000,
      trainingTimeoutMs: 7_200_000,
      promptTimeoutMs: 2_700_000,
      promptConcurrency: 8,
      cleanupOnCancel: true,
    });
  });

  test('a first interval above the default ceiling raises the ceiling when no ceiling is given', () => {
    expect(resolveOptions({ pollInterval: '20 minutes' })).toMatchObject({
      pollIntervalMs: 20 * 60_000,
      maxPollIntervalMs: 20 * 60_000,
    });
  });

  test.each([
    ['pollInterval', 'soon'],
    ['pollInterval', ''],
    ['maxPollInterval', '10 minutes '],
    ['trainingTimeout', 'forever'],
    ['promptTimeout', { minutes: 5 }],
    ['promptTimeout', true],
  ])('a bad %s (%p) fails with InvalidOptions naming it', (option, value) => {
    const failure = failureOf({ [option]: value });
    expect(failure.type).toBe(FailureType.invalidOptions);
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toContain(`Invalid option ${option}: must be a duration`);
    expect(failure.details).toEqual([expect.objectContaining({ option })]);
  });

  test.each([
    ['pollInterval', '0s'],
    ['trainingTimeout', 0],
    ['promptTimeout', '-5 minutes'],
  ])('%s must be longer than zero (%p)', (option, value) => {
    const failure = failureOf({ [option]: value });
    expect(failure.type).toBe(FailureType.invalidOptions);
    expect(failure.message).toMatch(new RegExp(`^Invalid option ${option}: must`));
  });

  test('the ceiling may not be below the first interval', () => {
    const failure = failureOf({ pollInterval: '5 minutes', maxPollInterval: '1 minute' });
    expect(failure.message).toBe('Invalid option maxPollInterval: must be at least pollInterval');
  });

  test.each([0, -1, 1.5, MAX_PROMPT_CONCURRENCY + 1, '4'])('promptConcurrency %p is refused', (value) => {
    const failure = failureOf({ promptConcurrency: value });
    expect(failure.message).toBe(
      `Invalid option promptConcurrency: must be an integer from 1 to ${MAX_PROMPT_CONCURRENCY}`,
    );
  });

  test('cleanupOnCancel must be a boolean', () => {
    expect(failureOf({ cleanupOnCancel: 'yes' }).message).toBe('Invalid option cleanupOnCancel: must be true or false');
  });

  test('an unknown option is a typo, refused with the known names', () => {
    const failure = failureOf({ pollIntervall: '1 minute' });
    expect(failure.message).toContain('Invalid option pollIntervall: is not an option');
    expect(failure.message).toContain('pollInterval, maxPollInterval');
  });

  test('options that are not an object are refused', () => {
    expect(failureOf(['pollInterval']).message).toBe('Invalid option options: must be an object');
    expect(failureOf('fast').message).toBe('Invalid option options: must be an object');
  });

  test('a wait that could poll more than MAX_POLLS_PER_WAIT times is refused: the history must stay small', () => {
    // Two-second polls for six hours of training: thousands of polls if no callback comes.
    const failure = failureOf({ pollInterval: '1 second', maxPollInterval: '2 seconds' });
    expect(failure.type).toBe(FailureType.invalidOptions);
    expect(failure.message).toMatch(/^Invalid option trainingTimeout: could take \d+ polls/);
    expect(failure.message).toContain(`more than the ${MAX_POLLS_PER_WAIT}`);
    // The prompt wait is checked too.
    const prompts = failureOf({
      pollInterval: '5 seconds',
      maxPollInterval: '10 seconds',
      trainingTimeout: '20 seconds',
    });
    expect(prompts.message).toMatch(/^Invalid option promptTimeout: could take 361 polls/);
    // Quick polls with deadlines to match are fine.
    expect(() =>
      resolveOptions({
        pollInterval: '1 second',
        maxPollInterval: '2 seconds',
        trainingTimeout: '2 minutes',
        promptTimeout: '2 minutes',
      }),
    ).not.toThrow();
  });

  test('options the input contract accepts (within the poll bound) the workflows accept too', () => {
    const accepted: TuneflowOptions[] = [
      {},
      { pollInterval: '30 minutes' },
      { pollInterval: 1, maxPollInterval: 1, trainingTimeout: 1, promptTimeout: 1 },
      { promptConcurrency: 1 },
      { promptConcurrency: MAX_PROMPT_CONCURRENCY, cleanupOnCancel: true },
    ];
    for (const options of accepted) {
      expect(() => checkGenerate({ tuneId: 1, prompts: [{ text: 'ohwx woman' }], options })).not.toThrow();
      expect(() => resolveOptions(options)).not.toThrow();
    }
  });
});
