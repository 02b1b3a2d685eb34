/**
 * The harness's own worker options, checked without a server: the native worker must take them, with and without an
 * identity (the workflow scenarios create every worker with them).
 */
import { Worker, type WorkflowBundle } from '@temporalio/worker';
import { bundleWorkflows } from './bundle';
import { installQuietRuntime } from './global-setup';
import { scenarioWorkerOptions } from './harness';
import { HistoryBuilder } from './history-builder';

let bundle: WorkflowBundle;

beforeAll(async () => {
  installQuietRuntime();
  bundle = await bundleWorkflows();
}, 120_000);

/** A run that fails at its first workflow task (a bad option): the shortest history there is. */
const history = () =>
  new HistoryBuilder('trainThenGenerate', {
    tune: { name: 'dog', image_urls: ['https://example.com/1.jpg'] },
    prompts: [],
    options: { pollInterval: 'soon' },
  })
    .workflowTask()
    .failed()
    .history();

test.each([undefined, 'worker-1'])('the native worker takes a scenario worker with identity %p', async (identity) => {
  const { taskQueue, maxCachedWorkflows, ...replayOptions } = scenarioWorkerOptions(bundle, 'tuneflow-test', identity);
  expect({ taskQueue, maxCachedWorkflows }).toEqual({ taskQueue: 'tuneflow-test', maxCachedWorkflows: 0 });
  expect(Object.values(replayOptions)).not.toContain(undefined);
  await Worker.runReplayHistory(replayOptions, history(), 'job');
});
