/**
 * Build C of the versioning tests: tuneflow's workflows with a change that replays (trainThenGenerate logs a line
 * first: a log is no command).
 */
import { log } from '@temporalio/workflow';
import { trainThenGenerate as current } from '../../src/workflows';

export * from '../../src/workflows';

export async function trainThenGenerate(...args: Parameters<typeof current>): ReturnType<typeof current> {
  log.info('build C');
  return current(...args);
}
