/**
 * Any starter, any team. One key, one job, one payment, whoever starts it: raw starts that Temporal lets through
 * (allow duplicate after the job closed, terminate-and-restart) create nothing and end with the first job's outcome;
 * other input under a key is refused naming the fields; TuneflowClient refuses other input and attaches the same. And
 * a file path reaches nothing outside the upload directory. A JSON start no TypeScript client could send (an attribute
 * nested 20,000 deep) ends typed, never stuck on a failing workflow task. Each asserts on the mock's requests, journal
 * and ledger and on the runs' histories, on the time-skipping test server in real time.
 */
import { randomUUID } from 'node:crypto';
import {
  WorkflowFailedError,
  type WorkflowHandle,
  type WorkflowHandleWithFirstExecutionRunId,
} from '@temporalio/client';
import { ApplicationFailure, RawValue } from '@temporalio/common';
import { encode } from '@temporalio/common/lib/encoding';
import type { History } from '@temporalio/common/lib/proto-utils';
import { temporal } from '@temporalio/proto';
import { TuneflowClient } from '../../src/client';
import { INPUT_BOUNDED } from '../../src/workflows/admission';
import type { TrainThenGenerateResult } from '../../src/contract/inputs';
import { KeyInUseError } from '../../src/contract/keys';
import { useWorkflowHarness, workflowTest } from './environment';
import { waitFor, type Scenario } from './harness';
import { summarize } from './history-summary';
import { EARLIER_PATCHES_FOLDED } from '../../src/workflows/patches';

jest.setTimeout(120_000);

const harness = useWorkflowHarness();

const input = (text = 'sks dog on a beach') => ({
  tune: { name: 'dog', branch: 'fast', image_urls: ['https://example.com/1.jpg'] },
  prompts: [{ text, num_images: 1 }],
});

/** Starts `trainThenGenerate` under `key` as a raw client does, with the ID policies it chose. */
function rawStart(
  s: Scenario,
  key: string,
  args: unknown,
  policies: { workflowIdReusePolicy?: 'ALLOW_DUPLICATE'; workflowIdConflictPolicy?: 'TERMINATE_EXISTING' } = {},
): Promise<WorkflowHandleWithFirstExecutionRunId> {
  return harness().realTime.workflow.start('trainThenGenerate', {
    taskQueue: s.taskQueue,
    workflowId: key,
    args: [args],
    ...policies,
  });
}

async function failureOf(handle: WorkflowHandle): Promise<ApplicationFailure> {
  const err = await handle.result().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(WorkflowFailedError);
  const cause = (err as WorkflowFailedError).cause;
  expect(cause).toBeInstanceOf(ApplicationFailure);
  return cause as ApplicationFailure;
}

/** What the mock made for the scenario's account: tunes and prompts created. */
const made = (s: Scenario) => ({
  tunes: s.mock.stats().routes['POST /tunes'] ?? 0,
  prompts: s.mock.stats().routes['POST /tunes/:id/prompts'] ?? 0,
});

workflowTest(
  'a raw start with "allow duplicate" after the job closed creates nothing: it ends with the first result',
  async () => {
    await harness().scenario({}, (s) =>
      s.withWorker(async () => {
        const key = `order-${randomUUID()}`;
        const first = await rawStart(s, key, input());
        const firstResult = (await first.result()) as TrainThenGenerateResult;
        const charged = s.mock.ledger('tuneflow-test-key').totalMc;
        const again = await rawStart(s, key, input(), { workflowIdReusePolicy: 'ALLOW_DUPLICATE' });
        const againResult = (await again.result()) as TrainThenGenerateResult;

        expect(again.firstExecutionRunId).not.toBe(first.firstExecutionRunId);
        expect(againResult).toEqual(firstResult);
        expect(made(s)).toEqual({ tunes: 1, prompts: 1 });
        expect(s.mock.ledger('tuneflow-test-key').totalMc).toBe(charged);
        // The first run claimed the key; the second found it claimed, read the first run, and made no service call.
        const firstRun = harness().realTime.workflow.getHandle(key, first.firstExecutionRunId);
        const firstSummary = summarize(await firstRun.fetchHistory());
        expect(firstSummary.activities.slice(0, 1)).toEqual(['createTune']);
        const againHistory = await again.fetchHistory();
        expect(summarize(againHistory).activities).toEqual(['priorJob']);
        const events = againHistory.events ?? [];
        expect(events.filter((e) => e.startChildWorkflowExecutionFailedEventAttributes)).toHaveLength(1);
        expect(events.filter((e) => e.timerStartedEventAttributes)).toEqual([]);
      }),
    );
  },
);

