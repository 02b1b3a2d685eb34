/**
 * A job's own metrics (jobs by outcome and failure type, durations, phases, polls), emitted by its run through the
 * workflow's metric meter, on `tuneflow worker`'s `/metrics`, each against the runs' histories. Jobs of every ending:
 * completed (trainThenGenerate, then generate on its tune), failed InvalidInput (a raw start with a bad input),
 * failed TuneNeverTrained (a tune the mock never trains, polled to a short deadline), and one cancelled on a second
 * worker after the first stopped under it: that worker replays the run's history and counts only what happens on it.
 * Counters are read as increases between scrapes of each worker (a worker's start at 0).
 */
import { Client, WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import type { History } from '@temporalio/common/lib/proto-utils';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { TuneflowClient } from '../../src/client';
import { Phase } from '../../src/contract/messages';
import { JobOutcome, MetricName } from '../../src/metrics';
import { startMockService, type MockService } from '../../src/mock-service';
import { freePort } from '../../src/temporal-server/dev-server';
import { devServerTest, startDevServer } from './environment';
import { rise, scrape, type Scrape } from './scrape';
import { startWorkerProcess, type WorkerProcess } from './worker-process';

jest.setTimeout(300_000);

const API_KEY = 'job-metrics-test-key-0123456789';
const stamp = Date.now();
const ID = {
  completed: `job-metrics-${stamp}-ok`,
  generated: `job-metrics-${stamp}-more`,
  invalid: `job-metrics-${stamp}-invalid`,
  neverTrained: `job-metrics-${stamp}-never`,
  cancelled: `job-metrics-${stamp}-cancelled`,
};

let env: TestWorkflowEnvironment | undefined;
let mock: MockService;

beforeAll(async () => {
  env = await startDevServer();
  mock = await startMockService({
    port: 0,
    trainingTime: '1s',
    inferenceTime: '500ms',
    faults: { neverTrainTitles: [ID.neverTrained, ID.cancelled] },
  });
}, 120_000);

afterAll(async () => {
  await mock?.close();
  await env?.teardown();
});

/** An event's time in ms (its seconds a Long in a fetched history). */
const ms = (t: { seconds?: unknown; nanos?: number | null } | null | undefined) =>
  Number(String(t?.seconds ?? 0)) * 1000 + (t?.nanos ?? 0) / 1e6;

/** What a job's history says its run's metrics must be. */
interface Ending {
  workflowType: string;
  outcome: string;
  failureType: string;
  /** Completed polls: reads whose summary says poll (a read a callback asked for says so instead). */
  polls: number;
  /** Bounds of the duration from the start event: the last workflow task's scheduling, the close event (seconds). */
  duration: [number, number];
  /** Bounds of its phases' sum: from its first workflow task to its end (seconds). */
  phases: [number, number];
}

function endingOf(history: History): Ending {
  const events = history.events ?? [];
  const started = events[0].workflowExecutionStartedEventAttributes!;
  const close = events[events.length - 1];
  const outcome = close.workflowExecutionCompletedEventAttributes
    ? JobOutcome.completed
    : close.workflowExecutionFailedEventAttributes
      ? JobOutcome.failed
      : close.workflowExecutionCanceledEventAttributes
        ? JobOutcome.cancelled
        : 'open or otherwise closed';
  const failure = close.workflowExecutionFailedEventAttributes?.failure;
  const failureType = failure
    ? (failure.applicationFailureInfo?.type ?? failure.cause?.applicationFailureInfo?.type ?? '?')
    : 'none';
  const summaries = new Map<number, string>();
  let polls = 0;
  for (const e of events) {
    const scheduled = e.activityTaskScheduledEventAttributes;
    if (scheduled) {
      const summary = e.userMetadata?.summary
        ? defaultPayloadConverter.fromPayload<string>(e.userMetadata.summary)
        : '';
      summaries.set(Number(e.eventId), summary);
    }
    const completed = e.activityTaskCompletedEventAttributes;
    if (completed && /: (poll \d+|the last poll)/.test(summaries.get(Number(completed.scheduledEventId)) ?? ''))
      polls++;
  }
  const tasks = events.filter((e) => e.workflowTaskScheduledEventAttributes);
  const firstTaskStarted = events.find((e) => e.workflowTaskStartedEventAttributes)!;
  const startAt = ms(events[0].eventTime);
  const lastTaskAt = ms(tasks[tasks.length - 1].eventTime);
  const closeAt = ms(close.eventTime);
  const firstTaskAt = ms(firstTaskStarted.eventTime);
  return {
    workflowType: started.workflowType!.name!,
    outcome,
    failureType,
    polls,
    duration: [(lastTaskAt - startAt) / 1000, (closeAt - startAt) / 1000],
    phases: [(lastTaskAt - firstTaskAt) / 1000, (closeAt - ms(tasks[0].eventTime)) / 1000],
  };
}

/** Jobs by `workflowType/outcome/failure_type`, as the histories say and as a worker's counter rose. */
const byKey = (endings: Ending[]) =>
  endings.reduce<Record<string, number>>((counts, e) => {
    const key = `${e.workflowType}/${e.outcome}/${e.failureType}`;
    return { ...counts, [key]: (counts[key] ?? 0) + 1 };
  }, {});

function jobsRise(before: Scrape, after: Scrape): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const workflowType of after.values(MetricName.jobs, 'workflowType'))
    for (const outcome of after.values(MetricName.jobs, 'outcome'))
      for (const failureType of after.values(MetricName.jobs, 'failure_type')) {
        const n = rise(before, after, MetricName.jobs, { workflowType, outcome, failure_type: failureType });
        if (n) counts[`${workflowType}/${outcome}/${failureType}`] = n;
      }
  return counts;
}

