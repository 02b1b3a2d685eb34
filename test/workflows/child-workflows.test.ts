/**
 * tuneflow's workflows as children of a user's own (test/workflows/parent-workflows.ts, the README's pattern): typed
 * results, callbacks that reach the child by its own workflow ID, and a parent's cancellation that reaches the child
 * and its cleanup. Real mock service, callback receiver, activities and time-skipping test server, in real time.
 */
import { CancelledFailure, WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import type { TrainThenGenerateResult } from '../../src/contract/inputs';
import { bundleWorkflows } from './bundle';
import { createTestEnvironment, useWorkflowHarness, workflowTest } from './environment';
import { waitFor } from './harness';
import { summarize } from './history-summary';
import { childId, type packThenMore } from './parent-workflows';
import { IMAGE_URLS, PET_PACK_ID } from './scenarios';

jest.setTimeout(120_000);

const harness = useWorkflowHarness(createTestEnvironment, () => bundleWorkflows(require.resolve('./parent-workflows')));

const fastDog = { name: 'dog', branch: 'fast' as const, image_urls: IMAGE_URLS };

/** The run's outcome without querying it: a parent of the user's has no progress query. */
async function outcomeOf<R>(handle: WorkflowHandle): Promise<{ result?: R; error?: unknown }> {
  try {
    return { result: (await handle.result()) as R };
  } catch (error) {
    return { error };
  }
}

workflowTest('trainThenGenerate as a child: typed result, callbacks addressed to the child end its waits', async () => {
  await harness().scenario({}, (s) =>
    s.withWorker(async () => {
      const input = { tune: fastDog, prompts: [{ text: 'sks dog on a beach', num_images: 2 }, { text: 'sks dog' }] };
      const parent = await s.start('orderPortraits', input, 'real');
      const { result, error } = await outcomeOf<TrainThenGenerateResult>(parent);
      expect(error).toBeUndefined();
      expect(result!.prompts.map((p) => p.images?.length)).toEqual([2, 1]);

      const child = harness().realTime.workflow.getHandle(childId(parent.workflowId, 'tune'));
      // Every callback the mock sent (the tune's and each prompt's) was addressed to the child.
      const sent = s.mock.journal().callbacks;
      expect(sent.flatMap((c) => c.ids).sort()).toEqual([result!.tune.id, ...result!.prompts.map((p) => p.id)].sort());
      expect(sent.map((c) => c.workflowId)).toEqual(sent.map(() => child.workflowId));
      const history = summarize(await child.fetchHistory());
      // The child's own callbacks woke it: its tune read once, its prompts by one list call (two if apart), no poll.
      const lists = history.activities.length - 4;
      expect(history.activities).toEqual([
        'createTune',
        'retrieveTune',
        'createPrompt',
        'createPrompt',
        ...Array(lists).fill('listPrompts'),
      ]);
      expect([1, 2]).toContain(lists);
      expect(s.mock.stats().routes).toEqual({
        'POST /tunes': 1,
        'GET /tunes/:id': 1,
        'POST /tunes/:id/prompts': 2,
        'GET /tunes/:id/prompts': lists,
      });
      expect(history.signals).toEqual(['callback', 'callback', 'callback']);
      expect(history.timers.every((t) => t.ended === 'cancelled')).toBe(true);
      expect(summarize(await parent.fetchHistory()).activities).toEqual([]);
    }),
  );
});

workflowTest('a cancelled parent cancels its child, which deletes the tune it created before both end', async () => {
  await harness().scenario({ mock: { trainingTime: '60s' } }, (s) =>
    s.withWorker(async () => {
      const input = { tune: fastDog, prompts: [{ text: 'sks dog' }], options: { cleanupOnCancel: true } };
      const parent = await s.start('orderPortraits', input, 'real');
      const child = harness().realTime.workflow.getHandle(childId(parent.workflowId, 'tune'));
      await waitFor(
        () =>
          child.describe().then(
            () => true,
            () => false,
          ),
        () => `the child ${child.workflowId} to start`,
      );
      await s.progressUntil(child, (p) => p.phase === 'training' && p.tuneId !== null);
      await parent.cancel();
      const { error } = await outcomeOf(parent);
      expect(error).toBeInstanceOf(WorkflowFailedError);
      expect((await parent.describe()).status.name).toBe('CANCELLED');
      expect((await child.describe()).status.name).toBe('CANCELLED');
      await expect(child.result()).rejects.toMatchObject({ cause: expect.any(CancelledFailure) });

      // The child's cleanup ran to its end before the parent closed: the tune it created is the one deleted.
      const { calls } = summarize(await child.fetchHistory());
      expect(calls.map((c) => c.activity)).toEqual(['createTune', 'deleteTune']);
      expect(calls[1].input).toEqual({ tuneId: (calls[0].result as { id: number }).id });
      expect(s.mock.stats().routes['DELETE /tunes/:id']).toBe(1);
      expect(s.mock.stats().routes['POST /tunes/:id/prompts']).toBeUndefined();
      const parentEvents = (await parent.fetchHistory()).events ?? [];
      expect(parentEvents.some((e) => e.requestCancelExternalWorkflowExecutionInitiatedEventAttributes)).toBe(true);
      expect(parentEvents.some((e) => e.childWorkflowExecutionCanceledEventAttributes)).toBe(true);
    }),
  );
});

workflowTest('packTune then generate as children: both complete by callbacks, on one tune', async () => {
  await harness().scenario({}, (s) =>
    s.withWorker(async () => {
      const input = {
        pack: { packId: PET_PACK_ID, tune: { name: 'dog', image_urls: IMAGE_URLS, characteristics: { fur: 'brown' } } },
        more: [{ text: 'sks dog in the snow' }],
      };
      const parent = await s.start('packThenMore', input, 'real');
      const { result, error } = await outcomeOf<Awaited<ReturnType<typeof packThenMore>>>(parent);
      expect(error).toBeUndefined();
      const { pack, more } = result!;
      expect(more.prompts.map((p) => p.tune_id)).toEqual([pack.tune.id]);
      expect(pack.prompts).toHaveLength(2);
      expect(s.mock.stats().routes).toMatchObject({ 'POST /p/:pack_id/tunes': 1, 'POST /tunes/:id/prompts': 1 });
      expect(s.mock.stats().routes['POST /tunes']).toBeUndefined();

      const packChild = summarize(
        await harness().realTime.workflow.getHandle(childId(parent.workflowId, 'pack')).fetchHistory(),
      );
      expect(packChild.activities.slice(0, 3)).toEqual(['createPackTune', 'retrieveTune', 'listPrompts']);
      expect(packChild.activities.slice(3).every((a) => a === 'listPrompts')).toBe(true);
      expect(packChild.signals).toContain('callback');
      const generateChild = harness().realTime.workflow.getHandle(childId(parent.workflowId, 'generate'));
      const generated = summarize(await generateChild.fetchHistory());
      // The tune was trained already: one look, one create, and the read the prompt's callback asked for.
      expect(generated.activities).toEqual(['retrieveTune', 'createPrompt', 'listPrompts']);
      expect(generated.signals).toEqual(['callback']);
      const moreCallbacks = s.mock.journal().callbacks.filter((c) => c.ids.includes(more.prompts[0].id));
      expect(moreCallbacks.length).toBeGreaterThan(0);
      expect(moreCallbacks.map((c) => c.workflowId)).toEqual(moreCallbacks.map(() => generateChild.workflowId));
    }),
  );
});
