/**
 * Any starter, any team. One key, one job, one payment, whoever starts it: raw starts that Temporal lets through
 * (allow duplicate after the job closed, terminate-and-restart) create nothing and end with the first job's outcome;
 * other input under a key is refused naming the fields; TuneflowClient refuses other input and attaches the same. And
 * a file path reaches nothing outside the upload directory. Each asserts on the mock's requests and ledger and on the
 * runs' histories, on the time-skipping test server in real time.
 */
import { randomUUID } from 'node:crypto';
import {
  WorkflowFailedError,
  type WorkflowHandle,
  type WorkflowHandleWithFirstExecutionRunId,
} from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { TuneflowClient } from '../../src/client';
import type { TrainThenGenerateResult } from '../../src/contract/inputs';
import { KeyInUseError } from '../../src/contract/keys';
import { useWorkflowHarness, workflowTest } from './environment';
import type { Scenario } from './harness';
import { summarize } from './history-summary';

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
