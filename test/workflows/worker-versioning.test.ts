/**
 * Versioned deploys (issue 49) on a real server (the Temporal CLI's dev server, server 1.32): workers of build A and of
 * build B, whose trainThenGenerate would not replay A's histories, in one worker deployment. The README's rollout
 * ("Versioned deploys") is run as printed at each step: A current, B ramping at 20 %, B current, A described, and a
 * rollback to A. Jobs pinned to A finish on A with no workflow task failed and one tune each; the ramp's share and the
 * rollback's delay are read from where each new job ran. The replay gate reads the same namespace: zero where every
 * run is pinned to A, the runs named where B would take them (unversioned, auto-upgrade), zero with a change that
 * replays; `tuneflow replay` on the command line exits by the same rules.
 */
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { Client } from '@temporalio/client';
import type { VersioningBehavior as Behavior } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { NativeConnection, Worker, type WorkflowBundle } from '@temporalio/worker';
import { TuneflowClient } from '../../src/client';
import { replayGate } from '../../src/deployments/replay-gate';
import { defaultBuildId } from '../../src/deployments/versions';
import { startMockService, TUNE_TRAINING_MC, type MockService } from '../../src/mock-service';
import { ledgerWorkflowId, spendWindow, type TenantBudget } from '../../src/contract/spend';
import { DEFAULT_TENANT } from '../../src/contract/tenants';
import { TuneflowPlugin, tuneflowReplayOptions } from '../../src/plugin';
import { blocksUnder, commandsOf } from '../readme-blocks';
import { bundleWorkflows } from './bundle';
import { devServerTest, startDevServer, temporalOnPath, whileRunning } from './environment';

jest.setTimeout(900_000);

const { EventType, VersioningBehavior } = temporal.api.enums.v1;
const ROOT = path.resolve(__dirname, '..', '..');
const DEPLOYMENT = 'tuneflow';
const ROLLOUT_QUEUE = 'rollout';
/** Jobs that wait on their training (the mock's 20 s) while the rollout goes on; polls a few seconds apart. */
const OPTIONS = {
  pollInterval: '3 seconds',
  maxPollInterval: '6 seconds',
  trainingTimeout: '5 minutes',
  promptTimeout: '5 minutes',
};

let env: TestWorkflowEnvironment | undefined;
let connection: NativeConnection;
let mock: MockService;
let bundles: { a: WorkflowBundle; b: WorkflowBundle; c: WorkflowBundle };
let builds: { a: string; b: string; c: string };

beforeAll(async () => {
  env = await startDevServer();
  const [a, b, c] = await Promise.all([
    bundleWorkflows(),
    bundleWorkflows(require.resolve('./build-b-workflows')),
    bundleWorkflows(require.resolve('./build-c-workflows')),
  ]);
  bundles = { a, b, c };
  // Each build's ID as a worker takes it by default: the package version and its bundle's hash.
  builds = {
    a: defaultBuildId({ workflowBundle: a })!,
    b: defaultBuildId({ workflowBundle: b })!,
    c: defaultBuildId({ workflowBundle: c })!,
  };
  [connection, mock] = await Promise.all([
    NativeConnection.connect({ address: env.address }),
    startMockService({ trainingTime: '20s', inferenceTime: '300ms' }),
  ]);
}, 180_000);

afterAll(async () => {
  await mock?.close();
  await connection?.close();
  await env?.teardown();
});

const namespace = () => env!.namespace ?? 'default';
const client = () => new Client({ connection: env!.client.connection, namespace: namespace() });
const dog = () => ({ name: 'dog', branch: 'fast', image_urls: [`${mock.url}/images/training-1.png`] });

/** A worker of `bundle` on `taskQueue`: versioned in `deployment` (its default build ID) unless `deployment` is false. */
function worker(
  bundle: WorkflowBundle,
  taskQueue: string,
  deployment: { name: string; behavior?: Behavior } | false,
  budgets: Record<string, TenantBudget> = {},
) {
  return Worker.create({
    connection,
    taskQueue,
    workflowBundle: bundle,
    plugins: [
      new TuneflowPlugin({
        api: { apiKey: 'versioning', baseUrl: mock.url },
        callbacks: false,
        nexus: false,
        serviceRate: false,
        startReport: false,
        tenants: { budgets },
        versioning: deployment && { deploymentName: deployment.name, behavior: deployment.behavior },
      }),
    ],
  });
}

