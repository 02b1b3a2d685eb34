/**
 * trainThenGenerate against the real mock service, callback receiver, activities and a Temporal test server, in
 * real time (a plain client: the mock's callbacks must win their race against poll timers).
 */
import { CancelledFailure, WorkflowFailedError } from '@temporalio/client';
import { FLUX_BASE_TUNE, IMAGE_MC, TUNE_TRAINING_MC } from '../../src/mock-service';
import type { TrainThenGenerateResult } from '../../src/contract/inputs';
import { RESULT_PROMPT_FIELDS, RESULT_TUNE_FIELDS } from '../../src/contract/results';
import { useWorkflowHarness, workflowTest } from './environment';
import { resultOf } from './harness';
import { historyToJson } from './history-json';
import { summarize, type Timer } from './history-summary';
import { CALLBACK_READ_SPACING_MS } from '../../src/workflows/callback-reads';
import { play, scenarios } from './scenarios';
import { EARLIER_PATCHES_FOLDED } from '../../src/workflows/patches';

jest.setTimeout(120_000);

const harness = useWorkflowHarness();

const HOUR = 3_600_000;
const MINUTE = 60_000;

/**
 * Callbacks ended each wait, by the read each asked for: the deadline and first poll timers of both waits were
 * cancelled, and any later timer is a callback gathering the others' (at most CALLBACK_READ_SPACING_MS), never a poll.
 */
function expectEndedByCallbacks(timers: Timer[], firstTunePollMs: number): void {
  expect(timers.slice(0, 4)).toEqual([
    { ms: 6 * HOUR, ended: 'cancelled' }, // training deadline
    { ms: firstTunePollMs, ended: 'cancelled' }, // first poll: the eta, then the 2 min poll interval
    { ms: HOUR, ended: 'cancelled' }, // prompts deadline
    { ms: 2 * MINUTE, ended: 'cancelled' }, // first prompts poll
  ]);
  for (const timer of timers.slice(4)) expect(timer.ms).toBeLessThanOrEqual(CALLBACK_READ_SPACING_MS);
}

/**
 * The activities of a train-then-generate job whose callbacks woke it: the tune read once after its callback, the
 * prompts read with one list call per gathering of their callbacks (one, or two when they came apart).
 */
function expectReadsAfterCallbacks(activities: string[], prompts: number): number {
  expect(activities.slice(0, 2 + prompts)).toEqual([
    'createTune',
    'retrieveTune',
    ...Array(prompts).fill('createPrompt'),
  ]);
  const lists = activities.slice(2 + prompts);
  expect(lists.length).toBeGreaterThanOrEqual(1);
  expect(lists.length).toBeLessThanOrEqual(2);
  expect(new Set(lists)).toEqual(new Set(['listPrompts']));
  return lists.length;
}

