/**
 * A real Temporal cluster on one machine (DESIGN.md tier 9): the full server built from its Go module
 * (src/temporal-server/cluster-server.ts) with its four services in one process, on a throwaway PostgreSQL
 * (./postgres.ts), its schema set up by the server's own SQL tool, configured from the `development-postgres12.yaml`
 * template the module ships (ports, database and log level adapted), the `default` namespace created and the server
 * health-checked with the `temporal` CLI. Everything listens on loopback; everything lives in one scratch folder.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';
import { registerSearchAttributes } from '../../src/search-attributes';
import { parse, stringify } from 'yaml';
import { describeServer, provisionTemporal } from '../../src/temporal-server';
import { PINNED_SERVER, provisionClusterServer, SERVER_CONFIG } from '../../src/temporal-server/cluster-server';
import { freePort } from '../../src/temporal-server/dev-server';
import { findPostgresBin, startPostgres, type Postgres } from './postgres';

/** The server process now running; `pid` follows restarts. The shape of the soak's dev server. */
export interface ClusterServerProcess {
  readonly address: string;
  readonly port: number;
  readonly pid: number;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export interface TemporalCluster {
  readonly address: string;
  readonly namespace: string;
  readonly dir: string;
  readonly server: ClusterServerProcess;
  readonly postgres: Postgres;
  /** Stops the server (SIGTERM), waits `downMs`, starts it again on the same database and ports. */
  restartServer(downMs: number): Promise<void>;
  /** CPU of the server over every start, and of PostgreSQL, in ms; how often the server started. */
  usage(): { serverCpuMs: number; serverStarts: number; postgresCpuMs: number };
  stop(): Promise<void>;
}

export interface ClusterOptions {
  /** The scratch folder. @default a new one in the system's temp folder */
  dir?: string;
  log?: (line: string) => void;
}

const NAMESPACE = 'default';

function cpuMsOf(pid: number | undefined): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
  } catch {
    return 0;
  }
}

/** A free loopback port below 32768: the membership table stores ports as smallint, out of the ephemeral range. */
async function freeMembershipPort(): Promise<number> {
  for (;;) {
    const port = 10_000 + Math.floor(Math.random() * 22_000);
    const server = net.createServer();
    const bound = await new Promise<boolean>((resolve) => {
      server.once('error', () => resolve(false));
      server.listen(port, '127.0.0.1', () => resolve(true));
    });
    if (bound) {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      return port;
    }
  }
}

/** The module's template with this cluster's database, free loopback ports and quieter logs. */
async function adaptConfig(template: string, postgres: Postgres) {
  const config = parse(template);
  config.log = { stdout: true, level: 'warn' };
  for (const store of Object.values(config.persistence.datastores) as Array<{ sql: Record<string, unknown> }>)
    Object.assign(store.sql, {
      connectAddr: `${postgres.host}:${postgres.port}`,
      user: postgres.user,
      password: postgres.password,
    });
  // No pprof (port 0 turns it off); the server's Prometheus metrics on a port of its own.
  config.global.pprof.port = 0;
  config.global.metrics.prometheus.listenAddress = `127.0.0.1:${await freePort()}`;
  for (const service of ['frontend', 'history', 'matching', 'worker']) {
    const rpc = config.services[service].rpc;
    Object.assign(rpc, {
      grpcPort: await freePort(),
      membershipPort: await freeMembershipPort(),
      bindOnLocalHost: true,
    });
  }
  config.services.frontend.rpc.httpPort = await freePort();
  const frontend = `127.0.0.1:${config.services.frontend.rpc.grpcPort}`;
  config.clusterMetadata.clusterInformation.active.rpcAddress = frontend;
  return { config, frontend };
}

/** Runs the `temporal` CLI; resolves with whether it succeeded and what it printed. */
async function temporalCli(cli: string, args: string[]): Promise<{ ok: boolean; output: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(cli, args, { timeout: 30_000 });
    return { ok: true, output: `${stdout}${stderr}` };
  } catch (err) {
    const { stdout, stderr, message } = err as { stdout?: string; stderr?: string; message: string };
    return { ok: false, output: `${stdout ?? ''}${stderr ?? ''}` || message };
  }
}

