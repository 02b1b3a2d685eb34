import { isPromptSettled as schemaIsPromptSettled, type Prompt, type Tune } from '../../src/api/schemas';
import { costOf } from '../../src/contract/cost';
import { Phase } from '../../src/contract/messages';
import {
  isPromptSettled,
  mergePrompt,
  mergeTune,
  progressOf,
  PromptLedger,
  TuneWatch,
} from '../../src/workflows/state';

const T0 = '2025-01-01T00:00:00.000Z';
const T1 = '2025-01-01T00:00:01.000Z';
const T2 = '2025-01-01T00:00:02.000Z';

function tune(id: number, fields: Partial<Tune> = {}): Tune {
  return { id, title: 'job', trained_at: null, model_type: null, updated_at: T0, ...fields };
}

function prompt(id: number, fields: Partial<Prompt> = {}): Prompt {
  return { id, tune_id: 7, text: 'ohwx', images: [], user_error: null, updated_at: T0, ...fields };
}

const done = (id: number, at = T2, tuneId = 7) =>
  prompt(id, { images: [`https://x/${id}.png`], updated_at: at, tune_id: tuneId });
const running = (id: number, at = T1, tuneId = 7) =>
  prompt(id, { started_training_at: at, updated_at: at, tune_id: tuneId });

describe('isPromptSettled', () => {
  test.each([
    [{ images: ['a.png'], user_error: null }, true],
    [{ images: [], user_error: 'NSFW' }, true],
    [{ images: [], user_error: null }, false],
    [{ images: undefined, user_error: undefined }, false],
    [{ images: [], user_error: '' }, false],
  ])('%p settled: %p (the same rule as the schemas)', (p, expected) => {
    expect(isPromptSettled(p)).toBe(expected);
    expect(schemaIsPromptSettled(p)).toBe(expected);
  });
});

describe('mergeTune', () => {
  test('a trained copy beats an untrained one, whatever the order', () => {
    const trained = tune(1, { trained_at: T2, updated_at: T2 });
    const stale = tune(1, { updated_at: T1 });
    expect(mergeTune(trained, stale)).toBe(trained);
    expect(mergeTune(stale, trained)).toBe(trained);
    // Even a later-stamped untrained copy cannot undo training.
    expect(mergeTune(trained, tune(1, { updated_at: '2030-01-01T00:00:00.000Z' }))).toBe(trained);
  });

  test('between copies equally far along, the strictly newer one wins; a tie keeps what is held', () => {
    const a = tune(1, { updated_at: T1 });
    const b = tune(1, { updated_at: T2 });
    expect(mergeTune(a, b)).toBe(b);
    expect(mergeTune(b, a)).toBe(b);
    const duplicate = { ...a };
    expect(mergeTune(a, duplicate)).toBe(a);
    expect(mergeTune(a, tune(1, { updated_at: undefined }))).toBe(a);
    expect(mergeTune(tune(1, { updated_at: undefined }), a)).toBe(a);
  });

  test('nothing held takes the copy; a copy of another tune changes nothing', () => {
    const a = tune(1);
    expect(mergeTune(undefined, a)).toBe(a);
    expect(mergeTune(a, tune(2, { trained_at: T2 }))).toBe(a);
  });
});

describe('mergePrompt', () => {
  test('a settled prompt never goes back', () => {
    const settled = done(3);
    expect(mergePrompt(settled, running(3, '2030-01-01T00:00:00.000Z'))).toBe(settled);
    expect(mergePrompt(running(3), settled)).toBe(settled);
  });

  test('the first settled copy is final; duplicates change nothing', () => {
    const first = done(3, T2);
    expect(mergePrompt(first, { ...first })).toBe(first);
    expect(mergePrompt(first, prompt(3, { user_error: 'late', updated_at: T2 }))).toBe(first);
  });

  test('a stale copy never overwrites a newer one', () => {
    const newer = running(3, T2);
    expect(mergePrompt(newer, prompt(3, { updated_at: T0 }))).toBe(newer);
  });
});

describe('TuneWatch', () => {
  test('a callback before the create answer is kept and merged when the tune is adopted', () => {
    const watch = new TuneWatch();
    expect(watch.offer(tune(9, { trained_at: T2, updated_at: T2 }))).toBe(true);
    expect(watch.id).toBeUndefined();
    expect(watch.trained).toBe(false);
    watch.adopt(tune(9, { updated_at: T0 }));
    expect(watch.id).toBe(9);
    expect(watch.trained).toBe(true);
    expect(watch.latest?.trained_at).toBe(T2);
  });

  test('callbacks about other tunes are passed over once the tune is known', () => {
    const watch = new TuneWatch();
    watch.adopt(tune(9));
    expect(watch.offer(tune(10, { trained_at: T2 }))).toBe(false);
    expect(watch.trained).toBe(false);
  });

  test('duplicate, late and out-of-order callbacks change nothing once trained', () => {
    const watch = new TuneWatch();
    watch.adopt(tune(9));
    const trained = tune(9, { trained_at: T2, updated_at: T2 });
    watch.offer(trained);
    watch.offer({ ...trained });
    watch.offer(tune(9, { updated_at: T1 }));
    expect(watch.latest).toBe(trained);
    // A poll that saw the tune before it trained, answering late.
    watch.adopt(tune(9, { updated_at: T1 }));
    expect(watch.latest).toBe(trained);
  });

  test('a payload that is not a tune is refused without harm', () => {
    const watch = new TuneWatch();
    for (const junk of [null, undefined, 'tune', 42, [], {}, { id: 'x' }, { id: 1.5 }])
      expect(watch.offer(junk)).toBe(false);
    expect(watch.id).toBeUndefined();
  });
});

