/**
 * The worker's settings, read from the environment once at start-up. A missing or invalid setting stops start-up
 * with a message that names the variable and the rule. The API key is read here and handed to the client only.
 */
import { loadClientConnectConfig, type ClientConnectConfig } from '@temporalio/envconfig';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';
import { DEFAULT_RECEIVER_LIMITS, type ReceiverLimits } from './callbacks/receiver-limits';
import { durationToMs, type Duration } from './duration';
import { DEFAULT_TENANT, tenantNameProblem } from './contract/tenants';
import type { SpendPeriod } from './contract/spend';
import type { TenantSettings } from './tenants';
import type { StorageSettings } from './storage';
import { MAX_IMAGE_MAX_BYTES } from './contract/storage';
import { versioningProblem, type VersioningOptions } from './deployments/versions';

/** The public service's base URL. */
export const DEFAULT_API_URL = 'https://api.astria.ai';
export const DEFAULT_TASK_QUEUE = 'tuneflow';
/** Where the callback receiver listens by default (Temporal's own ports are 7233 and 8233). */
export const DEFAULT_CALLBACK_PORT = 3001;
export const DEFAULT_METRICS_ADDRESS = '0.0.0.0:9464';

/** The branches `tuneflow demo` may train on. */
const DEMO_BRANCHES = ['fast', 'sd15', 'sdxl1', 'flux1'] as const;

/** Every variable the worker reads, with its default and meaning: the README's configuration table follows this. */
export const ENVIRONMENT = {
  TUNEFLOW_API_URL: `the service's base URL (default ${DEFAULT_API_URL})`,
  TUNEFLOW_API_KEY: 'the service API key (required); never leaves the worker',
  TUNEFLOW_CALLBACK_BASE_URL: 'public https URL where the service can reach the callback receiver; unset: poll only',
  TUNEFLOW_CALLBACK_SECRET: 'HMAC key for callback URLs, at least 16 characters (required with the base URL)',
  TUNEFLOW_CALLBACK_PORT: `port the callback receiver listens on (default ${DEFAULT_CALLBACK_PORT})`,
  TUNEFLOW_CALLBACK_HOST: 'address the callback receiver binds (default 0.0.0.0)',
  TUNEFLOW_CALLBACK_MAX_CONNECTIONS: `connections the receiver keeps open (default ${DEFAULT_RECEIVER_LIMITS.maxConnections}); at it, the longest-idle closes`,
  TUNEFLOW_CALLBACK_MAX_CONNECTIONS_PER_PEER: `connections from one address (default ${DEFAULT_RECEIVER_LIMITS.maxConnectionsPerPeer}; behind an ingress, raise it)`,
  TUNEFLOW_CALLBACK_MAX_BUFFERED_BYTES: `body bytes held across requests being read (default ${DEFAULT_RECEIVER_LIMITS.maxBufferedBytes}); past it, 503`,
  TUNEFLOW_CALLBACK_IDLE_TIMEOUT: `how long a connection stays open idle (default '${DEFAULT_RECEIVER_LIMITS.idleTimeout}')`,
  TUNEFLOW_TASK_QUEUE: `task queue of the workflows and activities (default ${DEFAULT_TASK_QUEUE})`,
  TUNEFLOW_METRICS_ADDRESS: `Prometheus scrape address host:port, or "off" (default ${DEFAULT_METRICS_ADDRESS})`,
  TUNEFLOW_LOG_LEVEL: 'TRACE, DEBUG, INFO, WARN or ERROR (default INFO)',
  TUNEFLOW_UPLOAD_DIR:
    "the only directory a job's file paths may name (each file opened once, checked and read on that handle); unset: jobs send image URLs only",
  TUNEFLOW_STORAGE:
    "where each settled prompt's images are copied: an absolute folder path (the embedded default), or s3://bucket/prefix with the AWS SDK's credentials (AWS_ACCESS_KEY_ID, ...); unset: not copied",
  TUNEFLOW_STORAGE_ENDPOINT:
    'the S3-compatible store of an s3:// TUNEFLOW_STORAGE that is not AWS S3 (R2, GCS, SeaweedFS, MinIO): its http(s) URL',
  TUNEFLOW_IMAGE_HOSTS:
    "hosts (host or host:port) the service's image URLs may name besides https ones and the service's own, comma-separated; the API key is never sent to them",
  TUNEFLOW_IMAGE_MAX_BYTES: 'the most bytes one image may have to be copied (default 33554432, 32 MiB)',
  TUNEFLOW_MAX_CACHED_WORKFLOWS:
    "runs kept in the worker's cache, most of its memory (default: the SDK's, from the heap limit; sizing: docs/scale.md)",
  TUNEFLOW_CHECK_API_KEY:
    'on: the worker checks TUNEFLOW_API_KEY with one read at start, and a key the service refuses stops it (default off)',
  TUNEFLOW_COMPRESS_PAYLOADS:
    "on: activity payloads are stored compressed, a sixth of a job's history bytes less; turn it on once every worker decodes them (this release or later), and read them with `tuneflow codec-server` (default off)",
  TUNEFLOW_SERVICE_RATE:
    "the service's rate limit, requests per second for the API key: the task queue, all workers together, starts its activities at TUNEFLOW_SERVICE_MARGIN under it (unset: no limit)",
  TUNEFLOW_SERVICE_MARGIN:
    "the share of TUNEFLOW_SERVICE_RATE kept unused, from 0 to 0.5, for the workers' own delays between the server's dispatch and the service (default 0.1)",
  TUNEFLOW_TENANT_ENDPOINTS:
    'the tenant of each Nexus endpoint, endpoint=tenant,...; a request through any other endpoint is refused (unset: every one)',
  TUNEFLOW_TENANT_FALLBACK: 'the tenant of Nexus requests whose endpoint the server does not say (servers before 1.30)',
  TUNEFLOW_TENANT_TUNES:
    "tunes the operator gives tenants besides their jobs' own, tenant=id+id;*=id (* is every tenant)",
  TUNEFLOW_TENANT_BUDGETS:
    "each tenant's spend ceiling over a UTC day or month, tenant=millicents/day,...|/month; a job over it fails OverBudget before paying (unset: none)",
  TUNEFLOW_TENANT:
    'the tenant `tuneflow start` starts jobs as (default: default, whose jobs run under their bare keys)',
  TUNEFLOW_DEPLOYMENT_NAME:
    'the worker deployment this worker is a version of (Worker Versioning): it takes new jobs once its build is current or ramping; unset: unversioned',
  TUNEFLOW_BUILD_ID:
    "this worker's build in the deployment (default: the package version and the workflow bundle's hash)",
  TUNEFLOW_VERSIONING_BEHAVIOR:
    'PINNED: a job finishes on the build it started on (default); AUTO_UPGRADE: it moves to the current build',
} as const;

