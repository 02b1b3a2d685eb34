/**
 * The commands the workflows issue on each path, checked without a server: hand-built histories (what a server
 * would record for the path) replayed strictly against the current workflow code (strict-replay.ts). The replay fails
 * on any command that differs from the history: a missing timer, an activity too many, completing instead of
 * failing, and also an activity of another type or a timer of another duration, which Temporal's own check lets by.
 *
 * The order of commands these histories pin down: a wait starts its deadline timer, then its poll timer; when it
 * ends, the poll timer is cancelled, then the deadline; prompt creates run `promptConcurrency` at a time.
 */
import { type WorkflowBundle } from '@temporalio/worker';
import type { Prompt, Tune } from '../../src/api/schemas';
import { bundleForStrictReplay, replayStrictly } from './strict-replay';
import { installQuietRuntime } from './global-setup';
import { HistoryBuilder } from './history-builder';
import { MAX_COST_HOLDS, UNKNOWN_PRICE_STOPS } from '../../src/workflows/budget';
import { CALLBACKS_ARE_WAKE_UPS } from '../../src/workflows/wake-ups';

const HOUR = 3600_000;
/** A tune input the job's contract accepts (the workflow checks its whole input before its first activity). */
const DOG = { name: 'dog', image_urls: ['https://example.com/1.jpg'] };
const T0 = '2025-01-01T00:00:00.000Z';
const T1 = '2025-01-01T00:00:01.000Z';

/** A tune as the service answers its create: training, due in 1 s. */
const training = (fields: Partial<Tune> = {}): Tune => ({
  id: 7,
  title: 'job',
  model_type: null,
  branch: 'fast',
  created_at: T0,
  updated_at: T0,
  eta: T1,
  trained_at: null,
  ...fields,
});
const trained = training({ trained_at: T1, updated_at: T1 });
const prompt = (id: number, fields: Partial<Prompt> = {}): Prompt => ({
  id,
  tune_id: 7,
  text: 'sks dog',
  images: [],
  user_error: null,
  updated_at: T1,
  ...fields,
});
const settled = (id: number) => prompt(id, { images: [`https://example.com/${id}.png`] });

/** A trainThenGenerate run's first steps: its tune created (training), then the training wait's deadline started. */
const tuneCreated = (input: object, deadlineMs: number): HistoryBuilder =>
  new HistoryBuilder('trainThenGenerate', input)
    .workflowTask()
    .callActivity('1', 'createTune', training())
    .startTimer('1', deadlineMs);

/** A trainThenGenerate run whose tune's callback came before the create's answer: both read, no wait started. */
const trainedBeforeCreated = (input: object): HistoryBuilder =>
  new HistoryBuilder('trainThenGenerate', input)
    .workflowTask()
    .scheduleActivity('1', 'createTune')
    .signal('tuneTrained', trained)
    .workflowTask()
    .completeActivity('1', training())
    .workflowTask();

/** Polls every second or two, deadlines of two minutes. */
const QUICK = {
  pollInterval: '1 second',
  maxPollInterval: '2 seconds',
  trainingTimeout: '2 minutes',
  promptTimeout: '2 minutes',
};
const QUICK_TIMEOUT = 120_000;

/** A quick job without prompts, its tune created and its first poll under way (2 s: eta 1 s + pollInterval). */
const quickTunePolled = (): HistoryBuilder =>
  tuneCreated({ tune: DOG, prompts: [], options: QUICK }, QUICK_TIMEOUT)
    .timerFires('2', 2_000)
    .scheduleActivity('2', 'retrieveTune');

/** The default first poll: 2 minutes after the eta (1 s after creation). */
const FIRST_TUNE_POLL = 1_000 + 120_000;

let bundle: WorkflowBundle;

beforeAll(async () => {
  installQuietRuntime();
  bundle = await bundleForStrictReplay();
}, 120_000);

/** Strict: Temporal's own check, then the activity types and timer durations against the history's. */
function replay(history: HistoryBuilder): Promise<void> {
  return replayStrictly(bundle, history.history(), 'job');
}