/** Starts a job under `key` on `taskQueue` (one prompt); `priced`, its tune's price given, for a tenant's budget. */
function startJob(taskQueue: string, key: string, priced = false) {
  return new TuneflowClient({ client: client(), taskQueue }).trainThenGenerate(key, {
    tune: dog(),
    prompts: [{ text: 'sks dog' }],
    options: priced ? { ...OPTIONS, tuneCostMc: TUNE_TRAINING_MC } : OPTIONS,
  });
}

/** Waits until the server knows `buildId` of `deployment` (its workers polled), so it can be made current. */
async function untilPolled(deployment: string, buildId: string): Promise<void> {
  for (const giveUpAt = Date.now() + 60_000; Date.now() < giveUpAt; ) {
    const described = await client()
      .workflowService.describeWorkerDeployment({ namespace: namespace(), deploymentName: deployment })
      .catch(() => undefined);
    const versions = described?.workerDeploymentInfo?.versionSummaries ?? [];
    if (versions.some((v) => v.deploymentVersion?.buildId === buildId)) return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`the server never saw build ${buildId} of ${deployment} poll`);
}

/** The build a run is on once its first workflow task completed (undefined before, or unversioned). */
async function buildOf(workflowId: string): Promise<string | undefined> {
  const described = await client().workflowService.describeWorkflowExecution({
    namespace: namespace(),
    execution: { workflowId },
  });
  return described.workflowExecutionInfo?.versioningInfo?.deploymentVersion?.buildId ?? undefined;
}

/** The build each run is on, asked until every one has completed its first workflow task. */
async function buildsOf(workflowIds: string[]): Promise<Map<string, string>> {
  const on = new Map<string, string>();
  for (const giveUpAt = Date.now() + 120_000; on.size < workflowIds.length && Date.now() < giveUpAt; ) {
    for (const id of workflowIds.filter((id) => !on.has(id))) {
      const build = await buildOf(id);
      if (build) on.set(id, build);
    }
    if (on.size < workflowIds.length) await new Promise((resolve) => setTimeout(resolve, 500));
  }
  if (on.size < workflowIds.length) throw new Error(`${workflowIds.length - on.size} runs never ran a workflow task`);
  return on;
}

/** Every workflow task of the run's history: which build completed it, and how many failed. */
async function tasksOf(workflowId: string, runId?: string): Promise<{ builds: Set<string>; failed: number }> {
  const history = await client().workflow.getHandle(workflowId, runId).fetchHistory();
  const builds = new Set<string>();
  let failed = 0;
  for (const event of history.events ?? []) {
    if (event.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED) failed++;
    const completed = event.workflowTaskCompletedEventAttributes;
    if (completed) builds.add(completed.deploymentVersion?.buildId ?? '(unversioned)');
  }
  return { builds, failed };
}

/** The ledger's workflow tasks over all its runs (it continues as new every 500 updates). */
async function ledgerTasksOf(ledgerId: string): Promise<{ builds: Set<string>; failed: number; runs: number }> {
  const all = { builds: new Set<string>(), failed: 0, runs: 0 };
  for await (const run of client().workflow.list({ query: `WorkflowId = '${ledgerId}'` })) {
    const tasks = await tasksOf(ledgerId, run.runId);
    for (const build of tasks.builds) all.builds.add(build);
    all.failed += tasks.failed;
    all.runs++;
  }
  return all;
}

/** Each job's result, or a rejection naming the job if it has not finished within `ms` of the call. */
async function resultsWithin(workflowIds: string[], ms: number): Promise<PromiseSettledResult<unknown>[]> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('timed out')), ms)));
  try {
    return await Promise.allSettled(
      workflowIds.map((id) =>
        Promise.race([
          client().workflow.getHandle(id).result(),
          deadline.catch(() => Promise.reject(new Error(`${id} had not finished within ${ms / 1000} s`))),
        ]),
      ),
    );
  } finally {
    clearTimeout(timer);
  }
}