/** What `tuneflow demo` reads besides: on the real service (TUNEFLOW_API_KEY set), its images and branch. */
export const DEMO_ENVIRONMENT = {
  TUNEFLOW_DEMO_IMAGES: 'training image URLs, comma-separated (or --images)',
  TUNEFLOW_DEMO_BRANCH: `the branch it trains on: ${DEMO_BRANCHES.join(', ')} (default fast, the free one)`,
} as const;

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    rule: string,
  ) {
    super(`${variable}: ${rule}`);
    this.name = 'ConfigError';
  }
}

/**
 * The one answer for a port a server cannot have: a ConfigError naming `setting` (the command line answers it with
 * exit 2). `advice` says what to change, when more than the setting; `detail` is the error the listen met.
 *
 * @example
 * throw portTaken('TUNEFLOW_METRICS_ADDRESS', '0.0.0.0:9464', 'choose another port, or "off"');
 */
export function portTaken(setting: string, address: string, advice?: string, detail?: string): ConfigError {
  return new ConfigError(
    setting,
    `${address} is taken (${detail ?? 'another server on this machine?'})${advice ? `: ${advice}` : ''}`,
  );
}

/**
 * Why a server could not listen, when the fault is its port setting (taken, or not allowed): a ConfigError naming
 * `setting`, with the listen's own error in its message and as its cause. Undefined for any other error.
 *
 * @example
 * const mock = await startMockService({ port }).catch((err) => { throw portProblem(err, '--port', address) ?? err; });
 */
export function portProblem(err: unknown, setting: string, address: string, advice?: string): ConfigError | undefined {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  const detail = (err as Error | undefined)?.message;
  let problem: ConfigError | undefined;
  if (code === 'EADDRINUSE') problem = portTaken(setting, address, advice, detail);
  if (code === 'EACCES')
    problem = new ConfigError(setting, `${address} is not allowed here (${detail}; a port below 1024?)`);
  return problem && Object.assign(problem, { cause: err });
}

export const LOG_LEVELS = ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface ReceiverConfig {
  /** Public base URL that callback URLs start with, when set. */
  baseUrl?: string;
  secret: string;
  port: number;
  host: string;
  /** What the receiver holds for all clients together (the TUNEFLOW_CALLBACK_MAX_* and _IDLE_TIMEOUT variables). */
  limits: ReceiverLimits;
}

export interface CallbackConfig extends ReceiverConfig {
  baseUrl: string;
}

