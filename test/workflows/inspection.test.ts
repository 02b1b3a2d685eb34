/**
 * Inspection before paying (`options.inspect`) against the real mock service, activities and a Temporal test server:
 * every training image is inspected before the tune or pack tune is created; a refused flag fails the run
 * InspectionRefused with no create and nothing charged (the mock's ledger), clean photos complete with what inspection
 * found in the result, and inspection is retried and heartbeats as any call. Each asserts on the history's activity
 * types and attempts and on the mock's request counts, not only on the outcome.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ApplicationFailure, WorkflowFailedError } from '@temporalio/client';
import type { History } from '@temporalio/common/lib/proto-utils';
import type { InspectionRefusedDetails } from '../../src/contract/failures';
import type { PackTuneResult, TrainThenGenerateResult } from '../../src/contract/inputs';
import { solidPng } from '../../src/mock-service/png';
import { useWorkflowHarness, workflowTest } from './environment';
import { resultOf, UPLOAD_DIR, type Outcome } from './harness';
import { summarize } from './history-summary';
import { BLURRY_URL, CROWD_URL, INSPECTED_URLS, PET_PACK_ID, play, REFUSE, scenarios } from './scenarios';

jest.setTimeout(120_000);

const harness = useWorkflowHarness();

/** The run's InspectionRefused failure and its details. */
function refusalOf(outcome: Outcome<unknown>): { failure: ApplicationFailure; details: InspectionRefusedDetails } {
  expect(outcome.error).toBeInstanceOf(WorkflowFailedError);
  const failure = (outcome.error as WorkflowFailedError).cause as ApplicationFailure;
  expect(failure).toBeInstanceOf(ApplicationFailure);
  expect(failure.type).toBe('InspectionRefused');
  expect(failure.nonRetryable).toBe(true);
  return { failure, details: failure.details?.[0] as InspectionRefusedDetails };
}

/** How many inspections the run had scheduled when the first one answered: how many ran at once. */
function inspectionsAtOnce(history: History): number {
  const events = history.events ?? [];
  const firstAnswer = events.findIndex((e) => e.activityTaskCompletedEventAttributes);
  return events
    .slice(0, firstAnswer)
    .filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'inspectImage').length;
}

workflowTest(
  'a refused photo fails the run InspectionRefused, naming it and its flags: every photo inspected, no tune, nothing charged',
  async () => {
    const outcome = await play(harness(), scenarios.inspectionRefused);
    const { failure, details } = refusalOf(outcome);
    expect(failure.message).toBe(
      'Inspection refused 2 of 3 training images (options.inspect.refuse: blurry, includes_multiple_people): ' +
        `tune.image_urls[1] (${BLURRY_URL}): blurry; tune.image_urls[2] (${CROWD_URL}): includes_multiple_people; ` +
        'no tune was created',
    );
    expect(details.refuse).toEqual(['blurry', 'includes_multiple_people']);
    expect(details.images).toEqual([
      { field: 'tune.image_urls[1]', image: BLURRY_URL, flags: ['blurry'] },
      { field: 'tune.image_urls[2]', image: CROWD_URL, flags: ['includes_multiple_people'] },
    ]);
    expect(details.inspection.map((i) => [i.field, i.image, i.flags])).toEqual([
      ['tune.image_urls[0]', INSPECTED_URLS[0], []],
      ['tune.image_urls[1]', BLURRY_URL, ['blurry']],
      ['tune.image_urls[2]', CROWD_URL, ['includes_multiple_people']],
    ]);
    expect(details.inspection[0].characteristics).toMatchObject({ eye_color: expect.any(String) });
    // Three inspections, then nothing: no create was scheduled, none reached the service, nothing was charged.
    expect(summarize(outcome.history).activities).toEqual(['inspectImage', 'inspectImage', 'inspectImage']);
    expect(outcome.stats.routes).toEqual({ 'POST /images/inspect': 3 });
    expect(outcome.ledger).toEqual({ totalMc: 0, charges: [] });
    expect(outcome.progress).toMatchObject({ phase: 'failed', tuneId: null, cost: { mc: 0 }, counts: { apiCalls: 3 } });
  },
);

workflowTest(
  'clean photos: all five inspected, four at once, before the create; the job completes with its inspection in the result',
  async () => {
    const outcome = await play<TrainThenGenerateResult>(harness(), scenarios.inspectionClean);
    const { tune, prompts, inspection } = resultOf(outcome);
    expect(tune.trained_at).toBeTruthy();
    expect(prompts).toHaveLength(1);
    // In the input's order; a flag not refused (low_quality) is reported, not refused.
    expect(inspection?.map((i) => [i.field, i.image, i.flags])).toEqual(
      INSPECTED_URLS.map((url, i) => [`tune.image_urls[${i}]`, url, i === 2 ? ['low_quality'] : []]),
    );
    for (const found of inspection ?? []) expect(found.characteristics).not.toHaveProperty('name');
    const { activities } = summarize(outcome.history);
    expect(activities.slice(0, 6)).toEqual([...Array(5).fill('inspectImage'), 'createTune']);
    expect(activities).toContain('createPrompt');
    expect(inspectionsAtOnce(outcome.history)).toBe(4);
    expect(outcome.stats.routes).toMatchObject({
      'POST /images/inspect': 5,
      'POST /tunes': 1,
      'POST /tunes/:id/prompts': 1,
    });
    // A fast tune and its prompt: charged nothing, as without inspection.
    expect(outcome.ledger.totalMc).toBe(0);
    expect(outcome.ledger.charges.map((c) => c.object)).toEqual(['tune', 'prompt']);
  },
);

