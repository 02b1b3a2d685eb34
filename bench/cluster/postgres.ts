/**
 * A throwaway PostgreSQL for the cluster tier: this machine's PostgreSQL binaries (the Debian package's
 * /usr/lib/postgresql/<major>/bin, or PATH, or TUNEFLOW_POSTGRES_BIN), a data directory made by initdb in a scratch
 * folder, listening on loopback only on a port of its own, with password authentication for the one role. PostgreSQL
 * refuses to run as root: a root caller runs it as the package's `postgres` user (else `nobody`).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../../src/temporal-server/dev-server';

/** Set to the folder holding initdb and postgres to use those. */
export const POSTGRES_BIN_VARIABLE = 'TUNEFLOW_POSTGRES_BIN';

export interface Postgres {
  readonly host: string;
  readonly port: number;
  readonly user: string;
  readonly password: string;
  readonly version: string;
  /** The postmaster's pid (its backends are its children). */
  readonly pid: number;
  /** CPU of the postmaster and every backend that has exited, in ms. */
  cpuMs(): number;
  stop(): Promise<void>;
}

/** The folder with initdb and postgres: the setting, the newest Debian package, or PATH. */
export function findPostgresBin(env: NodeJS.ProcessEnv = process.env, debian = '/usr/lib/postgresql'): string {
  const executable = (dir: string) =>
    fs.existsSync(path.join(dir, 'initdb')) && fs.existsSync(path.join(dir, 'postgres'));
  const given = env[POSTGRES_BIN_VARIABLE];
  if (given) {
    if (!executable(given)) throw new Error(`${POSTGRES_BIN_VARIABLE}=${given} holds no initdb and postgres`);
    return given;
  }
  const majors = fs.existsSync(debian)
    ? fs
        .readdirSync(debian)
        .filter((v) => executable(path.join(debian, v, 'bin')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (majors.length) return path.join(debian, majors[0], 'bin');
  for (const dir of (env.PATH ?? '').split(path.delimiter)) if (dir && executable(dir)) return dir;
  throw new Error(
    [
      'PostgreSQL (initdb and postgres) is not on this machine. Ways out:',
      '  1. install it: `apt-get install postgresql` on Debian or Ubuntu (any major from 12; the tier was run on 15),',
      '     `brew install postgresql@15` on macOS; only the binaries are used, no system service',
      `  2. ${POSTGRES_BIN_VARIABLE}=/path/to/bin   a folder holding initdb and postgres`,
    ].join('\n'),
  );
}

/** Who runs PostgreSQL: this process's user, or for root the `postgres` user (else `nobody`). */
function runAs(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const users = fs
    .readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .map((line) => line.split(':'));
  const user = users.find(([name]) => name === 'postgres') ?? users.find(([name]) => name === 'nobody');
  if (!user) throw new Error('PostgreSQL refuses to run as root, and neither a postgres nor a nobody user exists');
  return { uid: Number(user[2]), gid: Number(user[3]) };
}

function cpuOf(pid: number): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime, stime, and the reaped children's cutime, cstime: the backends that have exited.
    return ((Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * 1000) / 100;
  } catch {
    return 0;
  }
}

/**
 * initdb in `dir` (made, and owned by whoever runs PostgreSQL) and a postmaster on a free loopback port, ready for
 * connections.
 *
 * @example
 * const pg = await startPostgres({ dir: '/tmp/x/postgres' });
 * await pg.stop();
 */
export async function startPostgres(options: { dir: string; user?: string; password?: string }): Promise<Postgres> {
  const bin = findPostgresBin();
  const user = options.user ?? 'temporal';
  const password = options.password ?? 'temporal';
  const owner = runAs();
  const data = path.join(options.dir, 'data');
  // Whoever runs PostgreSQL owns the folder (its parents must let that user through).
  fs.mkdirSync(options.dir, { recursive: true, mode: 0o755 });
  if (owner) fs.chownSync(options.dir, owner.uid, owner.gid);
  const passwordFile = path.join(options.dir, 'password');
  fs.writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 });
  if (owner) fs.chownSync(passwordFile, owner.uid, owner.gid);
  const ids = owner ?? {};
  await promisify(execFile)(
    path.join(bin, 'initdb'),
    ['-D', data, '-U', user, `--pwfile=${passwordFile}`, '--auth=scram-sha-256', '-E', 'UTF8', '--locale=C.UTF-8'],
    { ...ids, cwd: options.dir },
  ).catch((err: { stderr?: string; message: string }) => {
    throw new Error(`initdb failed: ${err.stderr || err.message}`);
  });
  fs.rmSync(passwordFile);

  const port = await freePort();
  const args = ['-D', data, '-p', String(port), '-k', options.dir, '-c', 'listen_addresses=127.0.0.1'];
  // Temporal's services each keep a pool per store (20 + 2 connections in the template): four services need ~90.
  args.push('-c', 'max_connections=200');
  const child: ChildProcess = spawn(path.join(bin, 'postgres'), args, {
    ...ids,
    cwd: options.dir,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const log = fs.createWriteStream(path.join(options.dir, 'postgres.log'));
  child.stderr!.pipe(log);
  let tail = '';
  child.stderr!.on('data', (chunk: Buffer) => (tail = (tail + chunk.toString()).slice(-3000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const deadline = Date.now() + 60_000;
  while (!tail.includes('ready to accept connections')) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`PostgreSQL did not start (see ${options.dir}/postgres.log):\n${tail}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const version = (await promisify(execFile)(path.join(bin, 'postgres'), ['--version'])).stdout.trim();
  const pid = child.pid!;
  let lastCpu = 0;
  return {
    host: '127.0.0.1',
    port,
    user,
    password,
    version,
    pid,
    cpuMs: () => (lastCpu = Math.max(lastCpu, cpuOf(pid))),
    async stop() {
      lastCpu = Math.max(lastCpu, cpuOf(pid));
      // Fast shutdown: disconnects the clients, then exits.
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
      await exited;
    },
  };
}