/** The callbacks path of a one-prompt job, with the activity types and timer durations given. */
function callbacksPath(
  [createTune, createPrompt] = ['createTune', 'createPrompt'],
  [trainingDeadline, firstTunePoll, promptsDeadline, firstPromptsPoll] = [6 * HOUR, FIRST_TUNE_POLL, HOUR, 120_000],
) {
  return new HistoryBuilder('trainThenGenerate', { tune: DOG, prompts: [{ text: 'sks dog' }] })
    .workflowTask()
    .callActivity('1', createTune, training())
    .waitStarts('1', trainingDeadline, '2', firstTunePoll)
    .signal('tuneTrained', trained)
    .workflowTask()
    .waitEnds('2', '1')
    .callActivity('2', createPrompt, prompt(11))
    .waitStarts('3', promptsDeadline, '4', firstPromptsPoll)
    .signal('promptSettled', settled(11))
    .workflowTask()
    .waitEnds('4', '3')
    .completed();
}

test('callbacks end both waits: deadline and poll timers start, and are cancelled when the callback comes', async () => {
  await replay(callbacksPath());
});

test('the same history with other activity types does not replay: the types are checked', async () => {
  await expect(replay(callbacksPath(['deleteTune', 'listPrompts']))).rejects.toThrow(
    'the workflow scheduled createTune, createPrompt; the history has deleteTune, listPrompts',
  );
});

test('the same history with every timer 1 ms does not replay: the durations are checked', async () => {
  await expect(replay(callbacksPath(undefined, [1, 1, 1, 1]))).rejects.toThrow(
    `the workflow started timers of ${6 * HOUR}, ${FIRST_TUNE_POLL}, ${HOUR}, 120000 ms; the history has 1, 1, 1, 1 ms`,
  );
});

test('the same history without the poll timer does not replay: the check is strict', async () => {
  const history = tuneCreated({ tune: DOG, prompts: [{ text: 'sks dog' }] }, 6 * HOUR)
    .signal('tuneTrained', trained)
    .workflowTask()
    .cancelTimer('1')
    .callActivity('2', 'createPrompt', prompt(11))
    .completed();
  await expect(replay(history)).rejects.toThrow(/nondeterminism/i);
});

test('no callback: a poll when the timer fires, backing off; prompts created two at a time and polled with one list', async () => {
  const input = {
    tune: DOG,
    prompts: [{ text: 'a' }, { text: 'b' }, { text: 'c' }],
    options: { ...QUICK, promptConcurrency: 2 },
  };
  const history = tuneCreated(input, QUICK_TIMEOUT)
    .startTimer('2', 2_000) // eta (1 s) + pollInterval
    .fireTimer('2', 2_000)
    .workflowTask()
    .callActivity('2', 'retrieveTune', training())
    .startTimer('3', 2_000) // doubled, at the ceiling
    .fireTimer('3', 2_000)
    .workflowTask()
    .callActivity('3', 'retrieveTune', trained)
    .cancelTimer('1')
    .scheduleActivity('4', 'createPrompt')
    .scheduleActivity('5', 'createPrompt')
    .completeActivity('4', prompt(11))
    .workflowTask()
    .scheduleActivity('6', 'createPrompt')
    .completeActivity('5', prompt(12))
    .completeActivity('6', prompt(13))
    .workflowTask()
    .startTimer('4', QUICK_TIMEOUT)
    .timerFires('5', 1_000)
    .callActivity('7', 'listPrompts', [settled(13), settled(12), settled(11)])
    .cancelTimer('4')
    .completed();
  await replay(history);
});

test('a poll that fails after its retries is counted and the wait goes on to the next poll', async () => {
  const history = quickTunePolled()
    .failActivity('2', 'ServerError', false)
    .workflowTask()
    .timerFires('3', 2_000)
    .callActivity('3', 'retrieveTune', trained)
    .cancelTimer('1')
    .completed();
  await replay(history);
});

test('a poll that fails for good (the tune is gone) ends the workflow', async () => {
  const history = quickTunePolled().failActivity('2', 'NotFound', true).workflowTask().cancelTimer('1').failed();
  await replay(history);
});

