/**
 * Cleanup on cancellation (`cleanupOnCancel`): the service keeps what a run created until someone deletes it.
 */
import { CancellationScope, log } from '@temporalio/workflow';
import type { Prompt } from '../api/schemas';
import { runBounded } from './concurrency';
import { service } from './activity-calls';
import { failureMessage } from './waits';

/**
 * Runs the create `start` so that cleanup knows everything that exists on the service: not started after a
 * cancellation (the cancellation is thrown instead) and, once started, let finish. `counted` counts the
 * call; it is applied inside, as the run's commands keep their order by it.
 *
 * @example
 * const tune = await createToCleanUp(() => service.createTune({ tune }), counted);
 */
export async function createToCleanUp<T>(
  start: () => Promise<T>,
  counted: <U>(call: Promise<U>) => Promise<U>,
): Promise<T> {
  const scope = CancellationScope.current();
  if (scope.consideredCancelled) await scope.cancelRequested;
  return counted(CancellationScope.nonCancellable(start));
}

/**
 * Deletes `prompts` (those a tune deletion leaves behind), `concurrency` at a time, then the tune `tuneId`. A deletion
 * that fails is logged and the cleanup goes on: the cancellation must still end the run.
 *
 * @example
 * await deleteCreated(prompts, createdTuneId, options.promptConcurrency, counted);
 */
export async function deleteCreated(
  prompts: readonly Pick<Prompt, 'id' | 'tune_id'>[],
  tuneId: number | undefined,
  concurrency: number,
  counted: <T>(call: Promise<T>) => Promise<T>,
): Promise<void> {
  const deleteQuietly = async (what: string, remove: () => Promise<void>): Promise<void> => {
    try {
      await counted(remove());
    } catch (err) {
      log.error(`cleanup could not delete ${what}`, { error: failureMessage(err) });
    }
  };
  await runBounded(prompts.length, concurrency, (i) =>
    deleteQuietly(`prompt ${prompts[i].id}`, () =>
      service.deletePrompt.executeWithOptions({ summary: `cleanup: delete prompt ${prompts[i].id}` }, [
        { tuneId: prompts[i].tune_id, promptId: prompts[i].id },
      ]),
    ),
  );
  if (tuneId !== undefined)
    await deleteQuietly(`tune ${tuneId}`, () =>
      service.deleteTune.executeWithOptions({ summary: `cleanup: delete tune ${tuneId}` }, [{ tuneId }]),
    );
}
