import { ApplicationFailure } from '@temporalio/common';
import type { Prompt } from '../../src/api/schemas';
import { checkGenerate, checkTrainThenGenerate } from '../../src/contract/check';
import {
  FailureType,
  MAX_PROMPTS_PER_RUN,
  promptsNeverSettled,
  requireValidInput,
  tuneNeverTrained,
} from '../../src/contract/failures';

const wait = { timeoutMs: 6 * 3600_000, polls: 34, failedPolls: 0 };

describe('tuneNeverTrained', () => {
  test('names the tune, the deadline, what the tune showed and the polls', () => {
    const failure = tuneNeverTrained(
      { id: 42, started_training_at: '2025-01-01T00:00:00.000Z', eta: '2025-01-01T00:30:00.000Z' },
      wait,
    );
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect(failure.type).toBe(FailureType.tuneNeverTrained);
    expect(failure.type).toBe('TuneNeverTrained');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toBe(
      'Tune 42 was not trained within 6 hours (trainingTimeout): it started training at 2025-01-01T00:00:00.000Z ' +
        '(eta 2025-01-01T00:30:00.000Z) and never got trained_at; no callback said otherwise and 34 polls found it unfinished',
    );
    expect(failure.details).toEqual([
      {
        tuneId: 42,
        startedTrainingAt: '2025-01-01T00:00:00.000Z',
        eta: '2025-01-01T00:30:00.000Z',
        ...wait,
      },
    ]);
  });

  test('a tune that never started, and polls that failed, say so', () => {
    const failure = tuneNeverTrained(
      { id: 42 },
      { timeoutMs: 90_000, polls: 1, failedPolls: 2, lastPollError: 'ServerError: boom' },
    );
    expect(failure.message).toContain('within 2 minutes');
    expect(failure.message).toContain('it never started training');
    expect(failure.message).toContain('1 poll found it unfinished (2 failed, the last with: ServerError: boom)');
  });
});

describe('promptsNeverSettled', () => {
  const unsettled = [
    { id: 11, tune_id: 7, text: 'a', started_training_at: '2025-01-01T00:00:00.000Z' },
    { id: 12, tune_id: 7, text: 'b', started_training_at: null },
  ] as Prompt[];

  test('names every prompt still waiting and what it showed', () => {
    const failure = promptsNeverSettled(7, unsettled, { expected: 3, known: 3 }, { ...wait, timeoutMs: 3600_000 });
    expect(failure.type).toBe('PromptsNeverSettled');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toBe(
      'Prompts of tune 7 did not settle within 1 hour (promptTimeout): prompt 11 started at 2025-01-01T00:00:00.000Z ' +
        'and has no images and no user_error; prompt 12 never started and has no images and no user_error; ' +
        '34 polls found them unfinished',
    );
    expect(failure.details).toEqual([
      { tuneId: 7, promptIds: [11, 12], expected: 3, known: 3, timeoutMs: 3600_000, polls: 34, failedPolls: 0 },
    ]);
  });

  test('prompts that never appeared (a pack whose tune lists none) are explained too', () => {
    expect(promptsNeverSettled(7, [], { expected: 0, known: 0 }, wait).message).toContain(
      'the tune never listed any prompt',
    );
    expect(promptsNeverSettled(7, [], { expected: 3, known: 1 }, wait).message).toContain(
      '2 expected prompts never appeared',
    );
  });
});

describe('requireValidInput', () => {
  const failureOf = (check: () => void) => {
    try {
      requireValidInput(check);
    } catch (err) {
      return err as ApplicationFailure;
    }
    return undefined;
  };
  const tune = { name: 'woman', image_urls: ['https://example.com/1.jpg'] };

  test('passes a valid input, fails typed with every field and rule otherwise', () => {
    expect(failureOf(() => checkTrainThenGenerate('order-1', { tune, prompts: [{ text: 'ohwx' }] }))).toBeUndefined();
    const failure = failureOf(() =>
      checkTrainThenGenerate('order-1', { tune, prompts: [{ text: 'a' }, { text: 'b', w: 500 }], options: { x: 1 } }),
    );
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect(failure?.type).toBe(FailureType.invalidInput);
    expect(failure?.nonRetryable).toBe(true);
    const details = failure?.details?.[0] as { field: string; issues: { field: string; rule: string }[] };
    expect(details.field).toBe('prompts[1].w');
    expect(details.issues.map((i) => i.field)).toEqual(['prompts[1].w', 'options.x']);
    expect(failure?.message).toMatch(/^Invalid input: prompts\[1\]\.w: .+; options\.x: is not an option/);
  });

  test('prompts: an array of up to one list page, each with the spec rules', () => {
    const fieldsOf = (prompts: unknown) =>
      (
        failureOf(() => checkGenerate({ tuneId: 1, prompts }))?.details?.[0] as { issues: { field: string }[] }
      )?.issues.map((i) => i.field) ?? 'accepted';
    expect(MAX_PROMPTS_PER_RUN).toBe(120);
    expect(fieldsOf(Array.from({ length: MAX_PROMPTS_PER_RUN }, () => ({ text: 'x' })))).toBe('accepted');
    expect(fieldsOf(Array.from({ length: 121 }, () => ({ text: 'x' })))).toEqual(['prompts']);
    expect(fieldsOf([])).toEqual(['prompts']);
    expect(fieldsOf(undefined)).toEqual(['prompts']);
    expect(fieldsOf([{ text: 'a' }, { num_images: 2 }])).toContain('prompts[1].text');
    expect(fieldsOf(['a'])).toEqual(['prompts[0]']);
  });

  test('other errors pass through unchanged', () => {
    const boom = new TypeError('boom');
    expect(
      failureOf(() => {
        throw boom;
      }),
    ).toBe(boom);
  });
});