test('the deadline: a last poll when it passes, then the workflow fails', async () => {
  const options = {
    pollInterval: '5 seconds',
    maxPollInterval: '10 seconds',
    trainingTimeout: '20 seconds',
    promptTimeout: '20 seconds',
  };
  const history = tuneCreated({ tune: DOG, prompts: [], options }, 20_000)
    .timerFires('2', 6_000)
    .callActivity('2', 'retrieveTune', training())
    .timerFires('3', 10_000)
    .callActivity('3', 'retrieveTune', training())
    .startTimer('4', 10_000)
    .fireTimer('1', 4_000)
    .workflowTask()
    .cancelTimer('4')
    .callActivity('4', 'retrieveTune', training())
    .failed();
  await replay(history);
});

test('a bad option fails the first workflow task, before any activity', async () => {
  const input = { tune: DOG, prompts: [], options: { pollInterval: 'soon' } };
  await replay(new HistoryBuilder('trainThenGenerate', input).workflowTask().failed());
});

test('a FaceID tune needs no wait: no timer between the create and the prompts', async () => {
  const input = { tune: { ...DOG, name: 'woman', model_type: 'faceid' }, prompts: [{ text: 'woman, avatar' }] };
  const history = new HistoryBuilder('trainThenGenerate', input)
    .workflowTask()
    .callActivity('1', 'createTune', training({ model_type: 'faceid', trained_at: T0 }))
    .callActivity('2', 'createPrompt', settled(11))
    .completed();
  await replay(history);
});

test('callbacks that beat the create answer are kept: no wait once the answer comes', async () => {
  const history = trainedBeforeCreated({ tune: DOG, prompts: [{ text: 'sks dog' }] })
    .scheduleActivity('2', 'createPrompt')
    .signal('promptSettled', settled(11))
    .workflowTask()
    .completeActivity('2', prompt(11))
    .workflowTask()
    .completed();
  await replay(history);
});

test('duplicate, stale and foreign callbacks change nothing: the wait ends on the last prompt settling', async () => {
  const input = { tune: DOG, prompts: [{ text: 'a' }, { text: 'b' }] };
  const history = trainedBeforeCreated(input)
    .callActivitiesTogether(2, 'createPrompt', [prompt(11), prompt(12)])
    .waitStarts('1', HOUR, '2', 120_000)
    .signal('promptSettled', settled(11))
    .signal('promptSettled', settled(11))
    .signal('tuneTrained', training())
    .signal('promptSettled', prompt(11, { updated_at: '2025-01-01T00:00:02.000Z' }))
    .signal('promptSettled', settled(99))
    .signal('packPromptsSettled', [settled(98)])
    .workflowTask()
    .signal('promptSettled', settled(12))
    .workflowTask()
    .waitEnds('2', '1')
    .completed();
  await replay(history);
});

test('cancelled while training, with cleanupOnCancel: timers cancelled, the tune deleted, then cancelled', async () => {
  const input = { tune: DOG, prompts: [{ text: 'sks dog' }], options: { cleanupOnCancel: true } };
  const history = tuneCreated(input, 6 * HOUR)
    .startTimer('2', FIRST_TUNE_POLL)
    .cancelRequested()
    .workflowTask()
    .waitEnds('2', '1')
    .callActivity('2', 'deleteTune', null)
    .cancelled();
  await replay(history);
});

test('cancelled during a poll, without cleanupOnCancel: the poll is cancelled, the deadline too, then cancelled', async () => {
  const history = quickTunePolled()
    .cancelRequested()
    .workflowTask()
    .requestActivityCancel('2')
    .cancelTimer('1')
    .cancelled();
  await replay(history);
});

test('cancelled during the create, with cleanupOnCancel: the create finishes, then its tune is deleted', async () => {
  const input = { tune: DOG, prompts: [], options: { cleanupOnCancel: true } };
  const history = new HistoryBuilder('trainThenGenerate', input)
    .workflowTask()
    .scheduleActivity('1', 'createTune')
    .cancelRequested()
    .workflowTask()
    .completeActivity('1', training())
    .workflowTask()
    .callActivity('2', 'deleteTune', null)
    .cancelled();
  await replay(history);
});

