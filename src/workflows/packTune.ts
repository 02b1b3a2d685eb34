/**
 * `packTune`: a tune from a pack (spec 4.9), and the pack's prompts the service runs on it.
 */
import { workflowInfo } from '@temporalio/workflow';
import type { Tune } from '../api/schemas';
import { checkPackTune } from '../contract/check';
import { tuneTitle } from '../contract/tenants';
import type { PackTuneInput, PackTuneResult } from '../contract/inputs';
import { Job } from './job';
import { Phase } from '../contract/messages';
import { untilEtaMs } from '../contract/poll-schedule';
import { resultTune } from '../contract/results';

/**
 * Creates a tune from a pack, waits until it is trained, then until every prompt the pack put on it is settled
 * (prompt callbacks, the pack's prompts_callback, or polls of the tune's prompts); returns the final tune and prompts.
 *
 * With `tune_ids` (one existing tune: a run follows one tune) the service adds the pack's prompts to it. The workflow
 * notes the tune's newest prompt before the request, then waits for the pack's prompts added after it, and returns
 * that tune with them. For several tunes, start one `packTune` per tune. A reused tune is never deleted on
 * cancellation (only the prompts the request made). With `maxCostMc`, the pack's price for the class is read first;
 * a pack on an existing tune has no published price and is refused. With `inspect`, a new tune's training images are
 * inspected before the request, and the job refused (InspectionRefused) when one raises a refused flag.
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
  const { workflowId, runId } = workflowInfo();
  return job.run(
    input,
    (options) => checkPackTune(workflowId, input, options),
    async () => {
      const reused = input.tune.tune_ids;
      job.budget.requireOneTune(reused);
      // A new tune costs the pack's price for its class: refused before anything is created when above maxCostMc.
      await job.budget.checkPackPrice(input.packId, input.tune);
      // With options.inspect: a new tune's images are inspected, and may be refused, before the pack is paid for.
      await job.inspectImages(input.tune);
      // A reused tune must be the tenant's: the read that notes its newest prompt refuses another's (InvalidInput).
      const minId = reused ? await job.nextPromptId(reused[0], 'tune.tune_ids[0]') : undefined;
      const created = await job.createPackTune(
        input.packId,
        { ...input.tune, title: tuneTitle(workflowId, runId) },
        minId,
      );
      // A reused tune's eta is from its own training, long ago.
      await job.waitUntilTrained(reused ? 0 : untilEtaMs(created));
      await job.budget.readTunePrice();
      await job.learnPrompts(created.id);
      const prompts = await job.waitUntilSettled(created.id);
      job.budget.requireWithinBudget();
      const { inspection } = job;
      return {
        tune: resultTune(job.tune.latest as Tune),
        prompts: job.resultPrompts(prompts),
        cost: job.budget.cost(),
        ...(inspection && { inspection }),
      };
    },
  );
}
