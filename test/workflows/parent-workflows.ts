/**
 * A user's own workflows index, as the README shows it: tuneflow's workflows re-exported, and parents of the user's
 * that run them as child workflows (executeChild with the SDK's defaults: a cancelled parent cancels its child and
 * waits for the child's cleanup).
 */
import { executeChild, workflowInfo } from '@temporalio/workflow';
import { generate, packTune, trainThenGenerate } from '../../src/workflows';
import type {
  GenerateResult,
  PackTuneInput,
  PackTuneResult,
  PromptSpec,
  TrainThenGenerateInput,
  TrainThenGenerateResult,
} from '../../src/contract/inputs';

export * from '../../src/workflows';

/** The child's workflow ID: the parent's and a suffix, so callbacks and retries find it by business key. */
export function childId(parentId: string, step: string): string {
  return `${parentId}/${step}`;
}

/** trainThenGenerate as a child. */
export async function orderPortraits(input: TrainThenGenerateInput): Promise<TrainThenGenerateResult> {
  return executeChild(trainThenGenerate, { workflowId: childId(workflowInfo().workflowId, 'tune'), args: [input] });
}

/** packTune as a child, then generate on the pack's tune as a second child. */
export async function packThenMore({
  pack,
  more,
}: {
  pack: PackTuneInput;
  more: PromptSpec[];
}): Promise<{ pack: PackTuneResult; more: GenerateResult }> {
  const parentId = workflowInfo().workflowId;
  const packed = await executeChild(packTune, { workflowId: childId(parentId, 'pack'), args: [pack] });
  const generated = await executeChild(generate, {
    workflowId: childId(parentId, 'generate'),
    args: [{ tuneId: packed.tune.id, prompts: more }],
  });
  return { pack: packed, more: generated };
}