export interface WorkerConfig {
  api: { baseUrl: string; apiKey: string };
  /** Absent when TUNEFLOW_CALLBACK_BASE_URL is unset: the workflows then rely on polling. */
  callbacks?: CallbackConfig;
  taskQueue: string;
  /** From the standard Temporal variables (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TLS, API key) and profile file. */
  temporal: ClientConnectConfig;
  /** `host:port` for Prometheus, or undefined when off. */
  metricsAddress?: string;
  logLevel: LogLevel;
  /**
   * Runs the worker keeps in its cache (the worker's memory is mostly this: docs/scale.md); a run evicted from it
   * replays its history at its next task.
   * @default the SDK's: sized from the V8 heap limit
   */
  maxCachedWorkflows?: number;
  /** TUNEFLOW_UPLOAD_DIR: the only directory a job's file paths may name; undefined: URLs only. */
  uploadDir?: string;
  /**
   * TUNEFLOW_SERVICE_RATE: the service's rate limit, requests per second; the task queue starts its activities across
   * every worker on it (the Temporal server's task-queue limit) at `serviceMargin` under it.
   * @default no limit
   */
  serviceRate?: number;
  /** TUNEFLOW_SERVICE_MARGIN: the share of `serviceRate` kept unused. @default 0.1 */
  serviceMargin?: number;
  /** TUNEFLOW_CHECK_API_KEY: check the API key with the service at start. @default false */
  checkApiKey: boolean;
  /** TUNEFLOW_COMPRESS_PAYLOADS: store activity payloads compressed (src/codec/compression.ts). @default false */
  compressPayloads: boolean;
  /** TUNEFLOW_STORAGE and the image settings: where the images are copied; undefined: not copied. */
  storage?: StorageSettings;
  /** TUNEFLOW_DEPLOYMENT_NAME, _BUILD_ID and _VERSIONING_BEHAVIOR: Worker Versioning; undefined: unversioned. */
  versioning?: VersioningOptions;
}

export type Env = Record<string, string | undefined>;

const httpUrl = z.url({ protocol: /^https?$/ });
const hostPort = z.string().regex(/^[^\s:]+:\d{1,5}$/);

/** Whether `n` is a port number from `min` (0: any free port) to 65535: the one port rule, options and flags alike. */
export function isPort(n: number, min: 0 | 1 = 0): boolean {
  return Number.isInteger(n) && n >= min && n <= 65535;
}

/**
 * A port number written in a variable or a flag; a ConfigError names `name` and the rule.
 *
 * @example
 * readPort('3001', 'TUNEFLOW_CALLBACK_PORT'); // 3001
 * readPort('0', '--port', 1); // throws "--port: must be a port number from 1 to 65535"
 */
export function readPort(value: string, name: string, min: 0 | 1 = 0): number {
  const port = /^\d{1,5}$/.test(value.trim()) ? Number(value) : NaN;
  if (!isPort(port, min)) throw new ConfigError(name, `must be a port number from ${min} to 65535`);
  return port;
}

function read<T>(env: Env, variable: string, schema: z.ZodType<T>, rule: string): T {
  const result = schema.safeParse(env[variable]);
  if (!result.success) throw new ConfigError(variable, rule);
  return result.data;
}

/**
 * What the callback receiver needs: the secret (required), where to listen, and the public base URL when it is set.
 * `tuneflow callbacks` runs on this alone.
 */
export function loadReceiverConfig(env: Env = process.env): ReceiverConfig {
  return {
    baseUrl: env.TUNEFLOW_CALLBACK_BASE_URL
      ? read(env, 'TUNEFLOW_CALLBACK_BASE_URL', httpUrl, 'must be an http(s) URL the service can reach')
      : undefined,
    secret: read(
      env,
      'TUNEFLOW_CALLBACK_SECRET',
      z.string().min(16),
      env.TUNEFLOW_CALLBACK_SECRET
        ? `must be at least 16 characters (it has ${env.TUNEFLOW_CALLBACK_SECRET.length}): the HMAC key of callback URLs`
        : 'is required with callbacks: the HMAC key of callback URLs, at least 16 characters',
    ),
    port: env.TUNEFLOW_CALLBACK_PORT
      ? readPort(env.TUNEFLOW_CALLBACK_PORT, 'TUNEFLOW_CALLBACK_PORT')
      : DEFAULT_CALLBACK_PORT,
    host: env.TUNEFLOW_CALLBACK_HOST || '0.0.0.0',
    limits: loadReceiverLimits(env),
  };
}

