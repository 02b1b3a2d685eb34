/**
 * The test environment (test/quiet-environment.ts) as a run shows it: jest runs quiet-environment.fixture.ts, whose
 * tests log through the SDK's runtime logger and console, and this reads what the run printed.
 */
import { execFile } from 'node:child_process';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '..');

/** Everything a jest run of the fixture printed, stdout and stderr. */
function runFixture(env: NodeJS.ProcessEnv): Promise<string> {
  const args = ['--selectProjects', 'unit', '--testMatch', '<rootDir>/test/quiet-environment.fixture.ts'];
  return new Promise((resolve) =>
    execFile(
      process.execPath,
      [require.resolve('jest/bin/jest'), ...args, '--forceExit'],
      { cwd: ROOT, env },
      (_e, out, err) => resolve(`${out}${err}`),
    ),
  );
}

const { TUNEFLOW_TEST_LOGS: _, ...inherited } = process.env;

test("a failing test prints what it logged, the SDK's warnings with their stacks; a passing one its errors only", async () => {
  const output = await runFixture(inherited);
  expect(output).toContain('Tests:       1 failed, 2 passed, 3 total');
  expect(output).toContain('● a test that fails: what it printed');
  expect(output).toMatch(/\[WARN\] Workflow failed \{\n +error: Error: the failure that explains it\n +at /);
  expect(output).toContain('the timing of a failing test');
  expect(output).toContain('● a test that passes and logs an error: its errors (it passed)');
  expect(output).toContain('[ERROR] Failed to initiate shutdown');
  expect(output).not.toContain('the failure this test expects');
  expect(output).not.toContain('the timing of a passing test');
}, 60_000);

test('TUNEFLOW_TEST_LOGS=all prints what passing tests logged too', async () => {
  const output = await runFixture({ ...inherited, TUNEFLOW_TEST_LOGS: 'all' });
  expect(output).toContain('● a test that expects a workflow to fail: what it printed (it passed)');
  expect(output).toMatch(/\[WARN\] Workflow failed \{\n +error: Error: the failure this test expects\n +at /);
  expect(output).toContain('the timing of a passing test');
}, 60_000);
