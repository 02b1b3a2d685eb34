/**
 * The soak's judge (bench/soak/judge.ts) under test: a good run passes, and each defect seeded into its journal or
 * its histories is reported (a judge that always answered "fine" would fail here).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as proto from '@temporalio/proto';
import {
  callbackTimes,
  FORGED_DATA_MARK,
  HISTORY_PARTS,
  judgeRun,
  readHistory,
  signalIds,
  type History,
  type RunVerdict,
} from '../../bench/soak/judge';
import type { SoakJob } from '../../bench/soak/jobs';
import type { MockJournal } from '../../src/mock-service';
import { historyFromJson } from '../workflows/history-json';
import {
  generateJob,
  goodHistories,
  goodJournal,
  HistoryFixture,
  packJob,
  T0,
  ttgJob,
  ttgResult,
  ttgUntilSettled,
  type JournalFixture,
} from './soak-fixtures';

const API_KEY = 'soak-key-judge-test-0123456789';

function judge(journal: MockJournal, histories: Map<SoakJob, History>): RunVerdict {
  const times = callbackTimes(journal);
  const outcomes = [...histories].map(([job, history]) => readHistory(job, history, API_KEY, times));
  return judgeRun(outcomes, journal, false);
}

/** The good run with `job`'s history replaced. */
function withHistory(job: SoakJob, history: History): Map<SoakJob, History> {
  return new Map([...goodHistories(), [job, history]]);
}

function expectOnly(verdict: RunVerdict, violation: RegExp): void {
  expect(verdict.violations).toEqual([expect.stringMatching(violation)]);
}

test('a good run: every job completed, nothing duplicated, lost, open or leaked', () => {
  const verdict = judge(goodJournal().journal(), goodHistories());
  expect(verdict).toEqual({
    completed: 3,
    failedTyped: 0,
    failedOther: 0,
    duplicates: 0,
    lost: 0,
    stuck: 0,
    keyLeaks: 0,
    signedUrlLeaks: 0,
    unmatchedSignals: 0,
    forgedSignals: 0,
    forgedData: 0,
    terminated: 0,
    failureTypes: {},
    violations: [],
  });
});

test('a duplicate tune is reported', () => {
  const verdict = judge(goodJournal().tune(110, ttgJob.workflowId).journal(), goodHistories());
  expect(verdict.duplicates).toBe(1);
  expectOnly(verdict, /^soak-t-0: 1 duplicate create/);
});

test('a duplicate prompt is reported, and a prompt beyond those asked for', () => {
  const twice = judge(goodJournal().prompt(104, 100, 'sks dog [soak-t-0 #1]').journal(), goodHistories());
  expect(twice.duplicates).toBe(1);
  expectOnly(twice, /^soak-t-0: 1 duplicate create/);
  const beyond = judge(goodJournal().prompt(104, 100, 'sks dog [soak-t-0 #2]').journal(), goodHistories());
  expect(beyond.duplicates).toBe(1);
});

test('a missing prompt is reported', () => {
  const journal = goodJournal();
  journal.prompts.splice(
    journal.prompts.findIndex((p) => p.id === 102),
    1,
  );
  const verdict = judge(journal.journal(), goodHistories());
  expect(verdict.lost).toBe(1);
  expect(verdict.violations).toContainEqual(expect.stringMatching(/^soak-t-0: 1 requested object\(s\) missing/));
});

test('a surplus pack prompt counts as a duplicate', () => {
  const verdict = judge(goodJournal().prompt(204, 200, 'a pet pack prompt').journal(), goodHistories());
  expect(verdict.duplicates).toBe(1);
  expectOnly(verdict, /^soak-t-8: 1 duplicate create/);
});

test('a run left open is stuck', () => {
  const verdict = judge(goodJournal().journal(), withHistory(ttgJob, ttgUntilSettled().history()));
  expect(verdict.stuck).toBe(1);
  expectOnly(verdict, /^soak-t-0: still open at the deadline/);
});

