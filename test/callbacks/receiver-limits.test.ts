/**
 * The receiver against a crowd (issue 30): a flood of stalled bodies and a flood of idle connections, each against a
 * receiver in a process of its own (test/callbacks/receiver-process.ts), over real sockets on loopback. During each
 * flood a genuine signed callback is answered 200; the receiver's memory (its RSS, from /proc) stays near where it
 * started, during the flood and after it. The times and sizes measured are printed; the assertions are bounds.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { request } from 'undici';
import { CallbackSigner } from '../../src/callbacks/signing';

jest.setTimeout(120_000);

const ROOT = path.resolve(__dirname, '../..');
const SECRET = 'receiver-limits-test-secret-0123';
const signer = new CallbackSigner({ baseUrl: 'http://127.0.0.1', secret: SECRET });

interface Receiver {
  child: ChildProcess;
  url: string;
  port: number;
}

const running: Receiver[] = [];
afterEach(async () => {
  for (const r of running.splice(0)) {
    r.child.kill('SIGKILL');
    await new Promise((resolve) => r.child.once('exit', resolve));
  }
});

/** The receiver process, under `ulimit -n fds`, with `limits`. */
async function startReceiver(fds: number, limits: object = {}): Promise<Receiver> {
  const command = `ulimit -n ${fds}; exec node --import tsx test/callbacks/receiver-process.ts`;
  const child = spawn('bash', ['-c', command], {
    cwd: ROOT,
    env: { ...process.env, TUNEFLOW_CALLBACK_SECRET: SECRET, TUNEFLOW_TEST_LIMITS: JSON.stringify(limits) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`the receiver exited ${code}`)));
  });
  const receiver = { child, url, port: Number(new URL(url).port) };
  running.push(receiver);
  return receiver;
}

function rssMiB(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) / 1024;
}