/** Each phase's count of records, as a worker's histogram rose. */
function phasesRise(before: Scrape, after: Scrape): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const phase of after.values(`${MetricName.phaseDuration}_count`, 'phase')) {
    const n = rise(before, after, `${MetricName.phaseDuration}_count`, { phase });
    if (n) counts[phase] = n;
  }
  return counts;
}

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

/** The histograms' rise against the endings: each job one record, its polls, its duration within its history's. */
function expectHistograms(before: Scrape, after: Scrape, endings: Ending[]): void {
  const histogram = (name: string, part: 'count' | 'sum', where: Record<string, string> = {}) =>
    rise(before, after, `${name}_${part}`, where);
  for (const outcome of Object.values(JobOutcome)) {
    const these = endings.filter((e) => e.outcome === outcome);
    expect([outcome, histogram(MetricName.jobDuration, 'count', { outcome })]).toEqual([outcome, these.length]);
    expect([outcome, histogram(MetricName.jobPolls, 'count', { outcome })]).toEqual([outcome, these.length]);
    expect([outcome, histogram(MetricName.jobPolls, 'sum', { outcome })]).toEqual([
      outcome,
      sum(these.map((e) => e.polls)),
    ]);
  }
  // Durations on the workflow's clock, from the start event: within what the history's timestamps allow (1 ms each
  // for rounding).
  const slack = 0.001 * endings.length;
  const duration = histogram(MetricName.jobDuration, 'sum');
  expect(duration).toBeGreaterThanOrEqual(sum(endings.map((e) => e.duration[0])) - slack);
  expect(duration).toBeLessThanOrEqual(sum(endings.map((e) => e.duration[1])) + slack);
}