workflowTest('a 500 on an inspection: retried 30 s later as any call, then the tune is created', async () => {
  const outcome = await play<TrainThenGenerateResult>(harness(), scenarios.inspectionServerError);
  const { tune, inspection } = resultOf(outcome);
  expect(tune.model_type).toBe('faceid');
  expect(inspection).toHaveLength(1);
  expect(outcome.stats.faults).toEqual({
    injected: 1,
    byKind: { status500: 1, status429: 0, status504: 0, garbled: 0 },
  });
  expect(outcome.stats.routes).toMatchObject({ 'POST /images/inspect': 2, 'POST /tunes': 1 });
  const { activities, attempts } = summarize(outcome.history);
  expect(activities).toEqual(['inspectImage', 'createTune']);
  const inspected = attempts.find((a) => a.activity === 'inspectImage');
  expect(inspected?.attempt).toBe(2);
  // The service policy's backoff (30 s, skipped in server time), not an immediate retry.
  expect(inspected?.waitedMs).toBeGreaterThanOrEqual(30_000);
});

workflowTest(
  'a pack on a new tune: its photos inspected before the pack request, and the inspection in the result',
  async () => {
    const outcome = await play<PackTuneResult>(harness(), scenarios.packInspection);
    const { tune, prompts, inspection, cost } = resultOf(outcome);
    expect(tune.pack_id).toBe(PET_PACK_ID);
    expect(prompts.length).toBeGreaterThan(0);
    expect(inspection?.map((i) => i.field)).toEqual(['tune.image_urls[0]', 'tune.image_urls[1]']);
    const { activities } = summarize(outcome.history);
    expect(activities.slice(0, 3)).toEqual(['inspectImage', 'inspectImage', 'createPackTune']);
    expect(outcome.stats.routes).toMatchObject({ 'POST /images/inspect': 2, 'POST /p/:pack_id/tunes': 1 });
    // The pack's price for a dog, as without inspection: inspection adds no charge.
    expect(cost.mc).toBe(outcome.ledger.totalMc);
    expect(outcome.ledger.charges.filter((c) => c.object === 'tune')).toEqual([
      { object: 'tune', id: tune.id, mc: 80_000 },
    ]);
  },
);

workflowTest('a pack with a blurry photo is refused before the pack request: no tune, nothing charged', async () => {
  const outcome = await play(harness(), scenarios.packInspectionRefused);
  const { details } = refusalOf(outcome);
  expect(details.images).toEqual([{ field: 'tune.image_urls[1]', image: BLURRY_URL, flags: ['blurry'] }]);
  expect(summarize(outcome.history).activities).toEqual(['inspectImage', 'inspectImage']);
  expect(outcome.stats.routes).toEqual({ 'POST /images/inspect': 2 });
  expect(outcome.ledger).toEqual({ totalMc: 0, charges: [] });
});

workflowTest(
  'a photo from the upload directory is uploaded to inspection: a 64-pixel one is refused low_resolution',
  async () => {
    const image = path.join(fs.mkdtempSync(path.join(UPLOAD_DIR, 'inspection-')), 'small.png');
    fs.writeFileSync(image, solidPng('inspection-small', 64));
    const input = {
      tune: { name: 'dog', branch: 'sd15', images: [image] },
      prompts: [],
      options: { inspect: { refuse: ['low_resolution'] } },
    };
    const outcome = await harness().scenario({}, (s) =>
      s.withWorker(async () => s.settle(await s.start('trainThenGenerate', input, 'real'))),
    );
    const { details } = refusalOf(outcome);
    expect(details.images).toEqual([{ field: 'tune.images[0]', image, flags: ['low_resolution'] }]);
    // The upload check first (the input names a file), then the inspection; no create.
    expect(summarize(outcome.history).activities).toEqual(['checkUploads', 'inspectImage']);
    expect(outcome.stats.routes).toEqual({ 'POST /images/inspect': 1 });
    expect(outcome.ledger.totalMc).toBe(0);
  },
);

workflowTest(
  'a slow inspection (answered after 12 s, past the 10 s heartbeat timeout) completes in one attempt: it heartbeats',
  async () => {
    const input = {
      tune: { name: 'woman', model_type: 'faceid', image_urls: [INSPECTED_URLS[1]] },
      prompts: [],
      options: { inspect: REFUSE },
    };
    const faults = { answerDelayMs: 12_000, faultRoutes: ['POST /images/inspect'] };
    const outcome = await harness().scenario({ mock: { faults } }, (s) =>
      s.withWorker(async () => s.settle(await s.start('trainThenGenerate', input, 'real'))),
    );
    expect((resultOf(outcome) as TrainThenGenerateResult).inspection).toHaveLength(1);
    const { activities, attempts } = summarize(outcome.history);
    expect(activities).toEqual(['inspectImage', 'createTune']);
    expect(attempts.find((a) => a.activity === 'inspectImage')?.attempt).toBe(1);
    expect(outcome.stats.routes).toMatchObject({ 'POST /images/inspect': 1, 'POST /tunes': 1 });
  },
);

workflowTest('without options.inspect nothing is inspected: the first activity is the create', async () => {
  const outcome = await play<TrainThenGenerateResult>(harness(), scenarios.callbacksHappyPath);
  expect(resultOf(outcome)).not.toHaveProperty('inspection');
  expect(summarize(outcome.history).activities[0]).toBe('createTune');
  expect(outcome.stats.routes['POST /images/inspect']).toBeUndefined();
});