workflowTest('happy path: callbacks wake every wait, the run reads what they said, no poll is made', async () => {
  const outcome = await play<TrainThenGenerateResult>(harness(), scenarios.callbacksHappyPath);
  const { tune, prompts } = resultOf(outcome);
  expect(tune.trained_at).toBeTruthy();
  expect(tune.title?.startsWith(`${outcome.workflowId}#`)).toBe(true);
  expect(prompts.map((p) => p.text)).toEqual(['sks dog on a beach', 'sks dog in the snow']);
  expect(prompts.map((p) => p.images?.length)).toEqual([2, 1]);
  expect(prompts.every((p) => p.tune_id === tune.id)).toBe(true);
  const history = summarize(outcome.history);
  const lists = expectReadsAfterCallbacks(history.activities, 2);
  expect(outcome.stats.routes).toEqual({
    'POST /tunes': 1,
    'GET /tunes/:id': 1,
    'POST /tunes/:id/prompts': 2,
    'GET /tunes/:id/prompts': lists,
  });
  // The tune trains in 1 s: its first poll would have come at eta (1 s) + 2 min.
  expectEndedByCallbacks(history.timers, MINUTE * 2 + 1_000);
  expect(history.signals).toEqual(['callback', 'callback', 'callback']);
  expect(outcome.progress).toEqual({
    phase: 'completed',
    tuneId: tune.id,
    prompts: { total: 2, settled: 2, failed: 0 },
    cost: { mc: 0, usd: 0 }, // branch fast is free
    counts: { apiCalls: 4 + lists, polls: 0, callbacks: 3 },
    phases: ['creating-tune', 'training', 'creating-prompts', 'generating', 'completed'].map((phase) => ({
      phase,
      since: expect.any(Number),
    })),
    // Every image of the settled prompts, in the prompts' order, as the result has them.
    images: outcome.result!.prompts.flatMap((p) => p.images!.map((url, index) => ({ promptId: p.id, index, url }))),
  });
  expect(outcome.ledger.totalMc).toBe(0);
  expect(outcome.result?.cost).toEqual({ mc: 0, usd: 0 });
  // Brief answers: each copy entered history with only what the run reads and the result gives, done or not; the
  // result is the done copies cut to the result's fields (src/contract/results.ts), no callback URL in it.
  const answers = (activity: string) => history.calls.filter((c) => c.activity === activity).map((c) => c.result);
  expect(answers('createTune')).toEqual([expect.not.objectContaining({ orig_images: expect.anything() })]);
  expect(answers('createTune')[0]).toMatchObject({ id: tune.id, trained_at: null, eta: expect.any(String) });
  const read = answers('retrieveTune')[0] as Record<string, unknown>;
  expect(read).toMatchObject({ id: tune.id, trained_at: tune.trained_at, token: 'sks' });
  expect(read).not.toHaveProperty('orig_images');
  for (const copy of [answers('createTune')[0], read, ...answers('createPrompt')] as { callback: string }[])
    expect(copy.callback).toMatch(/^http:\/\/[^?]+\/callbacks\/(tune|prompt)$/);
  expect(Object.keys(tune).every((field) => (RESULT_TUNE_FIELDS as readonly string[]).includes(field))).toBe(true);
  expect(tune).toEqual(Object.fromEntries(RESULT_TUNE_FIELDS.filter((f) => f in read).map((f) => [f, read[f]])));
  for (const prompt of prompts)
    expect(Object.keys(prompt).every((field) => (RESULT_PROMPT_FIELDS as readonly string[]).includes(field))).toBe(
      true,
    );
  expect(prompts.map((p) => p.num_images)).toEqual([2, 1]);
  expect(prompts.every((p) => !('url' in p) && !('callback' in p))).toBe(true);
});

workflowTest('every callback dropped: polls near the eta and after the prompts start finish the job', async () => {
  const outcome = await play<TrainThenGenerateResult>(harness(), scenarios.callbacksDropped);
  const { tune, prompts } = resultOf(outcome);
  expect(tune.trained_at).toBeTruthy();
  expect(prompts.map((p) => p.images?.length)).toEqual([2, 1]);
  expect(outcome.stats.callbacks.dropped).toBe(3);
  // The tune trains in 1 s and the first poll comes 1 s after its eta; the prompts take 0.5 s and the first list
  // comes 1 s after they start: one look each, a second only if the machine is slow.
  const tunePolls = outcome.stats.routes['GET /tunes/:id'] ?? 0;
  const listPolls = outcome.stats.routes['GET /tunes/:id/prompts'] ?? 0;
  expect(tunePolls).toBeGreaterThanOrEqual(1);
  expect(tunePolls).toBeLessThanOrEqual(2);
  expect(listPolls).toBeGreaterThanOrEqual(1);
  expect(listPolls).toBeLessThanOrEqual(2);
  expect(outcome.progress.counts).toEqual({
    apiCalls: 3 + tunePolls + listPolls,
    polls: tunePolls + listPolls,
    callbacks: 0,
  });
  // In history: one retrieveTune per fired tune poll timer, then ONE listPrompts per fired prompts poll timer.
  const { activities, timers, signals } = summarize(outcome.history);
  expect(activities).toEqual([
    'createTune',
    ...Array(tunePolls).fill('retrieveTune'),
    'createPrompt',
    'createPrompt',
    ...Array(listPolls).fill('listPrompts'),
  ]);
  expect(signals).toEqual([]);
  const [trainingDeadline, firstTunePoll] = timers;
  expect(trainingDeadline).toEqual({ ms: 2 * MINUTE, ended: 'cancelled' });
  expect(firstTunePoll).toEqual({ ms: 2_000, ended: 'fired' }); // eta (1 s) + the 1 s poll interval
  const promptTimers = timers.slice(1 + tunePolls);
  expect(promptTimers[0]).toEqual({ ms: 2 * MINUTE, ended: 'cancelled' });
  expect(promptTimers.filter((t) => t.ended === 'fired')).toHaveLength(listPolls);
  expect(promptTimers[1]).toEqual({ ms: 1_000, ended: 'fired' }); // the prompts' start + 1 s
});