/** Waits until visibility lists `count` runs for `query` (it lags the starts). */
async function untilListed(query: string, count: number): Promise<void> {
  for (const giveUpAt = Date.now() + 30_000; Date.now() < giveUpAt; ) {
    const { count: listed } = await client().workflow.count(query);
    if (listed >= count) return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`visibility never listed ${count} runs for ${query}`);
}

/** The README's rollout: its commands, in order, after the line that names the two builds. */
function rolloutCommands(): string[] {
  const [first, ...commands] = commandsOf(blocksUnder('### Versioned deploys', 'sh')[0]!);
  expect(first).toMatch(/^A=\S+\s+B=\S+$/);
  return commands;
}

/** Runs one README command as printed, `temporal` on PATH, against the test's server, with A and B the test's builds. */
async function runPrinted(command: string): Promise<string> {
  const { stdout } = await promisify(execFile)('bash', ['-euo', 'pipefail', '-c', command], {
    cwd: ROOT,
    env: { ...process.env, PATH: temporalOnPath(), TEMPORAL_ADDRESS: env!.address, A: builds.a, B: builds.b },
  });
  return stdout;
}

devServerTest(
  "a rollout as the README prints it: A's 50 jobs finish on A, a 20 % ramp sends 20 ± 8 % of 200 jobs to B, and a " +
    'rollback sends new jobs to A within 60 s; no workflow task fails and no job creates twice',
  async () => {
    const [current, ramp, currentB, describeA, rollback] = rolloutCommands();
    expect(current).toMatch(/set-current-version .*\$A/);
    expect(ramp).toMatch(/set-ramping-version .*\$B.* --percentage 20/);
    expect(currentB).toMatch(/set-current-version .*\$B/);
    expect(describeA).toMatch(/describe-version .*\$A/);
    expect(rollback).toMatch(/set-current-version .*\$A/);
    const creates = () => mock.stats().routes['POST /tunes'] ?? 0;
    const createsBefore = creates();

    // A budget for the jobs' tenant: every job reserves on its ledger, which lives across the builds (AUTO_UPGRADE).
    const budgets = { [DEFAULT_TENANT]: { ceilingMc: 1_000_000_000, period: 'day' as const } };
    const ledgerId = ledgerWorkflowId(DEFAULT_TENANT, spendWindow('day', Date.now()));
    const workerA = await worker(bundles.a, ROLLOUT_QUEUE, { name: DEPLOYMENT }, budgets);
    const workerB = await worker(bundles.b, ROLLOUT_QUEUE, { name: DEPLOYMENT }, budgets);
    expect(workerA.options.workerDeploymentOptions).toEqual({
      version: { deploymentName: DEPLOYMENT, buildId: builds.a },
      useWorkerVersioning: true,
      defaultVersioningBehavior: 'PINNED',
    });
    const jobs: string[] = [];
    const outcome = await whileRunning([workerA, workerB], async () => {
      await untilPolled(DEPLOYMENT, builds.a);
      await runPrinted(current);
      const onA = await Promise.all(Array.from({ length: 50 }, (_, i) => startJob(ROLLOUT_QUEUE, `a-${i}`, true)));
      jobs.push(...onA.map((h) => h.workflowId));
      const firstBuilds = await buildsOf(onA.map((h) => h.workflowId));

      // The gate, with B's code, before B takes anything: every run is pinned to A, so it replays none and passes.
      // The jobs only: the ledger (auto-upgrade) is any build's to run.
      const pinnedQuery = `TaskQueue = '${ROLLOUT_QUEUE}' AND WorkflowType = 'trainThenGenerate'`;
      await untilListed(pinnedQuery, 50);
      const gateOnPinned = await replayGate({
        client: client(),
        query: pinnedQuery,
        build: { deploymentName: DEPLOYMENT, buildId: builds.b },
        replayer: tuneflowReplayOptions({ workflowBundle: bundles.b }),
      });

      await untilPolled(DEPLOYMENT, builds.b);
      await runPrinted(ramp);
      // Keys fixed, so the server's hash of each ID (which decides the ramp) gives the same split every run.
      const ramped = await Promise.all(
        Array.from({ length: 200 }, (_, i) => startJob(ROLLOUT_QUEUE, `ramp-${i}`, true)),
      );
      jobs.push(...ramped.map((h) => h.workflowId));
      const rampBuilds = await buildsOf(ramped.map((h) => h.workflowId));

      await runPrinted(currentB);
      // A's jobs are still training when B becomes current: what follows is theirs to finish on A.
      const aRunningAtRollout = (
        await Promise.all(
          onA.map((h) =>
            client()
              .workflow.getHandle(h.workflowId)
              .describe()
              .then((d) => d.status.name),
          ),
        )
      ).filter((status) => status === 'RUNNING').length;
      const afterRollout = await Promise.all([0, 1, 2].map((i) => startJob(ROLLOUT_QUEUE, `b-${i}`, true)));
      jobs.push(...afterRollout.map((h) => h.workflowId));
      const rolloutBuilds = await buildsOf(afterRollout.map((h) => h.workflowId));
      const describedA = await runPrinted(describeA);

      const rolledBackAt = Date.now();
      await runPrinted(rollback);
      // A job a second until one lands on A, then three more: each must land on A too.
      let firstOnA: number | undefined;
      for (let i = 0; firstOnA === undefined && Date.now() - rolledBackAt < 90_000; i++) {
        const handle = await startJob(ROLLOUT_QUEUE, `back-${i}`, true);
        jobs.push(handle.workflowId);
        const [build] = (await buildsOf([handle.workflowId])).values();
        if (build === builds.a) firstOnA = Date.now() - rolledBackAt;
        else await new Promise((resolve) => setTimeout(resolve, 1_000));
      }
      const afterRollback = await Promise.all([0, 1, 2].map((i) => startJob(ROLLOUT_QUEUE, `back-more-${i}`, true)));
      jobs.push(...afterRollback.map((h) => h.workflowId));
      const rollbackBuilds = await buildsOf(afterRollback.map((h) => h.workflowId));

      // Bounded: a job whose workflow tasks fail (a nondeterminism error retries forever) is a failure, not a hang.
      const results = await resultsWithin(jobs, 300_000);
      // Every job that started on A, the ramp's among them.
      const startedOnA = [
        ...firstBuilds.keys(),
        ...[...rampBuilds].filter(([, b]) => b === builds.a).map(([id]) => id),
      ];
      const aTasks = await Promise.all(startedOnA.map((id) => tasksOf(id)));
      const allTasks = await Promise.all(jobs.map((id) => tasksOf(id)));
      const ledger = await client().workflowService.describeWorkflowExecution({
        namespace: namespace(),
        execution: { workflowId: ledgerId },
      });
      return {
        firstBuilds,
        gateOnPinned,
        rampBuilds,
        rolloutBuilds,
        describedA,
        firstOnA,
        rollbackBuilds,
        results,
        aTasks,
        allTasks,
        aRunningAtRollout,
        ledgerBehavior: ledger.workflowExecutionInfo?.versioningInfo?.behavior,
        ledgerTasks: await ledgerTasksOf(ledgerId),
      };
    });

    // Every job of A started on A and every one of its workflow tasks ran on A, B current meanwhile.
    expect([...outcome.firstBuilds.values()].every((b) => b === builds.a)).toBe(true);
    expect(outcome.aRunningAtRollout).toBe(50);
    expect(outcome.aTasks.length).toBeGreaterThan(50);
    expect(outcome.aTasks.every((t) => t.builds.size === 1 && t.builds.has(builds.a))).toBe(true);
    // The ledger moved with the current build (A, B, A again), no task of it failed.
    expect(outcome.ledgerBehavior).toBe(VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE);
    expect(outcome.ledgerTasks).toEqual({ builds: new Set([builds.a, builds.b]), failed: 0, runs: expect.any(Number) });
    expect(outcome.gateOnPinned.replayed).toHaveLength(0);
    expect(outcome.gateOnPinned.failed).toHaveLength(0);
    expect(outcome.gateOnPinned.skipped).toHaveLength(50);
    const onB = [...outcome.rampBuilds.values()].filter((b) => b === builds.b).length;
    expect(onB).toBeGreaterThanOrEqual(24);
    expect(onB).toBeLessThanOrEqual(56);
    expect([...outcome.rampBuilds.values()].every((b) => b === builds.a || b === builds.b)).toBe(true);
    expect([...outcome.rolloutBuilds.values()]).toEqual([builds.b, builds.b, builds.b]);
    // A still holds pinned jobs while B is current: draining, not drained.
    expect(outcome.describedA).toMatch(/Draining/i);
    expect(outcome.firstOnA).toBeDefined();
    expect(outcome.firstOnA!).toBeLessThan(60_000);
    expect([...outcome.rollbackBuilds.values()]).toEqual([builds.a, builds.a, builds.a]);
    // Every job completed, none with a failed workflow task (a nondeterminism error is one), and one tune each.
    expect(outcome.results.filter((r) => r.status === 'rejected')).toEqual([]);
    expect(outcome.allTasks.reduce((sum, t) => sum + t.failed, 0)).toBe(0);
    expect(creates() - createsBefore).toBe(jobs.length);
    console.log(
      `versioning rollout: ${jobs.length} jobs; ramp 20 %: ${onB} of 200 on B; rollback: first new job on A ` +
        `${outcome.firstOnA} ms after it`,
    );
  },
);