test('a typed failure nothing injected explains fails the soak: the prompts had settled, or no fault was made', () => {
  const neverSettled = ttgUntilSettled().failed(
    { type: 'PromptsNeverSettled', message: 'did not settle', details: { tuneId: 100, promptIds: [102] } },
    121_000,
  );
  const verdict = judge(goodJournal().journal(), withHistory(ttgJob, neverSettled.history()));
  expect(verdict).toMatchObject({ failedOther: 1, failedTyped: 0, failureTypes: { PromptsNeverSettled: 1 } });
  expectOnly(verdict, /^soak-t-0: failed PromptsNeverSettled, which no injected fault explains/);

  // The review's case: a contract that refused valid input. Nothing was made, so nothing is lost.
  const journal = goodJournal();
  journal.tunes.splice(0, 1);
  journal.prompts.splice(0, 2);
  const refused = new HistoryFixture().task(10).failed({ type: 'InvalidInput', message: 'Invalid input' }, 20);
  const invalid = judge(journal.journal(), withHistory(ttgJob, refused.history()));
  expect(invalid).toMatchObject({ failedOther: 1, lost: 0, failureTypes: { InvalidInput: 1 } });
  expectOnly(invalid, /^soak-t-0: failed InvalidInput/);
});

test('TuneNeverTrained is justified only for a tune that did not train', () => {
  const history = () =>
    new HistoryFixture()
      .task(10)
      .activity('createTune', 20, {}, { id: 100 })
      .task(90_000)
      .failed({ type: 'TuneNeverTrained', message: 'not trained', details: { tuneId: 100 } }, 90_010)
      .history();
  const untrained = goodJournal();
  untrained.tunes[0] = { ...untrained.tunes[0], trainedAt: null, neverTrains: true };
  untrained.prompts.splice(0, 2);
  const fair = judge(untrained.journal(), withHistory(ttgJob, history()));
  expect(fair).toMatchObject({ failedTyped: 1, failedOther: 0, violations: [] });

  const trained = goodJournal();
  trained.prompts.splice(0, 2);
  const unfair = judge(trained.journal(), withHistory(ttgJob, history()));
  expect(unfair.failedOther).toBe(1);
  expectOnly(unfair, /^soak-t-0: failed TuneNeverTrained, which no injected fault explains/);
});

test("a pack whose tune never trained: its prompts are reached through the failure's tune, not lost", () => {
  const journal = goodJournal();
  journal.tunes[1] = { ...journal.tunes[1], trainedAt: null, neverTrains: true };
  for (const prompt of journal.prompts) if (prompt.tuneId === 200) prompt.settledAt = null;
  journal.callbacks.splice(0, journal.callbacks.length, ...journal.callbacks.filter((c) => !c.ids.includes(201)));
  const history = new HistoryFixture()
    .task(10)
    .activity('createPackTune', 20, {}, { id: 200 })
    .task(90_000)
    .failed({ type: 'TuneNeverTrained', message: 'not trained', details: { tuneId: 200 } }, 90_010)
    .history();
  expect(judge(journal.journal(), withHistory(packJob, history))).toMatchObject({
    failedTyped: 1,
    lost: 0,
    violations: [],
  });
});

test('an untyped failure is reported', () => {
  const history = ttgUntilSettled().failed({ message: 'TypeError: cannot read properties of undefined' }, 1_530);
  const verdict = judge(goodJournal().journal(), withHistory(ttgJob, history.history()));
  expect(verdict).toMatchObject({ failedOther: 1, failureTypes: { untyped: 1 } });
  expect(verdict.violations).toContainEqual(
    expect.stringMatching(/^soak-t-0: failed untyped, which no injected fault explains: TypeError/),
  );
});

test('a failed job loses what it made and does not report', () => {
  // Failed without naming its tune: the tune and both prompts are nowhere in what the run reports.
  const history = ttgUntilSettled().failed({ type: 'OverBudget', message: 'over budget' }, 1_530);
  const verdict = judge(goodJournal().journal(), withHistory(ttgJob, history.history()));
  expect(verdict.lost).toBe(3);
  expect(verdict.violations).toContainEqual(
    expect.stringMatching(/^soak-t-0: 3 object\(s\) made and neither reported by the run nor cleaned up/),
  );
});

test('a completed result that names another prompt than the one made loses it', () => {
  const result = { ...ttgResult, prompts: [{ id: 101 }, { id: 999 }] };
  const verdict = judge(
    goodJournal().journal(),
    withHistory(ttgJob, ttgUntilSettled().completed(result, 1_530).history()),
  );
  expect(verdict.lost).toBe(1);
  expect(verdict.violations).toContainEqual(expect.stringMatching(/^soak-t-0: 1 object\(s\) made and neither/));
});

