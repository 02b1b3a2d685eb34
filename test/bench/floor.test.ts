/**
 * The floor (bench/floor) keeps tuneflow's Temporal shape: it replays tuneflow's own recorded histories, strictly
 * (the same activities in order, timers of the same lengths), markers aside; it carries none of tuneflow's weight; and
 * its service keeps the mock's timing and callback order.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { bundleWorkflowCode, DefaultLogger, type WorkflowBundle } from '@temporalio/worker';
import { FloorService, type FloorAnswer } from '../../bench/floor/service';
import { FLOOR_DEFAULTS, type FloorObject } from '../../bench/floor/workflows';
import { PACKS } from '../../src/mock-service';
import type { CallbackWakeUp } from '../../src/contract/messages';
import { DEFAULT_OPTIONS } from '../../src/contract/options';
import { historyFromJson } from '../workflows/history-json';
import { installQuietRuntime } from '../workflows/global-setup';
import { replayStrictly } from '../workflows/strict-replay';

// A replay's time follows the machine's load (over jest's 5 s on two shared cores), not the history: this catches a
// replay that hangs, never one that is slow.
jest.setTimeout(300_000);

const HISTORIES = path.join(__dirname, '..', 'histories');

/**
 * tuneflow's recordings of what the soak's jobs do: the happy path of each workflow, and the waits' other ways out
 * (polls, a late worker, retried calls, a deadline). Not the features the floor leaves out: validation (faceid's
 * training image is a file, checked against the upload directory first), budgets, cancellation and cleanup, reused
 * pack tunes, the first releases' signals.
 */
const SAME_SHAPE = [
  'callbacks-happy-path',
  'pack',
  'generate-on-training-tune',
  'callbacks-dropped',
  'forged-callbacks',
  'worker-restart',
  'gateway-timeout-once',
  'server-error-backoff',
  'tune-never-trained',
  'flux-lora',
];

type EventJson = Record<string, unknown>;

/**
 * A history without its patch markers, its search attributes (the check's local activity marker, its upserts and the
 * one each `patched` makes), events renumbered: the commands tuneflow issued for the job itself. The floor is a bare
 * workflow; tuneflow's versioning and its findable runs are its own cost (the soak counts them).
 */
function withoutPatchMarkers(history: { events: EventJson[] }): { events: EventJson[] } {
  const marker = (e: EventJson) => (e.markerRecordedEventAttributes as EventJson | undefined)?.markerName;
  const isPatch = (e: EventJson) =>
    marker(e) === 'core_patch' ||
    marker(e) === 'core_local_activity' ||
    e.upsertWorkflowSearchAttributesEventAttributes !== undefined;
  const kept = history.events.filter((e) => !isPatch(e));
  const ids = new Map(kept.map((e, i) => [String(e.eventId), String(i + 1)]));
  // Activities and local activities share one sequence: the ids after a local activity move down by one.
  const localSeqs = history.events
    .filter((e) => marker(e) === 'core_local_activity')
    .map((e) => {
      const details = (e.markerRecordedEventAttributes as { details: { data: { payloads: Array<{ data: string }> } } })
        .details;
      return (JSON.parse(Buffer.from(details.data.payloads[0].data, 'base64').toString()) as { seq: number }).seq;
    });
  const activityId = (id: number) => String(id - localSeqs.filter((seq) => seq < id).length);
  const renumber = (value: unknown, key = ''): unknown => {
    if (Array.isArray(value)) return value.map((item) => renumber(item));
    if (value && typeof value === 'object')
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, renumber(v, k)]));
    if (key === 'activityId') return activityId(Number(value));
    return /(^e|E)ventId$/.test(key) && ids.has(String(value)) ? ids.get(String(value)) : value;
  };
  return { ...history, events: kept.map((e) => renumber(e) as EventJson) };
}