describe('PromptLedger (prompts the run creates)', () => {
  test("results come back in the caller's order, whatever order the creates answered in", () => {
    const ledger = new PromptLedger(3);
    ledger.adopt(prompt(30), 2);
    ledger.adopt(prompt(10), 0);
    ledger.adopt(prompt(20), 1);
    expect(ledger.all().map((p) => p.id)).toEqual([10, 20, 30]);
  });

  test('not settled until every expected prompt exists and is settled', () => {
    const ledger = new PromptLedger(2);
    expect(ledger.allSettled()).toBe(false);
    ledger.adopt(prompt(1), 0);
    ledger.offer(done(1));
    expect(ledger.allSettled()).toBe(false); // the second prompt does not exist yet
    ledger.adopt(prompt(2), 1);
    expect(ledger.allSettled()).toBe(false);
    ledger.offer(prompt(2, { user_error: 'failed', updated_at: T2 }));
    expect(ledger.allSettled()).toBe(true);
    expect({ total: ledger.total, settled: ledger.settled, failed: ledger.failed }).toEqual({
      total: 2,
      settled: 2,
      failed: 1,
    });
  });

  test('no prompts to make: settled at once', () => {
    expect(new PromptLedger(0).allSettled()).toBe(true);
  });

  test('a callback that beats its create answer is kept and reconciled', () => {
    const ledger = new PromptLedger(1);
    expect(ledger.offer(done(5))).toBe(false);
    expect(ledger.settled).toBe(0);
    ledger.adopt(prompt(5), 0);
    expect(ledger.all()).toEqual([done(5)]);
    expect(ledger.allSettled()).toBe(true);
  });

  test('duplicate and reordered callbacks and late polls change nothing', () => {
    const ledger = new PromptLedger(2);
    ledger.adopt(prompt(1), 0);
    ledger.adopt(prompt(2), 1);
    const settled = done(2);
    ledger.offer(settled);
    ledger.offer({ ...settled });
    ledger.learn([running(2), running(1)]);
    expect(ledger.all()[1]).toBe(settled);
    expect(ledger.settled).toBe(1);
    ledger.offer(done(1));
    ledger.offer(done(1));
    expect(ledger.settled).toBe(2);
    expect(ledger.total).toBe(2);
  });

  test("a poll of a base tune passes over prompts that are not the run's", () => {
    const ledger = new PromptLedger(1);
    ledger.adopt(prompt(5, { tune_id: 1504944 }), 0);
    ledger.learn([done(6, T2, 1504944), done(5, T2, 1504944), done(4, T2, 1504944)]);
    expect(ledger.all().map((p) => p.id)).toEqual([5]);
    expect(ledger.allSettled()).toBe(true);
  });

  test('polls need nothing older than the oldest unsettled prompt', () => {
    const ledger = new PromptLedger(3);
    ledger.adopt(prompt(11), 0);
    ledger.adopt(prompt(12), 1);
    ledger.adopt(prompt(13), 2);
    expect(ledger.pollMinId()).toBe(11);
    ledger.offer(done(11));
    expect(ledger.pollMinId()).toBe(12);
    ledger.offer(done(12));
    ledger.offer(done(13));
    expect(ledger.pollMinId()).toBeUndefined();
  });

  test('polls ask for the unsettled prompts by id once all are known, never for prompts not yet created', () => {
    const ledger = new PromptLedger(3);
    ledger.adopt(prompt(13), 2);
    ledger.adopt(prompt(11), 0);
    expect(ledger.pollIds()).toBeUndefined(); // the third is not created yet
    ledger.adopt(prompt(12), 1);
    expect(ledger.pollIds()).toEqual([11, 12, 13]);
    ledger.offer(done(12));
    expect(ledger.pollIds()).toEqual([11, 13]);
    const pack = new PromptLedger();
    pack.claimPack({ tuneId: 7 });
    expect(pack.pollIds()).toBeUndefined(); // a pack's prompts are unknown until listed
  });

  test('payloads that are not prompts are refused', () => {
    const ledger = new PromptLedger(1);
    for (const junk of [null, 'x', { id: '3' }, {}]) expect(ledger.offer(junk)).toBe(false);
    ledger.offerPack([null, 7]);
    expect(ledger.all()).toEqual([]);
  });
});

