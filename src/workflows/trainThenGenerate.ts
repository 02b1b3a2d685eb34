/**
 * `trainThenGenerate`: create a tune, wait until it is trained, create the prompts, wait until every one is settled.
 */
import { workflowInfo } from '@temporalio/workflow';
import type { Tune } from '../api/schemas';
import { checkTrainThenGenerate } from '../contract/check';
import { tuneTitle } from '../contract/tenants';
import type { TrainThenGenerateInput, TrainThenGenerateResult } from '../contract/inputs';
import { Job } from './job';
import { Phase } from '../contract/messages';
import { untilEtaMs } from '../contract/poll-schedule';
import { promptTarget } from './tune-kinds';
import { resultTune } from '../contract/results';

/**
 * Trains a tune (spec 4.1) and generates the prompts (spec 4.5) with it; returns the final tune and prompts, in the
 * caller's order. The tune's title is the workflow ID and the run ID, so a retried create finds only the tune this run
 * made, and the title tells which tenant's job made it. A Flux
 * LoRA's prompts run on its base tune with the LoRA in their text; a FaceID tune needs no wait. With `maxCostMc`, the
 * tune's price is `tuneCostMc` (nothing on `branch: fast`), checked before the create. With `inspect`, each training
 * image is inspected first, and the job refused (InspectionRefused) when one raises a refused flag.
 *
 * @example
 * await client.workflow.execute(trainThenGenerate, {
 *   taskQueue: 'tuneflow',
 *   workflowId: 'order-1234',
 *   args: [{ tune: { name: 'woman', image_urls: ['https://example.com/1.jpg'] }, prompts: [{ text: 'ohwx woman' }] }],
 * });
 */
export async function trainThenGenerate(input: TrainThenGenerateInput): Promise<TrainThenGenerateResult> {
  const job = new Job(Phase.creatingTune, Array.isArray(input?.prompts) ? input.prompts.length : undefined);
  const { workflowId, runId } = workflowInfo();
  return job.run(
    input,
    (options) => checkTrainThenGenerate(workflowId, input, options),
    async () => {
      // maxCostMc: the tune is charged at its create, so its price must be known, and fit, before.
      job.budget.checkTunePrice(input.tune, input.prompts.length);
      // With options.inspect: the images are inspected, and may be refused, before anything is paid for.
      await job.inspectImages(input.tune);
      const created = await job.createTune({ ...input.tune, title: tuneTitle(workflowId, runId) });
      job.budget.requireTuneWithinBudget(input.prompts.length);
      const tune = await job.waitUntilTrained(untilEtaMs(created));
      const target = promptTarget(tune);
      const notCreated = await job.createPrompts(target, input.prompts);
      const prompts = await job.waitUntilSettled(target.tuneId);
      job.budget.requireWithinBudget(notCreated);
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