/** The receiver's limits from the environment: each one set overrides its default. */
function loadReceiverLimits(env: Env): ReceiverLimits {
  const count = (variable: string) =>
    env[variable]
      ? read(env, variable, z.coerce.number().int().min(1), 'must be a whole number, 1 or more')
      : undefined;
  const limits: ReceiverLimits = {
    maxConnections: count('TUNEFLOW_CALLBACK_MAX_CONNECTIONS'),
    maxConnectionsPerPeer: count('TUNEFLOW_CALLBACK_MAX_CONNECTIONS_PER_PEER'),
    maxBufferedBytes: count('TUNEFLOW_CALLBACK_MAX_BUFFERED_BYTES'),
  };
  const idle = env.TUNEFLOW_CALLBACK_IDLE_TIMEOUT;
  if (idle) {
    try {
      if (!(durationToMs(idle, 'TUNEFLOW_CALLBACK_IDLE_TIMEOUT') > 0)) throw new RangeError('not positive');
    } catch {
      throw new ConfigError('TUNEFLOW_CALLBACK_IDLE_TIMEOUT', "must be a positive duration such as '5 seconds'");
    }
    limits.idleTimeout = idle as Duration;
  }
  return Object.fromEntries(Object.entries(limits).filter(([, v]) => v !== undefined)) as ReceiverLimits;
}

/** The worker's callback settings; undefined when no base URL is set (the workflows then poll only). */
export function loadCallbackConfig(env: Env = process.env): CallbackConfig | undefined {
  if (!env.TUNEFLOW_CALLBACK_BASE_URL) return undefined;
  return loadReceiverConfig(env) as CallbackConfig;
}

/** The service's base URL from TUNEFLOW_API_URL (default the public service); a bad one is named by the variable. */
export function loadApiUrl(env: Env = process.env): string {
  return env.TUNEFLOW_API_URL ? read(env, 'TUNEFLOW_API_URL', httpUrl, 'must be an http(s) URL') : DEFAULT_API_URL;
}

export function loadLogLevel(env: Env = process.env): LogLevel {
  return env.TUNEFLOW_LOG_LEVEL
    ? read(env, 'TUNEFLOW_LOG_LEVEL', z.enum(LOG_LEVELS), `must be one of ${LOG_LEVELS.join(', ')}`)
    : 'INFO';
}

/** What the SDK takes for a Temporal address: `host` or `host:port` (an IPv6 host in brackets), no scheme. */
const TEMPORAL_ADDRESS = /^(\[[0-9A-Fa-f:.]+\]|[^\s:/[\]@]+)(:(\d{1,5}))?$/;

/**
 * The Temporal connection from the standard environment variables and profile file; an address the SDK would refuse
 * (a URL, a port past 65535) is named by TEMPORAL_ADDRESS. An empty variable counts as unset.
 */
export function loadTemporalConfig(env: Env = process.env): ClientConnectConfig {
  let config: ClientConnectConfig;
  try {
    config = loadClientConnectConfig({ overrideEnvVars: definedOnly(env) });
  } catch (err) {
    throw new ConfigError('TEMPORAL_*', `the Temporal connection settings are invalid: ${(err as Error).message}`);
  }
  const address = config.connectionOptions.address;
  const parsed = address === undefined ? undefined : TEMPORAL_ADDRESS.exec(address);
  if (address !== undefined && (!parsed || (parsed[3] !== undefined && !isPort(Number(parsed[3]), 1))))
    throw new ConfigError(
      env.TEMPORAL_ADDRESS ? 'TEMPORAL_ADDRESS' : 'TEMPORAL_ADDRESS (from the Temporal profile)',
      `must be host:port, such as localhost:7233 (got ${JSON.stringify(address)})`,
    );
  return config;
}

/**
 * Where Prometheus scrapes the process (TUNEFLOW_METRICS_ADDRESS, else `fallback`); undefined when "off".
 *
 * @example
 * loadMetricsAddress({ TUNEFLOW_METRICS_ADDRESS: '127.0.0.1:9465' }, 'off'); // '127.0.0.1:9465'
 */
export function loadMetricsAddress(env: Env, fallback: string): string | undefined {
  const metrics = env.TUNEFLOW_METRICS_ADDRESS ?? fallback;
  if (metrics === 'off') return undefined;
  return read(
    { TUNEFLOW_METRICS_ADDRESS: metrics },
    'TUNEFLOW_METRICS_ADDRESS',
    hostPort,
    'must be host:port or "off"',
  );
}

/**
 * Reads and checks every setting of the worker.
 *
 * @example
 * const config = loadWorkerConfig(process.env); // throws ConfigError('TUNEFLOW_API_KEY: is required ...')
 */
