/**
 * `npm run demo` as a real child process, end to end: a Temporal server from the same variables as the
 * other workflow tests, the mock service, the receiver and a worker in the demo's process; it must end with the
 * images saved and exit 0.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { currentVerdict, workflowTest } from './environment';

jest.setTimeout(240_000);

const ROOT = path.resolve(__dirname, '../..');
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** The variables that hand the demo the server this test run has. */
function temporalVariables(): Record<string, string> {
  const verdict = currentVerdict();
  if (verdict.kind === 'test-server') return { TEMPORAL_TEST_SERVER_PATH: verdict.path };
  if (verdict.kind === 'existing') return { TEMPORAL_ADDRESS: verdict.address, TEMPORAL_NAMESPACE: verdict.namespace };
  return {}; // 'download': the demo downloads the dev server itself
}

workflowTest('tuneflow demo trains, generates, saves the images and exits 0', async () => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-demo-'));
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, ...temporalVariables() };
  const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'tuneflow.js'), 'demo', '--out', out], {
    cwd: ROOT,
    env,
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c));
  child.stderr.on('data', (c: Buffer) => (stderr += c));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  try {
    expect({ code, stderr }).toEqual({ code: 0, stderr: expect.any(String) });
    expect(stdout).toMatch(/^started: {3}trainThenGenerate demo-/m);
    expect(stdout).toMatch(/^tune \d+ "demo-[\w-]+" trained at /m);
    expect(stdout.match(/^prompt \d+: http:\/\/127\.0\.0\.1:\d+\/images\/\S+\.png$/gm)).toHaveLength(3);
    expect(stdout).toMatch(/^saved 3 images to /m);
    expect(stdout).toMatch(/completed/); // the progress line reached the end

    const files = fs.readdirSync(out, { recursive: true, withFileTypes: true }).filter((f) => f.isFile());
    expect(files).toHaveLength(3);
    for (const file of files)
      expect(fs.readFileSync(path.join(file.parentPath, file.name)).subarray(0, 8)).toEqual(PNG_SIGNATURE);
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
  }
});