/** A signed callback for a run, as the service sends it: its answer's status and how long it took. */
async function genuine(receiver: Receiver, n: number): Promise<{ status: number; ms: number }> {
  const url = new URL(signer.url('tune', { workflowId: `job-${n}`, runId: `run-${n}` }));
  const started = performance.now();
  const { statusCode, body } = await request(`${receiver.url}${url.pathname}${url.search}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', connection: 'close' },
    body: JSON.stringify({ id: n + 1, trained_at: '2026-11-26T00:00:00Z' }),
    headersTimeout: 10_000,
  });
  await body.dump();
  return { status: statusCode, ms: Math.round(performance.now() - started) };
}

function connect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Opens `count` connections, `batch` at a time; each socket's errors (a refusal, a close) are swallowed. */
async function crowd(port: number, count: number, onOpen: (socket: net.Socket) => void): Promise<net.Socket[]> {
  const sockets: net.Socket[] = [];
  for (let at = 0; at < count; at += 50) {
    const opened = await Promise.all(
      Array.from({ length: Math.min(50, count - at) }, () =>
        connect(port).then(
          (socket) => {
            socket.on('error', () => undefined);
            onOpen(socket);
            return socket;
          },
          () => undefined,
        ),
      ),
    );
    for (const socket of opened) if (socket) sockets.push(socket);
  }
  return sockets;
}

const settle = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test('600 stalled 511 KiB bodies: a genuine callback is answered 200, and the RSS stays within 64 MiB', async () => {
  const receiver = await startReceiver(4096);
  expect((await genuine(receiver, 0)).status).toBe(200);
  await settle(500);
  const before = rssMiB(receiver.child.pid!);

  const url = new URL(signer.url('pack-prompts', { workflowId: 'job-x', runId: 'run-x' }));
  const head =
    `POST ${url.pathname}${url.search} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n` +
    `content-length: ${512 * 1024}\r\n\r\n`;
  const body = Buffer.alloc(511 * 1024, 0x20);
  const sockets = await crowd(receiver.port, 600, (socket) => {
    socket.write(head);
    socket.write(body);
  });
  await settle(2_000);
  const during = rssMiB(receiver.child.pid!);
  const answer = await genuine(receiver, 1);
  for (const socket of sockets) socket.destroy();
  await settle(3_000);
  const after = rssMiB(receiver.child.pid!);
  console.info(
    `stalled-body flood: ${sockets.length} connections; receiver RSS ${before.toFixed(1)} MiB before, ` +
      `${during.toFixed(1)} during, ${after.toFixed(1)} after; a genuine callback: ${answer.status} in ${answer.ms} ms`,
  );
  expect(answer.status).toBe(200);
  expect(during - before).toBeLessThan(64);
  expect(after - before).toBeLessThan(64);
});

test('1,100 idle connections under 1,024 file descriptors: a genuine callback is answered 200', async () => {
  const receiver = await startReceiver(1024);
  expect((await genuine(receiver, 0)).status).toBe(200);
  await settle(500);
  const before = rssMiB(receiver.child.pid!);
  // Idle: connected, nothing sent; and keep-alive health checks, answered and closed.
  const idle = await crowd(receiver.port, 1_100, () => undefined);
  const health = await crowd(receiver.port, 100, (socket) =>
    socket.write('GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: keep-alive\r\n\r\n'),
  );
  await settle(500);
  const answer = await genuine(receiver, 1);
  const during = rssMiB(receiver.child.pid!);
  const open = [...idle, ...health].filter((s) => !s.destroyed && s.readyState === 'open').length;
  for (const socket of [...idle, ...health]) socket.destroy();
  await settle(2_000);
  const after = rssMiB(receiver.child.pid!);
  console.info(
    `idle-connection flood: ${idle.length} idle and ${health.length} health-check connections opened, ${open} still ` +
      `open; receiver RSS ${before.toFixed(1)} MiB before, ${during.toFixed(1)} during, ${after.toFixed(1)} after; ` +
      `a genuine callback: ${answer.status} in ${answer.ms} ms`,
  );
  expect(answer.status).toBe(200);
  expect(during - before).toBeLessThan(64);
  expect(after - before).toBeLessThan(64);
});

/** A request's head and `sent` bytes of its body on a socket of its own; `answered` is the status line, if any. */
async function stalled(port: number, target: string, declared: number, sent: number) {
  const socket = await connect(port);
  socket.on('error', () => undefined);
  let text = '';
  socket.on('data', (chunk: Buffer) => void (text += chunk.toString('latin1')));
  socket.write(`POST ${target} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: ${declared}\r\n\r\n`);
  socket.write(Buffer.alloc(sent, 0x20));
  return { socket, answered: () => text.split('\r\n')[0] };
}

/** Waits until `count` of `requests` are answered 503, or `ms` pass; the status lines then. */
async function untilRefused(requests: Array<{ answered: () => string }>, count: number, ms = 10_000) {
  const lines = () => requests.map((request) => request.answered());
  const refused = () => lines().filter((line) => line.startsWith('HTTP/1.1 503')).length;
  for (const deadline = Date.now() + ms; refused() < count && Date.now() < deadline; ) await settle(50);
  return lines();
}

const stalledTarget = (workflowId: string) => {
  const url = new URL(signer.url('pack-prompts', { workflowId, runId: `run-of-${workflowId}` }));
  return `${url.pathname}${url.search}`;
};

test("one leaked URL's stalled bodies hold its run's share of the bytes, not all: another run's callback is read", async () => {
  // 1 MiB in all; a run's share is the larger of a quarter and the largest body a route takes (512 KiB). Four bodies
  // a byte short of 256 KiB each would hold all but 4 bytes of it; the run's share holds two.
  const receiver = await startReceiver(1024, { maxBufferedBytes: 1024 * 1024 });
  const target = stalledTarget('job-leaked');
  const requests = [];
  for (let i = 0; i < 4; i++) requests.push(await stalled(receiver.port, target, 256 * 1024, 256 * 1024 - 1));
  const lines = await untilRefused(requests, 2);
  const answer = await genuine(receiver, 2);
  for (const request of requests) request.socket.destroy();
  expect(lines.filter((line) => line === 'HTTP/1.1 503 Service Unavailable')).toHaveLength(2);
  expect(lines.filter((line) => line === '')).toHaveLength(2);
  expect(answer.status).toBe(200);
});

test("stalled bodies of many runs hold no more than the receiver's bytes in all", async () => {
  // Six runs, a body a byte short of 256 KiB each: 1 MiB holds four.
  const receiver = await startReceiver(1024, { maxBufferedBytes: 1024 * 1024 });
  const requests = [];
  for (let i = 0; i < 6; i++)
    requests.push(await stalled(receiver.port, stalledTarget(`job-${i}`), 256 * 1024, 256 * 1024 - 1));
  const lines = await untilRefused(requests, 2);
  for (const request of requests) request.socket.destroy();
  expect(lines.filter((line) => line === 'HTTP/1.1 503 Service Unavailable')).toHaveLength(2);
  expect(lines.filter((line) => line === '')).toHaveLength(4);
});
