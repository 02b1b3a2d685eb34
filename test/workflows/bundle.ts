/**
 * The workflows bundled as a worker loads them: once per test file, reused by every worker and replayer in it.
 */
import { bundleWorkflowCode, DefaultLogger, type WorkflowBundle } from '@temporalio/worker';

/**
 * Bundles src/workflows (webpack's report kept to warnings).
 *
 * @example
 * const bundle = await bundleWorkflows();
 */
export async function bundleWorkflows(): Promise<WorkflowBundle> {
  return bundleWorkflowCode({
    workflowsPath: require.resolve('../../src/workflows'),
    logger: new DefaultLogger('WARN'),
  });
}