export function loadWorkerConfig(env: Env = process.env): WorkerConfig {
  const apiKey = loadApiKey(env);
  return {
    api: { baseUrl: loadApiUrl(env), apiKey },
    callbacks: loadCallbackConfig(env),
    taskQueue: loadTaskQueue(env),
    temporal: loadTemporalConfig(env),
    metricsAddress: loadMetricsAddress(env, DEFAULT_METRICS_ADDRESS),
    logLevel: loadLogLevel(env),
    maxCachedWorkflows: env.TUNEFLOW_MAX_CACHED_WORKFLOWS
      ? read(env, 'TUNEFLOW_MAX_CACHED_WORKFLOWS', z.coerce.number().int().min(0), 'must be a whole number, 0 or more')
      : undefined,
    uploadDir: loadUploadDir(env),
    serviceRate: loadServiceRate(env),
    serviceMargin: loadServiceMargin(env),
    checkApiKey: loadCheckApiKey(env),
    compressPayloads: loadCompressPayloads(env),
    storage: loadStorageSettings(env),
    versioning: loadVersioning(env),
  };
}

/**
 * TUNEFLOW_DEPLOYMENT_NAME, TUNEFLOW_BUILD_ID and TUNEFLOW_VERSIONING_BEHAVIOR; undefined (unversioned) when the
 * deployment name is unset.
 *
 * @example
 * loadVersioning({ TUNEFLOW_DEPLOYMENT_NAME: 'tuneflow', TUNEFLOW_BUILD_ID: 'b' }); // { deploymentName: 'tuneflow', buildId: 'b' }
 */
export function loadVersioning(env: Env = process.env): VersioningOptions | undefined {
  const value = (name: string) => (env[name]?.trim() ? env[name]!.trim() : undefined);
  const deploymentName = value('TUNEFLOW_DEPLOYMENT_NAME');
  const buildId = value('TUNEFLOW_BUILD_ID');
  const behavior = value('TUNEFLOW_VERSIONING_BEHAVIOR')?.toUpperCase().replace('-', '_');
  if (deploymentName === undefined) {
    for (const name of ['TUNEFLOW_BUILD_ID', 'TUNEFLOW_VERSIONING_BEHAVIOR'])
      if (value(name) !== undefined)
        throw new ConfigError(name, 'needs TUNEFLOW_DEPLOYMENT_NAME: a build is a version of a worker deployment');
    return undefined;
  }
  const versioning = { deploymentName, buildId, behavior } as VersioningOptions;
  const problem = versioningProblem(versioning, VERSIONING_VARIABLES);
  if (problem)
    throw new ConfigError(problem[0], problem[1].replace(/got "(.*)"$/, `got ${JSON.stringify(value(problem[0]))}`));
  return versioning;
}

/** The variables of VersioningOptions' fields. */
export const VERSIONING_VARIABLES = {
  deploymentName: 'TUNEFLOW_DEPLOYMENT_NAME',
  buildId: 'TUNEFLOW_BUILD_ID',
  behavior: 'TUNEFLOW_VERSIONING_BEHAVIOR',
} as const;

/**
 * TUNEFLOW_STORAGE (a folder's absolute path, or s3://bucket/prefix), TUNEFLOW_STORAGE_ENDPOINT, TUNEFLOW_IMAGE_HOSTS
 * and TUNEFLOW_IMAGE_MAX_BYTES; undefined when TUNEFLOW_STORAGE is unset.
 *
 * @example
 * loadStorageSettings({ TUNEFLOW_STORAGE: 's3://images/tuneflow' }); // { target: { s3: { bucket: 'images', prefix: 'tuneflow' } } }
 */
