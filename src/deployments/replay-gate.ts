/**
 * The replay gate: before a deploy, the namespace's own recent runs of tuneflow's workflows replayed with the new build's
 * workflow code, so a change that would break a live run fails CI, not the run. Only the runs the new build would take
 * are replayed: unversioned runs, auto-upgrade runs, and runs already on the new build. A run pinned to another build
 * finishes there and never meets the new code.
 */
import type { Client, WorkflowExecutionInfo } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import type { ReplayWorkerOptions } from '@temporalio/worker';
import { WORKFLOW_NAMES } from '../contract/jobs';
import type { DeploymentVersion } from './versions';

const { VersioningBehavior } = temporal.api.enums.v1;

/** The most runs one gate reads. */
export const MAX_GATE_RUNS = 1000;
export const DEFAULT_GATE_RUNS = 100;

/** tuneflow's workflow types the gate reads by default: the jobs and the spend ledger. */
export const GATE_WORKFLOW_TYPES: readonly string[] = [...WORKFLOW_NAMES, 'spendLedger'];

/** One run, as the gate names it. */
export interface GateRun {
  workflowId: string;
  runId: string;
  workflowType: string;
  /** How the server routes it: unversioned, auto-upgrade, or pinned. */
  behavior: 'unversioned' | 'AUTO_UPGRADE' | 'PINNED';
  /** The build it is on (`deployment.build`), where the server says. */
  version?: string;
}

export interface ReplayGateOptions {
  /** A client of the namespace to read. */
  client: Client;
  /**
   * More of the visibility query, joined to tuneflow's workflow types with AND: `StartTime > "2026-11-01T00:00:00Z"`,
   * `ExecutionStatus = "Running"`, `TaskQueue = "tuneflow"`.
   */
  query?: string;
  /** The most recent runs read, 1 to MAX_GATE_RUNS. @default 100 */
  count?: number;
  /** The new build. Runs pinned to any other version are not replayed. @default none: every pinned run is skipped */
  build?: DeploymentVersion;
  /**
   * The replayer: the new build's workflows (`workflowBundle` or `workflowsPath`), its data converter and plugins. The
   * SDK's options, as a worker of the new build has them.
   */
  replayer: ReplayWorkerOptions;
}

export interface ReplayGateResult {
  /** Runs replayed clean. */
  replayed: GateRun[];
  /** Runs that would not replay on the new build, each with the replayer's error. */
  failed: Array<GateRun & { error: string }>;
  /** Runs pinned to another build: they never meet the new code. */
  skipped: GateRun[];
  /** Runs listed, then gone before they were read (the namespace's retention): nothing to replay. */
  gone: Array<Pick<GateRun, 'workflowId' | 'runId' | 'workflowType'>>;
}

/** The visibility query the gate reads: tuneflow's workflow types, and the caller's own, if any. */
export function gateQuery(query?: string): string {
  const types = `WorkflowType IN (${GATE_WORKFLOW_TYPES.map((type) => `'${type}'`).join(', ')})`;
  return query?.trim() ? `${types} AND (${query.trim()})` : types;
}

/** What is wrong with a count of runs, if anything. */
export function gateCountProblem(count: unknown): string | undefined {
  if (Number.isInteger(count) && (count as number) >= 1 && (count as number) <= MAX_GATE_RUNS) return undefined;
  return `must be a whole number from 1 to ${MAX_GATE_RUNS}, got ${JSON.stringify(count)}`;
}

type VersioningInfo = temporal.api.workflow.v1.IWorkflowExecutionVersioningInfo | null | undefined;

/**
 * How the server routes a run, from its versioning info (an override wins over the behaviour its worker declared), and
 * whether `build` would run it.
 */
export function routeOf(
  info: VersioningInfo,
  build: DeploymentVersion | undefined,
): { behavior: GateRun['behavior']; version?: string; replay: boolean } {
  const override = info?.versioningOverride;
  // The override's forms, newest first: `pinned.version`, the string `pinnedVersion`, the older `deployment`.
  const pinnedTo =
    override?.pinned?.version ??
    (override?.pinnedVersion ? parseVersion(override.pinnedVersion) : null) ??
    (override?.deployment?.seriesName && override.deployment.buildId
      ? { deploymentName: override.deployment.seriesName, buildId: override.deployment.buildId }
      : null);
  const overridden =
    override?.behavior === VersioningBehavior.VERSIONING_BEHAVIOR_PINNED || pinnedTo
      ? 'PINNED'
      : override?.autoUpgrade || override?.behavior === VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE
        ? 'AUTO_UPGRADE'
        : undefined;
  const declared =
    info?.behavior === VersioningBehavior.VERSIONING_BEHAVIOR_PINNED
      ? 'PINNED'
      : info?.behavior === VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE
        ? 'AUTO_UPGRADE'
        : 'unversioned';
  const behavior = overridden ?? declared;
  const on = behavior === 'PINNED' && pinnedTo ? pinnedTo : info?.deploymentVersion;
  const version = on?.deploymentName && on.buildId ? `${on.deploymentName}.${on.buildId}` : undefined;
  if (behavior !== 'PINNED') return { behavior, version, replay: true };
  const isBuild = (v: { deploymentName?: string | null; buildId?: string | null } | null | undefined) =>
    !!build && v?.deploymentName === build.deploymentName && v?.buildId === build.buildId;
  // A one-time override sends the run's next task to a version of its own: the new build's code if it names it.
  return { behavior, version, replay: isBuild(on) || isBuild(override?.oneTime?.targetDeploymentVersion) };
}

