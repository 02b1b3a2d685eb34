/**
 * `maxCostMc` against the real mock service, callback receiver, activities and a Temporal test server, in real time:
 * each charge is weighed before the create that makes it, at a price known beforehand, and the result's (or the
 * failure's) `cost` is what the mock's ledger charged for the job. Prices (src/mock-service/pricing.ts): training
 * 150,000 mc, 2,000 mc an image, a pack its price for the class, `branch: fast` nothing.
 */
import { ApplicationFailure, WorkflowFailedError } from '@temporalio/client';
import type { Prompt } from '../../src/api/schemas';
import { IMAGE_MC, TUNE_TRAINING_MC } from '../../src/mock-service';
import type { History } from '@temporalio/common/lib/proto-utils';
import { defaultPayloadConverter } from '@temporalio/common';
import type { OverBudgetDetails, PriceUnknownDetails } from '../../src/contract/failures';
import { costMcOf } from '../../src/contract/cost';
import type { PackTuneInput, PackTuneResult, TrainThenGenerateResult } from '../../src/contract/inputs';
import { useWorkflowHarness, workflowTest } from './environment';
import { resultOf, trainedPaidTune, type Outcome } from './harness';
import { summarize } from './history-summary';
import { IMAGE_URLS, PET_PACK_ID, play, scenarios } from './scenarios';
import { EARLIER_PATCHES_FOLDED } from '../../src/workflows/patches';

jest.setTimeout(120_000);

const harness = useWorkflowHarness();

/** The workflow's typed failure. */
function failureOf(outcome: Outcome<unknown>): ApplicationFailure {
  expect(outcome.error).toBeInstanceOf(WorkflowFailedError);
  const failure = (outcome.error as WorkflowFailedError).cause as ApplicationFailure;
  expect(failure).toBeInstanceOf(ApplicationFailure);
  expect(failure.nonRetryable).toBe(true);
  return failure;
}

/** What the ledger charged for these objects (the scenario's own setup, an existing tune, is not the job's). */
function chargedFor(outcome: Outcome<unknown>, ids: number[]): number {
  return outcome.ledger.charges.filter((c) => ids.includes(c.id)).reduce((sum, c) => sum + c.mc, 0);
}

/** Refused before anything was created: no activity, no request, nothing charged; the one marker of a new run. */
function expectNothingCreated(outcome: Outcome<unknown>, setupMc = 0): void {
  const { activities, timers, patches } = summarize(outcome.history);
  expect(activities).toEqual([]);
  expect(timers).toEqual([]);
  expect(patches).toEqual([EARLIER_PATCHES_FOLDED]);
  expect(outcome.ledger.totalMc).toBe(setupMc);
  expect(outcome.progress).toMatchObject({ phase: 'failed', cost: { mc: 0 }, counts: { apiCalls: 0 } });
}

workflowTest(
  'a priced training and no prompts: the tune is the cost, within maxCostMc, and the job completes',
  async () => {
    const outcome = await play<TrainThenGenerateResult>(harness(), scenarios.pricedTrainingNoPrompts);
    const { tune, prompts, cost } = resultOf(outcome);
    expect(tune.trained_at).toBeTruthy();
    expect(prompts).toEqual([]);
    expect(outcome.ledger.charges).toEqual([{ object: 'tune', id: tune.id, mc: TUNE_TRAINING_MC }]);
    expect(cost).toEqual({ mc: TUNE_TRAINING_MC, usd: 1.5 });
    expect(outcome.progress.cost).toEqual(cost);
    expect(outcome.stats.routes['POST /tunes']).toBe(1);
    expect(outcome.stats.routes['POST /tunes/:id/prompts']).toBeUndefined();
    const { activities, patches } = summarize(outcome.history);
    expect(activities).toEqual(['createTune', 'retrieveTune']);
    expect(patches).toEqual([EARLIER_PATCHES_FOLDED]); // one marker: every rule on it
  },
);