devServerTest('jobs, their durations, phases and polls on /metrics are what the runs histories say', async () => {
  const taskQueue = `tuneflow-job-metrics-${process.pid}`;
  const client = new Client({ connection: env!.connection, namespace: env!.namespace });
  const tuneflow = new TuneflowClient({ client, taskQueue });
  const startWorker = async () => {
    const metricsPort = await freePort();
    const worker = await startWorkerProcess({
      temporalAddress: env!.address,
      apiKey: API_KEY,
      apiUrl: mock.url,
      taskQueue,
      callbackPort: await freePort(),
      metricsPort,
    });
    return { worker, scrape: () => scrape(metricsPort) };
  };
  const stop = async (worker: WorkerProcess) => {
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
  };
  const tune = (n: number) => ({ name: 'dog', branch: 'sd15', image_urls: [`${mock.url}/images/training-${n}.png`] });
  const histories: Record<keyof typeof ID, History> = {} as never;
  const historyOf = async (key: keyof typeof ID) => {
    histories[key] = await client.workflow.getHandle(ID[key]).fetchHistory();
  };

  // The first worker: every job but the cancelled one ends on it.
  const first = await startWorker();
  let before: Scrape, after: Scrape;
  let cancelled: WorkflowHandle;
  try {
    before = await first.scrape();
    const completed = (async () => {
      const run = await tuneflow.trainThenGenerate(ID.completed, {
        tune: tune(0),
        prompts: [{ text: 'sks dog on a beach' }],
      });
      const { tune: trained } = await run.result();
      const more = await tuneflow.generate(ID.generated, {
        tuneId: trained.id,
        prompts: [{ text: 'sks dog in the snow' }],
      });
      await more.result();
    })();
    // A raw start (the starters refuse it before sending): the run refuses its input itself.
    const invalid = client.workflow.start('trainThenGenerate', {
      taskQueue,
      workflowId: ID.invalid,
      args: [{ tune: { name: 'dog', image_urls: [] }, prompts: [] }],
    });
    const neverTrained = tuneflow.trainThenGenerate(ID.neverTrained, {
      tune: tune(1),
      prompts: [{ text: 'sks dog' }],
      options: {
        pollInterval: '1 second',
        maxPollInterval: '2 seconds',
        trainingTimeout: '8 seconds',
        promptTimeout: '1 minute',
      },
    });
    const waiting = await tuneflow.trainThenGenerate(ID.cancelled, { tune: tune(2), prompts: [{ text: 'sks dog' }] });
    cancelled = waiting.handle;
    await completed;
    await expect((await invalid).result()).rejects.toThrow(WorkflowFailedError);
    await expect((await neverTrained).result()).rejects.toThrow(WorkflowFailedError);
    // Training (a tune that never trains): the phase the second worker takes the run up in.
    while ((await waiting.progress()).phase !== Phase.training) await new Promise((r) => setTimeout(r, 200));
    after = await first.scrape();
  } finally {
    await stop(first.worker);
  }

  // The second worker: it replays the cancelled run's history (nothing counted again), then counts its end.
  const second = await startWorker();
  let secondBefore: Scrape, secondAfter: Scrape;
  try {
    secondBefore = await second.scrape();
    await cancelled.cancel();
    await expect(cancelled.result()).rejects.toThrow(WorkflowFailedError);
    secondAfter = await second.scrape();
  } finally {
    await stop(second.worker);
  }
  for (const key of Object.keys(ID) as Array<keyof typeof ID>) await historyOf(key);

  const onFirst = (['completed', 'generated', 'invalid', 'neverTrained'] as const).map((k) => endingOf(histories[k]));
  const onSecond = [endingOf(histories.cancelled)];
  // The jobs are what the test meant them to be, by their histories.
  expect(byKey(onFirst)).toEqual({
    'trainThenGenerate/completed/none': 1,
    'generate/completed/none': 1,
    'trainThenGenerate/failed/InvalidInput': 1,
    'trainThenGenerate/failed/TuneNeverTrained': 1,
  });
  expect(byKey(onSecond)).toEqual({ 'trainThenGenerate/cancelled/none': 1 });
  expect(endingOf(histories.neverTrained).polls).toBeGreaterThan(1);

  // Jobs, each counted once, by the worker its run ended on.
  expect(jobsRise(before, after)).toEqual(byKey(onFirst));
  // Callbacks on time (or none, for the tune that never trains): none late.
  expect(rise(before, after, MetricName.lateCallbacks)).toBe(0);
  expect(jobsRise(secondBefore, secondAfter)).toEqual(byKey(onSecond));
  expectHistograms(before, after, onFirst);
  expectHistograms(secondBefore, secondAfter, onSecond);

  // Phases left: the first worker saw the cancelled run leave creating-tune; the second, replaying that, counts only
  // its training, which the cancellation ended.
  expect(phasesRise(before, after)).toEqual({
    [Phase.creatingTune]: 4,
    [Phase.training]: 3,
    [Phase.creatingPrompts]: 2,
    [Phase.generating]: 2,
  });
  expect(phasesRise(secondBefore, secondAfter)).toEqual({ [Phase.training]: 1 });
  // Each run's phases, on both workers, add up to its time from its first workflow task to its end.
  const phases =
    rise(before, after, `${MetricName.phaseDuration}_sum`) +
    rise(secondBefore, secondAfter, `${MetricName.phaseDuration}_sum`);
  const endings = [...onFirst, ...onSecond];
  expect(phases).toBeGreaterThanOrEqual(sum(endings.map((e) => e.phases[0])) - 0.001 * endings.length);
  expect(phases).toBeLessThanOrEqual(sum(endings.map((e) => e.phases[1])) + 0.001 * endings.length);

  // Labels stay bounded: no job ID (the key's timestamp), tune id or URL in any job sample.
  const ours = [after.text, secondAfter.text]
    .flatMap((text) => text.split('\n'))
    .filter((line) => line.startsWith('tuneflow_job'));
  expect(ours.length).toBeGreaterThan(0);
  expect(ours.filter((line) => new RegExp(`${stamp}|127\\.0\\.0\\.1|/\\d`).test(line))).toEqual([]);
});

