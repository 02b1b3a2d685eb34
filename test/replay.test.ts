/**
 * Replays every recorded history under test/histories/ with the current workflow code (DESIGN.md, testing tier 6):
 * a change that would break a running workflow fails here. Needs no server. The corpus keeps what earlier releases
 * recorded (test/histories/before-wake-ups/: runs started before callbacks became wake-ups) beside the current
 * recordings: a user upgrading tuneflow under live runs has both. Histories handed over in ../shared/histories/ are
 * replayed too, read where they are (never copied over the tracked ones). With no history at all, the bundle alone
 * still proves the workflow code bundles with deterministic imports only.
 *
 * A history file is Temporal's JSON form of a history (`historyToJSON`, `temporal workflow show --output json`); it is
 * replayed under the workflow ID its start event records (a run under a `tuneflow:` ID has one no file name can hold),
 * else under its name without `.json` (replayedWorkflowId; scripts/record-histories.ts records them so).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { defaultPayloadConverter } from '@temporalio/common';
import { Worker, type WorkflowBundle } from '@temporalio/worker';
import { TuneflowPlugin, workflowSource } from '../src/plugin';
import { FailureType } from '../src/contract/failures';
import { claimWorkflowId, RESERVED_KEY_PREFIX } from '../src/contract/keys';
import { WORKFLOW_ID_OWNED } from '../src/workflows/admission';
import { EARLIER_PATCHES_FOLDED } from '../src/workflows/patches';
import { API_KEY, CALLBACK_SECRET } from './workflows/harness';
import { historyFromJson } from './workflows/history-json';
import { bundleForStrictReplay, replayStrictly } from './workflows/strict-replay';
import { installQuietRuntime } from './workflows/global-setup';
import { replayedWorkflowId, summarize } from './workflows/history-summary';
import { patchMarkers } from './patch-markers';
import { COMPRESSED_ENCODING } from '../src/codec/compression';

const HISTORIES = path.join(__dirname, 'histories');
const SHARED_HISTORIES = path.resolve(__dirname, '..', '..', 'shared', 'histories');
/** The corpus recorded before callbacks became wake-ups. */
const BEFORE_WAKE_UPS = path.join(HISTORIES, 'before-wake-ups');
/** The corpus recorded before the job workflows folded their patches: a marker for each patch a run asked. */
const BEFORE_FOLDED_PATCHES = path.join(HISTORIES, 'before-folded-patches');
/** The corpus recorded before activities answered briefly: every activity result whole. */
const BEFORE_BRIEF_ANSWERS = path.join(HISTORIES, 'before-brief-answers');

/** Every history file under `dir`, at any depth, as paths; none when it does not exist. */
function historiesUnder(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.json'))
    .sort()
    .map((name) => path.join(dir, name));
}

// Jest decides the tests when the file loads: the listing happens now.
const files = [...historiesUnder(HISTORIES), ...historiesUnder(SHARED_HISTORIES)];
const label = (file: string) => path.relative(path.resolve(__dirname, '..'), file);
const named = (name: string) => files.find((file) => file === path.join(HISTORIES, name)) as string;

let bundle: WorkflowBundle;
const readHistory = (file: string) => historyFromJson(JSON.parse(fs.readFileSync(file, 'utf8')));

beforeAll(async () => {
  installQuietRuntime();
  bundle = await bundleForStrictReplay();
}, 120_000);

test('the workflows bundle with deterministic imports only', () => {
  // Module paths appear in the bundle, so a forbidden one would show.
  expect(bundle.code).toContain('src/workflows/');
  // Nothing that does I/O is bundled into workflow code; zod is, for the input contract (src/contract/check.ts).
  for (const forbidden of ['node_modules/undici/', 'src/api/http', 'src/activities/', 'src/callbacks/'])
    expect(bundle.code).not.toContain(forbidden);
  expect(bundle.code).toContain('src/contract/check.ts');
  if (!files.length)
    console.info(
      'replay: no histories under test/histories/ yet (npm run record-histories records them): nothing to replay',
    );
});