test('a Flux LoRA cancelled while generating: its prompts (on the base tune) and then the LoRA are deleted', async () => {
  const lora = training({ model_type: 'lora', branch: 'flux1', base_tune_id: 1504944 });
  const input = {
    tune: { ...DOG, name: 'man' },
    prompts: [{ text: 'a' }, { text: 'b' }],
    options: { cleanupOnCancel: true },
  };
  const history = new HistoryBuilder('trainThenGenerate', input)
    .workflowTask()
    .scheduleActivity('1', 'createTune')
    .signal('tuneTrained', { ...lora, trained_at: T1, updated_at: T1 })
    .workflowTask()
    .completeActivity('1', lora)
    .workflowTask()
    .callActivitiesTogether(2, 'createPrompt', [prompt(11, { tune_id: 1504944 }), prompt(12, { tune_id: 1504944 })])
    .waitStarts('1', HOUR, '2', 120_000)
    .cancelRequested()
    .workflowTask()
    .waitEnds('2', '1')
    .callActivitiesTogether(4, 'deletePrompt', [null, null])
    .callActivity('6', 'deleteTune', null)
    .cancelled();
  await replay(history);
});

test('generate on a trained tune: read it, create the prompts, wait for their callbacks', async () => {
  const input = { tuneId: 7, prompts: [{ text: 'a' }, { text: 'b' }] };
  const history = new HistoryBuilder('generate', input)
    .workflowTask()
    .callActivity('1', 'retrieveTune', trained)
    .callActivitiesTogether(2, 'createPrompt', [prompt(11), prompt(12)])
    .waitStarts('1', HOUR, '2', 120_000)
    .signal('promptSettled', settled(11))
    .signal('promptSettled', prompt(12, { user_error: 'the service could not' }))
    .workflowTask()
    .waitEnds('2', '1')
    .completed();
  await replay(history);
});

test('a pack: wait for training, list the pack prompts once, then the prompts_callback ends the wait', async () => {
  const input = { packId: 261, tune: { name: 'dog', image_urls: ['https://example.com/1.jpg'] } };
  const history = new HistoryBuilder('packTune', input)
    .workflowTask()
    .callActivity('1', 'createPackTune', training())
    .waitStarts('1', 6 * HOUR, '2', FIRST_TUNE_POLL)
    .signal('tuneTrained', trained)
    .workflowTask()
    .waitEnds('2', '1')
    .callActivity('2', 'listPrompts', [prompt(12), prompt(11)])
    .waitStarts('3', HOUR, '4', 120_000)
    .signal('promptSettled', settled(11))
    .workflowTask()
    .signal('packPromptsSettled', [settled(11), settled(12)])
    .workflowTask()
    .waitEnds('4', '3')
    .completed();
  await replay(history);
});

test('a pack on a reused tune: note its newest prompt, create, no training wait, then poll the new prompts', async () => {
  const input = { packId: 261, tune: { tune_ids: [7] } };
  const packPrompt = (id: number, fields: Partial<Prompt> = {}) =>
    prompt(id, { pack_id: 261, ...fields } as Partial<Prompt>);
  const history = new HistoryBuilder('packTune', input)
    .workflowTask()
    .callActivity('1', 'listPrompts', [settled(5)])
    .callActivity('2', 'createPackTune', trained)
    .callActivity('3', 'listPrompts', [packPrompt(12), packPrompt(11)])
    .startTimer('1', HOUR)
    .timerFires('2', 120_000)
    .callActivity('4', 'listPrompts', [packPrompt(12, { images: ['b.png'] }), packPrompt(11, { images: ['a.png'] })])
    .cancelTimer('1')
    .completed();
  await replay(history);
});

