/**
 * The workflows bundled as a worker loads them (the input contract preloaded): once per test file, reused by every
 * worker and replayer in it.
 */
import { bundleWorkflowCode, DefaultLogger, type WorkflowBundle } from '@temporalio/worker';
import { withPreloadedContract } from '../../src/bundling';

/**
 * Bundles src/workflows, or a test's own workflows index (webpack's report kept to warnings).
 *
 * @example
 * const bundle = await bundleWorkflows();
 */
export async function bundleWorkflows(workflowsPath = require.resolve('../../src/workflows')): Promise<WorkflowBundle> {
  return bundleWorkflowCode(withPreloadedContract({ workflowsPath, logger: new DefaultLogger('WARN') }));
}