test('a completed job whose tune never trained, or whose prompt had not settled, is reported', () => {
  const untrained = goodJournal();
  untrained.tunes[0] = { ...untrained.tunes[0], trainedAt: null, neverTrains: true };
  expect(judge(untrained.journal(), goodHistories()).violations).toContainEqual(
    expect.stringMatching(/^soak-t-0: completed although tune 100 never trained/),
  );
  const late = goodJournal();
  late.prompts.find((p) => p.id === 103)!.settledAt = T0 + 60_000;
  expect(judge(late.journal(), goodHistories()).violations).toContainEqual(
    expect.stringMatching(/^soak-t-6: completed although prompt 103 never settled/),
  );
});

test('the API key in a history is reported', () => {
  const history = new HistoryFixture()
    .task(10)
    .activity('createPrompt', 40, { apiKey: API_KEY }, { id: 103 })
    .signal('promptSettled', { id: 103 }, 1_510)
    .task(1_520)
    .completed({ prompts: [{ id: 103 }] }, 1_530);
  const verdict = judge(goodJournal().journal(), withHistory(generateJob, history.history()));
  expect(verdict.keyLeaks).toBe(1);
  expectOnly(verdict, /^soak-t-6: the API key is in its history/);
});

test('a signed callback URL in a history or a result is reported; a redacted one is not', () => {
  const url = `https://cb.example/callbacks/prompt/soak-t-6;sig=${'ab'.repeat(32)}`;
  const leaking = (result: unknown) =>
    new HistoryFixture()
      .task(10)
      .activity('createPrompt', 40, {}, { id: 103, callback: url.replace(/sig=.*/, 'sig=redacted') })
      .signal('promptSettled', { id: 103 }, 1_510)
      .task(1_520)
      .completed(result, 1_530)
      .history();
  const redacted = judge(goodJournal().journal(), withHistory(generateJob, leaking({ prompts: [{ id: 103 }] })));
  expect(redacted.signedUrlLeaks).toBe(0);
  expect(redacted.violations).toEqual([]);

  const signed = judge(
    goodJournal().journal(),
    withHistory(generateJob, leaking({ prompts: [{ id: 103, callback: url }] })),
  );
  expect(signed.signedUrlLeaks).toBe(1);
  expectOnly(signed, /^soak-t-6: a signed callback URL is in its history/);
  // URL-encoded, as a query string or a form would carry it.
  const encoded = judge(
    goodJournal().journal(),
    withHistory(generateJob, leaking({ prompts: [{ id: 103, callback: encodeURIComponent(url) }] })),
  );
  expect(encoded.signedUrlLeaks).toBe(1);
});

test('a signal that matches no callback the mock sent is a forged callback that got through', () => {
  const forged = ttgUntilSettled()
    .signal('tuneTrained', { id: 100, trained_at: '2999-01-01T00:00:00Z' }, 1_000)
    .signal('callback', { kind: 'prompt', ids: [555] }, 1_200)
    .completed(ttgResult, 1_530);
  const verdict = judge(goodJournal().journal(), withHistory(ttgJob, forged.history()));
  // The first names tune 100, for which the mock did send a callback: a wake-up, not a forgery to count.
  expect(verdict.unmatchedSignals).toBe(1);
  expectOnly(verdict, /^soak-t-0: 1 signal\(s\) match no callback the mock sent/);
});

test('callback signals match by ids in either form: objects, a list of objects, or { kind, ids }', () => {
  expect(signalIds({ id: 7, title: 'x' })).toEqual([7]);
  expect(signalIds([{ id: 9 }, { id: 8 }])).toEqual([9, 8]);
  expect(signalIds({ kind: 'pack-prompts', ids: [9, 8] })).toEqual([9, 8]);
  expect(signalIds(undefined)).toEqual([]);
  const history = ttgUntilSettled('callback').completed(ttgResult, 1_530).history();
  const verdict = judge(goodJournal().journal(), withHistory(ttgJob, history));
  expect(verdict.violations).toEqual([]);
});

