/**
 * The full Temporal server (frontend, history, matching and worker services; the one operators run), as opposed to the
 * CLI's one-process dev server: built from its Go module `go.temporal.io/server` at a pinned version with the machine's
 * Go, cached outside the repository beside the dev server (`$XDG_CACHE_HOME/tuneflow/temporal/server-<version>`), with
 * its SQL tool (`temporal-sql-tool`, which sets up the schema) and the config templates the module ships. The cluster
 * tier (bench/cluster) runs it on PostgreSQL.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { cacheDir, isExecutable, which } from './install';

/** The server release the cluster tier builds: the newest whose go.mod (go 1.25) this machine's Go builds. */
export const PINNED_SERVER = { version: '1.29.1', goModule: 'go.temporal.io/server' } as const;

/** The files the module ships that the cluster tier adapts: the server's config and its dynamic config. */
export const SERVER_CONFIG = {
  template: 'development-postgres12.yaml',
  dynamicConfig: 'dynamicconfig/development-sql.yaml',
} as const;

/** A built server: its executables and the config files copied from its module. */
export interface ClusterServerFiles {
  folder: string;
  server: string;
  sqlTool: string;
  /** `config/` with SERVER_CONFIG's files. */
  configDir: string;
  version: string;
}

/** Set to a folder laid out like the cache's (temporal-server, temporal-sql-tool, config/) to skip the build. */
export const SERVER_DIR_VARIABLE = 'TUNEFLOW_TEMPORAL_SERVER_DIR';

/** The server cannot be had; the message names the ways out. */
export class ClusterServerUnavailableError extends Error {
  override name = 'ClusterServerUnavailableError';
}

async function filesIn(folder: string): Promise<ClusterServerFiles | undefined> {
  const files = {
    folder,
    server: path.join(folder, 'temporal-server'),
    sqlTool: path.join(folder, 'temporal-sql-tool'),
    configDir: path.join(folder, 'config'),
    version: PINNED_SERVER.version,
  };
  if (!(await isExecutable(files.server)) || !(await isExecutable(files.sqlTool))) return undefined;
  for (const file of Object.values(SERVER_CONFIG))
    if (!(await fs.stat(path.join(files.configDir, file)).catch(() => undefined))) return undefined;
  return files;
}

function run(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(command, args, { env, maxBuffer: 64 * 1024 * 1024, timeout: 60 * 60_000 }, (err, stdout, stderr) => {
      if (!err) return resolve(stdout);
      const output = `${stderr}\n${stdout}`.trim().split('\n').slice(-8).join('\n  ');
      reject(new Error(`${command} ${args.join(' ')} exited ${err.code ?? err.signal}:\n  ${output}`));
    }),
  );
}

/**
 * The pinned server: from TUNEFLOW_TEMPORAL_SERVER_DIR, the cache, or built now with `go install` (about 4 minutes of
 * one core, and 230 MB of modules, the first time; seconds once Go's build cache has it).
 *
 * @example
 * const { server, sqlTool, configDir } = await provisionClusterServer();
 */
export async function provisionClusterServer(
  options: { env?: NodeJS.ProcessEnv; log?: (line: string) => void } = {},
): Promise<ClusterServerFiles> {
  const env = options.env ?? process.env;
  const log = options.log ?? ((line: string) => process.stderr.write(`temporal: ${line}\n`));
  const given = env[SERVER_DIR_VARIABLE];
  if (given) {
    const files = await filesIn(given);
    if (!files)
      throw new ClusterServerUnavailableError(
        `${SERVER_DIR_VARIABLE}=${given} must hold temporal-server, temporal-sql-tool and ` +
          `config/${SERVER_CONFIG.template}, config/${SERVER_CONFIG.dynamicConfig} (the cache's layout)`,
      );
    return files;
  }
  const destination = path.join(cacheDir(env), `server-${PINNED_SERVER.version}`);
  const cached = await filesIn(destination);
  if (cached) return cached;

  const go = await which('go', env);
  if (!go)
    throw new ClusterServerUnavailableError(
      [
        `The Temporal server ${PINNED_SERVER.version} is built from its Go module, and go is not on PATH. Ways out:`,
        '  1. install Go 1.25 or newer (or any Go from 1.21, which fetches the toolchain the module asks for), e.g.',
        '     from go.dev/dl or your package manager, and run this again: the build is cached in',
        `     ${destination}`,
        `  2. ${SERVER_DIR_VARIABLE}=/path/to/folder holding temporal-server and temporal-sql-tool of release`,
        `     ${PINNED_SERVER.version} and config/${SERVER_CONFIG.template}, config/${SERVER_CONFIG.dynamicConfig}`,
        `     from the same release's source (${PINNED_SERVER.goModule})`,
      ].join('\n'),
    );

  await fs.mkdir(path.dirname(destination), { recursive: true });
  const folder = `${destination}.installing-${randomBytes(4).toString('hex')}`;
  await fs.mkdir(path.join(folder, 'config', 'dynamicconfig'), { recursive: true });
  const module = `${PINNED_SERVER.goModule}@v${PINNED_SERVER.version}`;
  const started = Date.now();
  log(`building the Temporal server ${PINNED_SERVER.version} from ${PINNED_SERVER.goModule} with ${go}: ~4 minutes of`);
  log(`one core the first time (seconds from Go's build cache), into ${destination}`);
  try {
    const goEnv = { ...env, GOBIN: folder, CGO_ENABLED: '0' };
    const packages = ['cmd/server', 'cmd/tools/sql'].map(
      (p) => `${PINNED_SERVER.goModule}/${p}@v${PINNED_SERVER.version}`,
    );
    await run(go, ['install', ...packages], goEnv);
    await fs.rename(path.join(folder, 'server'), path.join(folder, 'temporal-server'));
    await fs.rename(path.join(folder, 'sql'), path.join(folder, 'temporal-sql-tool'));
    // The module's own config files, from the module cache `go install` filled.
    const { Dir } = JSON.parse(await run(go, ['mod', 'download', '-json', module], goEnv)) as { Dir: string };
    for (const file of Object.values(SERVER_CONFIG))
      await fs.copyFile(path.join(Dir, 'config', file), path.join(folder, 'config', file));
    await fs.rename(folder, destination).catch(async (err: NodeJS.ErrnoException) => {
      // Another process finished the same build first: keep its copy.
      if (err.code !== 'ENOTEMPTY' && err.code !== 'EEXIST') throw err;
      await fs.rm(folder, { recursive: true, force: true });
    });
  } catch (err) {
    await fs.rm(folder, { recursive: true, force: true });
    throw new ClusterServerUnavailableError(
      `building the Temporal server ${PINNED_SERVER.version} failed: ${(err as Error).message}\n` +
        `(or set ${SERVER_DIR_VARIABLE} to a folder with a built server; see src/temporal-server/cluster-server.ts)`,
    );
  }
  log(`built in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  return (await filesIn(destination))!;
}
