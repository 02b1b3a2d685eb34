/**
 * packTune and generate against the real mock service, callback receiver, activities and a Temporal test server,
 * in real time.
 */
import { IMAGE_MC, TUNE_TRAINING_MC } from '../../src/mock-service';
import type { GenerateResult, PackTuneResult, ResultPrompt } from '../../src/contract/inputs';
import { useWorkflowHarness, workflowTest } from './environment';
import type { GenerateInput, PackTuneInput } from '../../src/contract/inputs';
import { resultOf, trainedPaidTune, type Outcome } from './harness';
import { summarize } from './history-summary';
import { CALLBACK_READ_SPACING_MS } from '../../src/workflows/callback-reads';
import { IMAGE_URLS, PET_PACK_ID, play, scenarios } from './scenarios';

jest.setTimeout(120_000);

const harness = useWorkflowHarness();

const packIdOf = (p: ResultPrompt) => p.pack_id;

workflowTest('a pack: the tune trains, then every prompt the pack put on it settles', async () => {
  const outcome = await play<PackTuneResult>(harness(), scenarios.pack);
  const { tune, prompts } = resultOf(outcome);
  expect(tune.trained_at).toBeTruthy();
  expect(prompts).toHaveLength(2);
  for (const prompt of prompts) {
    expect(prompt.tune_id).toBe(tune.id);
    expect(packIdOf(prompt)).toBe(PET_PACK_ID);
    expect(prompt.text).toContain('brown fur');
    expect(prompt.images?.length).toBeGreaterThan(0);
  }
  expect(outcome.stats.routes['POST /p/:pack_id/tunes']).toBe(1);
  expect(outcome.progress).toMatchObject({ phase: 'completed', prompts: { total: 2, settled: 2, failed: 0 } });
  // The pack's price for dogs (80,000 mc) covers its prompts: the cost is what the mock's ledger charged.
  expect(outcome.ledger.totalMc).toBe(80_000);
  expect(resultOf(outcome).cost).toEqual({ mc: 80_000, usd: 0.8 });
  // The tune's callback and both prompts' (the pack's prompts_callback may come after the end).
  expect(outcome.progress.counts.callbacks).toBeGreaterThanOrEqual(3);
  // The pack makes the prompts itself: its tune read after its callback, one list call finds them once it is
  // trained, and the read their callbacks asked for; callbacks end both waits, no poll.
  const { activities, timers } = summarize(outcome.history);
  expectPackReads(activities, ['createPackTune', 'retrieveTune', 'listPrompts']);
  expect(outcome.progress.counts.polls).toBe(1); // the list that learnt the pack's prompts, no timer's
  expect(timers.slice(0, 4).map((t) => t.ended)).toEqual(['cancelled', 'cancelled', 'cancelled', 'cancelled']);
  expect(timers.slice(0, 4).map((t) => t.ms)).toEqual([6 * 3_600_000, 121_000, 3_600_000, 120_000]);
  for (const timer of timers.slice(4)) expect(timer.ms).toBeLessThanOrEqual(CALLBACK_READ_SPACING_MS);
});

/**
 * A pack job's activities: `first`, then at most two list reads its prompts' callbacks asked for (none when the list
 * that learnt them found them settled already).
 */
function expectPackReads(activities: string[], first: string[]): void {
  expect(activities.slice(0, first.length)).toEqual(first);
  const reads = activities.slice(first.length);
  expect(reads.length).toBeLessThanOrEqual(2);
  for (const read of reads) expect(read).toBe('listPrompts');
}