workflowTest('other input under a closed key: KeyInUse naming the key and the fields, nothing created', async () => {
  await harness().scenario({}, (s) =>
    s.withWorker(async () => {
      const key = `order-${randomUUID()}`;
      await (await rawStart(s, key, input())).result();
      const other = await rawStart(s, key, input('sks dog in the snow'), { workflowIdReusePolicy: 'ALLOW_DUPLICATE' });
      const failure = await failureOf(other);
      expect(failure.type).toBe('KeyInUse');
      expect(failure.nonRetryable).toBe(true);
      expect(failure.message).toContain(JSON.stringify(key));
      expect(failure.details?.[0]).toMatchObject({
        key,
        workflow: 'trainThenGenerate',
        fields: ['input.prompts[0].text'],
      });
      expect(made(s)).toEqual({ tunes: 1, prompts: 1 });
    }),
  );
});

workflowTest(
  'terminate-and-restart of a running job: the new run creates nothing and fails JobEnded, naming the first run',
  async () => {
    await harness().scenario({ mock: { trainingTime: '30s' } }, (s) =>
      s.withWorker(async () => {
        const key = `order-${randomUUID()}`;
        const first = await rawStart(s, key, input());
        await s.progressUntil(first, (p) => p.phase === 'training');
        const again = await rawStart(s, key, input(), { workflowIdConflictPolicy: 'TERMINATE_EXISTING' });
        const failure = await failureOf(again);
        expect(failure.type).toBe('JobEnded');
        expect(failure.details?.[0]).toMatchObject({ key, status: 'TERMINATED' });
        expect(made(s)).toEqual({ tunes: 1, prompts: 0 });
      }),
    );
  },
);