workflowTest('duplicate, stale and foreign callbacks change nothing', async () => {
  const outcome = await play<TrainThenGenerateResult>(harness(), scenarios.callbacksDuplicatedAndReordered);
  const { tune, prompts } = resultOf(outcome);
  expect(outcome.stats.callbacks.duplicated).toBe(3);
  // The stale copy of the tune (untrained) came after it trained: the result keeps the trained one.
  expect(tune.trained_at).toBeTruthy();
  // The stale copies of the prompts (no images) came while they ran: every prompt still settles with its images.
  expect(prompts.map((p) => p.images?.length)).toEqual([2, 1]);
  expect(prompts.map((p) => p.id)).not.toContain(987_654);
  expect(outcome.progress.prompts).toEqual({ total: 2, settled: 2, failed: 0 });
  // Two foreign, one stale tune, two stale prompts, and the service's three (their duplicates are answered by the
  // receiver as coalesced: they never reach the run).
  expect(outcome.progress.counts.callbacks).toBe(8);
  expect(outcome.progress.counts.polls).toBe(0);
  expect(outcome.stats.routes['POST /tunes']).toBe(1);
  expect(outcome.stats.routes['POST /tunes/:id/prompts']).toBe(2);
  const history = summarize(outcome.history);
  // The foreign and stale callbacks cost no read of their own: the tune was read once, after its own callback.
  expect(history.activities.filter((a) => a === 'retrieveTune')).toHaveLength(1);
  expect(history.activities.filter((a) => a === 'listPrompts').length).toBeLessThanOrEqual(3);
  expect(outcome.progress.counts.apiCalls).toBe(history.activities.length);
  expect(history.signals.length).toBe(outcome.progress.counts.callbacks);
});

