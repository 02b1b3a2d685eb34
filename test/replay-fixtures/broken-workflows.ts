/**
 * A deliberately broken change to the workflows, for test/replay.test.ts to prove that the recorded histories catch
 * one: trainThenGenerate now sleeps a second before its first activity, a command no recorded run issued.
 */
import { sleep } from '@temporalio/workflow';
import { trainThenGenerate as released } from '../../src/workflows';
import type { TrainThenGenerateInput, TrainThenGenerateResult } from '../../src/contract/inputs';

export * from '../../src/workflows';

export async function trainThenGenerate(input: TrainThenGenerateInput): Promise<TrainThenGenerateResult> {
  await sleep('1 second');
  return released(input);
}