workflowTest(
  'a training on branch fast is free: maxCostMc 0 needs no tuneCostMc, and the job completes at cost 0',
  async () => {
    const outcome = await play<TrainThenGenerateResult>(harness(), scenarios.fastTrainingMaxCost);
    const { tune, prompts, cost } = resultOf(outcome);
    expect(tune.branch).toBe('fast');
    expect(prompts).toHaveLength(1);
    expect(cost).toEqual({ mc: 0, usd: 0 });
    expect(outcome.progress.cost).toEqual(cost);
    expect(outcome.ledger.totalMc).toBe(0);
    expect(outcome.ledger.charges.map((c) => c.object)).toEqual(['tune', 'prompt']);
    expect(outcome.stats.routes).toMatchObject({ 'POST /tunes': 1, 'POST /tunes/:id/prompts': 1 });
    const { activities, patches } = summarize(outcome.history);
    expect(activities.slice(0, 3)).toEqual(['createTune', 'retrieveTune', 'createPrompt']);
    expect(patches).toEqual([EARLIER_PATCHES_FOLDED]);
  },
);

workflowTest('a training priced above maxCostMc (tuneCostMc): OverBudget before anything is created', async () => {
  const outcome = await play(harness(), scenarios.overBudgetTune);
  const failure = failureOf(outcome);
  expect(failure.type).toBe('OverBudget');
  expect(failure.message).toBe('The tune costs 150000 mc (tuneCostMc), above maxCostMc 100000: nothing was created');
  expect(failure.details?.[0]).toEqual({
    maxCostMc: 100_000,
    cost: { mc: 0, usd: 0 },
    tuneCostMc: 150_000,
    notCreated: [0, 1],
    prompts: [],
  });
  expect(outcome.stats.routes).toEqual({});
  // The option is new: no run started before could reach this refusal, so it needs no marker.
  const { activities, timers } = summarize(outcome.history);
  expect(activities).toEqual([]);
  expect(timers).toEqual([]);
  expect(outcome.ledger.totalMc).toBe(0);
});

workflowTest(
  'maxCostMc on a paid training without tuneCostMc: InvalidOptions naming tuneCostMc, nothing created',
  async () => {
    const outcome = await play(harness(), scenarios.unpricedTraining);
    const failure = failureOf(outcome);
    expect(failure.type).toBe('InvalidOptions');
    expect(failure.message).toMatch(
      /^Invalid option tuneCostMc: is needed with maxCostMc to train a tune not on branch/,
    );
    expect(failure.details?.[0]).toMatchObject({ option: 'tuneCostMc' });
    expect((failure.details?.[0] as { rule: string }).rule).toContain('the service publishes no price for a tune');
    expect(outcome.stats.routes).toEqual({});
    expectNothingCreated(outcome);
  },
);

workflowTest(
  'a tune charged above its stated price passes maxCostMc: the run stops at the create, OverBudget, tune kept',
  async () => {
    const outcome = await play(harness(), scenarios.tunePriceUnderstated);
    const failure = failureOf(outcome);
    expect(failure.type).toBe('OverBudget');
    const [charge] = outcome.ledger.charges;
    expect(outcome.ledger.charges).toEqual([{ object: 'tune', id: charge.id, mc: TUNE_TRAINING_MC }]);
    expect(failure.details?.[0]).toEqual({
      maxCostMc: 120_000,
      cost: { mc: TUNE_TRAINING_MC, usd: 1.5 },
      tuneCostMc: 100_000,
      tuneId: charge.id,
      notCreated: [0, 1],
      prompts: [],
    });
    expect(failure.message).toContain('Passed maxCostMc 120000: the service charged more than the price expected');
    expect(outcome.progress).toMatchObject({ phase: 'failed', tuneId: charge.id, cost: { mc: TUNE_TRAINING_MC } });
    // Nothing after the create: no training wait, no prompt.
    const { activities, timers, patches } = summarize(outcome.history);
    expect(activities).toEqual(['createTune']);
    expect(timers).toEqual([]);
    expect(patches).toEqual([EARLIER_PATCHES_FOLDED]);
    expect(outcome.stats.routes['POST /tunes/:id/prompts']).toBeUndefined();
  },
);