workflowTest(
  'forged callbacks with the run own signed URLs change no result, phase or cost, and leave its history small',
  async () => {
    const outcome = await play<TrainThenGenerateResult>(harness(), scenarios.forgedCallbacks);
    const { tune, prompts, cost } = resultOf(outcome);
    const text = JSON.stringify(outcome.result);
    // Nothing the forgeries said: not the far-future training, the other base tune, the images or the cost.
    expect(text).not.toContain('attacker');
    expect(text).not.toContain('2999');
    // What the service holds, field for field where tuneflow reads it.
    const served = outcome.served!;
    expect(tune).toMatchObject({
      id: served.tune.id,
      trained_at: served.tune.trained_at,
      model_type: served.tune.model_type,
      base_tune_id: served.tune.base_tune_id,
      cost_mc: served.tune.cost_mc,
    });
    expect(tune.model_type).toBeNull();
    const byId = (a: { id: number }, b: { id: number }) => a.id - b.id;
    expect([...prompts].sort(byId).map((p) => [p.id, p.images, p.cost_mc])).toEqual(
      [...served.prompts].sort(byId).map((p) => [p.id, p.images, p.cost_mc]),
    );
    expect(prompts.map((p) => p.images?.length)).toEqual([2, 1]);
    // The cost is what the service charged: training and three images, not 0.
    expect(outcome.ledger.totalMc).toBe(TUNE_TRAINING_MC + 3 * IMAGE_MC);
    expect(cost.mc).toBe(outcome.ledger.totalMc);
    // The prompts were created after the tune really trained, not when the forgery said it had.
    expect(outcome.stats.routes['POST /tunes/:id/prompts']).toBe(2);
    for (const p of served.prompts)
      expect(Date.parse(p.created_at!)).toBeGreaterThanOrEqual(Date.parse(tune.trained_at!));
    // The 100 padded copies were one wake-up: the receiver coalesced the rest; the history stays small.
    const history = summarize(outcome.history);
    expect(outcome.context!.forgeries).toBe(105);
    // Delivered: the forged tune, the foreign tune, one of the 100 padded copies, two forged prompts, a foreign one.
    expect(outcome.context!.delivered).toBe(6);
    expect(history.signals).toHaveLength(6 + 3);
    // What a signal carries is ids: no padding, no forged field enters the history (a run with no forgery: ~49 KB).
    const recorded = historyToJson(outcome.history);
    expect(recorded).not.toContain('attacker');
    expect(recorded).not.toContain('x'.repeat(100));
    expect(history.bytes).toBeLessThan(100_000);
    // Each forgery cost at most a read: the tune read for its forged callback and its real one, the prompts' lists.
    expect(history.activities.filter((a) => a === 'retrieveTune').length).toBeLessThanOrEqual(2);
    expect(outcome.progress.counts.polls).toBe(0);
    expect(outcome.progress).toMatchObject({ phase: 'completed', cost: { mc: outcome.ledger.totalMc } });
  },
);

workflowTest(
  'polling only, with the default options: the first polls come near the eta and after the prompts start',
  async () => {
    const started = Date.now();
    const outcome = await play<TrainThenGenerateResult>(harness(), scenarios.pollOnly);
    const { tune, prompts } = resultOf(outcome);
    expect(tune.trained_at).toBeTruthy();
    // Asked for no callbacks: the create's answer names none.
    const created = summarize(outcome.history).calls.find((c) => c.activity === 'createTune')?.result;
    expect(created).toMatchObject({ callback: null });
    expect(prompts.map((p) => p.images?.length)).toEqual([2, 1]);
    expect(outcome.progress.counts.callbacks).toBe(0);
    // The tune trains in 2 s: its first poll at eta + 1 s, then 2 s, 4 s...; the prompts' 1 s after their creation.
    const { activities, timers } = summarize(outcome.history);
    const tunePolls = activities.filter((a) => a === 'retrieveTune').length;
    const listPolls = activities.filter((a) => a === 'listPrompts').length;
    expect(outcome.progress.counts.polls).toBe(tunePolls + listPolls);
    const schedule = (n: number, firstMs: number) =>
      Array.from({ length: n }, (_, i) => ({ ms: i === 0 ? firstMs : 1_000 * 2 ** i, ended: 'fired' }));
    expect(timers).toEqual([
      { ms: 6 * HOUR, ended: 'cancelled' },
      ...schedule(tunePolls, 3_000),
      { ms: HOUR, ended: 'cancelled' },
      ...schedule(listPolls, 1_000),
    ]);
    // Seconds, not the minutes of the callback schedule (the time is shown, not asserted: the machine is shared).
    console.info(`polling-only job: ${Date.now() - started} ms, ${tunePolls} tune polls, ${listPolls} prompt polls`);
  },
);

