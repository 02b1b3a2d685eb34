/**
 * `tuneflow mock-service` as a real child process (node with tsx, as a user runs src/cli/index.ts): the first line
 * announces the URL, it serves and logs requests, SIGTERM stops it with exit 0; usage errors exit 2 naming the flag.
 * Also the `tuneflow` dispatcher itself.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { call, type TuneJson } from '../mock-service/loopback';

jest.setTimeout(30_000);

const ROOT = resolve(__dirname, '../..');

function cli(args: string[]): ChildProcessWithoutNullStreams {
  return spawn(process.execPath, ['--import', 'tsx', 'src/cli/index.ts', ...args], { cwd: ROOT });
}

/** Runs the cli to its end. */
async function run(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = cli(args);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c));
  child.stderr.on('data', (c: Buffer) => (stderr += c));
  const code = await new Promise<number | null>((done) => child.on('exit', done));
  return { code, stdout, stderr };
}

describe('tuneflow mock-service', () => {
  test('prints "listening on" first, serves and logs requests, and stops on SIGTERM with exit 0', async () => {
    const child = cli(['mock-service', '--port', '0', '--training-time', '200ms', '--api-key', 'only-this']);
    const exited = new Promise<[number | null, NodeJS.Signals | null]>((done) =>
      child.on('exit', (code, signal) => done([code, signal])),
    );
    try {
      const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
      const first = (await lines.next()).value as string;
      expect(first).toMatch(/^listening on http:\/\/127\.0\.0\.1:\d+$/);
      const url = first.slice('listening on '.length);

      const created = await call<TuneJson>(url, 'only-this', 'POST', '/tunes', {
        tune: { title: 'cli', name: 'man', image_urls: ['https://images.test/1.jpg'] },
      });
      expect(created.status).toBe(201);
      expect(Date.parse(created.body.eta) - Date.parse(created.body.created_at)).toBe(200);
      expect((await call(url, 'another', 'GET', '/tunes')).status).toBe(401);
      expect((await lines.next()).value).toMatch(/^POST \/tunes 201 /);
      expect((await lines.next()).value).toMatch(/^GET \/tunes 401 /);

      child.kill('SIGTERM');
      expect(await exited).toEqual([0, null]);
    } finally {
      child.kill('SIGKILL');
    }
  });

  test('--rate-limit holds each API key to that many requests a second: 429 with Retry-After above it', async () => {
    // One request every 10 s: the second, sent at once, is over the limit whatever the machine's load.
    const child = cli(['mock-service', '--port', '0', '--rate-limit', '0.1']);
    const exited = new Promise<number | null>((done) => child.on('exit', done));
    try {
      const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
      const url = ((await lines.next()).value as string).slice('listening on '.length);
      expect((await call(url, 'limited', 'GET', '/tunes')).status).toBe(200);
      const over = await call(url, 'limited', 'GET', '/tunes');
      expect(over.status).toBe(429);
      // The whole seconds until the key's next request passes: 10 less what passed since the first.
      expect(Number(over.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(Number(over.headers['retry-after'])).toBeLessThanOrEqual(10);
      // Per key: another account has its own.
      expect((await call(url, 'another', 'GET', '/tunes')).status).toBe(200);
      expect((await call(url, null, 'GET', '/__mock/faults')).body).toEqual({ rateLimitPerSecond: 0.1 });
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
    }
  });

  test('a taken port exits 2 naming --port, in one line', async () => {
    const taken: Server = createServer();
    await new Promise<void>((done) => taken.listen(0, '127.0.0.1', done));
    const { port } = taken.address() as AddressInfo;
    try {
      const { code, stdout, stderr } = await run(['mock-service', '--port', String(port)]);
      expect(code).toBe(2);
      expect(stdout).toBe('');
      expect(stderr).toBe(
        `tuneflow mock-service: --port: 127.0.0.1:${port} is taken (listen EADDRINUSE: address already in use 127.0.0.1:${port})\n`,
      );
    } finally {
      await new Promise<void>((done) => taken.close(() => done()));
    }
  });

  test('--help prints the usage and exits 0', async () => {
    const { code, stdout } = await run(['mock-service', '--help']);
    expect(code).toBe(0);
    expect(stdout).toContain('Usage: tuneflow mock-service');
    for (const flag of [
      '--port',
      '--host',
      '--training-time',
      '--inference-time',
      '--idempotency',
      '--api-key',
      '--rate-limit',
    ])
      expect(stdout).toContain(flag);
  });

  test('an unknown flag exits 2 naming it in one line, pointing at --help', async () => {
    const { code, stdout, stderr } = await run(['mock-service', '--colour', 'red']);
    expect(code).toBe(2);
    expect(stdout).toBe('');
    expect(stderr).toBe("tuneflow mock-service: Unknown option '--colour' (see tuneflow mock-service --help)\n");
  });

  test.each([
    [['--training-time', 'soon'], '--training-time'],
    [['--inference-time=-5s'], '--inference-time'],
    [['--port', 'eighty'], '--port'],
    [['--idempotency', 'maybe'], '--idempotency'],
    [['--rate-limit', '0'], '--rate-limit'],
    [['--rate-limit', 'fast'], '--rate-limit'],
  ])('a bad value %j exits 2 naming %s and its rule', async (args, flag) => {
    const { code, stderr } = await run(['mock-service', ...args]);
    expect(code).toBe(2);
    expect(stderr).toContain(`${flag}: must be`);
  });
});

describe('tuneflow', () => {
  test('--help lists the commands and exits 0; no command lists them on stderr and exits 2', async () => {
    const help = await run(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('mock-service');
    const none = await run([]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('mock-service');
  });

  test('an unknown command exits 2 naming it', async () => {
    const { code, stderr } = await run(['frobnicate']);
    expect(code).toBe(2);
    expect(stderr).toContain("unknown command 'frobnicate'");
  });
});
