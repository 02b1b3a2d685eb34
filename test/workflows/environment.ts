/**
 * Where the workflow tests get a Temporal server (DESIGN.md, testing tier 4):
 *
 * - `TEMPORAL_TEST_SERVER_PATH`: the time-skipping test server at that path;
 * - `TEMPORAL_ADDRESS` (and `TEMPORAL_NAMESPACE`): an existing server, in real time;
 * - otherwise the SDK's own download of the test server, tried once by global-setup.ts within a bound.
 *
 * Jest decides test-or-skip when a test file loads, but finding a server is async: global-setup.ts decides once per
 * run and publishes its verdict in process.env, which the test files read here. Only the download may end in a skip
 * (printed with its reason); a server that was asked for by variable and does not work fails the tests instead.
 */
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflows, WorkflowHarness } from './harness';
import { environmentFor, VERDICT_VARIABLE, verdictFromVariables, type TemporalVerdict } from './global-setup';

export type { TemporalVerdict } from './global-setup';

/**
 * The verdict global-setup.ts published; without one (a file run outside the `workflows` project), what the
 * variables say, and no download.
 */
export function currentVerdict(env: Record<string, string | undefined> = process.env): TemporalVerdict {
  const published = env[VERDICT_VARIABLE];
  if (published) return JSON.parse(published) as TemporalVerdict;
  const verdict = verdictFromVariables(env);
  return verdict.kind === 'download'
    ? {
        kind: 'unavailable',
        reason: "the workflows project's globalSetup did not run (see test/workflows/global-setup.ts)",
      }
    : verdict;
}

/** True when the workflow tests have a server to run against. */
export function temporalAvailable(): boolean {
  return currentVerdict().kind !== 'unavailable';
}

/** `test`, or `test.skip` when no Temporal server is available (global-setup.ts prints why). */
export const workflowTest: jest.It = temporalAvailable() ? test : test.skip;

// Without the globalSetup (a project configured without it) nobody printed the reason yet.
if (!temporalAvailable() && !process.env[VERDICT_VARIABLE])
  process.stderr.write(`workflow tests SKIPPED: ${(currentVerdict() as { reason: string }).reason}\n`);

/**
 * A TestWorkflowEnvironment as the verdict says: time-skipping where possible, an existing server otherwise.
 *
 * @example
 * beforeAll(async () => { env = await createTestEnvironment(); });
 */
export function createTestEnvironment(): Promise<TestWorkflowEnvironment> {
  return environmentFor(currentVerdict());
}

/**
 * One environment and one harness per test file (DESIGN.md tier 4): created in beforeAll when a server is available,
 * torn down in afterAll. Returns a getter, since the harness exists only once beforeAll ran.
 *
 * @example
 * const harness = useWorkflowHarness();
 * workflowTest('...', async () => { const outcome = await play(harness(), scenarios.pack); });
 */
export function useWorkflowHarness(): () => WorkflowHarness {
  let env: TestWorkflowEnvironment | undefined;
  let harness: WorkflowHarness | undefined;
  beforeAll(async () => {
    if (!temporalAvailable()) return;
    env = await createTestEnvironment();
    harness = await WorkflowHarness.start(env, await bundleWorkflows());
  }, 180_000);
  afterAll(async () => {
    await harness?.close();
    await env?.teardown();
  });
  return () => {
    if (!harness) throw new Error('no workflow harness: beforeAll did not create one (no Temporal server?)');
    return harness;
  };
}
