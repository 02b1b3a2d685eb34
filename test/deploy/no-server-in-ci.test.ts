/**
 * No silent skips in CI: the workflow project run as CI runs it (`CI=true`), on a machine where no Temporal server can
 * be had (no setting, an empty cache, downloads and installs forbidden), fails the run and says why; without CI the
 * same run skips the workflow tests and says why.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');

function jestWorkflows(ci: boolean): Promise<{ code: number | null; output: string }> {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    XDG_CACHE_HOME: fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-empty-cache-')),
    TUNEFLOW_TEMPORAL_DOWNLOAD: 'off',
    ...(ci && { CI: 'true' }),
  };
  // One small file of the project: the global setup decides before any test runs.
  const args = ['jest', '--selectProjects', 'workflows', '--runInBand', 'test/workflows/harness.test.ts'];
  const child = spawn('npx', args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c));
  child.stderr.on('data', (c: Buffer) => (output += c));
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, output })));
}

test('with CI=true and no Temporal server, the workflow tests fail the run, naming why', async () => {
  const { code, output } = await jestWorkflows(true);
  expect(code).not.toBe(0);
  expect(output).toContain('workflow tests FAIL: No Temporal time-skipping test server could be had');
  expect(output).toContain('workflow tests FAIL: No Temporal dev server (the Temporal CLI) could be had');
  expect(output).toContain('CI is set and a Temporal server for the workflow tests could not be had');
}, 120_000);

test('without CI, the same run says why it skips them', async () => {
  const { output } = await jestWorkflows(false);
  expect(output).toContain('workflow tests SKIPPED: No Temporal time-skipping test server could be had');
}, 120_000);
