/**
 * Cleanup on cancellation (`cleanupOnCancel`): the service keeps what a run created until someone deletes it.
 */
import { log } from '@temporalio/workflow';
import type { Prompt } from '../api/schemas';
import { runBounded } from './concurrency';
import { service } from './activity-calls';
import { failureMessage } from './waits';

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
