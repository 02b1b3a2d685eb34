/**
 * CI guards itself (issue 16): `.ci/run` sets CI=true whatever the runner exports and empties an inherited Temporal
 * verdict, and with CI set the workflow tests decide afresh: a verdict inherited from outside, even one that claims
 * servers, does not let a machine without a server pass.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');

function run(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; output: string }> {
  const child = spawn(command, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c));
  child.stderr.on('data', (c: Buffer) => (output += c));
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, output })));
}

/** A verdict that claims both servers, at paths where there are none. */
const CLAIMED = JSON.stringify({
  testServer: { kind: 'test-server', executable: { type: 'existing-path', path: '/nonexistent/temporal-test-server' } },
  devServer: { kind: 'dev-server', executable: { type: 'existing-path', path: '/nonexistent/temporal' } },
});

test('.ci/run exports CI=true and empties an inherited verdict before npm ci && npm test', async () => {
  // A stand-in npm on PATH that prints what it was run with: .ci/run itself runs, nothing is installed.
  const bin = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-ci-run-'));
  fs.writeFileSync(
    path.join(bin, 'npm'),
    '#!/bin/sh\necho "npm $* CI=$CI verdict=${TUNEFLOW_TEMPORAL_VERDICT:-none}"\n',
    { mode: 0o755 },
  );
  const { code, output } = await run(path.join(ROOT, '.ci', 'run'), [], {
    PATH: `${bin}:${process.env.PATH}`,
    HOME: process.env.HOME,
    CI: 'false',
    TUNEFLOW_TEMPORAL_VERDICT: CLAIMED,
  });
  expect(code).toBe(0);
  expect(output.trim().split('\n')).toEqual(['npm ci CI=true verdict=none', 'npm test CI=true verdict=none']);
});

test('with CI=true, an inherited verdict is not trusted: no server here fails the workflow tests, naming why', async () => {
  const { code, output } = await run(
    'npx',
    ['jest', '--selectProjects', 'workflows', '--runInBand', 'test/workflows/harness.test.ts'],
    {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      XDG_CACHE_HOME: fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-empty-cache-')),
      TUNEFLOW_TEMPORAL_DOWNLOAD: 'off',
      CI: 'true',
      TUNEFLOW_TEMPORAL_VERDICT: CLAIMED,
    },
  );
  expect(code).not.toBe(0);
  expect(output).toContain('CI is set and a Temporal server for the workflow tests could not be had');
}, 120_000);