export function loadStorageSettings(env: Env = process.env): StorageSettings | undefined {
  const value = env.TUNEFLOW_STORAGE?.trim();
  const endpoint = env.TUNEFLOW_STORAGE_ENDPOINT?.trim() || undefined;
  const maxBytes = env.TUNEFLOW_IMAGE_MAX_BYTES?.trim();
  const imageMaxBytes = maxBytes
    ? read(
        env,
        'TUNEFLOW_IMAGE_MAX_BYTES',
        z.coerce.number().int().min(1024).max(MAX_IMAGE_MAX_BYTES),
        `must be a whole number of bytes from 1024 to ${MAX_IMAGE_MAX_BYTES}`,
      )
    : undefined;
  const imageHosts = (env.TUNEFLOW_IMAGE_HOSTS ?? '')
    .split(',')
    .map((h) => h.trim())
    .filter(Boolean);
  for (const host of imageHosts)
    if (!/^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9a-fA-F:]+\](:\d{1,5})?$/.test(host))
      throw new ConfigError(
        'TUNEFLOW_IMAGE_HOSTS',
        `must be host or host:port names, comma-separated (not ${JSON.stringify(host)})`,
      );
  if (!value) {
    if (endpoint) throw new ConfigError('TUNEFLOW_STORAGE_ENDPOINT', 'is set without TUNEFLOW_STORAGE');
    return undefined;
  }
  const extra = { ...(imageHosts.length && { imageHosts }), ...(imageMaxBytes !== undefined && { imageMaxBytes }) };
  if (value.startsWith('s3://')) {
    const [bucket, ...prefix] = value.slice('s3://'.length).split('/');
    if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket))
      throw new ConfigError('TUNEFLOW_STORAGE', `must name an S3 bucket after s3:// (not ${JSON.stringify(bucket)})`);
    if (endpoint && !httpUrl.safeParse(endpoint).success)
      throw new ConfigError('TUNEFLOW_STORAGE_ENDPOINT', 'must be an http or https URL');
    const s3 = { bucket, ...(prefix.join('/') && { prefix: prefix.join('/') }), ...(endpoint && { endpoint }) };
    return { target: { s3 }, ...extra };
  }
  if (endpoint) throw new ConfigError('TUNEFLOW_STORAGE_ENDPOINT', 'is for an s3:// TUNEFLOW_STORAGE only');
  if (!path.isAbsolute(value))
    throw new ConfigError('TUNEFLOW_STORAGE', 'must be an absolute folder path, or s3://bucket/prefix');
  return { target: { folder: value }, ...extra };
}

/**
 * TUNEFLOW_COMPRESS_PAYLOADS: `on` to store activity payloads compressed, `off` (the default) not to.
 *
 * @example
 * loadCompressPayloads({ TUNEFLOW_COMPRESS_PAYLOADS: 'on' }); // true
 */
export function loadCompressPayloads(env: Env = process.env): boolean {
  const value = env.TUNEFLOW_COMPRESS_PAYLOADS;
  if (value === undefined || value.trim() === '') return false;
  return read(env, 'TUNEFLOW_COMPRESS_PAYLOADS', z.enum(['on', 'off']), 'must be on or off') === 'on';
}

/**
 * TUNEFLOW_CHECK_API_KEY: `on` to check the API key with the service at start, `off` (the default) not to.
 *
 * @example
 * loadCheckApiKey({ TUNEFLOW_CHECK_API_KEY: 'on' }); // true
 */
export function loadCheckApiKey(env: Env = process.env): boolean {
  const value = env.TUNEFLOW_CHECK_API_KEY;
  if (value === undefined || value.trim() === '') return false;
  return read(env, 'TUNEFLOW_CHECK_API_KEY', z.enum(['on', 'off']), 'must be on or off') === 'on';
}

/**
 * TUNEFLOW_SERVICE_RATE, when set: a positive number of requests per second (decimals allowed: 0.5 is one request
 * every 2 s); undefined when unset.
 *
 * @example
 * loadServiceRate({ TUNEFLOW_SERVICE_RATE: '18' }); // 18
 * loadServiceRate({ TUNEFLOW_SERVICE_RATE: '0' }); // throws "TUNEFLOW_SERVICE_RATE: must be a positive number ..."
 */
export function loadServiceRate(env: Env = process.env): number | undefined {
  const value = env.TUNEFLOW_SERVICE_RATE;
  if (value === undefined || value.trim() === '') return undefined;
  const rate = /^\s*\d+(\.\d+)?\s*$/.test(value) ? Number(value) : NaN;
  if (!isServiceRate(rate))
    throw new ConfigError(
      'TUNEFLOW_SERVICE_RATE',
      `must be a positive number of requests per second, such as 18 or 0.5 (got ${JSON.stringify(value)})`,
    );
  return rate;
}

/**
 * The share of the service's rate a task queue leaves unused. The server's queue limiter and the service's limit are
 * both buckets of a second's worth; each activity reaches the service after its worker's own varying delay, so at an
 * equal rate two dispatches 40 ms apart can arrive together and one is a 429 (docs/scale.md, A fair share).
 */
export const DEFAULT_SERVICE_MARGIN = 0.1;
/** The most a margin may be: past it the service's rate is more than half unused. */
export const MAX_SERVICE_MARGIN = 0.5;

/** Whether `margin` is a usable share of the service's rate to leave unused: 0 to MAX_SERVICE_MARGIN. */
export function isServiceMargin(margin: unknown): margin is number {
  return typeof margin === 'number' && Number.isFinite(margin) && margin >= 0 && margin <= MAX_SERVICE_MARGIN;
}

/**
 * TUNEFLOW_SERVICE_MARGIN, when set: a number from 0 to 0.5; undefined when unset (DEFAULT_SERVICE_MARGIN applies).
 *
 * @example
 * loadServiceMargin({ TUNEFLOW_SERVICE_MARGIN: '0.2' }); // 0.2
 * loadServiceMargin({ TUNEFLOW_SERVICE_MARGIN: '1' }); // throws "TUNEFLOW_SERVICE_MARGIN: must be a number from 0 to 0.5 ..."
 */