/**
 * Builds (or finds) the server, starts PostgreSQL, sets up the schema, starts the server and creates the namespace.
 *
 * @example
 * const cluster = await startCluster({ log: console.error });
 * // TEMPORAL_ADDRESS=cluster.address ...
 * await cluster.stop();
 */
export async function startCluster(options: ClusterOptions = {}): Promise<TemporalCluster> {
  const log = options.log ?? ((line: string) => process.stderr.write(`cluster: ${line}\n`));
  findPostgresBin(); // before a build of minutes: its absence is said at once
  const files = await provisionClusterServer({ log });
  const provisioned = await provisionTemporal('dev-server', { strict: true, acceptAddress: false, log });
  if (provisioned.kind !== 'dev-server' || provisioned.executable.type !== 'existing-path')
    throw new Error(`the temporal CLI is needed as a file: ${describeServer(provisioned)}`);
  const cli = provisioned.executable.path;

  const dir = options.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-cluster-'));
  // PostgreSQL may run as another user (see ./postgres.ts): it must get through to its folder.
  fs.mkdirSync(dir, { recursive: true });
  fs.chmodSync(dir, 0o755);
  const cleanups: Array<() => Promise<void>> = [];
  const stopAll = async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  };
  try {
    const postgres = await startPostgres({ dir: path.join(dir, 'postgres') });
    cleanups.push(() => postgres.stop());
    log(`${postgres.version} on ${postgres.host}:${postgres.port}, data in ${dir}/postgres`);
    await setUpSchema(files.sqlTool, postgres);
    log('schema set up by temporal-sql-tool (temporal, temporal_visibility)');
    const frontend = await writeServerConfig(dir, files, postgres);

    const server = new ClusterServer(files.server, dir, frontend, cli);
    cleanups.push(() => server.stop());
    await server.start();
    log(`Temporal server ${files.version} (${files.server}) serving on ${frontend}; health by ${cli}`);
    await createNamespace(cli, frontend);
    log(`namespace ${NAMESPACE} created with the temporal CLI`);
    const added = await withConnection(frontend, (c) => registerSearchAttributes(c.operatorService, NAMESPACE));
    log(`search attributes registered: ${added.join(', ')}`);

    return {
      address: frontend,
      namespace: NAMESPACE,
      dir,
      server: {
        address: frontend,
        port: Number(frontend.split(':')[1]),
        get pid() {
          return server.pid;
        },
        stop: (signal) => server.stop(signal),
      },
      postgres,
      async restartServer(downMs) {
        await server.stop('SIGTERM');
        await new Promise((resolve) => setTimeout(resolve, downMs));
        await server.start();
      },
      usage: () => ({ ...server.usage(), postgresCpuMs: postgres.cpuMs() }),
      async stop() {
        await stopAll();
        server.closeLog();
      },
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

/** The schema, as Temporal's admin tools set it up: each database created, versioned, updated to the latest. */
async function setUpSchema(sqlTool: string, postgres: Postgres): Promise<void> {
  const sqlEnv = {
    PATH: process.env.PATH,
    SQL_PLUGIN: 'postgres12',
    SQL_HOST: postgres.host,
    SQL_PORT: String(postgres.port),
    SQL_USER: postgres.user,
    SQL_PASSWORD: postgres.password,
  };
  for (const [db, schema] of [
    ['temporal', 'postgresql/v12/temporal'],
    ['temporal_visibility', 'postgresql/v12/visibility'],
  ])
    for (const step of [['create-database'], ['setup-schema', '-v', '0.0'], ['update-schema', '--schema-name', schema]])
      await promisify(execFile)(sqlTool, ['--db', db, ...step], { env: sqlEnv }).catch(
        (err: { stderr?: string; message: string }) => {
          throw new Error(`temporal-sql-tool --db ${db} ${step.join(' ')}: ${err.stderr || err.message}`);
        },
      );
}

/** The server's config in `dir/config`: the release's template on `postgres`, and its dynamic config; the frontend's address. */
async function writeServerConfig(
  dir: string,
  files: { configDir: string; version: string },
  postgres: Postgres,
): Promise<string> {
  const template = fs.readFileSync(path.join(files.configDir, SERVER_CONFIG.template), 'utf8');
  const { config, frontend } = await adaptConfig(template, postgres);
  const configDir = path.join(dir, 'config');
  fs.mkdirSync(path.join(configDir, 'dynamicconfig'), { recursive: true });
  fs.writeFileSync(
    path.join(configDir, SERVER_CONFIG.template),
    `# ${PINNED_SERVER.goModule} v${files.version} config/${SERVER_CONFIG.template}, adapted by bench/cluster\n` +
      stringify(config),
  );
  fs.copyFileSync(
    path.join(files.configDir, SERVER_CONFIG.dynamicConfig),
    path.join(configDir, SERVER_CONFIG.dynamicConfig),
  );
  return frontend;
}

/**
 * The Temporal server's process, started again in place by a restart; its CPU over every start (a stopped process's
 * is added when it stops) and its log in `dir/server.log`.
 */
class ClusterServer {
  private child: ChildProcess | undefined;
  private exited = Promise.resolve();
  private starts = 0;
  private stoppedCpuMs = 0;
  private readonly log: fs.WriteStream;

  constructor(
    private readonly executable: string,
    private readonly dir: string,
    private readonly frontend: string,
    /** The temporal CLI, which asks the server's health. */
    private readonly cli: string,
  ) {
    this.log = fs.createWriteStream(path.join(dir, 'server.log'), { flags: 'a' });
  }

  get pid(): number {
    return this.child!.pid!;
  }

  /** Starts the server and resolves once it is healthy (120 s at most). */
  async start(): Promise<void> {
    const { dir, frontend } = this;
    const args = ['--root', dir, '--config', 'config', '--env', SERVER_CONFIG.template.replace(/\.yaml$/, '')];
    // The template's dynamic config path is relative: the server runs in the scratch folder.
    const current = spawn(this.executable, [...args, '--allow-no-auth', 'start'], {
      cwd: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = current;
    current.stdout!.pipe(this.log, { end: false });
    current.stderr!.pipe(this.log, { end: false });
    this.exited = new Promise<void>((resolve) => current.once('exit', () => resolve()));
    this.starts++;
    const deadline = Date.now() + 120_000;
    for (;;) {
      if (current.exitCode !== null || current.signalCode !== null)
        throw new Error(
          `the Temporal server exited (${current.exitCode ?? current.signalCode}); see ${dir}/server.log`,
        );
      const health = await temporalCli(this.cli, ['operator', 'cluster', 'health', '--address', frontend]);
      if (health.ok && /SERVING/.test(health.output)) return;
      if (Date.now() > deadline)
        throw new Error(`the Temporal server at ${frontend} was not healthy in 120 s: ${health.output.trim()}`);
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }

  /** Stops the server (SIGKILL after 30 s); a server already stopped is left alone. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    const current = this.child;
    if (!current || current.exitCode !== null || current.signalCode !== null) return;
    this.stoppedCpuMs += cpuMsOf(current.pid);
    current.kill(signal);
    const timer = setTimeout(() => current.kill('SIGKILL'), 30_000);
    await this.exited;
    clearTimeout(timer);
  }

  usage(): { serverCpuMs: number; serverStarts: number } {
    const child = this.child;
    const running = child?.exitCode === null && child.signalCode === null;
    return { serverCpuMs: this.stoppedCpuMs + (running ? cpuMsOf(child.pid) : 0), serverStarts: this.starts };
  }

  closeLog(): void {
    this.log.end();
  }
}

/** Creates the namespace with the temporal CLI, and waits until it serves. */
async function createNamespace(cli: string, frontend: string): Promise<void> {
  const created = await temporalCli(cli, [
    'operator',
    'namespace',
    'create',
    '--namespace',
    NAMESPACE,
    '--address',
    frontend,
  ]);
  if (!created.ok) throw new Error(`temporal operator namespace create: ${created.output.trim()}`);
  await untilNamespaceServes(frontend);
}

/** A new namespace reaches the frontend's registry within its refresh interval (10 s): wait until a query works. */
async function untilNamespaceServes(address: string): Promise<void> {
  await withConnection(address, async (connection) => {
    const deadline = Date.now() + 60_000;
    for (;;) {
      try {
        await connection.workflowService.countWorkflowExecutions({ namespace: NAMESPACE, query: '' });
        return;
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  });
}

async function withConnection<T>(address: string, use: (connection: Connection) => Promise<T>): Promise<T> {
  const connection = await Connection.connect({ address });
  try {
    return await use(connection);
  } finally {
    await connection.close();
  }
}