test('no recorded history carries the API key, the callback secret or a signed callback URL', () => {
  const signature = /sig(=|%3D)[0-9a-fA-F]{16,}/;
  for (const file of historiesUnder(HISTORIES)) {
    const text = fs.readFileSync(file, 'utf8');
    // Payloads are base64 in the JSON form: each is read as its text too.
    const payloads = [...text.matchAll(/"data":\s*"([A-Za-z0-9+/=]+)"/g)].map((m) =>
      Buffer.from(m[1], 'base64').toString(),
    );
    for (const form of [text, ...payloads]) {
      expect(form).not.toContain(API_KEY);
      expect(form).not.toContain(CALLBACK_SECRET);
      expect(form).not.toMatch(signature);
    }
  }
});

test('both corpora are here: histories recorded before callbacks became wake-ups, and after', () => {
  const before = historiesUnder(BEFORE_WAKE_UPS);
  expect(before.length).toBeGreaterThanOrEqual(21);
  expect(files.length - before.length).toBeGreaterThanOrEqual(21);
});

test('runs in flight at the brief-answers upgrade are kept: whole answers in before-brief-answers/, brief ones now', () => {
  // The tunes the runs created, as their createTune answered while the tune was still training.
  const untrainedCreates = (histories: string[]) =>
    histories
      .map((file) => summarize(readHistory(file)).calls.find((c) => c.activity === 'createTune')?.result)
      .filter((tune) => !!tune && !(tune as { trained_at?: unknown }).trained_at);
  const whole = untrainedCreates(historiesUnder(BEFORE_BRIEF_ANSWERS));
  const brief = untrainedCreates(historiesUnder(HISTORIES).filter((file) => path.dirname(file) === HISTORIES));
  expect(whole.length).toBeGreaterThanOrEqual(10);
  expect(brief.length).toBeGreaterThanOrEqual(10);
  for (const tune of whole) expect(tune).toHaveProperty('orig_images');
  for (const tune of brief) expect(tune).not.toHaveProperty('orig_images');
});

test("done copies are brief now too: a trained tune answered whole before, with the result's fields now", () => {
  // The tunes the runs read once trained: whole before (and in the result), cut to what the run reads and the
  // result gives now; both replay, and make the same commands.
  const trainedReads = (histories: string[]) =>
    histories
      .flatMap((file) => summarize(readHistory(file)).calls.filter((c) => c.activity === 'retrieveTune'))
      .map((c) => c.result as { trained_at?: unknown } | undefined)
      .filter((tune) => !!tune?.trained_at);
  const whole = trainedReads(historiesUnder(BEFORE_BRIEF_ANSWERS));
  const brief = trainedReads(historiesUnder(HISTORIES).filter((file) => path.dirname(file) === HISTORIES));
  expect(whole.length).toBeGreaterThanOrEqual(10);
  expect(brief.length).toBeGreaterThanOrEqual(10);
  for (const tune of whole) expect(tune).toHaveProperty('orig_images');
  for (const tune of brief) expect(tune).not.toHaveProperty('orig_images');
  for (const tune of brief) expect(tune).toHaveProperty('token');
});

/**
 * A replay's time depends on the machine and its load (a replay worker is created for each; 0.2 s idle, over 5 s, jest's
 * default, on two cores shared with other test runs), not on the history: this timeout catches a replay that hangs,
 * never one that is slow.
 */
const REPLAY_HANG_MS = 300_000;

for (const file of files) {
  test(
    `${label(file)} replays with the current workflow code: same commands, activity types and timer durations`,
    async () => {
      const history = readHistory(file);
      await replayStrictly(bundle, history, replayedWorkflowId(history, path.basename(file, '.json')));
    },
    REPLAY_HANG_MS,
  );
}

test('every patch marker the workflow code asks about is in a recorded history: each shape it decides is replayed', () => {
  const recorded = new Set(historiesUnder(HISTORIES).flatMap((file) => summarize(readHistory(file)).patches));
  expect(patchMarkers().filter((marker) => !recorded.has(marker))).toEqual([]);
});

