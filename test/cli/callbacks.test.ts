import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type AddressInfo, type Server } from 'node:net';
import * as path from 'node:path';
import { request } from 'undici';
import { CallbackSigner } from '../../src/callbacks/signing';

jest.setTimeout(30_000);

const ROOT = path.resolve(__dirname, '../..');
const ENTRY = "require('./src/cli/callbacks').callbacksCommand(process.argv.slice(1)).then((c) => process.exit(c))";
const SECRET = 'command-test-secret-0123456789';

/** The parent's environment without tuneflow's or Temporal's settings, plus `extra`. */
function envWith(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env))
    if (!key.startsWith('TUNEFLOW_') && !key.startsWith('TEMPORAL_')) env[key] = value;
  return { ...env, ...extra };
}

function spawnCommand(args: string[], env: NodeJS.ProcessEnv): ChildProcessWithoutNullStreams {
  return spawn(process.execPath, ['-r', 'tsx/cjs', '-e', ENTRY, '--', ...args], { cwd: ROOT, env });
}

interface Finished {
  code: number | null;
  stdout: string;
  stderr: string;
}

async function finish(child: ChildProcessWithoutNullStreams, already = { stdout: '', stderr: '' }): Promise<Finished> {
  let { stdout, stderr } = already;
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}

const run = (args: string[], env: NodeJS.ProcessEnv) => finish(spawnCommand(args, env));

/** Starts the command and resolves with its first stdout line once it is listening. */
async function startListening(
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ child: ChildProcessWithoutNullStreams; firstLine: string; output: { stdout: string; stderr: string } }> {
  const child = spawnCommand(args, env);
  const output = { stdout: '', stderr: '' };
  child.stderr.on('data', (d: Buffer) => (output.stderr += d.toString()));
  const firstLine = await new Promise<string>((resolve, reject) => {
    const onData = (d: Buffer) => {
      output.stdout += d.toString();
      const end = output.stdout.indexOf('\n');
      if (end !== -1) {
        child.stdout.off('data', onData);
        resolve(output.stdout.slice(0, end));
      }
    };
    child.stdout.on('data', onData);
    child.once('exit', (code) => reject(new Error(`exited with ${code} before listening: ${output.stderr}`)));
  });
  child.stderr.removeAllListeners('data');
  return { child, firstLine, output };
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('tuneflow callbacks: settings', () => {
  it('exits 2 naming TUNEFLOW_CALLBACK_SECRET when it is missing, before listening', async () => {
    const { code, stdout, stderr } = await run(['--port', '0'], envWith({}));
    expect(code).toBe(2);
    expect(stdout).toBe('');
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr).toMatch(/^tuneflow callbacks: TUNEFLOW_CALLBACK_SECRET: is required.*at least 16 characters\n$/);
  });

  it('exits 2 naming TUNEFLOW_CALLBACK_SECRET when it is too short, without echoing it', async () => {
    const { code, stderr } = await run(['--port', '0'], envWith({ TUNEFLOW_CALLBACK_SECRET: 'short-secret' }));
    expect(code).toBe(2);
    expect(stderr).toContain('TUNEFLOW_CALLBACK_SECRET');
    expect(stderr).not.toContain('short-secret');
  });

  it('exits 2 on an unknown flag, a flag without its value and a bad port', async () => {
    const env = envWith({ TUNEFLOW_CALLBACK_SECRET: SECRET });
    const unknown = await run(['--bogus'], env);
    expect([unknown.code, unknown.stderr]).toEqual([
      2,
      "tuneflow callbacks: Unknown option '--bogus' (see tuneflow callbacks --help)\n",
    ]);
    const missing = await run(['--port'], env);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("'--port <value>' argument missing");
    const badPort = await run(['--port', '70000'], env);
    expect([badPort.code, badPort.stderr]).toEqual([
      2,
      'tuneflow callbacks: --port: must be a port number from 0 to 65535\n',
    ]);
  });

  it('exits 2 naming a bad TUNEFLOW_CALLBACK_PORT or TUNEFLOW_CALLBACK_BASE_URL', async () => {
    const port = await run([], envWith({ TUNEFLOW_CALLBACK_SECRET: SECRET, TUNEFLOW_CALLBACK_PORT: 'http' }));
    expect([port.code, port.stderr]).toEqual([
      2,
      'tuneflow callbacks: TUNEFLOW_CALLBACK_PORT: must be a port number from 0 to 65535\n',
    ]);
    const base = await run(
      ['--port', '0'],
      envWith({ TUNEFLOW_CALLBACK_SECRET: SECRET, TUNEFLOW_CALLBACK_BASE_URL: 'hooks.example.com' }),
    );
    expect(base.code).toBe(2);
    expect(base.stderr).toMatch(/^tuneflow callbacks: TUNEFLOW_CALLBACK_BASE_URL: must be an http\(s\) URL/);
  });

  it('prints the usage with --help and exits 0', async () => {
    const { code, stdout } = await run(['--help'], envWith({}));
    expect(code).toBe(0);
    expect(stdout).toMatch(/^Usage: tuneflow callbacks \[--port N\] \[--host H\] \[--help\]/);
    expect(stdout).toContain('TUNEFLOW_CALLBACK_SECRET');
  });

  it('exits 2 naming the port setting when the port is taken', async () => {
    const taken: Server = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const { port } = taken.address() as AddressInfo;
    try {
      const res = await run(
        ['--port', String(port), '--host', '127.0.0.1'],
        envWith({ TUNEFLOW_CALLBACK_SECRET: SECRET }),
      );
      expect(res.code).toBe(2);
      expect(res.stderr).toContain(
        `--port: 127.0.0.1:${port} is taken (listen EADDRINUSE: address already in use 127.0.0.1:${port})`,
      );
      const byEnv = await run(
        ['--host', '127.0.0.1'],
        envWith({ TUNEFLOW_CALLBACK_SECRET: SECRET, TUNEFLOW_CALLBACK_PORT: String(port) }),
      );
      expect(byEnv.code).toBe(2);
      expect(byEnv.stderr).toContain(
        `TUNEFLOW_CALLBACK_PORT: 127.0.0.1:${port} is taken (listen EADDRINUSE: address already in use 127.0.0.1:${port})`,
      );
      expect(byEnv.stderr.trim().split('\n')).toHaveLength(1);
    } finally {
      await new Promise<void>((resolve) => taken.close(() => resolve()));
    }
  });
});

