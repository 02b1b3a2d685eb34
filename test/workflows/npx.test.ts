/**
 * `npx tuneflow` in the clone, as the README's "Run it locally" uses it after `npm ci && npm run build`:
 *
 * - the first one runs the build `npm run build` made: npm 10 and 11 link a package's own bin into their npx cache
 *   (~/.npm/_npx/<hash>, a link to the clone), and that install must not build again (a `prepare` build took 17-25 s;
 *   the package builds when packed now); nothing is downloaded either (the registry here is an address that refuses);
 * - Ctrl-C's exit status, as a shell shows it, is the same under npx and under node: 130, after the command stopped
 *   what it runs. Under npx npm's shell dies of the same Ctrl-C and npm re-raises it (130 whatever tuneflow says);
 *   where npm's shell is bash (macOS's sh) tuneflow is npm's child and gets the Ctrl-C twice, the terminal's and
 *   npm's, and says 130 itself.
 *
 * Each command runs as a terminal runs it: `bash -c` in a process group of its own, Ctrl-C sent to the group.
 * Times are in the report of the change, not asserted here.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { freePort, portIsFree } from '../../src/temporal-server/dev-server';
import { devServerTest } from './environment';

jest.setTimeout(120_000);

const ROOT = path.resolve(__dirname, '../..');
const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
};

/** A user's environment: none of the variables `npm test` set for this process (npm_*), nor tuneflow's settings. */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !/^(npm_|TUNEFLOW_|TEMPORAL_)/i.test(name)),
  );
  return { ...env, TUNEFLOW_TEMPORAL_DOWNLOAD: 'off', ...extra };
}

interface Running {
  output: () => string;
  /** The exit status a shell shows: the code, or 128 + the signal's number. */
  status: Promise<number>;
  /** Resolves once a line of output matches. */
  ready(pattern: RegExp): Promise<void>;
  ctrlC(): void;
}

/** `bash -c command` in the repository, in a process group of its own, as a terminal runs it. */
function run(command: string, env: NodeJS.ProcessEnv): Running {
  const child = spawn('bash', ['-c', command], { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const waiting: Array<[RegExp, () => void]> = [];
  const onData = (chunk: Buffer) => {
    output += chunk;
    for (const [pattern, resolve] of waiting) if (pattern.test(output)) resolve();
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  // 'close': under npx, tuneflow holds the pipes until it is done too.
  const status = new Promise<number>((resolve) =>
    child.on('close', (code, signal) => resolve(code ?? 128 + os.constants.signals[signal!])),
  );
  return {
    output: () => output,
    status,
    ready: (pattern) =>
      Promise.race([
        new Promise<void>((resolve) => {
          waiting.push([pattern, resolve]);
          if (pattern.test(output)) resolve();
        }),
        status.then((code) => {
          throw new Error(`\`${command}\` exited ${code} before it was ready:\n${output}`);
        }),
      ]),
    ctrlC: () => process.kill(-child.pid!, 'SIGINT'),
  };
}

test('the first `npx tuneflow` in a clone runs the build `npm run build` made: no build, nothing downloaded', async () => {
  const built = path.join(ROOT, 'lib', 'cli', 'index.js');
  const builtAt = fs.statSync(built).mtimeMs;
  // An empty npm cache, as on a machine where npx never ran, and a registry that refuses.
  const cache = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-npx-cache-'));
  try {
    const version = run(
      'npx tuneflow --version',
      userEnv({ npm_config_cache: cache, npm_config_registry: 'http://127.0.0.1:9/' }),
    );
    expect({ status: await version.status, output: version.output() }).toEqual({
      status: 0,
      output: `tuneflow ${manifest.version} (${manifest.name})\n`,
    });
    expect(fs.statSync(built).mtimeMs).toBe(builtAt);
    // What npm (10, 11) leaves in its npx cache for a package's own bin: a link to this clone, nothing copied.
    const npx = path.join(cache, '_npx');
    for (const install of fs.existsSync(npx) ? fs.readdirSync(npx) : []) {
      const modules = path.join(npx, install, 'node_modules');
      expect(fs.readdirSync(modules).filter((name) => !name.startsWith('.'))).toEqual([manifest.name]);
      expect(fs.lstatSync(path.join(modules, manifest.name)).isSymbolicLink()).toBe(true);
      expect(fs.realpathSync(path.join(modules, manifest.name))).toBe(fs.realpathSync(ROOT));
    }
  } finally {
    fs.rmSync(cache, { recursive: true, force: true });
  }
});

/** The ways a user runs a command: npx (npm's shell is sh, dash here), npx with bash as npm's shell, node. */
const WAYS: Array<[string, string, Record<string, string>]> = [
  ['npx', 'npx tuneflow', {}],
  ['npx, bash as npm’s shell', 'npx tuneflow', { npm_config_script_shell: 'bash' }],
  ['node', 'node bin/tuneflow.js', {}],
];

describe.each(WAYS)('Ctrl-C under %s: exit 130, after the command stopped what it runs', (_, tuneflow, extra) => {
  test('mock-service', async () => {
    const mock = run(`${tuneflow} mock-service --port 0`, userEnv(extra));
    await mock.ready(/^listening on http:\/\/127\.0\.0\.1:\d+$/m);
    mock.ctrlC();
    expect({ status: await mock.status, output: mock.output() }).toEqual({
      status: 130,
      output: expect.stringMatching(/^stopped$/m),
    });
  });

  devServerTest('dev-server', async () => {
    const [port, uiPort] = [await freePort(), await freePort()];
    const server = run(`${tuneflow} dev-server --port ${port} --ui-port ${uiPort}`, userEnv(extra));
    await server.ready(/^Ctrl-C stops it\.$/m);
    expect(await portIsFree(port)).toBe(false);
    server.ctrlC();
    expect({ status: await server.status, output: server.output() }).toEqual({
      status: 130,
      output: expect.any(String),
    });
    expect(await portIsFree(port)).toBe(true);
    expect(await portIsFree(uiPort)).toBe(true);
  });
});
