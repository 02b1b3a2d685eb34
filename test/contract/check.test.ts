/**
 * The job's input contract (src/contract/check.ts), the one module the starters, the command line and the
 * workflows check inputs with: every path named, every rule stated, and inside a workflow an `InvalidInput` failure.
 */
import { ApplicationFailure } from '@temporalio/common';
import { InvalidInputError } from '../../src/api/errors';
import { checkGenerate, checkPackTune, checkTrainThenGenerate } from '../../src/contract/check';
import { requireValidInput } from '../../src/contract/failures';

const tune = { name: 'dog', branch: 'fast' as const, image_urls: ['https://example.com/1.jpg'] };

function issuesOf(check: () => void): Array<{ field: string; rule: string }> {
  try {
    check();
  } catch (err) {
    if (err instanceof InvalidInputError) return [...err.issues];
    throw err;
  }
  return [];
}

test('a valid job passes, for each workflow', () => {
  expect(issuesOf(() => checkTrainThenGenerate('job-1', { tune, prompts: [{ text: 'sks dog', w: 512 }] }))).toEqual([]);
  expect(issuesOf(() => checkGenerate({ tuneId: 7, prompts: [{ text: 'sks dog' }] }))).toEqual([]);
  expect(issuesOf(() => checkPackTune('job-1', { packId: 260, tune: { tune_ids: [7] } }))).toEqual([]);
});

test('attributes the spec does not list pass; the ones it lists keep every rule (branch on pack tunes, characteristics)', () => {
  const pack = { name: 'man', image_urls: tune.image_urls, branch: 'fast', preset: 'flux-lora-portrait' };
  expect(issuesOf(() => checkPackTune('job-1', { packId: 260, tune: pack }))).toEqual([]);
  expect(
    issuesOf(() =>
      checkTrainThenGenerate('job-1', {
        tune: { ...tune, workspace_id: 'ws-1', characteristics: '{"eye_color":"blue eyes"}' },
        prompts: [{ text: 'sks dog', aspect_ratio: '16:9', resolution: '1080p' }],
      }),
    ),
  ).toEqual([]);
  expect(issuesOf(() => checkPackTune('job-1', { packId: 260, tune: { ...pack, branch: 'turbo' } }))).toEqual([
    { field: 'tune.branch', rule: 'must be one of "flux1", "sd15", "sdxl1", "fast"' },
  ]);
  expect(
    issuesOf(() =>
      checkTrainThenGenerate('job-1', {
        tune: { ...tune, characteristics: '{"eye_color": {"left": "blue"}}' },
        prompts: [{ text: 'x', aspect_ratio: '16:9', cfg_scale: 16 }],
      }),
    ).map((i) => i.field),
  ).toEqual(['tune.characteristics', 'prompts[0].cfg_scale']);
});

test('names the path of every bad field: the tune, each prompt by index, the pack, the options', () => {
  expect(
    issuesOf(() =>
      checkTrainThenGenerate('job-1', { tune, prompts: [{ text: 'a' }, { text: 'b', w: 500, num_images: 9 }] }),
    ).map((i) => i.field),
  ).toEqual(['prompts[1].num_images', 'prompts[1].w']);
  expect(issuesOf(() => checkTrainThenGenerate('job-1', { tune: { ...tune, name: '' }, prompts: [] }))).toEqual([
    { field: 'tune.name', rule: expect.any(String) },
  ]);
  expect(issuesOf(() => checkGenerate({ tuneId: 7, prompts: [] }))).toEqual([
    { field: 'prompts', rule: 'must be a non-empty array of prompts' },
  ]);
  expect(issuesOf(() => checkGenerate({ tuneId: -1, prompts: [{ text: 'x' }] }))[0].field).toBe('tuneId');
  expect(issuesOf(() => checkPackTune('job-1', { packId: 260, tune: 42 as never }))).toEqual([
    { field: 'tune', rule: 'must be an object' },
  ]);
  expect(
    issuesOf(() => checkTrainThenGenerate('job-1', { tune, prompts: [], options: { pollInterval: 'soon' } })),
  ).toEqual([{ field: 'options.pollInterval', rule: expect.stringContaining("a duration such as '90 seconds'") }]);
  expect(
    issuesOf(() =>
      checkTrainThenGenerate('job-1', { tune, prompts: Array.from({ length: 121 }, () => ({ text: 'x' })) }),
    ),
  ).toEqual([{ field: 'prompts', rule: expect.stringContaining('at most 120 prompts') }]);
  // Image bytes never enter a history: paths only.
  expect(
    issuesOf(() => checkTrainThenGenerate('job-1', { tune: { name: 'dog', images: [42 as never] }, prompts: [] })),
  ).toContainEqual({ field: 'tune.images[0]', rule: 'must be a path the worker can read (bytes never enter history)' });
});

test('inside a workflow the verdict is a non-retryable InvalidInput failure with the issues in its details', () => {
  let failure: unknown;
  try {
    requireValidInput(() => checkGenerate({ tuneId: 7, prompts: [{ text: 'x', h: 13 }] }));
  } catch (err) {
    failure = err;
  }
  expect(failure).toBeInstanceOf(ApplicationFailure);
  expect(failure).toMatchObject({ type: 'InvalidInput', nonRetryable: true });
  const issue = { field: 'prompts[0].h', rule: 'must be a positive integer multiple of 8' };
  expect((failure as ApplicationFailure).details).toEqual([{ ...issue, issues: [issue] }]);
});