test('reactions: from the mock sending a callback to the first command of the task that took it, in three parts', () => {
  const journal: JournalFixture = goodJournal();
  const outcome = readHistory(ttgJob, goodHistories().get(ttgJob)!, API_KEY, callbackTimes(journal.journal()));
  // Tune 100's callback at 900, its task's createPrompt at 930; the prompts' at 1,500, completion at 1,530.
  expect(outcome.reactions.map((r) => r.ms)).toEqual([30, 30, 30]);
  expect(outcome.reactions.map((r) => r.sentAt - T0)).toEqual([900, 1_500, 1_500]);
  // In parts (the fixture's events are 10 ms apart): the signal in history, the task that took it, its command.
  for (const reaction of outcome.reactions) expect(reaction.parts).toEqual({ deliveryMs: 10, waitMs: 10, taskMs: 10 });
  // And its shape: what it scheduled, started and took, each activity from scheduled to completed.
  expect(outcome.commands.activities).toBe(outcome.activityMs.length);
  expect(outcome.sequence[0]).toBe('createTune');
  expect(outcome.activityMs).toEqual([0, 0, 0]);
  expect(outcome).toMatchObject({ status: 'completed', resultPrompts: 2, events: expect.any(Number) });
});

test('signals of forgeries made with a leaked valid URL are counted apart, not as unmatched', () => {
  const forged = ttgUntilSettled()
    .signal('callback', { kind: 'tune', ids: [990_000_001] }, 1_000)
    .completed(ttgResult, 1_530);
  const times = callbackTimes(goodJournal().journal());
  const outcome = readHistory(ttgJob, forged.history(), API_KEY, times, new Set([990_000_001]));
  expect(outcome).toMatchObject({ forgedSignals: 1, unmatchedSignals: 0, forgedData: false });
});

test('forged data anywhere in a history is reported: a forged body wrote the run state', () => {
  const written = ttgUntilSettled().completed(
    { ...ttgResult, prompts: [{ id: 101, images: [`https://${FORGED_DATA_MARK}/forged.jpg`] }, { id: 102 }] },
    1_530,
  );
  const verdict = judge(goodJournal().journal(), withHistory(ttgJob, written.history()));
  expect(verdict.forgedData).toBe(1);
  expect(verdict.violations).toContainEqual(expect.stringMatching(/^soak-t-0: its history holds data only a forged/));
});

test('a run Temporal terminated (its history grown too large) is reported, with the reason', () => {
  const terminated = ttgUntilSettled().terminated('history size exceeds limit', 1_530);
  const verdict = judge(goodJournal().journal(), withHistory(ttgJob, terminated.history()));
  expect(verdict.terminated).toBe(1);
  expect(verdict.violations).toContainEqual(
    expect.stringMatching(/^soak-t-0: terminated \(history size exceeds limit\)/),
  );
});

test("a history's bytes by part, on a recorded run: every event counted once, each where its bytes belong", () => {
  const file = path.join(__dirname, '..', 'histories', 'callbacks-happy-path.json');
  const history = historyFromJson(JSON.parse(fs.readFileSync(file, 'utf8')));
  const outcome = readHistory(ttgJob, history, API_KEY, new Map());
  const events = history.events!;
  const size = (e: (typeof events)[number]) => proto.temporal.api.history.v1.HistoryEvent.encode(e).finish().length;
  const total = HISTORY_PARTS.reduce((sum, part) => sum + outcome.bytesByPart[part], 0);
  // The parts are the events' own encodings; the history adds a tag and a length to each.
  expect(total).toBe(events.reduce((sum, e) => sum + size(e), 0));
  expect(outcome.bytes - total).toBeGreaterThanOrEqual(2 * events.length);
  expect(outcome.bytes - total).toBeLessThanOrEqual(3 * events.length);
  // The result is the last event alone; the answers are the completed activities, with their payloads.
  expect(outcome.bytesByPart.result).toBe(size(events[events.length - 1]));
  const answers = events.filter((e) => e.activityTaskCompletedEventAttributes);
  expect(outcome.bytesByPart['activity answers']).toBe(answers.reduce((sum, e) => sum + size(e), 0));
  const upserts = events.filter((e) => e.upsertWorkflowSearchAttributesEventAttributes);
  expect(upserts.length).toBeGreaterThan(0);
  expect(outcome.bytesByPart['search attributes']).toBe(upserts.reduce((sum, e) => sum + size(e), 0));
  for (const part of HISTORY_PARTS) expect(outcome.bytesByPart[part]).toBeGreaterThan(0);
});
