/**
 * The image builds, proven without a container engine: the Dockerfile's stages replayed as written (test/deploy/
 * image.ts), the runtime stage holding production dependencies only, and the image's entrypoint answering
 * `worker --help` as its non-root user. test/workflows/image.test.ts runs the same image's worker for a job.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { execForm, hostPath, imageCommand, parseDockerfile, replayImage, ROOT, type Image } from './image';

jest.setTimeout(600_000);

const lock = JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, { dev?: boolean; optional?: boolean }>;
};

function run(image: Image, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(...imageCommand(image, args));
  let [stdout, stderr] = ['', ''];
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('the Dockerfile, parsed', () => {
  test('continuation lines, comments inside them, exec and shell forms', () => {
    const stages = parseDockerfile(
      'FROM node:20 AS build\n# a comment\nRUN npm ci \\\n  # dropped\n  && npm run build\nFROM build\nCMD ["worker"]\n',
    );
    expect(stages).toEqual([
      { from: 'node:20', name: 'build', instructions: [{ keyword: 'RUN', args: 'npm ci && npm run build', line: 3 }] },
      { from: 'build', name: undefined, instructions: [{ keyword: 'CMD', args: '["worker"]', line: 7 }] },
    ]);
    expect(execForm('["node", "lib/cli/index.js"]')).toEqual(['node', 'lib/cli/index.js']);
    expect(execForm('npm ci')).toBeUndefined();
  });
});

describe('the image, replayed from the Dockerfile as written', () => {
  let image: Image;
  beforeAll(async () => {
    image = await replayImage();
  }, 600_000);

  test('holds the build and the prebuilt workflow bundle, and production dependencies only', () => {
    const app = hostPath(image.root, image.workdir);
    for (const file of ['lib/cli/index.js', 'lib/index.js', 'lib/workflow-bundle.js', 'bin/tuneflow.js'])
      expect(fs.existsSync(path.join(app, file))).toBe(true);
    expect(fs.existsSync(path.join(app, 'src'))).toBe(false);
    const installed = Object.keys(lock.packages).filter((name) => name && fs.existsSync(path.join(app, name)));
    expect(installed).toContain('node_modules/@temporalio/worker');
    expect(installed.filter((name) => lock.packages[name].dev)).toEqual([]);
    expect(image.env.NODE_ENV).toBe('production');
  });

  test("its entrypoint answers `worker --help`, as the image's non-root user", async () => {
    expect(image.user).toBe('node');
    const [, , options] = imageCommand(image, ['worker', '--help']);
    if (process.getuid?.() === 0) expect(options.uid).toBeGreaterThan(0);
    const { code, stdout, stderr } = await run(image, ['worker', '--help']);
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    expect(stdout).toMatch(/^Usage: tuneflow worker/);
    expect(stdout).toContain('TUNEFLOW_API_KEY');
  });
});