test(
  'runs refused for a `tuneflow:` ID not their own replay under that ID, read from their start event, and under no other',
  async () => {
    for (const name of ['workflow-id-not-owned.json', 'tenant-id-not-owned.json']) {
      const history = readHistory(named(name));
      const workflowId = replayedWorkflowId(history, path.basename(name, '.json'));
      expect(workflowId.startsWith(RESERVED_KEY_PREFIX)).toBe(true);
      // Recorded now: the rule on the run's one marker; recorded before the fold: on its own.
      expect(summarize(history).patches).toEqual([EARLIER_PATCHES_FOLDED]);
      expect(summarize(readHistory(path.join(BEFORE_FOLDED_PATCHES, name))).patches).toContain(WORKFLOW_ID_OWNED);
      const failed = history.events?.at(-1)?.workflowExecutionFailedEventAttributes?.failure;
      expect(failed?.applicationFailureInfo?.type).toBe(FailureType.invalidInput);
      expect(failed?.message).toContain(JSON.stringify(workflowId));
      // Under a key of its own the run is not refused: its commands are not the recorded ones.
      await expect(replayStrictly(bundle, history, path.basename(name, '.json'))).rejects.toThrow(/nondeterminism/i);
    }
  },
  REPLAY_HANG_MS,
);

test(
  "a key's claim is recorded in both its shapes: completed as its job's child, refused at once when started raw",
  async () => {
    const claim = readHistory(named('key-claim-of-job.json'));
    const claimStart = claim.events?.[0]?.workflowExecutionStartedEventAttributes;
    expect(claimStart?.workflowType?.name).toBe('keyClaim');
    const job = claimStart?.parentWorkflowExecution?.workflowId as string;
    expect(replayedWorkflowId(claim, 'key-claim-of-job')).toBe(claimWorkflowId(job));
    expect(claim.events?.at(-1)?.workflowExecutionCompletedEventAttributes).toBeTruthy();
    // It completes because its parent is the key's run: under another ID the same start is refused.
    await expect(replayStrictly(bundle, claim, 'key-claim-of-job')).rejects.toThrow(/nondeterminism/i);

    const squat = readHistory(named('key-claim-squatted.json'));
    const squatStart = squat.events?.[0]?.workflowExecutionStartedEventAttributes;
    expect(squatStart?.workflowType?.name).toBe('keyClaim');
    expect(squatStart?.parentWorkflowExecution).toBeFalsy();
    const squatted = replayedWorkflowId(squat, 'key-claim-squatted');
    expect(squatted).toBe(claimWorkflowId('key-claim-squatted'));
    const failed = squat.events?.at(-1)?.workflowExecutionFailedEventAttributes?.failure;
    expect(failed?.applicationFailureInfo?.type).toBe(FailureType.invalidInput);
    expect(failed?.message).toContain(JSON.stringify(squatted));
    const [details] = failed?.applicationFailureInfo?.details?.payloads ?? [];
    expect(defaultPayloadConverter.fromPayload(details)).toMatchObject({ field: 'workflowId' });
    // At once: nothing between its first workflow task and its failure.
    expect(squat.events).toHaveLength(5);
  },
  REPLAY_HANG_MS,
);