/** A run the server no longer has. */
function isNotFound(err: unknown): boolean {
  const e = err as { name?: string; code?: number } | undefined;
  return e?.name === 'WorkflowNotFoundError' || e?.code === 5;
}

/** `deployment.build` (the server's older form of a version) as its parts. */
function parseVersion(version: string): { deploymentName: string; buildId: string } | null {
  const dot = version.indexOf('.');
  return dot > 0 ? { deploymentName: version.slice(0, dot), buildId: version.slice(dot + 1) } : null;
}

/**
 * Reads the `count` most recent runs of tuneflow's workflows that `query` finds, and replays those the new build would
 * take with its workflow code; each run that would not replay is named with its error.
 *
 * @example
 * const gate = await replayGate({ client, query: 'StartTime > "2026-11-01T00:00:00Z"', build, replayer });
 * if (gate.failed.length) process.exitCode = 1;
 */
export async function replayGate(options: ReplayGateOptions): Promise<ReplayGateResult> {
  const count = options.count ?? DEFAULT_GATE_RUNS;
  const problem = gateCountProblem(count);
  if (problem) throw new RangeError(`count: ${problem}`);
  const { client } = options;
  const runs: WorkflowExecutionInfo[] = [];
  for await (const run of client.workflow.list({ query: gateQuery(options.query), pageSize: Math.min(count, 100) })) {
    runs.push(run);
    if (runs.length >= count) break;
  }
  const result: ReplayGateResult = { replayed: [], failed: [], skipped: [], gone: [] };
  const toReplay: GateRun[] = [];
  const gone = (run: Pick<GateRun, 'workflowId' | 'runId' | 'workflowType'>) =>
    result.gone.push({ workflowId: run.workflowId, runId: run.runId, workflowType: run.workflowType });
  for (const run of runs) {
    // The list's versioning fields are search attributes, which lag; the run itself says where it is now.
    const described = await client.workflowService
      .describeWorkflowExecution({
        namespace: client.options.namespace,
        execution: { workflowId: run.workflowId, runId: run.runId },
      })
      .catch((err: unknown) => {
        if (isNotFound(err)) return undefined;
        throw err;
      });
    if (!described) {
      gone({ workflowId: run.workflowId, runId: run.runId, workflowType: run.type });
      continue;
    }
    const route = routeOf(described.workflowExecutionInfo?.versioningInfo, options.build);
    const gateRun: GateRun = {
      workflowId: run.workflowId,
      runId: run.runId,
      workflowType: run.type,
      behavior: route.behavior,
      ...(route.version && { version: route.version }),
    };
    if (route.replay) toReplay.push(gateRun);
    else result.skipped.push(gateRun);
  }
  if (toReplay.length === 0) return result;
  const { Worker } = await import('@temporalio/worker');
  // One history at a time: a thousand long histories are not held at once. Those gone meanwhile are left out.
  const replaying: GateRun[] = [];
  async function* histories() {
    for (const run of toReplay) {
      const history = await client.workflow
        .getHandle(run.workflowId, run.runId)
        .fetchHistory()
        .catch((err: unknown) => {
          if (isNotFound(err)) return undefined;
          throw err;
        });
      if (!history) {
        gone(run);
        continue;
      }
      replaying.push(run);
      yield { workflowId: run.workflowId, history };
    }
  }
  // One result a history, in the order given: paired by place, since a result names the history's first run (a reset
  // run's is its base run's), not always the run read.
  let at = 0;
  for await (const replayed of Worker.runReplayHistories(options.replayer, histories())) {
    const run = replaying[at++]!;
    if (replayed.error) result.failed.push({ ...run, error: replayed.error.message.split('\n')[0]! });
    else result.replayed.push(run);
  }
  return result;
}