describe("PromptLedger (a pack's prompts)", () => {
  test('the count is unknown until the tune lists its prompts; then every listed prompt is waited for', () => {
    const ledger = new PromptLedger();
    ledger.claimPack({ tuneId: 7 });
    expect(ledger.known).toBe(false);
    ledger.learn([]);
    expect(ledger.known).toBe(false);
    expect(ledger.allSettled()).toBe(false);
    ledger.learn([running(22), running(21)]);
    expect(ledger.known).toBe(true);
    expect(ledger.total).toBe(2);
    ledger.offer(done(21));
    expect(ledger.allSettled()).toBe(false);
    ledger.offer(done(22));
    expect(ledger.allSettled()).toBe(true);
    expect(ledger.all().map((p) => p.id)).toEqual([21, 22]);
  });

  test('prompt callbacks that came before the pack tune was known are claimed with it', () => {
    const ledger = new PromptLedger();
    ledger.offer(done(21));
    ledger.offer(done(99, T2, 8)); // another tune's
    ledger.claimPack({ tuneId: 7 });
    expect(ledger.all().map((p) => p.id)).toEqual([21]);
    expect(ledger.known).toBe(false);
  });

  test("the pack's prompts_callback tells the whole set, even before the tune is known", () => {
    const ledger = new PromptLedger();
    ledger.claimPack({ tuneId: 7 });
    ledger.offerPack([done(21), done(22), done(23)]);
    expect(ledger.known).toBe(true);
    expect(ledger.allSettled()).toBe(true);
    expect(ledger.total).toBe(3);

    const early = new PromptLedger();
    early.offerPack([done(21), done(22)]);
    early.claimPack({ tuneId: 7 });
    expect(early.settled).toBe(2);
  });

  test("on a reused tune only prompts from minId on, and of this pack when the service says, are the run's", () => {
    const ledger = new PromptLedger();
    ledger.claimPack({ tuneId: 7, minId: 50, packId: 260 });
    expect(ledger.pollMinId()).toBe(50);
    ledger.learn([
      prompt(52, { pack_id: 260 } as Partial<Prompt>),
      prompt(51, { pack_id: null } as Partial<Prompt>), // a prompt someone else made meanwhile
      prompt(53, { pack_id: 261 } as Partial<Prompt>),
      prompt(54), // a service that does not echo pack_id
      done(40), // older than the request
    ]);
    expect(ledger.all().map((p) => p.id)).toEqual([52, 54]);
    expect(ledger.pollMinId()).toBe(52);
  });
});

describe('progressOf', () => {
  const phases = [
    { phase: Phase.creatingTune, since: 1_000 },
    { phase: Phase.training, since: 2_000 },
    { phase: Phase.generating, since: 9_000 },
  ];

  test('phase (the last of the phases, each with its time), tune, prompt counts and a copy of the counters', () => {
    const ledger = new PromptLedger(3);
    ledger.adopt(done(1), 0);
    ledger.adopt(prompt(2, { user_error: 'x', updated_at: T2 }), 1);
    ledger.adopt(running(3), 2);
    const counts = { apiCalls: 5, polls: 1, callbacks: 2 };
    const progress = progressOf(phases, 7, ledger, counts, costOf(154_000));
    expect(progress).toEqual({
      phase: 'generating',
      tuneId: 7,
      prompts: { total: 3, settled: 2, failed: 1 },
      cost: { mc: 154_000, usd: 1.54 },
      counts: { apiCalls: 5, polls: 1, callbacks: 2 },
      phases,
      images: [{ promptId: 1, index: 0, url: 'https://x/1.png' }],
    });
    counts.apiCalls++;
    phases[0]!.since = 0;
    expect(progress.counts.apiCalls).toBe(5);
    expect(progress.phases![0]!.since).toBe(1_000);
    expect(progressOf(phases.slice(0, 1), undefined, new PromptLedger(2), counts, costOf(0)).tuneId).toBeNull();
    phases[0]!.since = 1_000;
  });

  test("images of settled prompts only, in the prompts' order, each with its stored copy once it is stored", () => {
    const ledger = new PromptLedger(3);
    ledger.adopt(prompt(5, { images: ['https://x/5a.png', 'https://x/5b.png'], updated_at: T2 }), 0);
    ledger.adopt(running(6), 1);
    ledger.adopt(done(4), 2);
    const copy = { sha256: 'ab', bytes: 3, content_type: 'image/png' };
    const stored = new Map([
      [
        5,
        [
          { ...copy, location: 's3://b/5a' },
          { ...copy, location: 's3://b/5b' },
        ],
      ],
    ]);
    expect(progressOf(phases, 7, ledger, { apiCalls: 0, polls: 0, callbacks: 0 }, costOf(0), stored).images).toEqual([
      { promptId: 5, index: 0, url: 'https://x/5a.png', stored: 's3://b/5a' },
      { promptId: 5, index: 1, url: 'https://x/5b.png', stored: 's3://b/5b' },
      { promptId: 4, index: 0, url: 'https://x/4.png' },
    ]);
  });
});