workflowTest(
  'maxCostMc: the job stops creating prompts before its cost would pass it, waits for those made, fails OverBudget',
  async () => {
    const outcome = await play(harness(), scenarios.overBudgetPrompts);
    const failure = failureOf(outcome);
    expect(failure.type).toBe('OverBudget');
    // Training 150,000 + 2 images of 2,000 = 154,000 <= 155,000; a third image would make 156,000.
    const details = failure.details?.[0] as OverBudgetDetails;
    expect(details).toMatchObject({
      maxCostMc: 155_000,
      cost: { mc: 154_000, usd: 1.54 },
      tuneCostMc: 150_000,
      notCreated: [2, 3],
    });
    expect(failure.message).toContain('Stopped before passing maxCostMc 155000: the job cost 154000 mc');
    expect(details.prompts).toHaveLength(2);
    for (const p of details.prompts) expect(p.images).toHaveLength(1); // the two it made settled first
    // The mock answered cost_mc as strings ("150000.0"); the cost is still what its ledger charged.
    expect(outcome.ledger.totalMc).toBe(154_000);
    expect(details.tuneId).toBe(outcome.ledger.charges[0].id);
    expect(outcome.stats.routes['POST /tunes/:id/prompts']).toBe(2);
    expect(outcome.progress).toMatchObject({ phase: 'failed', cost: { mc: 154_000 }, prompts: { total: 2 } });
    const { activities, patches } = summarize(outcome.history);
    expect(activities.slice(0, 4)).toEqual(['createTune', 'retrieveTune', 'createPrompt', 'createPrompt']);
    expect(activities.slice(4).every((a) => a === 'listPrompts')).toBe(true);
    expect(patches).toEqual([EARLIER_PATCHES_FOLDED]);
    // every answer said its price: no read
  },
);

workflowTest(
  'a first prompt whose price passes maxCostMc: it settles, then the run fails OverBudget instead of completing',
  async () => {
    const outcome = await play(harness(), scenarios.firstPromptOverBudget);
    const failure = failureOf(outcome);
    expect(failure.type).toBe('OverBudget');
    const details = failure.details?.[0] as OverBudgetDetails;
    expect(details).toMatchObject({ maxCostMc: 5_000, cost: { mc: 4 * IMAGE_MC }, notCreated: [] });
    expect(details.tuneId).toBeUndefined(); // generate creates no tune
    expect(details.prompts).toHaveLength(1);
    expect(details.prompts[0].images).toHaveLength(4);
    expect(chargedFor(outcome, [details.prompts[0].id])).toBe(4 * IMAGE_MC);
    // The account also paid for the existing tune, made outside the job.
    expect(outcome.ledger.totalMc).toBe(TUNE_TRAINING_MC + 4 * IMAGE_MC);
    expect(outcome.progress).toMatchObject({ phase: 'failed', cost: { mc: 4 * IMAGE_MC } });
    const { activities, patches } = summarize(outcome.history);
    expect(activities.slice(0, 2)).toEqual(['retrieveTune', 'createPrompt']);
    expect(activities.slice(2).every((a) => a === 'listPrompts')).toBe(true);
    expect(patches).toEqual([EARLIER_PATCHES_FOLDED]);
  },
);

/**
 * The prompt creates scheduled while an earlier create had answered without `cost_mc` and its read had not answered
 * yet: none, where no create starts while a price is unknown.
 */
function createsWhilePriceUnknown(history: History): number {
  const decode = (payload: unknown) =>
    payload
      ? defaultPayloadConverter.fromPayload(payload as Parameters<typeof defaultPayloadConverter.fromPayload>[0])
      : undefined;
  const typeOf = new Map<number, string>();
  const awaiting = new Set<number>();
  let early = 0;
  for (const event of history.events ?? []) {
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (scheduled) {
      const type = scheduled.activityType?.name ?? '?';
      typeOf.set(Number(event.eventId), type);
      if (type === 'createPrompt' && awaiting.size) early++;
    }
    const completed = event.activityTaskCompletedEventAttributes;
    if (!completed) continue;
    const type = typeOf.get(Number(completed.scheduledEventId));
    const answer = decode(completed.result?.payloads?.[0]) as { id: number; cost_mc?: unknown };
    if (type === 'createPrompt' && costMcOf(answer) === undefined) awaiting.add(answer.id);
    if (type === 'retrievePrompt') awaiting.delete(answer.id);
  }
  return early;
}

