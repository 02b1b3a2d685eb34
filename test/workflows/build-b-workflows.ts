/**
 * Build B of the versioning tests: tuneflow's workflows with one change that no history of the current code replays
 * on (trainThenGenerate starts with a 1 ms timer, where every recorded run's first command is not a timer).
 */
import { sleep } from '@temporalio/workflow';
import { trainThenGenerate as current } from '../../src/workflows';

export * from '../../src/workflows';

export async function trainThenGenerate(...args: Parameters<typeof current>): ReturnType<typeof current> {
  await sleep(1);
  return current(...args);
}