workflowTest('a worker restarted in the middle of the training wait: the new worker finishes the job', async () => {
  const outcome = await play<TrainThenGenerateResult>(harness(), scenarios.workerRestart);
  const { prompts } = resultOf(outcome);
  expect(prompts.map((p) => p.images?.length)).toEqual([2, 1]);
  const identities = new Set(
    outcome.history.events?.flatMap((e) => e.workflowTaskStartedEventAttributes?.identity ?? []),
  );
  expect(identities).toEqual(new Set(['worker-1', 'worker-2']));
  expect(outcome.progress.counts.polls).toBe(0);
  expect(outcome.stats.routes['POST /tunes']).toBe(1);
  const history = summarize(outcome.history);
  expectReadsAfterCallbacks(history.activities, 2);
  expectEndedByCallbacks(history.timers, MINUTE * 2 + 3_000); // trains in 3 s
});

workflowTest("Flux LoRA: prompts run on the base tune with <lora:ID:1> ahead of the caller's text", async () => {
  const outcome = await play<TrainThenGenerateResult>(harness(), scenarios.fluxLora);
  const { tune, prompts } = resultOf(outcome);
  expect(tune).toMatchObject({ model_type: 'lora', branch: 'flux1', base_tune_id: FLUX_BASE_TUNE.id });
  expect(prompts.map((p) => p.tune_id)).toEqual([FLUX_BASE_TUNE.id, FLUX_BASE_TUNE.id]);
  expect(prompts.map((p) => p.text)).toEqual([
    `<lora:${tune.id}:1> ohwx woman, studio portrait`,
    `<lora:${tune.id}:1> ohwx woman, on a bike`,
  ]);
  expect(prompts.map((p) => p.images?.length)).toEqual([1, 2]);
  expect(outcome.stats.routes['POST /tunes/:id/prompts']).toBe(2);
  // The LoRA's training and three images on the base tune, as the mock's ledger charged them.
  expect(outcome.ledger.totalMc).toBe(TUNE_TRAINING_MC + 3 * IMAGE_MC);
  expect(resultOf(outcome).cost).toEqual({ mc: outcome.ledger.totalMc, usd: outcome.ledger.totalMc / 100_000 });
  expect(outcome.progress.cost).toEqual(resultOf(outcome).cost);
  const { calls, timers, activities } = summarize(outcome.history);
  expectReadsAfterCallbacks(activities, 2);
  // Both prompts were posted to, and read from, the base tune, not the LoRA.
  expect(calls.slice(2).map((c) => (c.input as { tuneId: number }).tuneId)).toEqual(
    Array(calls.length - 2).fill(FLUX_BASE_TUNE.id),
  );
  expect(timers.every((t) => t.ended === 'cancelled')).toBe(true);
});

workflowTest(
  'a Flux LoRA polled while 500 other prompts are made on the base tune: its polls read and return only its own',
  async () => {
    const outcome = await play<TrainThenGenerateResult>(harness(), scenarios.fluxLoraBusyBaseTune);
    const { prompts } = resultOf(outcome);
    const ours = prompts.map((p) => p.id);
    expect(prompts.map((p) => p.tune_id)).toEqual([FLUX_BASE_TUNE.id, FLUX_BASE_TUNE.id]);
    expect(prompts.map((p) => p.images?.length)).toEqual([1, 2]);
    expect(outcome.stats.routes['POST /tunes/:id/prompts']).toBe(2 + outcome.context!.others);
    // They settled after the 500 existed: the poll that saw them settled read a base tune with 500 newer prompts.
    for (const p of prompts) expect(Date.parse(p.trained_at!)).toBeGreaterThan(outcome.context!.othersDoneAtMs);

    const { calls } = summarize(outcome.history);
    const polls = calls.filter((c) => c.activity === 'listPrompts');
    expect(polls.length).toBeGreaterThanOrEqual(1);
    for (const poll of polls) {
      const input = poll.input as { tuneId: number; promptIds: number[] };
      expect(input.tuneId).toBe(FLUX_BASE_TUNE.id);
      expect(ours).toEqual(expect.arrayContaining(input.promptIds));
      const result = poll.result as Array<{ id: number }>;
      expect(ours).toEqual(expect.arrayContaining(result.map((p) => p.id)));
      expect(result.length).toBeLessThanOrEqual(2);
    }
    // One list page per poll, from the run's newest prompt down: nothing newer read, nothing fetched by id.
    expect(outcome.stats.routes['GET /tunes/:id/prompts']).toBe(polls.length);
    expect(outcome.stats.routes['GET /tunes/:tune_id/prompts/:id']).toBeUndefined();
    expect(outcome.progress.counts.callbacks).toBe(0);
    // Its cost is its own: the ledger's charges for its LoRA and its prompts, not the 500 others'.
    const own = new Set([resultOf(outcome).tune.id, ...ours]);
    const ownMc = outcome.ledger.charges.filter((c) => own.has(c.id)).reduce((sum, c) => sum + c.mc, 0);
    expect(ownMc).toBe(TUNE_TRAINING_MC + 3 * IMAGE_MC);
    expect(resultOf(outcome).cost.mc).toBe(ownMc);
  },
);