describe('runs that take callbacks as wake-ups (histories with the callbacks-are-wake-ups marker)', () => {
  /** A one-prompt job started after the change: the marker comes with the first workflow task's commands. */
  const wakeUpJob = () =>
    new HistoryBuilder('trainThenGenerate', { tune: DOG, prompts: [{ text: 'sks dog' }] })
      .workflowTask()
      .patchMarker(CALLBACKS_ARE_WAKE_UPS)
      .callActivity('1', 'createTune', training())
      .waitStarts('1', 6 * HOUR, '2', FIRST_TUNE_POLL);

  test('a callback wakes the wait, the run reads the object, and what it read ends the wait', async () => {
    const history = wakeUpJob()
      .signal('callback', { kind: 'tune', ids: [7] })
      .workflowTask()
      .cancelTimer('2')
      .callActivity('2', 'retrieveTune', trained)
      .cancelTimer('1')
      .callActivity('3', 'createPrompt', prompt(11))
      .waitStarts('3', HOUR, '4', 120_000)
      .signal('callback', { kind: 'prompt', ids: [11] })
      .workflowTask()
      .cancelTimer('4')
      .callActivity('4', 'listPrompts', [settled(11)])
      .cancelTimer('3')
      .completed();
    await replay(history);
  });

  test("a forged body changes nothing: the old signal's tune, trained in the far future, is only a wake-up", async () => {
    const forged = { ...trained, trained_at: '2999-01-01T00:00:00.000Z', updated_at: '2999-01-01T00:00:00.000Z' };
    // The read says the tune still trains: no prompt is created, and the wait goes on until its first poll.
    const history = wakeUpJob()
      .signal('tuneTrained', forged)
      .workflowTask()
      .cancelTimer('2')
      .callActivity('2', 'retrieveTune', training())
      // The first poll stays due when it was: 220 ms of the history (the signal, the read) have passed since.
      .startTimer('3', FIRST_TUNE_POLL - 10 - 100 - 100 - 10);
    await replay(history);
  });

  test('a callback for an object the run did not create is dropped: no read, no timer', async () => {
    const history = wakeUpJob()
      .signal('callback', { kind: 'tune', ids: [987_655] })
      .signal('callback', { kind: 'prompt', ids: [987_654] })
      .workflowTask();
    await replay(history);
  });
});

describe('maxCostMc on a pack that names no price for the class (runs with the max-cost-holds marker refuse it)', () => {
  const input = {
    packId: 261,
    tune: { name: 'dog', image_urls: ['https://example.com/1.jpg'] },
    options: { maxCostMc: 100_000 },
  };
  /** The price read first; the pack names none for dogs. */
  const priceRead = (...patches: string[]) => {
    const history = new HistoryBuilder('packTune', input).workflowTask();
    for (const patch of patches) history.patchMarker(patch);
    return history.scheduleActivity('1', 'packPrice').completeActivity('1', null).workflowTask();
  };

  test('a run started before goes on, as it did: the pack is created and its training waited for', async () => {
    const history = priceRead()
      .callActivity('2', 'createPackTune', training())
      .waitStarts('1', 6 * HOUR, '2', FIRST_TUNE_POLL);
    await replay(history);
  });

  test('a run started since fails InvalidOptions right after the read: no pack created', async () => {
    await replay(priceRead(CALLBACKS_ARE_WAKE_UPS).patchMarker(MAX_COST_HOLDS).failed());
  });

  test('a run started since that created the pack anyway does not replay: the refusal is a command', async () => {
    const history = priceRead(CALLBACKS_ARE_WAKE_UPS)
      .patchMarker(MAX_COST_HOLDS)
      .scheduleActivity('2', 'createPackTune')
      .completeActivity('2', training());
    await expect(replay(history)).rejects.toThrow(/Fail workflow machine does not handle this event/);
  });
});