workflowTest(
  "a pack tune in branch fast, as the service's example app makes it, runs end to end on a mock answering like Rails",
  async () => {
    const input = {
      packId: PET_PACK_ID,
      tune: { name: 'cat', image_urls: IMAGE_URLS, branch: 'fast', characteristics: '{"fur":"grey"}' },
    } satisfies PackTuneInput;
    const outcome = await harness().scenario({ mock: { answerStyle: 'rails' } }, (s) =>
      s.withWorker(async () => s.settle(await s.start('packTune', input, 'real', `pack-fast-${Date.now()}`))),
    );
    const { tune, prompts } = resultOf(outcome as Outcome<PackTuneResult>);
    expect(tune.trained_at).toBeTruthy();
    expect(prompts).toHaveLength(2);
    for (const prompt of prompts) {
      expect(prompt.tune_id).toBe(tune.id);
      expect(prompt.text).toContain('grey fur');
      expect(prompt.images?.length).toBeGreaterThan(0);
    }
    expect(outcome.stats.routes).toMatchObject({ 'POST /p/:pack_id/tunes': 1, 'GET /tunes/:id': 1 });
    expect(outcome.stats.routes['POST /tunes/:id/prompts']).toBeUndefined();
    expect(outcome.progress).toMatchObject({ phase: 'completed', prompts: { total: 2, settled: 2, failed: 0 } });
    // The same commands as any pack: the create, one list once trained; the callbacks (parsed from Rails-style
    // bodies by the receiver) end both waits.
    const { activities, calls, timers } = summarize(outcome.history);
    expectPackReads(activities, ['createPackTune', 'retrieveTune', 'listPrompts']);
    expect(outcome.stats.routes['GET /tunes/:id/prompts']).toBe(activities.length - 2);
    expect(calls[0].input).toMatchObject({
      packId: PET_PACK_ID,
      tune: { branch: 'fast', characteristics: '{"fur":"grey"}' },
    });
    expect(timers.slice(0, 4).map((t) => t.ended)).toEqual(['cancelled', 'cancelled', 'cancelled', 'cancelled']);
    expect(outcome.progress.counts.callbacks).toBeGreaterThanOrEqual(3);
    expect(outcome.progress.counts.polls).toBe(1); // the list that learnt the pack's prompts, no timer's
  },
);

workflowTest('a pack on a reused tune (tune_ids): only the prompts the request added are waited for', async () => {
  const outcome = await play<PackTuneResult>(harness(), scenarios.packReusedTune);
  const { tune, prompts } = resultOf(outcome);
  const { tuneId, oldPromptId } = outcome.context as { tuneId: number; oldPromptId: number };
  expect(tune.id).toBe(tuneId);
  expect(prompts).toHaveLength(2);
  expect(prompts.map((p) => p.id)).not.toContain(oldPromptId);
  expect(prompts.every((p) => p.id > oldPromptId && packIdOf(p) === PET_PACK_ID)).toBe(true);
  expect(prompts.every((p) => (p.images?.length ?? 0) > 0)).toBe(true);
  expect(outcome.stats.routes['POST /p/:pack_id/tunes']).toBe(1);
  expect(Object.keys(outcome.stats.routes).filter((route) => route.startsWith('DELETE'))).toEqual([]);
  // The tune's newest prompt noted first (one small list), no training wait, then the new prompts found by one list.
  const { calls, timers } = summarize(outcome.history);
  expectPackReads(
    calls.map((c) => c.activity),
    ['listPrompts', 'createPackTune', 'listPrompts'],
  );
  expect(calls[2].input).toMatchObject({ tuneId, minId: oldPromptId + 1 });
  expect(timers.slice(0, 2).map((t) => t.ms)).toEqual([3_600_000, 120_000]);
  for (const timer of timers.slice(2)) expect(timer.ms).toBeLessThanOrEqual(CALLBACK_READ_SPACING_MS);
});