workflowTest(
  'prompt creates answered without cost_mc: each is read once before another create starts; the run stays within',
  async () => {
    const outcome = await play(harness(), scenarios.unpricedPromptsRead);
    const failure = failureOf(outcome);
    // Training 150,000 + five one-image prompts of 2,000 = 160,000: the sixth would pass the limit.
    expect(failure.type).toBe('OverBudget');
    const details = failure.details?.[0] as OverBudgetDetails;
    expect(details).toMatchObject({ maxCostMc: 160_000, cost: { mc: 160_000 }, notCreated: [5, 6, 7, 8, 9] });
    expect(details.prompts).toHaveLength(5);
    expect(outcome.ledger.totalMc).toBe(160_000);
    expect(outcome.journal.prompts).toHaveLength(5);
    expect(outcome.stats.routes['POST /tunes/:id/prompts']).toBe(5);
    expect(outcome.stats.routes['GET /tunes/:tune_id/prompts/:id']).toBe(5);
    const { activities, calls, patches } = summarize(outcome.history);
    expect(activities.slice(0, 4)).toEqual(['createTune', 'retrieveTune', 'createPrompt', 'retrievePrompt']);
    expect(activities.filter((a) => a === 'createPrompt')).toHaveLength(5);
    expect(activities.filter((a) => a === 'retrievePrompt')).toHaveLength(5);
    expect(calls.filter((c) => c.activity === 'retrievePrompt').map((c) => costMcOf(c.result as Prompt))).toEqual(
      Array(5).fill(2_000),
    );
    expect(createsWhilePriceUnknown(outcome.history)).toBe(0);
    expect(patches).toEqual([EARLIER_PATCHES_FOLDED]);
    expect(outcome.progress).toMatchObject({ phase: 'failed', cost: { mc: 160_000 } });
  },
);

workflowTest(
  'a prompt whose price neither its create nor a read says: no other create, PriceUnknown once it settled, within',
  async () => {
    const outcome = await play(harness(), scenarios.unpricedPromptsStop);
    const failure = failureOf(outcome);
    expect(failure.type).toBe('PriceUnknown');
    const details = failure.details?.[0] as PriceUnknownDetails;
    const [tuneCharge, promptCharge] = outcome.ledger.charges;
    expect(outcome.ledger.charges).toEqual([
      { object: 'tune', id: tuneCharge.id, mc: TUNE_TRAINING_MC },
      { object: 'prompt', id: promptCharge.id, mc: IMAGE_MC },
    ]);
    expect(outcome.ledger.totalMc).toBeLessThanOrEqual(160_000);
    // The service never said the prompt's price: the cost known is the tune's, a floor.
    expect(details).toEqual({
      maxCostMc: 160_000,
      cost: { mc: TUNE_TRAINING_MC, usd: 1.5 },
      tuneCostMc: TUNE_TRAINING_MC,
      tuneId: tuneCharge.id,
      unpriced: [{ object: 'prompt', id: promptCharge.id, position: 0 }],
      notCreated: [1, 2, 3, 4, 5, 6, 7, 8, 9],
      prompts: [expect.objectContaining({ id: promptCharge.id, images: [expect.any(String)] })],
    });
    expect(failure.message).toBe(
      `Stopped creating under maxCostMc 160000: the service did not say what prompt ${promptCharge.id} (input ` +
        "position 0) cost, in the create's answer or in a read of it; 9 of 10 prompts not created (input positions " +
        `1, 2, 3, 4, 5, 6, 7, 8, 9); the job cost at least 150000 mc ($1.5), the prices known; tune ${tuneCharge.id} ` +
        'is kept',
    );
    expect(outcome.journal.prompts.map((p) => p.id)).toEqual([promptCharge.id]);
    expect(outcome.journal.prompts[0].settledAt).not.toBeNull();
    expect(outcome.stats.routes['POST /tunes/:id/prompts']).toBe(1);
    expect(outcome.stats.routes['GET /tunes/:tune_id/prompts/:id']).toBe(1);
    const { activities, patches } = summarize(outcome.history);
    expect(activities.slice(0, 4)).toEqual(['createTune', 'retrieveTune', 'createPrompt', 'retrievePrompt']);
    // Then only the wait for the one prompt made: no create, no other read.
    expect(activities.slice(4).every((a) => a === 'listPrompts')).toBe(true);
    expect(patches).toEqual([EARLIER_PATCHES_FOLDED]);
    expect(outcome.progress).toMatchObject({ phase: 'failed', cost: { mc: TUNE_TRAINING_MC }, prompts: { total: 1 } });
  },
);