/** Runs `tuneflow` (the built package's command line) against the test's server; its exit code and output. */
async function tuneflow(command: string, extraEnv: Record<string, string> = {}) {
  try {
    const { stdout, stderr } = await promisify(execFile)('bash', ['-euo', 'pipefail', '-c', command], {
      cwd: ROOT,
      env: { ...process.env, TEMPORAL_ADDRESS: env!.address, ...extraEnv },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const { code, stdout, stderr } = err as { code: number; stdout: string; stderr: string };
    return { code, stdout, stderr };
  }
}

devServerTest(
  'the replay gate: non-zero naming the unversioned and auto-upgrade runs a build that would not replay them would ' +
    "take; zero with a change that replays; zero where every run is pinned to another build; the README's command as printed",
  async () => {
    const deployment = 'tuneflow-auto';
    const unversioned = await worker(bundles.a, 'unversioned', false);
    const unversionedB = await worker(bundles.b, 'unversioned-b', false);
    const autoUpgrade = await worker(bundles.a, 'auto-upgrade', { name: deployment, behavior: 'AUTO_UPGRADE' });
    expect(unversioned.options.workerDeploymentOptions).toBeUndefined();
    const started = await whileRunning([unversioned, unversionedB, autoUpgrade], async () => {
      await untilPolled(deployment, builds.a);
      await client().workflowService.setWorkerDeploymentCurrentVersion({
        namespace: namespace(),
        deploymentName: deployment,
        buildId: builds.a,
      });
      const handles = await Promise.all([
        ...[0, 1, 2].map((i) => startJob('unversioned', `u-${i}`)),
        ...[0, 1].map((i) => startJob('unversioned-b', `ub-${i}`)),
        ...[0, 1, 2].map((i) => startJob('auto-upgrade', `au-${i}`)),
      ]);
      await Promise.all(handles.map((h) => h.result()));
      return handles.map((h) => h.workflowId);
    });
    await untilListed(`WorkflowType = 'trainThenGenerate' AND TaskQueue = 'unversioned'`, 3);
    await untilListed(`WorkflowType = 'trainThenGenerate' AND TaskQueue = 'unversioned-b'`, 2);
    await untilListed(`WorkflowType = 'trainThenGenerate' AND TaskQueue = 'auto-upgrade'`, 3);

    const gate = (query: string, bundle: WorkflowBundle, build: string, deploymentName = DEPLOYMENT) =>
      replayGate({
        client: client(),
        query,
        // Every run of the query: the rollout's are some 260.
        count: 1000,
        build: { deploymentName, buildId: build },
        replayer: tuneflowReplayOptions({ workflowBundle: bundle }),
      });
    const withB = await gate(`TaskQueue = 'unversioned'`, bundles.b, builds.b);
    expect(withB.failed.map((run) => [run.workflowId, run.behavior]).sort()).toEqual(
      started.filter((id) => id.startsWith('u-')).map((id) => [id, 'unversioned']),
    );
    expect(withB.failed[0]!.error).toMatch(/nondetermin/i);
    const autoWithB = await gate(`TaskQueue = 'auto-upgrade'`, bundles.b, builds.b, deployment);
    expect(autoWithB.failed.map((run) => [run.workflowId, run.behavior, run.version]).sort()).toEqual(
      started.filter((id) => id.startsWith('au-')).map((id) => [id, 'AUTO_UPGRADE', `${deployment}.${builds.a}`]),
    );
    const withC = await gate(`TaskQueue IN ('unversioned', 'auto-upgrade')`, bundles.c, builds.c, deployment);
    expect(withC).toEqual({ replayed: expect.any(Array), failed: [], skipped: [], gone: [] });
    expect(withC.replayed).toHaveLength(6);
    // The rollout's runs: those pinned to A skipped, those on B replayed with B's code.
    const rollout = await gate(`TaskQueue = '${ROLLOUT_QUEUE}'`, bundles.b, builds.b);
    expect(rollout.failed).toEqual([]);
    const jobsReplayed = rollout.replayed.filter((run) => run.workflowType === 'trainThenGenerate');
    console.log(
      `the rollout's runs at the gate: ${rollout.replayed.length} replayed (${jobsReplayed.length} jobs), ` +
        `${rollout.skipped.length} skipped, ${rollout.gone.length} gone`,
    );
    expect(jobsReplayed.length).toBeGreaterThan(0);
    // The ledger, auto-upgrade, is B's to run: it replays with B's code (its own code is A's).
    expect(
      rollout.replayed
        .filter((run) => run.workflowType === 'spendLedger')
        .every((run) => run.behavior === 'AUTO_UPGRADE'),
    ).toBe(true);
    expect(jobsReplayed.every((run) => run.behavior === 'PINNED' && run.version === `${DEPLOYMENT}.${builds.b}`)).toBe(
      true,
    );
    expect(rollout.skipped.every((run) => run.version === `${DEPLOYMENT}.${builds.a}`)).toBe(true);

    // The command line, with this package's code (build A's): B's unversioned runs would not replay, A's do.
    const failing = await tuneflow(`node bin/tuneflow.js replay --query "TaskQueue = 'unversioned-b'"`);
    expect(failing.code).toBe(1);
    for (const id of started.filter((id) => id.startsWith('ub-')))
      expect(failing.stdout).toMatch(
        new RegExp(`^would not replay: trainThenGenerate ${id} \\(run [0-9a-f-]+, unversioned\\): `, 'm'),
      );
    expect(failing.stdout).toMatch(
      /^2 runs read \(.*\), with build unversioned: 0 replayed, 2 would not replay, 0 pinned/m,
    );
    const passing = await tuneflow(`node bin/tuneflow.js replay --query "TaskQueue = 'unversioned'" --json`);
    expect(passing.code).toBe(0);
    expect(JSON.parse(passing.stdout)).toMatchObject({ failed: [], skipped: [] });
    expect(JSON.parse(passing.stdout).replayed).toHaveLength(3);

    // The README's gate as printed (its query finds every run here): the build it names is this package's default,
    // so every pinned run is skipped; B's unversioned runs alone would not replay.
    const [printed] = commandsOf(blocksUnder('### Versioned deploys', 'sh')[1]!);
    expect(printed).toMatch(/^TUNEFLOW_DEPLOYMENT_NAME=tuneflow npx tuneflow replay --query /);
    const readme = await tuneflow(printed!);
    expect(readme.code).toBe(1);
    const notReplayed = [...readme.stdout.matchAll(/^would not replay: trainThenGenerate (\S+) /gm)].map((m) => m[1]);
    expect(notReplayed.sort()).toEqual(started.filter((id) => id.startsWith('ub-')));
    // The rollout's runs, pinned to builds the package's own default is neither of.
    const pinned = Number(/ (\d+) pinned to other builds not replayed\n/.exec(readme.stdout)?.[1]);
    expect(pinned).toBeGreaterThanOrEqual(257);
  },
);
