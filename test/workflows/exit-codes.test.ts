/**
 * Every exit code the README's table names ("The command line"), each made by a real `tuneflow` process against a real
 * dev server, the mock service and `tuneflow worker` processes, with the one line (or, with `--json`, the one JSON
 * object) the table promises on stderr. The codes are read from the README's own table: a code added there without a
 * case here, or a case for a code it does not name, fails the first test.
 */
import { execFile, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { startMockService, type MockService } from '../../src/mock-service';
import { startDevServerProcess, type DevServerChild } from '../../src/temporal-server/dev-server';
import { README } from '../readme-blocks';
import { currentVerdict, devServerExecutable, devServerTest } from './environment';
import { startWorkerProcess, type WorkerProcess } from './worker-process';

jest.setTimeout(180_000);

const BIN = path.resolve(__dirname, '../../bin/tuneflow.js');

/** The codes of the README's exit-code table, in its order. */
function readmeExitCodes(): number[] {
  const text = fs.readFileSync(README, 'utf8');
  const from = text.indexOf('Exit codes, as a shell shows them');
  const section = text.slice(from, text.indexOf('\n#', from));
  return [...section.matchAll(/^(?:\| |- )`(\d+)`/gm)].map((m) => Number(m[1]));
}

let server: DevServerChild | undefined;
let mock: MockService | undefined;
/** A worker on the mock service, and one whose service URL answers nothing (a closed port). */
let worker: WorkerProcess | undefined;
let unreachableWorker: WorkerProcess | undefined;
const QUEUE = `exits-${Date.now()}`;
const UNREACHABLE_QUEUE = `${QUEUE}-unreachable`;
const NOBODY_QUEUE = `${QUEUE}-nobody`;

async function closedPort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as net.AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

beforeAll(async () => {
  if (currentVerdict().devServer.kind === 'unavailable') return;
  server = await startDevServerProcess({ executable: devServerExecutable() });
  mock = await startMockService({ port: 0, trainingTime: '1s', inferenceTime: '1s' });
  const settings = { temporalAddress: server.address, apiKey: 'exit-codes-test-key' };
  [worker, unreachableWorker] = await Promise.all([
    startWorkerProcess({ ...settings, apiUrl: mock.url, taskQueue: QUEUE }),
    startWorkerProcess({ ...settings, apiUrl: `http://127.0.0.1:${await closedPort()}`, taskQueue: UNREACHABLE_QUEUE }),
  ]);
}, 120_000);

afterAll(async () => {
  for (const w of [worker, unreachableWorker]) if (w?.child.exitCode === null) w.child.kill('SIGKILL');
  await mock?.close();
  await server?.stop();
});

interface Command {
  exited: Promise<number | null>;
  stdout(): string;
  stderr(): string;
  kill(signal: NodeJS.Signals): void;
  /** Resolves once a line of stdout or stderr matches. */
  line(pattern: RegExp): Promise<void>;
}

function tuneflow(args: string[], env: Record<string, string> = {}): Command {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, TEMPORAL_ADDRESS: server!.address, ...env },
  });
  let stdout = '';
  let stderr = '';
  const seen: string[] = [];
  const waiting: Array<{ pattern: RegExp; resolve: () => void }> = [];
  const take = (text: string) => {
    seen.push(text);
    for (const w of [...waiting])
      if (w.pattern.test(text)) {
        waiting.splice(waiting.indexOf(w), 1);
        w.resolve();
      }
  };
  child.stdout.on('data', (c: Buffer) => (stdout += c));
  child.stderr.on('data', (c: Buffer) => (stderr += c));
  createInterface({ input: child.stdout }).on('line', take);
  createInterface({ input: child.stderr }).on('line', take);
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  return {
    exited,
    stdout: () => stdout,
    stderr: () => stderr,
    kill: (signal) => child.kill(signal),
    line: (pattern) =>
      Promise.race([
        new Promise<void>((resolve) =>
          seen.some((l) => pattern.test(l)) ? resolve() : waiting.push({ pattern, resolve }),
        ),
        exited.then((code): never => {
          throw new Error(
            `tuneflow ${args.join(' ')} exited ${code} before printing ${pattern}:\n${stdout}\n${stderr}`,
          );
        }),
      ]),
  };
}

