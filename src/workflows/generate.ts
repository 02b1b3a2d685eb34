/**
 * `generate`: prompts on an existing tune.
 */
import { checkGenerate } from '../contract/check';
import type { GenerateInput, GenerateResult } from '../contract/inputs';
import { Job } from './job';
import { Phase } from '../contract/messages';
import { promptTarget } from './tune-kinds';

/**
 * Creates the prompts (spec 4.5) on an existing tune and waits until every one is settled; returns them in the
 * caller's order. The tune is read first: one still training is waited for (by polls: its callback, if any, goes to
 * whoever created it), and a Flux LoRA's prompts run on its base tune with the LoRA in their text.
 *
 * @example
 * await client.workflow.execute(generate, {
 *   taskQueue: 'tuneflow',
 *   workflowId: 'order-1234-more',
 *   args: [{ tuneId: 123, prompts: [{ text: 'ohwx woman, oil painting', num_images: 4 }] }],
 * });
 */
export async function generate(input: GenerateInput): Promise<GenerateResult> {
  const job = new Job(Phase.training, Array.isArray(input?.prompts) ? input.prompts.length : undefined);
  return job.run(
    input,
    (options) => checkGenerate(input, options),
    async () => {
      // The tune must be the tenant's (made by its jobs, or given it by the operator): refused, InvalidInput, if not.
      await job.retrieveTune(input.tuneId, 'tuneId');
      // The tune was made elsewhere: its eta says nothing about how long is left, so polls start at once.
      const tune = await job.waitUntilTrained();
      const target = promptTarget(tune);
      const notCreated = await job.createPrompts(target, input.prompts);
      const prompts = await job.waitUntilSettled(target.tuneId);
      job.budget.requireWithinBudget(notCreated);
      return { prompts: job.resultPrompts(prompts), cost: job.budget.cost() };
    },
  );
}