devServerTest(
  'a callback that comes after a poll found its tune trained is counted late, and costs no read',
  async () => {
    // Callbacks 3.5 s late, polls each second: the tune's poll finds it trained first, and its callback comes while the
    // run waits for its prompt (6 s of inference).
    const slow = await startMockService({
      port: 0,
      trainingTime: '1s',
      inferenceTime: '6s',
      faults: { callbackDelayMs: 3_500 },
    });
    const taskQueue = `tuneflow-late-callbacks-${process.pid}`;
    const client = new Client({ connection: env!.connection, namespace: env!.namespace });
    const metricsPort = await freePort();
    const worker = await startWorkerProcess({
      temporalAddress: env!.address,
      apiKey: API_KEY,
      apiUrl: slow.url,
      taskQueue,
      callbackPort: await freePort(),
      metricsPort,
    });
    const workflowId = `job-metrics-${stamp}-late`;
    let before: Scrape, after: Scrape;
    try {
      before = await scrape(metricsPort);
      const run = await new TuneflowClient({ client, taskQueue }).trainThenGenerate(workflowId, {
        tune: { name: 'dog', branch: 'sd15', image_urls: [`${slow.url}/images/training-0.png`] },
        prompts: [{ text: 'sks dog on a beach' }],
        options: {
          pollInterval: '1 second',
          maxPollInterval: '2 seconds',
          trainingTimeout: '1 minute',
          promptTimeout: '1 minute',
        },
      });
      await run.result();
      after = await scrape(metricsPort);
    } finally {
      worker.child.kill('SIGTERM');
      expect(await worker.exited).toBe(0);
      await slow.close();
    }
    const events = (await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
    const firstCreate = events.findIndex(
      (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'createPrompt',
    );
    const tuneCallbacks = events
      .map((e, i) => ({ i, signal: e.workflowExecutionSignaledEventAttributes }))
      .filter(({ signal }) => signal?.signalName === 'callback')
      .filter(
        ({ signal }) =>
          defaultPayloadConverter.fromPayload<{ kind: string }>(signal!.input!.payloads![0]).kind === 'tune',
      );
    // The history says what the test meant: one tune callback, and it came after the run moved on to its prompts.
    expect(tuneCallbacks).toHaveLength(1);
    expect(tuneCallbacks[0].i).toBeGreaterThan(firstCreate);
    expect(firstCreate).toBeGreaterThan(0);
    expect(rise(before!, after!, MetricName.lateCallbacks, { kind: 'tune' })).toBe(1);
    // Not late: the prompt's callback came after its poll too, but to a closed run (the receiver's closed_run), or
    // before (an on-time callback).
    expect(rise(before!, after!, MetricName.lateCallbacks, { kind: 'prompt' })).toBe(0);
    // The late callback read nothing: every read of the tune was a poll the history shows.
    const reads = events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'retrieveTune');
    expect(slow.stats().routes['GET /tunes/:id']).toBe(reads.length);
  },
);