workflowTest(
  'generate on a tune still training: polls until trained, then the prompts; __fail__ settles with a user_error',
  async () => {
    const outcome = await play<GenerateResult>(harness(), scenarios.generateOnTrainingTune);
    const { prompts } = resultOf(outcome);
    const { tuneId } = outcome.context as { tuneId: number };
    expect(prompts.map((p) => p.tune_id)).toEqual([tuneId, tuneId]);
    expect(prompts[0].images).toHaveLength(2);
    expect(prompts[1].user_error).toBeTruthy();
    expect(outcome.progress).toMatchObject({
      phase: 'completed',
      tuneId,
      prompts: { total: 2, settled: 2, failed: 1 },
    });
    // The first read, then at least one poll while it trained.
    const reads = outcome.stats.routes['GET /tunes/:id'];
    expect(reads).toBeGreaterThanOrEqual(2);
    expect(outcome.progress.counts.polls).toBeGreaterThanOrEqual(1);
    // Every read of the tune is a retrieveTune in history, each poll after a timer of the polling-only schedule (the
    // tune's callback goes to whoever made it): 1 s, 2 s, then the 3 s ceiling; then the two prompts, read once their
    // callbacks came.
    const { activities, timers } = summarize(outcome.history);
    expectPackReads(activities, [...Array(reads).fill('retrieveTune'), 'createPrompt', 'createPrompt']);
    expect(activities.length).toBeGreaterThan(reads + 2);
    expect(timers[0]).toEqual({ ms: 120_000, ended: 'cancelled' }); // the training deadline
    expect(timers.slice(1, reads)).toEqual(
      Array.from({ length: reads - 1 }, (_, i) => ({ ms: Math.min(1_000 * 2 ** i, 3_000), ended: 'fired' })),
    );
  },
);

workflowTest('generate on a paid tune: its cost is its prompts, not the tune it only uses', async () => {
  const outcome = await harness().scenario({}, async (s) => {
    const created = await trainedPaidTune(s.api, IMAGE_URLS);
    const input: GenerateInput = {
      tuneId: created.id,
      prompts: [{ text: 'sks dog on a beach', num_images: 2 }, { text: 'sks dog running' }],
    };
    return s.withWorker(async () => s.settle<GenerateResult>(await s.start('generate', input, 'real')));
  });
  const { prompts, cost } = resultOf<GenerateResult>(outcome);
  expect(prompts.map((p) => p.images?.length)).toEqual([2, 1]);
  // The account paid for the tune too, but not through this job.
  expect(outcome.ledger.totalMc).toBe(TUNE_TRAINING_MC + 3 * IMAGE_MC);
  const ids = new Set(prompts.map((p) => p.id));
  const promptsMc = outcome.ledger.charges.filter((c) => ids.has(c.id)).reduce((sum, c) => sum + c.mc, 0);
  expect(promptsMc).toBe(3 * IMAGE_MC);
  expect(cost).toEqual({ mc: promptsMc, usd: promptsMc / 100_000 });
  expect(outcome.progress.cost).toEqual(cost);
  // The history: one read of the trained tune, the two prompts created on it (nothing created or deleted besides),
  // and the run's recorded result is the one returned.
  const { activities, calls } = summarize(outcome.history);
  const tuneId = prompts[0].tune_id;
  expect(activities[0]).toBe('retrieveTune');
  // The read that also says whose the tune is (the tenant's, or refused naming the field).
  expect(calls[0].input).toEqual({ tuneId, brief: true, owned: 'tuneId' });
  expect(activities.filter((a) => /^(create|delete)/.test(a))).toEqual(['createPrompt', 'createPrompt']);
  const created = calls.filter((c) => c.activity === 'createPrompt');
  expect(created.map((c) => (c.input as { tuneId: number }).tuneId)).toEqual([tuneId, tuneId]);
  expect(created.map((c) => (c.input as { prompt: { num_images?: number } }).prompt.num_images).sort()).toEqual([
    2,
    undefined,
  ]);
  const completed = outcome.history.events?.at(-1)?.workflowExecutionCompletedEventAttributes;
  expect(completed).toBeTruthy();
  const recorded = JSON.parse(Buffer.from(completed!.result!.payloads![0].data!).toString('utf8'));
  expect(recorded).toEqual(JSON.parse(JSON.stringify(resultOf<GenerateResult>(outcome))));
});