workflowTest(
  'a Flux LoRA whose prompts lie further apart than a list page: the one its page misses is read by id, one request an activity',
  async () => {
    const outcome = await play<TrainThenGenerateResult>(harness(), scenarios.fluxLoraInterleavedPrompts);
    const [first, second] = resultOf(outcome).prompts;
    expect([first.images?.length, second.images?.length]).toEqual([1, 2]);
    // The premise: the other job's 130 prompts were made between the run's two, more than a page of 120.
    expect(second.id - first.id).toBeGreaterThan(120);

    const { calls, attempts, patches } = summarize(outcome.history);
    const lists = calls.filter((c) => c.activity === 'listPrompts');
    const byId = calls.filter((c) => c.activity === 'retrievePrompt');
    expect(lists.length).toBeGreaterThanOrEqual(1);
    for (const list of lists) expect(list.input).toMatchObject({ tuneId: FLUX_BASE_TUNE.id, onePage: true });
    // Only the first prompt is out of the page's reach: every read by id is of it, after a page that missed it.
    expect(byId.length).toBeGreaterThanOrEqual(1);
    for (const read of byId) expect(read.input).toEqual({ tuneId: FLUX_BASE_TUNE.id, promptId: first.id, brief: true });
    // Each read by id follows a page that missed that prompt.
    const polls = calls.filter((c) => c.activity === 'listPrompts' || c.activity === 'retrievePrompt');
    polls.forEach((call, i) => {
      if (call.activity !== 'retrievePrompt') return;
      const page = polls
        .slice(0, i)
        .reverse()
        .find((c) => c.activity === 'listPrompts');
      expect((page!.result as Array<{ id: number }>).map((p) => p.id)).not.toContain(first.id);
    });
    expect(patches).toEqual([EARLIER_PATCHES_FOLDED]);
    // One request each: the service saw as many list pages and reads by id as there were activities, none retried.
    const pollTypes = new Set(['listPrompts', 'retrievePrompt']);
    expect(attempts.filter((a) => pollTypes.has(a.activity)).every((a) => a.attempt === 1)).toBe(true);
    expect(outcome.stats.routes['GET /tunes/:id/prompts']).toBe(lists.length);
    expect(outcome.stats.routes['GET /tunes/:tune_id/prompts/:id']).toBe(byId.length);
    expect(outcome.progress.counts.callbacks).toBe(0);
  },
);