test(
  "a tenant's ledger is recorded in both its shapes: kept by its jobs under the operator's ceiling, refused at once " +
    'when started raw with sums of its own',
  async () => {
    const ledger = readHistory(named('ledger-of-jobs.json'));
    const events = ledger.events ?? [];
    expect(events[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name).toBe('spendLedger');
    expect(replayedWorkflowId(ledger, 'ledger-of-jobs')).toMatch(/^tuneflow:ledger:ledgered:\d{4}-\d{2}$/);
    // The ceiling read once, from the operator's configuration; the training and two prompts reserved and committed.
    const { patches, activities } = summarize(ledger);
    expect(patches).toEqual(['ledger-ceiling-from-operator']);
    expect(activities).toEqual(['ledgerCeiling']);
    const updates = events.flatMap(
      (e) => e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.name ?? [],
    );
    expect(updates).toEqual([
      'reserveSpend',
      'commitSpend',
      'reserveSpend',
      'commitSpend',
      'reserveSpend',
      'commitSpend',
    ]);

    const forged = readHistory(named('ledger-forged-state.json'));
    const failed = forged.events?.at(-1)?.workflowExecutionFailedEventAttributes?.failure;
    expect(failed?.applicationFailureInfo?.type).toBe(FailureType.invalidInput);
    expect(forged.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId).toBeFalsy();
  },
  REPLAY_HANG_MS,
);

test(
  'a deliberately broken workflow change fails the replay of the recorded histories',
  async () => {
    const happyPath = named('callbacks-happy-path.json');
    expect(happyPath).toBeDefined();
    const broken = await bundleForStrictReplay(require.resolve('./replay-fixtures/broken-workflows'));
    await expect(replayStrictly(broken, readHistory(happyPath), 'callbacks-happy-path')).rejects.toThrow(
      /nondeterminism/i,
    );
  },
  REPLAY_HANG_MS,
);

test(
  'a replay worker given only TuneflowPlugin gets its workflows; one with workflows of its own keeps them',
  async () => {
    const plugin = new TuneflowPlugin({ api: { apiKey: API_KEY } });
    const history = readHistory(named('callbacks-happy-path.json'));
    await Worker.runReplayHistory({ plugins: [plugin] }, history, 'callbacks-happy-path');
    const own = require.resolve('./replay-fixtures/broken-workflows');
    await expect(
      Worker.runReplayHistory({ plugins: [plugin], workflowsPath: own }, history, 'callbacks-happy-path'),
    ).rejects.toThrow(/nondeterminism/i);
  },
  REPLAY_HANG_MS,
);

test(
  "a history stored with compressed activity payloads replays on TuneflowPlugin's replayer, and on none without the codec",
  async () => {
    const history = readHistory(named('compressed-happy-path.json'));
    const events = history.events ?? [];
    const encodings = (payloads: { metadata?: Record<string, Uint8Array> | null }[] | null | undefined) =>
      (payloads ?? []).map((p) => Buffer.from(p.metadata?.encoding ?? new Uint8Array()).toString());
    const activityPayloads = events.flatMap((e) => [
      ...encodings(e.activityTaskScheduledEventAttributes?.input?.payloads),
      ...encodings(e.activityTaskCompletedEventAttributes?.result?.payloads),
    ]);
    // The service's answers and the requests for them, compressed; the run's input and result plain.
    expect(activityPayloads.filter((e) => e === COMPRESSED_ENCODING).length).toBeGreaterThanOrEqual(8);
    expect(encodings(events[0]?.workflowExecutionStartedEventAttributes?.input?.payloads)).toEqual(['json/plain']);
    expect(encodings(events.at(-1)?.workflowExecutionCompletedEventAttributes?.result?.payloads)).toEqual([
      'json/plain',
    ]);
    // The same activities as the plain happy path, read through the codec.
    expect(summarize(history).activities).toEqual(
      summarize(readHistory(named('callbacks-happy-path.json'))).activities,
    );
    const plugin = new TuneflowPlugin({ api: { apiKey: API_KEY }, compressPayloads: false });
    await Worker.runReplayHistory({ plugins: [plugin] }, history, 'compressed-happy-path');
    await expect(Worker.runReplayHistory(workflowSource(), history, 'compressed-happy-path')).rejects.toThrow(
      /tuneflow-deflate/,
    );
  },
  REPLAY_HANG_MS,
);

test('a job recorded now holds one patch marker and one TemporalChangeVersion update; the same job before the fold, one each', () => {
  const versions = (file: string) =>
    (readHistory(file).events ?? []).filter(
      (e) => e.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields?.TemporalChangeVersion,
    ).length;
  for (const name of ['callbacks-happy-path.json', 'fast-training-max-cost.json', 'pack.json']) {
    const now = readHistory(named(name));
    const before = readHistory(path.join(BEFORE_FOLDED_PATCHES, name));
    expect(summarize(now).patches).toEqual([EARLIER_PATCHES_FOLDED]);
    expect(versions(named(name))).toBe(1);
    expect(summarize(before).patches.length).toBeGreaterThanOrEqual(3);
    expect(versions(path.join(BEFORE_FOLDED_PATCHES, name))).toBe(summarize(before).patches.length);
    // The same activities in the same order: the rules the markers named, all taken on one.
    expect(summarize(now).activities).toEqual(summarize(before).activities);
  }
});
