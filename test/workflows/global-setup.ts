/**
 * Jest globalSetup of the `workflows` project: decides once per run where the workflow tests get a Temporal server
 * (see environment.ts) and publishes the verdict in process.env, which the test workers inherit. When there is none,
 * it prints why, and the workflow tests are skipped.
 */
import * as fs from 'node:fs';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime } from '@temporalio/worker';

/** The variable global-setup.ts publishes its verdict in (JSON). */
export const VERDICT_VARIABLE = 'TUNEFLOW_TEMPORAL_VERDICT';
/** Set to `off` to never try the download (offline machines): the workflow tests are then skipped at once. */
export const DOWNLOAD_VARIABLE = 'TUNEFLOW_TEMPORAL_DOWNLOAD';
/** How long the download may take before the tests are skipped. */
export const DOWNLOAD_TIMEOUT_MS = 20_000;

export type TemporalVerdict =
  | { kind: 'test-server'; path: string }
  | { kind: 'existing'; address: string; namespace: string }
  | { kind: 'download' }
  | { kind: 'unavailable'; reason: string };

type Env = Record<string, string | undefined>;

/**
 * The verdict the variables give without trying anything: a server asked for, or a download to try.
 *
 * @example
 * verdictFromVariables({ TEMPORAL_ADDRESS: 'localhost:7233' }); // { kind: 'existing', ... }
 */
export function verdictFromVariables(env: Env = process.env): TemporalVerdict {
  const path = env.TEMPORAL_TEST_SERVER_PATH;
  if (path) return { kind: 'test-server', path };
  const address = env.TEMPORAL_ADDRESS;
  if (address) return { kind: 'existing', address, namespace: env.TEMPORAL_NAMESPACE || 'default' };
  if (env[DOWNLOAD_VARIABLE] === 'off')
    return {
      kind: 'unavailable',
      reason: `${DOWNLOAD_VARIABLE}=off and neither TEMPORAL_TEST_SERVER_PATH nor TEMPORAL_ADDRESS is set`,
    };
  return { kind: 'download' };
}

/**
 * Decides where the tests get a server, trying the download when nothing was asked for. Run once by global-setup.ts.
 *
 * @example
 * const verdict = await probeTemporal(process.env);
 */
export async function probeTemporal(env: Env = process.env): Promise<TemporalVerdict> {
  const verdict = verdictFromVariables(env);
  if (verdict.kind === 'test-server' && !isExecutable(verdict.path))
    // Asked for by name: the tests run and fail loudly rather than skip quietly.
    process.stderr.write(`workflow tests: TEMPORAL_TEST_SERVER_PATH=${verdict.path} is not an executable file\n`);
  if (verdict.kind !== 'download') return verdict;

  let timer: NodeJS.Timeout | undefined;
  const creating = TestWorkflowEnvironment.createTimeSkipping();
  const timedOut = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), DOWNLOAD_TIMEOUT_MS);
  });
  try {
    const outcome = await Promise.race([creating, timedOut]);
    if (outcome === 'timeout') {
      // It may still finish: tear it down then, so nothing outlives the setup.
      creating.then((late) => late.teardown()).catch(() => undefined);
      return { kind: 'unavailable', reason: `the test server download took longer than ${DOWNLOAD_TIMEOUT_MS} ms` };
    }
    await outcome.teardown();
    return verdict;
  } catch (err) {
    return { kind: 'unavailable', reason: `the test server download failed: ${(err as Error).message}` };
  } finally {
    clearTimeout(timer);
  }
}

function isExecutable(path: string): boolean {
  try {
    fs.accessSync(path, fs.constants.X_OK);
    return fs.statSync(path).isFile();
  } catch {
    return false;
  }
}

/** The globalSetup entry point. */
export default async function globalSetup(): Promise<void> {
  // Decided already: a watch-mode rerun, or a parent process that probed.
  if (process.env[VERDICT_VARIABLE]) return;
  const verdict = await probeTemporal(process.env);
  process.env[VERDICT_VARIABLE] = JSON.stringify(verdict);
  process.stdout.write(`\n${describeVerdict(verdict)}\n`);
}

/** One line for the test log. */
export function describeVerdict(verdict: TemporalVerdict): string {
  switch (verdict.kind) {
    case 'test-server':
      return `workflow tests: time-skipping test server at ${verdict.path}`;
    case 'existing':
      return `workflow tests: existing Temporal server at ${verdict.address}, namespace ${verdict.namespace} (real time)`;
    case 'download':
      return 'workflow tests: time-skipping test server downloaded by the SDK';
    default:
      return (
        `workflow tests SKIPPED: no Temporal server (${verdict.reason}). ` +
        'Set TEMPORAL_TEST_SERVER_PATH to a time-skipping test server, or TEMPORAL_ADDRESS to a running server.'
      );
  }
}

/**
 * A TestWorkflowEnvironment as the verdict says: time-skipping where possible, an existing server otherwise. Used by
 * the workflow tests (through environment.ts) and by bench/api-calls.ts; it needs no jest.
 *
 * @example
 * const env = await environmentFor(await probeTemporal());
 */
export async function environmentFor(verdict: TemporalVerdict): Promise<TestWorkflowEnvironment> {
  installQuietRuntime();
  switch (verdict.kind) {
    case 'test-server':
      return TestWorkflowEnvironment.createTimeSkipping({
        server: { executable: { type: 'existing-path', path: verdict.path } },
      });
    case 'existing':
      return TestWorkflowEnvironment.createFromExistingServer({
        address: verdict.address,
        namespace: verdict.namespace,
      });
    case 'download':
      return TestWorkflowEnvironment.createTimeSkipping();
    default:
      throw new Error(`no Temporal server for the workflow tests: ${verdict.reason}`);
  }
}

/** Worker and core logs at WARN: the tests' own output stays readable. Once per process; later calls are no-ops. */
function installQuietRuntime(): void {
  try {
    Runtime.install({ logger: new DefaultLogger('WARN') });
  } catch {
    // Already installed (another test file in this process): keep it.
  }
}
