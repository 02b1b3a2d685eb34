/**
 * `--rollout`: a versioned deploy in the middle of the soak. The workers start as build A of a worker deployment, A made
 * current before the first job; once half the jobs started as many workers of build B start beside them and B is
 * made current: A's jobs (pinned) finish on A, the jobs started after run on B. Both builds run the same code (the
 * package's bundle, two build IDs): what the soak judges is that no job is duplicated, lost or stuck across it. When it
 * stops, how many jobs each build took.
 */
import type { Client } from '@temporalio/client';

/** The deployment's name and the two builds' IDs of one soak run. */
export function rolloutBuilds(runId: string): { deploymentName: string; a: string; b: string } {
  return { deploymentName: `soak-${runId}`, a: `${runId}-a`, b: `${runId}-b` };
}

/** Asks until the server knows `buildId` (its workers polled), then makes it the deployment's current version. */
export async function makeCurrent(client: Client, deploymentName: string, buildId: string): Promise<number> {
  const asked = Date.now();
  const namespace = client.options.namespace;
  for (let last: unknown; ; ) {
    if (Date.now() - asked > 120_000)
      throw new Error(`rollout: build ${buildId} never became current: ${(last as Error)?.message ?? 'no pollers'}`);
    try {
      const described = await client.workflowService.describeWorkerDeployment({ namespace, deploymentName });
      const polled = described.workerDeploymentInfo?.versionSummaries?.some(
        (v) => v.deploymentVersion?.buildId === buildId,
      );
      if (polled) {
        await client.workflowService.setWorkerDeploymentCurrentVersion({ namespace, deploymentName, buildId });
        return Date.now() - asked;
      }
    } catch (err) {
      last = err;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** How many of `workflowIds` each build ran (by the build that completed the run's last workflow task). */
export async function jobsByBuild(client: Client, workflowIds: string[]): Promise<Record<string, number>> {
  const byBuild: Record<string, number> = {};
  for (const workflowId of workflowIds) {
    const described = await client.workflowService
      .describeWorkflowExecution({ namespace: client.options.namespace, execution: { workflowId } })
      .catch(() => undefined);
    const build = described?.workflowExecutionInfo?.versioningInfo?.deploymentVersion?.buildId ?? 'unversioned';
    byBuild[build] = (byBuild[build] ?? 0) + 1;
  }
  return byBuild;
}