describe('tuneflow callbacks: running', () => {
  it('listens with Temporal out of reach, answers health and refuses a forged callback, stops on SIGTERM', async () => {
    const env = envWith({
      TUNEFLOW_CALLBACK_SECRET: SECRET,
      TEMPORAL_ADDRESS: `127.0.0.1:${await closedPort()}`,
      TEMPORAL_NAMESPACE: 'tuneflow-test',
    });
    const { child, firstLine, output } = await startListening(['--port', '0', '--host', '127.0.0.1'], env);
    const exited = finish(child, output);
    try {
      const match = /^callbacks listening on (http:\/\/127\.0\.0\.1:(\d+))$/.exec(firstLine);
      expect(match).not.toBeNull();
      const base = match![1];
      expect(Number(match![2])).toBeGreaterThan(0);

      const health = await request(`${base}/healthz`);
      expect([health.statusCode, await health.body.text()]).toEqual([200, 'ok']);

      const forged = await request(`${base}/callbacks/prompt?workflowId=job-1&sig=${'0'.repeat(64)}`, {
        method: 'POST',
        body: JSON.stringify({ id: 1, text: 't', tune_id: 2 }),
      });
      expect(forged.statusCode).toBe(403);
      await forged.body.dump();

      // A URL signed with the same secret passes the signature check (and reaches the validation step).
      const run = { workflowId: 'job-1', runId: '0190b7c1-2f7e-7c1a-9d52-5a4f3c2b1a00' };
      const signed = new URL(new CallbackSigner({ baseUrl: base, secret: SECRET }).url('prompt', run));
      const invalid = await request(`${base}${signed.pathname}${signed.search}`, { method: 'POST', body: '[]' });
      expect(invalid.statusCode).toBe(422);
      await invalid.body.dump();
    } finally {
      child.kill('SIGTERM');
    }
    const { code, stderr } = await exited;
    expect(code).toBe(0);
    const lines = stderr
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { level: string; message: string; meta: Record<string, unknown> });
    expect(lines[0]).toMatchObject({
      level: 'INFO',
      message: 'callback receiver started',
      meta: { namespace: 'tuneflow-test' },
    });
    // Refusals are counted and logged once, when the receiver closes (or each minute), never a line each.
    expect(lines).toContainEqual({
      time: expect.any(String),
      level: 'WARN',
      message: 'callbacks refused',
      meta: expect.objectContaining({ total: 2, refused: { '403 signature': 1, '422 invalid object': 1 } }),
    });
    expect(lines).toContainEqual(
      expect.objectContaining({ message: 'callback receiver stopping', meta: { signal: 'SIGTERM' } }),
    );
    expect(stderr).not.toContain(SECRET);
  });

  it('with TUNEFLOW_METRICS_ADDRESS, serves tuneflow_callbacks_total by outcome on /metrics; a taken port is exit 2', async () => {
    const metricsPort = await closedPort();
    const env = envWith({
      TUNEFLOW_CALLBACK_SECRET: SECRET,
      TUNEFLOW_METRICS_ADDRESS: `127.0.0.1:${metricsPort}`,
      TEMPORAL_ADDRESS: `127.0.0.1:${await closedPort()}`,
      TEMPORAL_NAMESPACE: 'tuneflow-test',
    });
    const { child, firstLine, output } = await startListening(['--port', '0', '--host', '127.0.0.1'], env);
    const exited = finish(child, output);
    try {
      const base = firstLine.slice('callbacks listening on '.length);
      for (const sig of ['0'.repeat(64), '1'.repeat(64)]) {
        const forged = await request(`${base}/callbacks/prompt?workflowId=job-1&sig=${sig}`, {
          method: 'POST',
          body: JSON.stringify({ id: 1, text: 't', tune_id: 2 }),
        });
        expect(forged.statusCode).toBe(403);
        await forged.body.dump();
      }
      const scraped = await (await request(`http://127.0.0.1:${metricsPort}/metrics`)).body.text();
      const refused = scraped.split('\n').filter((line) => line.startsWith('tuneflow_callbacks_total{'));
      expect(refused).toEqual([expect.stringMatching(/^tuneflow_callbacks_total\{.*outcome="refused".* 2$/)]);
      expect(refused[0]).toContain('namespace="tuneflow-test"');

      // A second receiver on the same metrics port: named, before it listens.
      const second = await run(['--port', '0', '--host', '127.0.0.1'], env);
      expect(second.code).toBe(2);
      expect(second.stderr).toContain(`TUNEFLOW_METRICS_ADDRESS: 127.0.0.1:${metricsPort} is taken`);
      expect(second.stdout).toBe('');
    } finally {
      child.kill('SIGTERM');
    }
    expect((await exited).code).toBe(0);
  });

  it('stops on SIGINT (Ctrl-C) with exit 130, taking the port from TUNEFLOW_CALLBACK_PORT', async () => {
    const port = await closedPort();
    const env = envWith({
      TUNEFLOW_CALLBACK_SECRET: SECRET,
      TUNEFLOW_CALLBACK_PORT: String(port),
      TUNEFLOW_CALLBACK_HOST: '127.0.0.1',
      TEMPORAL_ADDRESS: `127.0.0.1:${await closedPort()}`,
    });
    const { child, firstLine, output } = await startListening([], env);
    const exited = finish(child, output);
    expect(firstLine).toBe(`callbacks listening on http://127.0.0.1:${port}`);
    child.kill('SIGINT');
    expect((await exited).code).toBe(130);
  });
});
