/**
 * The servers the workflow tests run on (DESIGN.md tiers 4 and 5), as global-setup.ts provisioned them once per run:
 *
 * - `workflowTest`: the time-skipping test server (or the server at TEMPORAL_ADDRESS), one environment per file;
 * - `devServerTest`: the Temporal CLI's dev server, which each test starts (and stops, kills or restarts) itself.
 *
 * Jest decides test-or-skip when a file loads, but provisioning is async: global-setup.ts decides once and publishes
 * its verdict in process.env, which the test files read here. With CI set a missing server fails the run in
 * global-setup.ts, so nothing is skipped there.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker, WorkflowBundle } from '@temporalio/worker';
import { openTemporal, type DevServerSettings, type TemporalServer } from '../../src/temporal-server';
import { startDevServerProcess } from '../../src/temporal-server/dev-server';
import { installQuietRuntime, isCI, VERDICT_VARIABLE, type Provisioned, type TemporalVerdict } from './global-setup';
import { bundleWorkflows, WorkflowHarness } from './harness';
import { shutdownOnceRunning } from '../../src/plugin';

/** The verdict global-setup.ts published; without one (a file run outside the `workflows` project), none. */
export function currentVerdict(env: Record<string, string | undefined> = process.env): TemporalVerdict {
  const published = env[VERDICT_VARIABLE];
  if (published) return JSON.parse(published) as TemporalVerdict;
  const reason = "the workflows project's globalSetup did not run (see test/workflows/global-setup.ts)";
  return { testServer: { kind: 'unavailable', reason }, devServer: { kind: 'unavailable', reason } };
}

function server(provisioned: Provisioned): TemporalServer {
  if (provisioned.kind === 'unavailable') throw new Error(`no Temporal server: ${provisioned.reason}`);
  return provisioned;
}

/**
 * `test` where its server is available; otherwise `test.skip` (global-setup.ts printed why), except in CI, where
 * each such test fails naming why: nothing a CI run needs is skipped, whatever the environment says.
 */
function testWhereAvailable(provisioned: Provisioned): jest.It {
  if (provisioned.kind !== 'unavailable') return test;
  if (!isCI()) return test.skip;
  const failing = (name: string) =>
    test(name, () => {
      throw new Error(`CI is set and this test's Temporal server could not be had: ${provisioned.reason}`);
    });
  return Object.assign(failing, test);
}
export const workflowTest: jest.It = testWhereAvailable(currentVerdict().testServer);
export const devServerTest: jest.It = testWhereAvailable(currentVerdict().devServer);

// Without the globalSetup nobody printed the reason yet.
if (!process.env[VERDICT_VARIABLE]) process.stderr.write(`workflow tests SKIPPED: globalSetup did not run\n`);

/**
 * A TestWorkflowEnvironment on the test server (time-skipping where it is one).
 *
 * @example
 * beforeAll(async () => { env = await createTestEnvironment(); });
 */
export function createTestEnvironment(): Promise<TestWorkflowEnvironment> {
  installQuietRuntime();
  return openTemporal(server(currentVerdict().testServer));
}

/**
 * A dev server of this test's own, started now: its state in `dbFilename` when given (so a restart finds it). A process
 * of our own (src/temporal-server/dev-server.ts), which teardown stops: the SDK's writes its banner to our stdout.
 *
 * @example
 * const env = await startDevServer({ dbFilename: path.join(dir, 'temporal.db'), port });
 */
export async function startDevServer(
  settings: Pick<DevServerSettings, 'port' | 'dbFilename' | 'uiPort'> = {},
): Promise<TestWorkflowEnvironment> {
  installQuietRuntime();
  const dev = server(currentVerdict().devServer);
  // The SDK's download runs only inside the SDK's server process.
  if (dev.kind !== 'dev-server' || dev.executable.type !== 'existing-path') return openTemporal(dev, settings);
  const child = await startDevServerProcess({ executable: dev.executable.path, ...settings });
  try {
    const env = await TestWorkflowEnvironment.createFromExistingServer({ address: child.address });
    const teardown = env.teardown.bind(env);
    return Object.assign(env, { teardown: () => teardown().finally(() => child.stop()) });
  } catch (err) {
    await child.stop();
    throw err;
  }
}

/** The dev server's executable (for tests that run it as a child process of their own). */
export function devServerExecutable(): string {
  const dev = server(currentVerdict().devServer);
  if (dev.kind !== 'dev-server' || dev.executable.type !== 'existing-path')
    throw new Error(`the dev server is not a file here: ${JSON.stringify(dev)}`);
  return dev.executable.path;
}

/**
 * PATH with `temporal` on it, as the README's commands expect it: a link to the CLI the dev server is, in a directory
 * of its own, before the test's own PATH.
 */
export function temporalOnPath(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-cli-'));
  fs.symlinkSync(devServerExecutable(), path.join(dir, 'temporal'));
  return `${dir}${path.delimiter}${process.env.PATH}`;
}

/**
 * One environment and one harness per test file (DESIGN.md tier 4): created in beforeAll when a server is available,
 * torn down in afterAll. Returns a getter, since the harness exists only once beforeAll ran.
 *
 * @example
 * const harness = useWorkflowHarness();
 * workflowTest('...', async () => { const outcome = await play(harness(), scenarios.pack); });
 */
export function useWorkflowHarness(
  open: () => Promise<TestWorkflowEnvironment> = createTestEnvironment,
  bundle: () => Promise<WorkflowBundle> = bundleWorkflows,
) {
  let env: TestWorkflowEnvironment | undefined;
  let harness: WorkflowHarness | undefined;
  beforeAll(async () => {
    env = await open();
    harness = await WorkflowHarness.start(env, await bundle());
  }, 180_000);
  afterAll(async () => {
    await harness?.close();
    await env?.teardown();
  });
  return (): WorkflowHarness => {
    if (!harness) throw new Error('no workflow harness: beforeAll did not create one (no Temporal server?)');
    return harness;
  };
}

/** Runs `workers` (each with `run`, `worker.run()` by default) while `body` runs, then stops them once they run. */
export async function whileRunning<T>(
  workers: Worker[],
  body: () => Promise<T>,
  run: (worker: Worker) => Promise<void> = (worker) => worker.run(),
): Promise<T> {
  const running = workers.map(run);
  try {
    return await body();
  } finally {
    await Promise.all(workers.map((worker, i) => shutdownOnceRunning(worker, running[i])));
    await Promise.all(running);
  }
}
