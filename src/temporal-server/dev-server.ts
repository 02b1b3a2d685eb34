/**
 * A dev server as a child process of its own, for what the SDK's ephemeral server cannot do: stop the server while
 * its clients and workers stay up, start it again on the same port with the same state (`--db-filename`), keep it
 * up after its starter is done (`demo --keep`), and keep its banner out of our output (the SDK's child writes
 * to our stdout).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as net from 'node:net';
import { Connection } from '@temporalio/client';
import { SEARCH_ATTRIBUTES } from '../contract/search-attributes';

/**
 * The dynamic config a dev server needs for tuneflow's fair share: fairness on (the server dispatches each tenant's
 * activity tasks in proportion to its weight, and holds per-tenant rate limits), and one partition per task queue, where
 * fairness and the queue's rate limit are exact (a queue's limit is split between its partitions otherwise). A
 * self-hosted cluster needs the first (README "Operating"); the second is for one-process servers and tests.
 */
export const FAIRNESS_DYNAMIC_CONFIG: readonly string[] = [
  'matching.enableFairness=true',
  'matching.numTaskqueueReadPartitions=1',
  'matching.numTaskqueueWritePartitions=1',
];

export interface DevServerProcessOptions {
  /** The Temporal CLI. */
  executable: string;
  /** @default a free port */
  port?: number;
  /** Keep the state in this SQLite file, so a restart finds it. @default in memory */
  dbFilename?: string;
  /** @default 'default' */
  namespace?: string;
  /** More flags for `temporal server start-dev`, e.g. `['--dynamic-config-value', 'frontend.rps=10000']`. */
  extraArgs?: string[];
  /** Serve the Web UI on this port. @default no UI */
  uiPort?: number;
  /**
   * Register tuneflow's search attributes in every namespace it creates, so runs can be found by phase, tune and cost.
   * @default true
   */
  searchAttributes?: boolean;
  /**
   * Fairness and one partition per task queue (FAIRNESS_DYNAMIC_CONFIG).
   * @default true
   */
  fairness?: boolean;
}

export interface DevServerProcess {
  readonly address: string;
  readonly port: number;
  readonly pid: number;
  /** The Web UI's base URL, when it serves one. */
  readonly ui?: string;
  /** Stops the server (SIGTERM, or SIGKILL for a crash) and waits until it is gone. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/** A dev server this process started. */
export interface DevServerChild extends DevServerProcess {
  /** Resolves when the server exits, on its own or stopped. */
  readonly exited: Promise<void>;
}

/** A free port on loopback, for a server that must come back on the same one. */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * Starts a server on `count` ports chosen free, and on fresh ones when its start fails with a bind refused: a port
 * chosen free can be taken before the server binds it (an outgoing connection's ephemeral port, another test's server).
 * Up to three starts; `start` cleans up after a failure of its own.
 */
export async function onFreePorts<T>(count: number, start: (ports: number[]) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const ports: number[] = [];
    for (let i = 0; i < count; i++) ports.push(await freePort());
    try {
      return await start(ports);
    } catch (err) {
      if (attempt >= 3 || !/address already in use/.test(String((err as Error)?.message))) throw err;
    }
  }
}

/**
 * Starts `temporal server start-dev` and waits until it answers on gRPC.
 *
 * @example
 * const server = await startDevServerProcess({ executable, port, dbFilename: '/tmp/x/temporal.db' });
 * await server.stop();
 * const again = await startDevServerProcess({ executable, port, dbFilename: '/tmp/x/temporal.db' });
 */
export async function startDevServerProcess(options: DevServerProcessOptions): Promise<DevServerChild> {
  if (options.port !== undefined) return startOnPort(options, options.port);
  return onFreePorts(1, ([port]) => startOnPort(options, port!));
}

async function startOnPort(options: DevServerProcessOptions, port: number): Promise<DevServerChild> {
  const args = ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(port)];
  args.push(...(options.uiPort === undefined ? ['--headless'] : ['--ui-port', String(options.uiPort)]));
  args.push('--namespace', options.namespace ?? 'default', '--log-level', 'error');
  if (options.dbFilename) args.push('--db-filename', options.dbFilename);
  if (options.searchAttributes !== false)
    args.push(...SEARCH_ATTRIBUTES.flatMap(({ name, type }) => ['--search-attribute', `${name}=${type}`]));
  if (options.fairness !== false)
    args.push(...FAIRNESS_DYNAMIC_CONFIG.flatMap((setting) => ['--dynamic-config-value', setting]));
  args.push(...(options.extraArgs ?? []));
  const child = spawn(options.executable, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const address = `127.0.0.1:${port}`;
  try {
    await untilServing(address, child, () => stderr);
  } catch (err) {
    child.kill('SIGKILL');
    await exited;
    throw err;
  }
  return {
    address,
    port,
    pid: child.pid!,
    ui: options.uiPort === undefined ? undefined : `http://127.0.0.1:${options.uiPort}`,
    exited,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}

/** True when nothing listens on `port` of `host` yet. */
export async function portIsFree(port: number, host = '127.0.0.1'): Promise<boolean> {
  const server = net.createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, host, () => server.close(() => resolve(true)));
  });
}

/** Waits for the server's gRPC to answer, or fails with what it printed when it exits first or takes over 60 s. */
async function untilServing(address: string, child: ChildProcess, stderr: () => string): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`the dev server exited (${child.exitCode ?? child.signalCode}) before serving: ${stderr()}`);
    try {
      const connection = await Connection.connect({ address, connectTimeout: '1 second' });
      try {
        await connection.workflowService.getSystemInfo({});
        return;
      } finally {
        await connection.close();
      }
    } catch {
      if (Date.now() > deadline) throw new Error(`the dev server at ${address} did not serve within 60 s: ${stderr()}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}