describe('the floor replays tuneflow', () => {
  let bundle: WorkflowBundle;

  beforeAll(async () => {
    installQuietRuntime();
    // As bench/floor/phase.ts bundles it (nothing preloaded), with the interceptor the strict replay reads.
    bundle = await bundleWorkflowCode({
      workflowsPath: require.resolve('../../bench/floor/workflows'),
      workflowInterceptorModules: [require.resolve('../replay-fixtures/command-interceptors')],
      logger: new DefaultLogger('WARN'),
    });
  }, 120_000);

  test.each(SAME_SHAPE)('%s: the same activities and timers, in order', async (name) => {
    const json = JSON.parse(fs.readFileSync(path.join(HISTORIES, `${name}.json`), 'utf8')) as { events: EventJson[] };
    expect(json.events.some((e) => e.markerRecordedEventAttributes)).toBe(true);
    await replayStrictly(bundle, historyFromJson(withoutPatchMarkers(json)), name);
  });

  test("a history whose poll came at another time is not the floor's: the replay is strict", async () => {
    const json = JSON.parse(fs.readFileSync(path.join(HISTORIES, 'callbacks-happy-path.json'), 'utf8')) as {
      events: EventJson[];
    };
    const timers = json.events.flatMap((e) => (e.timerStartedEventAttributes ?? []) as EventJson[]);
    expect(timers.length).toBeGreaterThan(1);
    timers[1].startToFireTimeout = '60s';
    await expect(
      replayStrictly(bundle, historyFromJson(withoutPatchMarkers(json)), 'callbacks-happy-path'),
    ).rejects.toThrow(/timers/);
  });

  test("the floor carries none of tuneflow's weight: no zod, no contract, no state ledger", () => {
    // Webpack names each module it bundles "./path"; a path in a comment does not count.
    const modules = [...new Set(bundle.code.match(/"\.\/(node_modules|src|bench)\/[^"]+"/g))];
    // The retry policy's list of kinds (src/api/error-kinds.ts, a table with no imports) is shared, as the policy is.
    const weight = modules.filter((m) => /zod|src\/workflows\/(contract|state)|src\/api\//.test(m));
    expect(weight).toEqual(['"./src/api/error-kinds.ts"']);
    expect(modules).toContain('"./bench/floor/workflows.ts"');
  });
});

test("the floor's defaults are tuneflow's", () => {
  const { pollInterval, maxPollInterval, trainingTimeout, promptTimeout, promptConcurrency } = DEFAULT_OPTIONS;
  expect(FLOOR_DEFAULTS).toEqual({ pollInterval, maxPollInterval, trainingTimeout, promptTimeout, promptConcurrency });
});

describe("the floor's service: the mock's timing, no HTTP", () => {
  let signals: Array<{ workflowId: string; wakeUp: CallbackWakeUp; at: number }>;
  let service: FloorService;
  let seq = 0;
  const call = (activity: Parameters<FloorService['answer']>[0]['activity'], input: object): FloorAnswer =>
    service.answer({ seq: ++seq, workflowId: 'job-1', activity, input: input as Record<string, unknown> });
  const result = <T = FloorObject>(answer: FloorAnswer) => {
    expect(answer.error).toBeUndefined();
    return answer.result as T;
  };

  beforeEach(() => {
    jest.useFakeTimers({ now: Date.parse('2026-01-01T00:00:00Z') });
    signals = [];
    service = new FloorService({ trainingMs: 10_000, inferenceMs: 3_000 }, (workflowId, wakeUp) =>
      signals.push({ workflowId, wakeUp, at: Date.now() }),
    );
  });
  afterEach(() => {
    service.close();
    jest.useRealTimers();
  });

  test('a tune trains for the training time, then calls back; prompts settle the inference time after', () => {
    const tune = result(call('createTune', { tune: { name: 'dog' } }));
    expect(Date.parse(tune.eta!) - Date.parse(tune.created_at!)).toBe(10_000);
    expect(String(tune.id)).toHaveLength(7);
    jest.advanceTimersByTime(9_999);
    expect(signals).toEqual([]);
    expect(result(call('retrieveTune', { tuneId: tune.id })).trained_at).toBeNull();
    jest.advanceTimersByTime(1);
    expect(signals).toEqual([{ workflowId: 'job-1', wakeUp: { kind: 'tune', ids: [tune.id] }, at: Date.now() }]);
    expect(result(call('retrieveTune', { tuneId: tune.id })).trained_at).not.toBeNull();

    const prompt = result(call('createPrompt', { tuneId: tune.id, prompt: { text: 'x' }, key: '0' }));
    jest.advanceTimersByTime(3_000);
    expect(signals[1].wakeUp).toEqual({ kind: 'prompt', ids: [prompt.id] });
    const listed = result<FloorObject[]>(call('listPrompts', { tuneId: tune.id, promptIds: [prompt.id] }));
    expect(listed).toEqual([{ id: prompt.id, trained_at: expect.any(String) }]);
    expect(service.callbacks.map((c) => c.ids)).toEqual([[tune.id], [prompt.id]]);
  });

  test("a pack tune makes its class's prompts: the tune's callback, each prompt's, then the pack's", () => {
    const pack = PACKS.find((p) => p.id === 261)!;
    const count = pack.prompts_per_class.dog.length;
    const tune = result(call('createPackTune', { packId: 261, tune: { name: 'dog' } }));
    const prompts = result<FloorObject[]>(call('listPrompts', { tuneId: tune.id, minId: 0 }));
    expect(prompts).toHaveLength(count);
    jest.advanceTimersByTime(13_000);
    const ids = prompts.map((p) => p.id);
    expect(signals.map((s) => s.wakeUp)).toEqual([
      { kind: 'tune', ids: [tune.id] },
      ...ids.map((id) => ({ kind: 'prompt', ids: [id] })),
      { kind: 'pack-prompts', ids },
    ]);
  });

  test('the shared base tune is trained; prompts on it settle on their own; unknown things are errors', () => {
    const base = result(call('retrieveTune', { tuneId: 1504944 }));
    expect(base.trained_at).not.toBeNull();
    const prompt = result(call('createPrompt', { tuneId: 1504944, prompt: { text: 'x' }, key: '0' }));
    jest.advanceTimersByTime(3_000);
    expect(signals.map((s) => s.wakeUp)).toEqual([{ kind: 'prompt', ids: [prompt.id] }]);
    expect(call('retrieveTune', { tuneId: 42 }).error).toBe('no tune 42');
    expect(call('deleteTune' as never, {}).error).toBe('the floor has no activity deleteTune');
  });

  test('close clears every timer: no callback after the run', () => {
    call('createTune', { tune: {} });
    service.close();
    jest.advanceTimersByTime(60_000);
    expect(signals).toEqual([]);
  });
});