workflowTest("maxCostMc below a pack's price for the class: OverBudget before anything is created", async () => {
  const outcome = await play(harness(), scenarios.overBudgetPack);
  const failure = failureOf(outcome);
  expect(failure.type).toBe('OverBudget');
  expect(failure.message).toContain('80000 mc for class dog');
  expect(failure.details?.[0]).toMatchObject({ maxCostMc: 50_000, packPriceMc: 80_000, cost: { mc: 0 } });
  expect(outcome.stats.routes).toEqual({ 'GET /p/:id': 1 });
  expect(outcome.ledger.totalMc).toBe(0);
  expect(summarize(outcome.history).activities).toEqual(['packPrice']);
});

workflowTest("maxCostMc at a pack's price for the class: the pack is read, created, and costs its price", async () => {
  const input: PackTuneInput = {
    packId: PET_PACK_ID,
    tune: { name: 'dog', image_urls: IMAGE_URLS },
    options: { maxCostMc: 80_000 },
  };
  const outcome = await harness().scenario({}, (s) =>
    s.withWorker(async () => s.settle<PackTuneResult>(await s.start('packTune', input, 'real'))),
  );
  const { tune, prompts, cost } = resultOf(outcome);
  expect(prompts).toHaveLength(2);
  expect(outcome.ledger.totalMc).toBe(80_000);
  expect(chargedFor(outcome, [tune.id])).toBe(80_000);
  expect(cost).toEqual({ mc: 80_000, usd: 0.8 });
  const { activities, patches } = summarize(outcome.history);
  expect(activities.slice(0, 4)).toEqual(['packPrice', 'createPackTune', 'retrieveTune', 'listPrompts']);
  expect(patches).toEqual([EARLIER_PATCHES_FOLDED]);
});

workflowTest('a pack in branch fast is free: maxCostMc 0 lets it run, with no price read, and it costs 0', async () => {
  const outcome = await play<PackTuneResult>(harness(), scenarios.packFastMaxCost);
  const { tune, prompts, cost } = resultOf(outcome);
  expect(tune.branch).toBe('fast');
  expect(prompts).toHaveLength(2);
  expect(cost).toEqual({ mc: 0, usd: 0 });
  expect(outcome.ledger.totalMc).toBe(0);
  expect(outcome.ledger.charges.map((c) => c.object)).toEqual(['tune', 'prompt', 'prompt']);
  expect(outcome.stats.routes['GET /p/:id']).toBeUndefined();
  const { activities, patches } = summarize(outcome.history);
  expect(activities.slice(0, 3)).toEqual(['createPackTune', 'retrieveTune', 'listPrompts']);
  expect(patches).toEqual([EARLIER_PATCHES_FOLDED]);
});