describe('maxCostMc and a prompt create answered without cost_mc (runs with the unknown-price-stops marker read it)', () => {
  const input = { tuneId: 7, prompts: [{ text: 'a' }, { text: 'b' }], options: { maxCostMc: 100_000 } };
  /** The tune read, the first prompt created (one at a time until a price is known), its answer without cost_mc. */
  const firstCreated = () =>
    new HistoryBuilder('generate', input)
      .workflowTask()
      .callActivity('1', 'retrieveTune', trained)
      .callActivity('2', 'createPrompt', prompt(11));

  test('a run started before goes on, as it did: the next prompt created with the price still unknown', async () => {
    await replay(firstCreated().callActivity('3', 'createPrompt', prompt(12)).waitStarts('1', HOUR, '2', 120_000));
  });

  test('a run started since reads the prompt first, then creates the next at the price the read said', async () => {
    const history = firstCreated()
      .patchMarker(UNKNOWN_PRICE_STOPS)
      .callActivity('3', 'retrievePrompt', prompt(11, { cost_mc: 2_000 }))
      .callActivity('4', 'createPrompt', prompt(12, { cost_mc: 2_000 }))
      .waitStarts('1', HOUR, '2', 120_000);
    await replay(history);
  });

  test('a run started since whose read says no price either creates nothing more, and fails once it settled', async () => {
    const history = firstCreated()
      .patchMarker(UNKNOWN_PRICE_STOPS)
      .callActivity('3', 'retrievePrompt', prompt(11))
      .waitStarts('1', HOUR, '2', 120_000)
      .signal('promptSettled', settled(11))
      .workflowTask()
      .waitEnds('2', '1')
      .failed();
    await replay(history);
  });

  test('a run started since that created the next prompt without the read does not replay: the read is a command', async () => {
    const history = firstCreated().patchMarker(UNKNOWN_PRICE_STOPS).callActivity('3', 'createPrompt', prompt(12));
    await expect(replay(history)).rejects.toThrow(
      'the workflow scheduled retrieveTune, createPrompt, retrievePrompt; the history has retrieveTune, createPrompt, ' +
        'createPrompt',
    );
  });
});

describe('options.inspect: the training images inspected before the create (no marker: no run before it had one)', () => {
  const urls = Array.from({ length: 5 }, (_, i) => `https://example.com/${i + 1}.jpg`);
  const input = { tune: { ...DOG, image_urls: urls }, prompts: [], options: { inspect: { refuse: ['blurry'] } } };
  const found = (i: number, flags: string[] = []) => ({
    field: `tune.image_urls[${i}]`,
    image: urls[i],
    flags,
    characteristics: {},
  });

  test('five images, four at once, then the create: the job goes on as one without inspection', async () => {
    const history = new HistoryBuilder('trainThenGenerate', input)
      .workflowTask()
      .scheduleActivity('1', 'inspectImage')
      .scheduleActivity('2', 'inspectImage')
      .scheduleActivity('3', 'inspectImage')
      .scheduleActivity('4', 'inspectImage')
      .completeActivity('1', found(0, ['selfie']))
      .workflowTask()
      .scheduleActivity('5', 'inspectImage')
      .completeActivity('2', found(1))
      .completeActivity('3', found(2))
      .completeActivity('4', found(3))
      .completeActivity('5', found(4))
      .workflowTask()
      .callActivity('6', 'createTune', training())
      .waitStarts('1', 6 * HOUR, '2', FIRST_TUNE_POLL);
    await replay(history);
  });

  test('an image with a refused flag fails the run once every inspection answered: no create', async () => {
    const two = { ...input, tune: { ...DOG, image_urls: urls.slice(0, 2) } };
    const history = new HistoryBuilder('trainThenGenerate', two)
      .workflowTask()
      .scheduleActivity('1', 'inspectImage')
      .scheduleActivity('2', 'inspectImage')
      .completeActivity('1', found(0))
      .completeActivity('2', found(1, ['blurry']))
      .workflowTask()
      .failed();
    await replay(history);
    const created = new HistoryBuilder('trainThenGenerate', two)
      .workflowTask()
      .scheduleActivity('1', 'inspectImage')
      .scheduleActivity('2', 'inspectImage')
      .completeActivity('1', found(0))
      .completeActivity('2', found(1, ['blurry']))
      .workflowTask()
      .scheduleActivity('3', 'createTune');
    await expect(replay(created)).rejects.toThrow(/Fail workflow machine does not handle this event/);
  });

  test('a pack on a new tune: its image inspected, then the pack request', async () => {
    const pack = { packId: 261, tune: { name: 'dog', image_urls: urls.slice(0, 1) }, options: input.options };
    const history = new HistoryBuilder('packTune', pack)
      .workflowTask()
      .callActivity('1', 'inspectImage', found(0))
      .callActivity('2', 'createPackTune', training())
      .waitStarts('1', 6 * HOUR, '2', FIRST_TUNE_POLL);
    await replay(history);
  });
});
