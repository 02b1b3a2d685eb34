/**
 * Prometheus's own rule checker, `promtool`, provisioned as tuneflow provisions Temporal (src/temporal-server/install.ts):
 * from this machine's package registries with their ordinary clients, cached outside the repository in
 * `$XDG_CACHE_HOME/tuneflow/promtool` (else `~/.cache/tuneflow/promtool`), each install in a fresh folder renamed into
 * place only once complete. First Debian's package `prometheus`, promtool taken out of it (seconds); else built from
 * Prometheus's Go module at the version of docker-compose.yml's image (minutes). `TUNEFLOW_PROMTOOL` names one of your
 * own instead. There is no skip: a promtool that cannot be had fails the tests that need it, naming every reason.
 */
import { execFile } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { cacheDir, installFirst, isExecutable, type CacheInstaller } from '../../src/temporal-server/install';

export const PINNED = {
  /** Bookworm's; a point release may replace it, and the Go module is then built instead. */
  debian: { version: '2.42.0', apt: 'prometheus=2.42.0+ds-5+deb12u1' },
  /** Prometheus 3.5.0, the image in docker-compose.yml (the module's v0.305.0); its go.mod's one replace kept. */
  go: {
    version: '3.5.0',
    module: 'github.com/prometheus/prometheus@v0.305.0',
    replace: 'github.com/fsnotify/fsnotify@v1.8.0=github.com/fsnotify/fsnotify@v1.7.0',
  },
} as const;

export const PROMTOOL_VARIABLE = 'TUNEFLOW_PROMTOOL';

/** Where promtool installs are cached, beside Temporal's. */
export function promtoolCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return path.join(path.dirname(cacheDir(env)), 'promtool');
}

const INSTALLERS: CacheInstaller[] = [
  {
    folder: `debian-${PINNED.debian.version}`,
    executable: 'promtool',
    tools: ['apt-get', 'dpkg-deb', 'tar'],
    describe: `promtool ${PINNED.debian.version} from Debian's package (${PINNED.debian.apt}, 19 MB): seconds`,
    async install(folder, env) {
      const download = () => run('apt-get', ['download', '-q', PINNED.debian.apt], { env, cwd: folder });
      // A machine whose package lists were never read knows no package: read them once, as root only.
      await download().catch(async (err: Error) => {
        if (process.getuid?.() !== 0) throw err;
        await run('apt-get', ['update', '-q'], { env, cwd: folder });
        await download();
      });
      const [deb] = (await fs.readdir(folder)).filter((f) => f.endsWith('.deb'));
      await run('sh', ['-c', `dpkg-deb --fsys-tarfile "$1" | tar -x -f - ./usr/bin/promtool`, 'sh', deb], {
        env,
        cwd: folder,
      });
      await fs.rename(path.join(folder, 'usr', 'bin', 'promtool'), path.join(folder, 'promtool'));
      await fs.rm(path.join(folder, 'usr'), { recursive: true, force: true });
      await fs.rm(path.join(folder, deb));
    },
  },
  {
    folder: `go-${PINNED.go.version}`,
    executable: 'promtool',
    tools: ['go'],
    describe: `promtool ${PINNED.go.version} built from Prometheus's Go module (${PINNED.go.module}): minutes on two cores`,
    async install(folder, env) {
      // `go install module@version` refuses a go.mod with replace directives: a module of our own requires it instead.
      const work = path.join(folder, 'module');
      await fs.mkdir(work);
      const goEnv = { ...env, CGO_ENABLED: '0', GOTOOLCHAIN: 'local', GOFLAGS: '-mod=mod' };
      const go = (...args: string[]) => run('go', args, { env: goEnv, cwd: work });
      await go('mod', 'init', 'tuneflow.local/promtool');
      await go('mod', 'edit', `-replace=${PINNED.go.replace}`);
      await go('get', `${PINNED.go.module.replace('@', '/cmd/promtool@')}`);
      await go('build', '-o', path.join(folder, 'promtool'), 'github.com/prometheus/prometheus/cmd/promtool');
      await fs.rm(work, { recursive: true, force: true });
    },
  },
];

export interface Promtool {
  executable: string;
  /** Where it came from, for the test's log. */
  source: string;
}

/**
 * promtool: `TUNEFLOW_PROMTOOL`, else a cached install, else installed now by the first way whose tools are on PATH;
 * says on `log` what it installs and how long that took. Throws naming every way tried and why it failed.
 */
export async function provisionPromtool(
  env: NodeJS.ProcessEnv = process.env,
  log: (line: string) => void = () => {},
): Promise<Promtool> {
  const own = env[PROMTOOL_VARIABLE];
  if (own) {
    if (!(await isExecutable(own))) throw new Error(`${PROMTOOL_VARIABLE}=${own} is not an executable file`);
    return { executable: own, source: `${PROMTOOL_VARIABLE}=${own}` };
  }
  for (const installer of INSTALLERS) {
    const executable = path.join(promtoolCacheDir(env), installer.folder, installer.executable);
    if (await isExecutable(executable)) return { executable, source: `cached: ${installer.describe.split(':')[0]}` };
  }
  const { executable, reasons, installed } = await installFirst(INSTALLERS, promtoolCacheDir(env), env, log);
  if (executable && installed)
    return { executable, source: `${installed.describe}, installed in ${installed.seconds} s` };
  throw new Error(
    `promtool could not be had (set ${PROMTOOL_VARIABLE} to one of your own):\n- ${reasons.join('\n- ')}`,
  );
}

export interface RunResult {
  code: number;
  output: string;
}

/** Runs promtool; resolves with its exit code and everything it printed, whatever the code. */
export function promtool(executable: string, args: string[], cwd?: string): Promise<RunResult> {
  return new Promise((resolve) => {
    execFile(executable, args, { cwd, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      resolve({ code, output: `${stdout}${stderr}` });
    });
  });
}

/** Runs a registry client; its output is kept for the error only. */
function run(command: string, args: string[], options: { env: NodeJS.ProcessEnv; cwd: string }): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(
      command,
      args,
      { ...options, maxBuffer: 16 * 1024 * 1024, timeout: 30 * 60_000 },
      (err, stdout, stderr) => {
        if (!err) return resolve();
        const output = `${stderr}\n${stdout}`.trim().split('\n').slice(-5).join(' | ');
        reject(new Error(`${command} ${args.slice(0, 2).join(' ')} exited ${err.code ?? err.signal}: ${output}`));
      },
    );
  });
}