/** A job on `queue`: its training image from the mock (a flag in its name raises that flag in inspection). */
const job = (id: string, queue: string, image = 'training-1.png') => [
  ...['start', '--id', id, '--task-queue', queue, '--name', 'dog', '--branch', 'fast'],
  ...['--images', `${mock!.url}/images/${image}`, '--prompt', 'sks dog on a beach'],
];

/** The JSON object a `--json` command writes to stderr on error: its last line (`--wait` draws its progress above). */
function jsonError(command: Command): Record<string, unknown> {
  const last = command.stderr().trim().split('\n').pop()!;
  return (JSON.parse(last) as { error: Record<string, unknown> }).error;
}

/** Each code of the table, made as the table says. */
const CASES: Record<number, () => Promise<void>> = {
  0: async () => {
    const done = tuneflow([...job(`${QUEUE}-completed`, QUEUE), '--wait']);
    expect(await done.exited).toBe(0);
    expect(done.stdout()).toMatch(/^tune \d+ trained at /m);
  },
  1: async () => {
    // An image that raises a refused flag: the run fails InspectionRefused, nothing created.
    const refused = tuneflow([...job(`${QUEUE}-failed`, QUEUE, 'dog__blurry__.png'), '--inspect', 'blurry', '--wait']);
    expect(await refused.exited).toBe(1);
    expect(refused.stderr()).toMatch(/^tuneflow start: the run failed: InspectionRefused: /);
    const json = tuneflow(['status', `${QUEUE}-failed`, '--json']);
    expect(await json.exited).toBe(1);
    expect(JSON.parse(json.stdout())).toMatchObject({
      status: 'FAILED',
      failure: expect.stringMatching(/^InspectionRefused/),
    });
    const again = tuneflow([
      ...job(`${QUEUE}-failed`, QUEUE, 'dog__blurry__.png'),
      '--inspect',
      'blurry',
      '--wait',
      '--json',
    ]);
    expect(await again.exited).toBe(1);
    expect(jsonError(again)).toMatchObject({ exitCode: 1, kind: 'failed', failure: 'InspectionRefused' });
  },
  2: async () => {
    // A wrong flag: its line and where the usage is, nothing more.
    const flag = tuneflow(['start', '--bogus']);
    expect(await flag.exited).toBe(2);
    expect(flag.stderr()).toBe("tuneflow start: Unknown option '--bogus' (see tuneflow start --help)\n");
    // A namespace the server lacks: one line naming TEMPORAL_NAMESPACE, not the SDK's error.
    const namespace = tuneflow(['status', 'any'], { TEMPORAL_NAMESPACE: 'no-such-namespace' });
    expect(await namespace.exited).toBe(2);
    expect(namespace.stderr()).toMatch(
      /^tuneflow status: TEMPORAL_NAMESPACE: Temporal at \S+ has no namespace no-such-namespace: [^\n]+\n$/,
    );
    const json = tuneflow(['status', 'any', '--json'], { TEMPORAL_NAMESPACE: 'no-such-namespace' });
    expect(await json.exited).toBe(2);
    expect(jsonError(json)).toMatchObject({ exitCode: 2, kind: 'setting', setting: 'TEMPORAL_NAMESPACE' });
  },
  3: async () => {
    const temporal = tuneflow(['status', 'any'], { TEMPORAL_ADDRESS: `127.0.0.1:${await closedPort()}` });
    expect(await temporal.exited).toBe(3);
    expect(temporal.stderr()).toMatch(/^tuneflow status: cannot reach Temporal at [^\n]+TEMPORAL_ADDRESS[^\n]+\n$/);
    // The service unreachable from the worker: the run retries, and start stops following after the stated limit.
    const id = `${QUEUE}-unreachable`;
    const following = tuneflow([...job(id, UNREACHABLE_QUEUE), '--wait', '--unreachable-limit', '3s', '--json']);
    expect(await following.exited).toBe(3);
    expect(jsonError(following)).toMatchObject({
      exitCode: 3,
      kind: 'unreachable',
      setting: 'TUNEFLOW_API_URL',
      message: expect.stringMatching(
        new RegExp(`^createTune has not reached the service for \\d+s: .*Stopped following ${id}: the run goes on`),
      ),
    });
    const status = tuneflow(['status', id]);
    expect(await status.exited).toBe(0);
    expect(status.stdout()).toMatch(/^now: +creating-tune: createTune failed \(attempt 2 next/m);
  },
  4: async () => {
    const status = tuneflow(['status', 'no-such-run']);
    expect(await status.exited).toBe(4);
    expect(status.stderr().trim().split('\n')).toHaveLength(1);
    const json = tuneflow(['status', 'no-such-run', '--json']);
    expect(await json.exited).toBe(4);
    expect(jsonError(json)).toMatchObject({ command: 'status', exitCode: 4, kind: 'not-found' });
  },
  5: async () => {
    // A run retrying an unreachable service, cancelled while followed.
    const id = `${QUEUE}-cancelled`;
    const following = tuneflow([...job(id, UNREACHABLE_QUEUE), '--wait']);
    await following.line(/createTune failed \(attempt 2 next/);
    expect(await tuneflow(['cancel', id]).exited).toBe(0);
    expect(await following.exited).toBe(5);
    expect(following.stderr()).toBe('tuneflow start: the run was cancelled\n');
  },
  130: async () => {
    const following = tuneflow([...job(`${QUEUE}-interrupted`, NOBODY_QUEUE), '--wait']);
    await following.line(/no worker polls task queue/);
    following.kill('SIGINT');
    expect(await following.exited).toBe(130);
    expect(following.stderr()).toMatch(/^tuneflow start: stopped following \S+; the run goes on/);
  },
  141: async () => {
    // Its output closed: `| head -1` reads the first line and goes; the next line finds the pipe closed.
    const command = [process.execPath, BIN, ...job(`${QUEUE}-piped`, NOBODY_QUEUE), '--wait']
      .map((arg) => `'${arg}'`)
      .join(' ');
    const { stdout, stderr } = await promisify(execFile)(
      'bash',
      ['-c', `${command} | head -1; echo "exit \${PIPESTATUS[0]}" >&2`],
      { env: { PATH: process.env.PATH, HOME: process.env.HOME, TEMPORAL_ADDRESS: server!.address } },
    );
    expect(stdout).toBe(`started ${QUEUE}-piped\n`);
    expect(stderr).toMatch(/^exit 141$/m);
    expect(stderr).not.toMatch(/EPIPE|^\s+at /m);
  },
  143: async () => {
    const following = tuneflow([...job(`${QUEUE}-terminated`, NOBODY_QUEUE), '--wait']);
    await following.line(/no worker polls task queue/);
    following.kill('SIGTERM');
    expect(await following.exited).toBe(143);
  },
};

test("the README's table names the codes made here, and no other", () => {
  expect(readmeExitCodes()).toEqual(Object.keys(CASES).map(Number));
});

for (const code of readmeExitCodes())
  devServerTest(`exit ${code}, as the README's table says`, async () => {
    await CASES[code]();
    // A worker drains after SIGTERM (0), last: the table's other 0.
    if (code === Math.max(...readmeExitCodes())) {
      for (const w of [worker!, unreachableWorker!]) w.child.kill('SIGTERM');
      expect(await Promise.all([worker!.exited, unreachableWorker!.exited])).toEqual([0, 0]);
    }
  });
