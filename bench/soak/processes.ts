/**
 * The soak run's processes: `tuneflow worker` and `tuneflow callbacks` as child processes (the built bin when the
 * build is fresh, else the sources with tsx: no build step needed), a TCP proxy that can cut the receiver's Temporal connection, and the workers' RSS and CPU read
 * from /proc.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { createInterface } from 'node:readline';

const ROOT = path.resolve(__dirname, '../..');

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(full) : fs.statSync(full).mtimeMs);
  }
  return newest;
}

/**
 * How the `tuneflow` commands are run: the built bin (`bin/tuneflow.js`, with its prebuilt workflow bundle), as users
 * run it, when the build is newer than every source file; otherwise the sources with tsx, which bundles the workflows
 * at each worker's start (seconds of CPU, and a few hundred MiB of RSS that the bundler leaves behind).
 */
export function tuneflowCommand(): { args: string[]; built: boolean } {
  const bundle = path.join(ROOT, 'lib', 'workflow-bundle.js');
  const cli = path.join(ROOT, 'lib', 'cli', 'index.js');
  const built =
    fs.existsSync(bundle) &&
    fs.existsSync(cli) &&
    Math.min(fs.statSync(bundle).mtimeMs, fs.statSync(cli).mtimeMs) > newestMtime(path.join(ROOT, 'src'));
  return built
    ? { args: [path.join(ROOT, 'bin', 'tuneflow.js')], built }
    : { args: ['--import', 'tsx', path.join(ROOT, 'src', 'cli', 'index.ts')], built };
}

/** A child process of the run (a `tuneflow` command, a floor worker), its output appended to a log file. */
export interface TuneflowProcess {
  readonly name: string;
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
}

/**
 * Starts `tuneflow <command>` (see tuneflowCommand) and resolves once a line of its output contains `ready`.
 *
 * @example
 * const worker = await startTuneflow('worker-1', ['worker'], env, 'tuneflow worker started', logFile);
 */
export function startTuneflow(
  name: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  ready: string,
  logFile: string,
  nodeFlags: string[] = [],
): Promise<TuneflowProcess> {
  return startNode(name, [...nodeFlags, ...tuneflowCommand().args, ...args], env, ready, logFile);
}

/**
 * Starts `node <args>` and resolves once a line of its output contains `ready`; with `ipc`, a message channel to it
 * is open (the floor's workers ask the harness through it).
 *
 * @example
 * const worker = await startNode('floor-1', [script], env, 'floor worker started', logFile, { ipc: true });
 */
export async function startNode(
  name: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  ready: string,
  logFile: string,
  { ipc = false } = {},
): Promise<TuneflowProcess> {
  const log = fs.createWriteStream(logFile, { flags: 'a' });
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    stdio: ipc ? ['ignore', 'pipe', 'pipe', 'ipc'] : ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  void exited.then(() => log.end());
  let tail = '';
  await new Promise<void>((resolve, reject) => {
    for (const stream of [child.stdout!, child.stderr!])
      createInterface({ input: stream }).on('line', (line) => {
        log.write(`${line}\n`);
        tail = `${tail}${line}\n`.slice(-2000);
        if (line.includes(ready)) resolve();
      });
    void exited.then(() =>
      reject(new Error(`${name} exited (${child.exitCode ?? child.signalCode}) before it was ready:\n${tail}`)),
    );
  });
  return { name, child, exited };
}

/** Stops a process with `signal` and waits until it is gone. */
export async function stopProcess(process: TuneflowProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (process.child.exitCode === null && process.child.signalCode === null) process.child.kill(signal);
  await process.exited;
}

/**
 * Ends a phase: runs its `cleanups` in reverse (the last started stops first; one that fails does not stop the rest),
 * then removes its folder of logs, or keeps it (and says where) when the phase broke an invariant or `keep` is set.
 *
 * @example
 * await endPhase(cleanups, dir, violations.length > 0 || options.keep, log);
 */
export async function endPhase(
  cleanups: Array<() => Promise<unknown> | unknown>,
  dir: string,
  keepLogs: boolean,
  log: (line: string) => void,
): Promise<void> {
  for (const cleanup of cleanups.reverse()) await Promise.resolve(cleanup()).catch(() => undefined);
  if (keepLogs) log(`logs kept in ${dir}`);
  else fs.rmSync(dir, { recursive: true, force: true });
}

/** Stops a worker with SIGTERM, so a CPU profile is written; SIGKILL if it hangs. */
export async function stopGracefully(process: TuneflowProcess): Promise<void> {
  const timer = setTimeout(() => process.child.kill('SIGKILL'), 15_000);
  await stopProcess(process, 'SIGTERM');
  clearTimeout(timer);
}

/** Node flags of every worker process (tuneflow's and the floor's alike): a CPU profile, a heap limit. */
export function workerNodeFlags(options: { cpuProfDir?: string; workerHeapMiB?: number; traceGc?: boolean }): string[] {
  const flags = options.cpuProfDir ? ['--cpu-prof', '--cpu-prof-dir', path.resolve(options.cpuProfDir)] : [];
  if (options.workerHeapMiB) flags.push(`--max-old-space-size=${options.workerHeapMiB}`);
  if (options.traceGc) flags.push('--trace-gc');
  return flags;
}

/**
 * Resident memory and CPU time (user + system) of a process, and the CPU time of its main thread alone (a worker's
 * activities run there; its workflow threads, the core's threads and V8's helpers make the rest), from /proc;
 * undefined once it is gone.
 */
export function usageOf(
  pid: number | undefined,
): { rssBytes: number; cpuMs: number; mainThreadCpuMs: number } | undefined {
  if (pid === undefined) return undefined;
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const rss = /VmRSS:\s+(\d+) kB/.exec(status);
    return {
      rssBytes: rss ? Number(rss[1]) * 1024 : 0,
      cpuMs: cpuMsOf(`/proc/${pid}/stat`),
      // A process's main thread is the task whose id is the process's.
      mainThreadCpuMs: cpuMsOf(`/proc/${pid}/task/${pid}/stat`),
    };
  } catch {
    return undefined;
  }
}

/** utime + stime of a /proc stat file, in milliseconds (USER_HZ is 100). */
function cpuMsOf(statPath: string): number {
  // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
  const stat = fs.readFileSync(statPath, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

/**
 * A TCP proxy to `target` that can be cut: every open connection is destroyed and new ones are refused until it is
 * restored. Stands between the callback receiver and Temporal.
 */
export class CuttableProxy {
  private readonly sockets = new Set<net.Socket>();
  private server: net.Server | undefined;
  private cut = false;
  port = 0;

  constructor(private readonly target: { host: string; port: number }) {}

  async listen(): Promise<void> {
    this.server = net.createServer((client) => {
      if (this.cut) return void client.destroy();
      const upstream = net.connect(this.target.port, this.target.host);
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
        socket.on('error', () => undefined);
      }
      client.pipe(upstream);
      upstream.pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as net.AddressInfo).port;
  }

  /** Destroys every connection and refuses new ones. */
  sever(): void {
    this.cut = true;
    for (const socket of this.sockets) socket.destroy();
  }

  restore(): void {
    this.cut = false;
  }

  async close(): Promise<void> {
    this.sever();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