workflowTest(
  'a FaceID pack, ready at creation: its tune is read once for its price, and the cost is the ledger',
  async () => {
    const outcome = await play<PackTuneResult>(harness(), scenarios.packFaceId);
    const { tune, prompts, cost } = resultOf(outcome);
    // The full tune, not the create's pack form: the price, the type.
    expect(tune).toMatchObject({ model_type: 'faceid', cost_mc: 40_000 });
    expect(prompts).toHaveLength(2);
    expect(prompts.every((p) => p.tune_id === tune.id && (p.images?.length ?? 0) > 0)).toBe(true);
    expect(outcome.ledger.totalMc).toBe(40_000);
    expect(chargedFor(outcome, [tune.id])).toBe(40_000);
    expect(cost).toEqual({ mc: 40_000, usd: 0.4 });
    expect(outcome.progress.cost).toEqual(cost);
    const { activities, calls, timers, patches } = summarize(outcome.history);
    expect(activities.slice(0, 3)).toEqual(['createPackTune', 'retrieveTune', 'listPrompts']);
    // Asked brief: the price and the result's fields, not the tune's every field.
    expect(calls[1].input).toEqual({ tuneId: tune.id, brief: true });
    expect(calls[1].result).not.toHaveProperty('orig_images');
    expect(activities.slice(3).every((a) => a === 'listPrompts')).toBe(true);
    // No training wait: at most the prompts' (their deadline, first poll, and callback gatherings).
    expect(timers.map((t) => t.ms)).not.toContain(6 * 3_600_000);
    expect(patches).toEqual([EARLIER_PATCHES_FOLDED]);
    expect(outcome.stats.routes['GET /tunes/:id']).toBe(1);
  },
);

workflowTest(
  'a pack on one existing paid tune: the cost is the prompts the request added, as the ledger charged them',
  async () => {
    const outcome = await harness().scenario({}, async (s) => {
      const created = await trainedPaidTune(s.api, IMAGE_URLS);
      const input: PackTuneInput = { packId: PET_PACK_ID, tune: { tune_ids: [created.id] } };
      return s.withWorker(async () => s.settle<PackTuneResult>(await s.start('packTune', input, 'real')));
    });
    const { tune, prompts, cost } = resultOf(outcome);
    expect(prompts).toHaveLength(2);
    const promptIds = prompts.map((p) => p.id);
    // Two one-image pack prompts added to a paid tune: 2,000 mc each; the tune was paid for outside the job.
    expect(chargedFor(outcome, promptIds)).toBe(2 * IMAGE_MC);
    expect(outcome.ledger.totalMc).toBe(TUNE_TRAINING_MC + 2 * IMAGE_MC);
    expect(chargedFor(outcome, [tune.id])).toBe(TUNE_TRAINING_MC);
    expect(cost).toEqual({ mc: 2 * IMAGE_MC, usd: 0.04 });
    const { activities, patches } = summarize(outcome.history);
    expect(activities.slice(0, 3)).toEqual(['listPrompts', 'createPackTune', 'listPrompts']);
    expect(patches).toEqual([EARLIER_PATCHES_FOLDED]);
  },
);

workflowTest(
  'maxCostMc with a pack on an existing tune: InvalidOptions before the request (no price known)',
  async () => {
    const outcome = await play(harness(), scenarios.packReusedTuneMaxCost);
    const failure = failureOf(outcome);
    expect(failure.type).toBe('InvalidOptions');
    expect(failure.details?.[0]).toMatchObject({ option: 'maxCostMc' });
    expect(failure.message).toContain(
      'Invalid option maxCostMc: cannot be held for a pack on existing tunes (tune.tune_ids)',
    );
    expect(outcome.stats.routes['POST /p/:pack_id/tunes']).toBeUndefined();
    expectNothingCreated(outcome, TUNE_TRAINING_MC); // the existing tune, made outside the job
  },
);

workflowTest('a pack on several existing tunes: InvalidInput naming tune.tune_ids, nothing created', async () => {
  const outcome = await play(harness(), scenarios.packSeveralTunes);
  const failure = failureOf(outcome);
  expect(failure.type).toBe('InvalidInput');
  expect(failure.details?.[0]).toMatchObject({ field: 'tune.tune_ids' });
  expect(failure.message).toBe(
    'Invalid input: tune.tune_ids: must name one tune: a run follows one tune (its prompts, its cost); start one ' +
      'packTune per tune',
  );
  expect(outcome.stats.routes['POST /p/:pack_id/tunes']).toBeUndefined();
  expectNothingCreated(outcome, 2 * TUNE_TRAINING_MC); // the two existing tunes
});
