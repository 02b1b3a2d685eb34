/**
 * `packTune`: a tune from a pack (spec 4.9), and the pack's prompts the service runs on it.
 */
import { workflowInfo } from '@temporalio/workflow';
import type { Tune } from '../api/schemas';
import { isObject, requireInput } from './failures';
import type { PackTuneInput, PackTuneResult } from './inputs';
import { Job } from './job';
import { Phase } from './messages';
import { untilEtaMs } from './poll-schedule';

/**
 * Creates a tune from a pack, waits until it is trained, then until every prompt the pack put on it is settled
 * (prompt callbacks, the pack's prompts_callback, or polls of the tune's prompts); returns the final tune and prompts.
 *
 * @example
 * await client.workflow.execute(packTune, {
 *   taskQueue: 'tuneflow',
 *   workflowId: 'order-77',
 *   args: [{ packId: 260, tune: { name: 'woman', image_urls: ['https://example.com/1.jpg'] } }],
 * });
 */
export async function packTune(input: PackTuneInput): Promise<PackTuneResult> {
  const job = new Job(Phase.creatingTune);
  return job.run(input?.options, async () => {
    requireInput(Number.isInteger(input?.packId) && input.packId > 0, 'packId', 'must be a positive integer');
    requireInput(isObject(input.tune), 'tune', 'must be an object of pack tune attributes (spec 4.9)');
    const created = await job.createPackTune(input.packId, {
      ...input.tune,
      title: input.tune.title ?? workflowInfo().workflowId,
    });
    await job.waitUntilTrained(untilEtaMs(created));
    await job.learnPrompts(created.id);
    const prompts = await job.waitUntilSettled(created.id);
    return { tune: job.tune.latest as Tune, prompts };
  });
}