export function loadServiceMargin(env: Env = process.env): number | undefined {
  const value = env.TUNEFLOW_SERVICE_MARGIN;
  if (value === undefined || value.trim() === '') return undefined;
  const margin = /^\s*\d+(\.\d+)?\s*$/.test(value) ? Number(value) : NaN;
  if (!isServiceMargin(margin))
    throw new ConfigError(
      'TUNEFLOW_SERVICE_MARGIN',
      `must be a number from 0 to ${MAX_SERVICE_MARGIN}, the share of TUNEFLOW_SERVICE_RATE left unused (got ${JSON.stringify(value)})`,
    );
  return margin;
}

/**
 * The task queue's activity rate for a service's `rate` with `margin` of it left unused, to the thousandth.
 *
 * @example
 * queueRateFor(25, 0.1); // 22.5
 */
export function queueRateFor(rate: number, margin = DEFAULT_SERVICE_MARGIN): number {
  return Math.round(rate * (1 - margin) * 1000) / 1000;
}

/** Whether `rate` is a usable requests-per-second limit: a finite number above 0. */
export function isServiceRate(rate: unknown): rate is number {
  return typeof rate === 'number' && Number.isFinite(rate) && rate > 0;
}

/** TUNEFLOW_TASK_QUEUE, or tuneflow's own queue. */
export function loadTaskQueue(env: Env = process.env): string {
  return env.TUNEFLOW_TASK_QUEUE
    ? read(env, 'TUNEFLOW_TASK_QUEUE', z.string().regex(/^\S+$/), 'must be a name without spaces')
    : DEFAULT_TASK_QUEUE;
}

/**
 * Where the Temporal variables say a server is: TEMPORAL_ADDRESS (undefined when unset) and TEMPORAL_NAMESPACE (or
 * `default`). The connection itself is loadTemporalConfig's; this is for saying where it was looked for.
 */
export function temporalAddressOf(env: Env = process.env): { address: string | undefined; namespace: string } {
  return { address: env.TEMPORAL_ADDRESS || undefined, namespace: env.TEMPORAL_NAMESPACE || 'default' };
}

/** `tuneflow demo` on the real service: with TUNEFLOW_API_KEY set, its key, URL, callbacks, images and branch. */
export interface DemoServiceConfig {
  apiKey: string;
  apiUrl: string;
  callbacks: CallbackConfig | undefined;
  /** Training image URLs: `--images`, else TUNEFLOW_DEMO_IMAGES. */
  images: string[];
  branch: (typeof DEMO_BRANCHES)[number];
}

/**
 * The real service for `tuneflow demo`, or undefined without TUNEFLOW_API_KEY (the demo then runs its own mock).
 *
 * @example
 * loadDemoService({ TUNEFLOW_API_KEY: 'k', TUNEFLOW_DEMO_IMAGES: 'https://a/1.jpg' }); // { images: ['https://a/1.jpg'], branch: 'fast', ... }
 */
export function loadDemoService(env: Env, images?: string[]): DemoServiceConfig | undefined {
  if (!env.TUNEFLOW_API_KEY) return undefined;
  const urls = images ?? env.TUNEFLOW_DEMO_IMAGES?.split(',').filter(Boolean) ?? [];
  if (urls.length === 0)
    throw new ConfigError(
      'TUNEFLOW_DEMO_IMAGES',
      'is needed with TUNEFLOW_API_KEY (or --images URL): training image URLs',
    );
  return {
    apiKey: loadApiKey(env),
    apiUrl: loadApiUrl(env),
    callbacks: loadCallbackConfig(env),
    images: urls,
    branch: env.TUNEFLOW_DEMO_BRANCH
      ? read(env, 'TUNEFLOW_DEMO_BRANCH', z.enum(DEMO_BRANCHES), `must be one of ${DEMO_BRANCHES.join(', ')}`)
      : 'fast',
  };
}

/** TUNEFLOW_API_KEY, required: the one place it is read, handed to the service client only. */
export function loadApiKey(env: Env = process.env): string {
  return read(env, 'TUNEFLOW_API_KEY', z.string().trim().min(1), 'is required: the service API key');
}

/**
 * TUNEFLOW_UPLOAD_DIR, when set: an absolute path to a directory that exists, so a typo stops start-up, not a job.
 */