workflowTest('FaceID: ready at creation, so no wait and no poll for training', async () => {
  const outcome = await play<TrainThenGenerateResult>(harness(), scenarios.faceId);
  const { tune, prompts } = resultOf(outcome);
  expect(tune.model_type).toBe('faceid');
  // The file at the path, uploaded by the worker with the create.
  expect(outcome.journal.uploads.filter((u) => u.tuneId === tune.id)).toHaveLength(1);
  // One read, and no poll: the create's check that the base (a gallery tune) is the tenant's, once per worker.
  expect(outcome.stats.routes['GET /tunes/:id']).toBe(1);
  expect(prompts[0].images?.length).toBe(1);
  expect(outcome.progress.counts.callbacks).toBe(0);
  // No training wait at all: the only timers are the prompt wait's deadline and its polls. The training image, a file,
  // is checked against the upload directory before the tune is created.
  const { activities, timers } = summarize(outcome.history);
  expect(activities.slice(0, 3)).toEqual(['checkUploads', 'createTune', 'createPrompt']);
  expect(activities.slice(3).every((a) => a === 'listPrompts')).toBe(true);
  expect(timers[0]).toEqual({ ms: 2 * MINUTE, ended: 'cancelled' });
  expect(timers[1]).toEqual({ ms: 1_000, ended: 'fired' });
});

workflowTest('cancelled while training with cleanupOnCancel: the tune is deleted, the run ends cancelled', async () => {
  const outcome = await play(harness(), scenarios.cancelWithCleanup);
  expect(outcome.error).toBeInstanceOf(WorkflowFailedError);
  expect((outcome.error as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);
  expect(outcome.progress.phase).toBe('cancelled');
  expect(outcome.stats.routes['DELETE /tunes/:id']).toBe(1);
  expect(outcome.stats.routes['POST /tunes/:id/prompts']).toBeUndefined();
  // The tune it created is the one it deleted.
  const { calls, timers } = summarize(outcome.history);
  expect(calls.map((c) => c.activity)).toEqual(['createTune', 'deleteTune']);
  expect(calls[1].input).toEqual({ tuneId: (calls[0].result as { id: number }).id });
  // The training wait (60 s training: first poll at eta + 2 min) was cut short.
  expect(timers).toEqual([
    { ms: 6 * HOUR, ended: 'cancelled' },
    { ms: 3 * MINUTE, ended: 'cancelled' },
  ]);
});

workflowTest('cancelled without cleanupOnCancel: nothing is deleted', async () => {
  const outcome = await play(harness(), scenarios.cancelWithoutCleanup);
  expect((outcome.error as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);
  expect(outcome.progress.phase).toBe('cancelled');
  expect(Object.keys(outcome.stats.routes).filter((route) => route.startsWith('DELETE'))).toEqual([]);
  expect(summarize(outcome.history).activities).toEqual(['createTune']);
});

workflowTest(
  'a Flux LoRA cancelled while generating: its prompts on the base tune, then the LoRA, are deleted',
  async () => {
    const outcome = await play(harness(), scenarios.cancelFluxWhileGenerating);
    expect((outcome.error as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);
    expect(outcome.progress.phase).toBe('cancelled');
    expect(outcome.stats.routes['DELETE /tunes/:tune_id/prompts/:id']).toBe(2);
    expect(outcome.stats.routes['DELETE /tunes/:id']).toBe(1);
    // Exactly the prompts it made on the base tune, then the LoRA it trained.
    const { calls } = summarize(outcome.history);
    const made = (activity: string) => calls.filter((c) => c.activity === activity).map((c) => c.result);
    const [lora] = made('createTune') as Array<{ id: number }>;
    const prompts = made('createPrompt') as Array<{ id: number; tune_id: number }>;
    expect(calls.map((c) => c.activity)).toEqual([
      'createTune',
      'retrieveTune', // its training callback's read
      'createPrompt',
      'createPrompt',
      'deletePrompt',
      'deletePrompt',
      'deleteTune',
    ]);
    expect(calls.filter((c) => c.activity === 'deletePrompt').map((c) => c.input)).toEqual(
      expect.arrayContaining(prompts.map((p) => ({ tuneId: FLUX_BASE_TUNE.id, promptId: p.id }))),
    );
    expect(calls[6].input).toEqual({ tuneId: lora.id });
  },
);