workflowTest(
  'TuneflowClient: other input under a running key is refused naming the fields; the same input attaches',
  async () => {
    await harness().scenario({ mock: { trainingTime: '30s' } }, (s) =>
      s.withWorker(async () => {
        const tuneflow = new TuneflowClient({ client: harness().realTime, taskQueue: s.taskQueue });
        const key = `order-${randomUUID()}`;
        const first = await tuneflow.trainThenGenerate(key, input());
        await s.progressUntil(first.handle, (p) => p.phase === 'training');
        const refused = await tuneflow.trainThenGenerate(key, input('sks dog in the snow')).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(refused).toBeInstanceOf(KeyInUseError);
        expect((refused as KeyInUseError).fields).toEqual(['input.prompts[0].text']);
        expect((refused as KeyInUseError).issues[0].field).toBe('key');
        const generateUnderIt = await tuneflow.generate(key, { tuneId: 1, prompts: [{ text: 'x' }] }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect((generateUnderIt as KeyInUseError).holder.workflow).toBe('trainThenGenerate');
        const same = await tuneflow.trainThenGenerate(key, input());
        expect(same.started).toBe(false);
        expect((await same.handle.describe()).runId).toBe((await first.handle.describe()).runId);
        expect(made(s)).toEqual({ tunes: 1, prompts: 0 });
        await first.handle.terminate('test done');
      }),
    );
  },
);

workflowTest("a prompt's file path outside the upload directory: InvalidInput before the tune is created", async () => {
  await harness().scenario({}, (s) =>
    s.withWorker(async () => {
      const job = { ...input(), prompts: [{ text: 'sks dog', controlnet: 'canny', input_image: '/etc/hostname' }] };
      const handle = await rawStart(s, `order-${randomUUID()}`, job);
      const failure = await failureOf(handle);
      expect(failure.type).toBe('InvalidInput');
      expect(failure.details?.[0]).toMatchObject({ field: 'prompts[0].input_image' });
      expect(failure.message).toContain("must be a path inside the worker's upload directory");
      expect(made(s)).toEqual({ tunes: 0, prompts: 0 });
      // Checked before anything else: the upload check is the run's one activity.
      expect(summarize(await handle.fetchHistory()).activities).toEqual(['checkUploads']);
    }),
  );
});

/**
 * Starts `workflow` with `json` as its one argument, as the Temporal CLI or another SDK sends it: the bytes as given,
 * which the TypeScript client's own converter could not make (JSON.stringify stops near 5,000 deep).
 */
function rawJsonStart(s: Scenario, workflow: string, json: string): Promise<WorkflowHandle> {
  const payload = { metadata: { encoding: encode('json/plain') }, data: encode(json) };
  return harness().realTime.workflow.start(workflow, {
    taskQueue: s.taskQueue,
    workflowId: `order-${randomUUID()}`,
    args: [RawValue.fromPayload(payload)],
  });
}

/** A pack tune whose `prompt_attributes` holds an array 20,000 deep. */
const deepPackTune = (imageUrl: string) =>
  `{"packId":261,"tune":{"name":"dog","image_urls":["${imageUrl}"],"prompt_attributes":{"x":` +
  `${'['.repeat(20_000)}${']'.repeat(20_000)}}}}`;

/** Waits until the run closes; a run left running (a workflow task failing on every attempt) fails the test here. */
async function closed(handle: WorkflowHandle): Promise<History> {
  await waitFor(
    async () => (await handle.describe()).status.name !== 'RUNNING',
    () => `${handle.workflowId} to close (still RUNNING: stuck on a failing workflow task?)`,
  );
  return handle.fetchHistory();
}

/** What the mock made for the scenario: tunes and prompts in its journal, requests that create, charges. */
const created = (s: Scenario) => ({
  tunes: s.mock.journal().tunes.length,
  prompts: s.mock.journal().prompts.length,
  packTunes: s.mock.stats().routes['POST /p/:pack_id/tunes'] ?? 0,
  charged: s.mock.ledger('tuneflow-test-key').totalMc,
});

/**
 * Workflow tasks the worker failed. Not the server's UNHANDLED_COMMAND: a task that tried to close the run while an
 * event (the key's claim closing) came in, which the worker retries at once with the event.
 */
const failedTasks = (history: History) =>
  (history.events ?? []).filter((e) => {
    const cause = e.workflowTaskFailedEventAttributes?.cause;
    if (cause === undefined) return false;
    // The history's JSON form names the cause; the proto form numbers it.
    const name = typeof cause === 'number' ? temporal.api.enums.v1.WorkflowTaskFailedCause[cause] : String(cause);
    return name !== 'WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND';
  });

workflowTest(
  'a raw JSON start whose prompt_attributes nests 20,000 deep: FAILED InvalidInput at once, nothing created',
  async () => {
    await harness().scenario({}, (s) =>
      s.withWorker(async () => {
        const handle = await rawJsonStart(s, 'packTune', deepPackTune('https://example.com/1.jpg'));
        const history = await closed(handle);
        const failure = await failureOf(handle);
        expect(failure.type).toBe('InvalidInput');
        expect(failure.nonRetryable).toBe(true);
        expect(failure.details?.[0]).toMatchObject({
          field: 'tune.prompt_attributes.x[0][0][0][0][0]',
          rule: 'must nest at most 8 objects and arrays deep, the input itself counted (this one is at depth 9)',
        });
        // Refused by its first workflow task: no activity, no child, no task failed on the way.
        expect(summarize(history).activities).toEqual([]);
        expect((history.events ?? []).filter((e) => e.startChildWorkflowExecutionInitiatedEventAttributes)).toEqual([]);
        expect(failedTasks(history)).toEqual([]);
        expect(summarize(history).patches).toEqual([EARLIER_PATCHES_FOLDED]);
        expect(created(s)).toEqual({ tunes: 0, prompts: 0, packTunes: 0, charged: 0 });
      }),
    );
  },
);

workflowTest(
  'had the bound been missed (a worker that leaves it off), the unconvertible activity input ends the run typed',
  async () => {
    // The run takes the deep input as a run started before the bounds did; the pack's create cannot be sent.
    // Neither the bound's patch nor the fold that answers it for a new run.
    const worker = {
      patchActivationCallback: ({ patchId }: { patchId: string }) =>
        patchId !== INPUT_BOUNDED && patchId !== EARLIER_PATCHES_FOLDED,
    };
    await harness().scenario({ worker }, (s) =>
      s.withWorker(async () => {
        const handle = await rawJsonStart(s, 'packTune', deepPackTune('https://example.com/1.jpg'));
        const history = await closed(handle);
        const failure = await failureOf(handle);
        expect(failure.type).toBe('UnconvertiblePayload');
        expect(failure.nonRetryable).toBe(true);
        expect(failure.message).toContain('Unable to convert');
        // The create was never scheduled: the SDK converts its arguments before the command leaves the run.
        expect(summarize(history).activities).not.toContain('createPackTune');
        expect(failedTasks(history)).toEqual([]);
        expect(summarize(history).patches).not.toContain(INPUT_BOUNDED);
        expect(created(s)).toEqual({ tunes: 0, prompts: 0, packTunes: 0, charged: 0 });
      }),
    );
  },
);

workflowTest('an attribute named `__proto__` in a raw JSON start: InvalidInput saying why in words', async () => {
  await harness().scenario({}, (s) =>
    s.withWorker(async () => {
      const json =
        '{"tune":{"name":"dog","branch":"fast","image_urls":["https://example.com/1.jpg"],"__proto__":{}},"prompts":[]}';
      const handle = await rawJsonStart(s, 'trainThenGenerate', json);
      await closed(handle);
      const failure = await failureOf(handle);
      expect(failure.type).toBe('InvalidInput');
      expect(failure.message).toContain(
        'tune.__proto__: is the name of a property every JavaScript object has (Object.prototype.__proto__)',
      );
      expect(failure.message).not.toContain('[object Object]');
      expect(created(s)).toEqual({ tunes: 0, prompts: 0, packTunes: 0, charged: 0 });
    }),
  );
});