export function loadUploadDir(env: Env = process.env): string | undefined {
  const dir = env.TUNEFLOW_UPLOAD_DIR;
  if (!dir) return undefined;
  if (!path.isAbsolute(dir)) throw new ConfigError('TUNEFLOW_UPLOAD_DIR', 'must be an absolute path');
  let stat: fs.Stats;
  try {
    stat = fs.statSync(dir);
  } catch {
    throw new ConfigError('TUNEFLOW_UPLOAD_DIR', `must be a directory that exists (${dir} does not)`);
  }
  if (!stat.isDirectory()) throw new ConfigError('TUNEFLOW_UPLOAD_DIR', `must be a directory (${dir} is not)`);
  return dir;
}

function definedOnly(env: Env): Record<string, string> {
  const out: Record<string, string> = {};
  // `TEMPORAL_ADDRESS= tuneflow ...` unsets it, as temporalAddressOf reads it.
  for (const [k, v] of Object.entries(env)) if (v !== undefined && !(k.startsWith('TEMPORAL_') && v === '')) out[k] = v;
  return out;
}

/** A refusal of a setting, naming the variable and the rule. */
function refuseSetting(variable: string, rule: string): never {
  throw new ConfigError(variable, rule);
}

/** The tenant settings from the environment (TUNEFLOW_TENANT_ENDPOINTS, _FALLBACK, _TUNES, _BUDGETS). */
export function loadTenantSettings(env: Env = process.env): TenantSettings {
  const pairs = (variable: string, separator: string): [string, string][] => {
    const seen = new Set<string>();
    return (env[variable] ?? '')
      .split(separator)
      .map((item) => item.trim())
      .filter(Boolean)
      .map((item) => {
        const at = item.indexOf('=');
        if (at <= 0 || at === item.length - 1) refuseSetting(variable, `${JSON.stringify(item)} is not name=value`);
        const name = item.slice(0, at).trim();
        if (seen.has(name)) refuseSetting(variable, `${JSON.stringify(name)} is named twice`);
        seen.add(name);
        return [name, item.slice(at + 1).trim()];
      });
  };
  const checked = (variable: string, tenant: string): string => {
    const problem = tenant === '*' && variable === 'TUNEFLOW_TENANT_TUNES' ? undefined : tenantNameProblem(tenant);
    if (problem) refuseSetting(variable, `tenant ${JSON.stringify(tenant)} ${problem}`);
    return tenant;
  };
  const endpoints = Object.fromEntries(
    pairs('TUNEFLOW_TENANT_ENDPOINTS', ',').map(([endpoint, t]) => [endpoint, checked('TUNEFLOW_TENANT_ENDPOINTS', t)]),
  );
  const tuneIds = z.array(
    z
      .string()
      .regex(/^[1-9]\d{0,15}$/)
      .transform(Number),
  );
  const tunes = Object.fromEntries(
    pairs('TUNEFLOW_TENANT_TUNES', ';').map(([tenant, ids]) => {
      const parsed = tuneIds.safeParse(ids.split('+'));
      if (!parsed.success)
        refuseSetting('TUNEFLOW_TENANT_TUNES', `${JSON.stringify(ids)} is not tune ids joined by "+"`);
      return [checked('TUNEFLOW_TENANT_TUNES', tenant), parsed.data];
    }),
  );
  const budgets = Object.fromEntries(
    pairs('TUNEFLOW_TENANT_BUDGETS', ',').map(([tenant, budget]) => {
      const match = /^([1-9]\d{0,14})\/(day|month)$/.exec(budget);
      if (!match)
        refuseSetting(
          'TUNEFLOW_TENANT_BUDGETS',
          `${JSON.stringify(budget)} is not a ceiling in millicents per day or month (such as 5000000/day)`,
        );
      return [
        checked('TUNEFLOW_TENANT_BUDGETS', tenant),
        { ceilingMc: Number(match[1]), period: match[2] as SpendPeriod },
      ];
    }),
  );
  const fallback = env.TUNEFLOW_TENANT_FALLBACK?.trim() || undefined;
  return {
    ...(Object.keys(endpoints).length && { endpoints }),
    ...(Object.keys(budgets).length && { budgets }),
    ...(fallback && { fallback: checked('TUNEFLOW_TENANT_FALLBACK', fallback) }),
    ...(Object.keys(tunes).length && { tunes }),
  };
}

/**
 * The tenant a starter runs as, from TUNEFLOW_TENANT (the operator's setting for `tuneflow start` and its client):
 * the default tenant when unset.
 */
export function loadStarterTenant(env: Env = process.env): string {
  const tenant = env.TUNEFLOW_TENANT?.trim() || DEFAULT_TENANT;
  const problem = tenantNameProblem(tenant);
  if (problem) refuseSetting('TUNEFLOW_TENANT', problem);
  return tenant;
}
