/**
 * The Temporal server a soak run (or its floor) runs on: a running one (TEMPORAL_ADDRESS), the cluster tier, or a dev
 * server of the run's own with the run's flags (on a state file where a restart must find its state).
 */
import * as path from 'node:path';
import { describeServer, provisionTemporal } from '../../src/temporal-server';
import {
  FAIRNESS_DYNAMIC_CONFIG,
  freePort,
  startDevServerProcess,
  type DevServerProcess,
} from '../../src/temporal-server/dev-server';
import { soakCluster } from '../cluster/soak';
import type { SoakOptions } from './options';

export interface SoakServer {
  address: string;
  /** The server's process, when it is the run's own: its CPU and memory are the run's figures. */
  process?: DevServerProcess;
  /** Stops the server, waits `downMs`, starts it again; undefined when the server is not ours. */
  restart?: (downMs: number) => Promise<void>;
}

/**
 * Starts (or names) the run's server; its stop goes on `cleanups`. `answered` resolves once the harness's client is
 * answered again after a restart. `fairness` false starts the dev server without `matching.enableFairness` (one
 * partition still): its matching is then one first-come line whatever fairness keys the tasks carry.
 *
 * @example
 * const server = await startSoakServer(options, dir, cleanups, stderr, () => answering());
 */
export async function startSoakServer(
  options: Pick<SoakOptions, 'cluster' | 'profiles' | 'dbFile' | 'serverArgs' | 'jobs'>,
  dir: string,
  cleanups: Array<() => Promise<unknown> | unknown>,
  log: (line: string) => void,
  answered: () => Promise<void>,
  fairness = true,
): Promise<SoakServer> {
  if (options.cluster) {
    // The cluster tier (bench/cluster): the full Temporal server on PostgreSQL, restarted by the server-restart fault.
    const cluster = await soakCluster(dir, options.jobs, log, cleanups);
    return {
      address: cluster.process.address,
      process: cluster.process,
      restart: async (downMs) => {
        await cluster.restartServer(downMs);
        await answered();
      },
    };
  }
  if (!fairness && (options.cluster || process.env.TEMPORAL_ADDRESS))
    throw new Error('a run without fairness needs a dev server of its own: unset TEMPORAL_ADDRESS');
  if (process.env.TEMPORAL_ADDRESS) {
    if (options.profiles.includes('server-restart'))
      log('TEMPORAL_ADDRESS is set: the server is not ours to restart, the server-restart fault is left out');
    return { address: process.env.TEMPORAL_ADDRESS };
  }
  const provisioned = await provisionTemporal('dev-server', { strict: true, acceptAddress: false, log });
  if (provisioned.kind !== 'dev-server' || provisioned.executable.type !== 'existing-path')
    throw new Error(`no dev server executable: ${describeServer(provisioned)}`);
  const executable = provisioned.executable.path;
  const needsFile = options.dbFile || options.profiles.includes('server-restart');
  const settings = {
    executable,
    port: await freePort(),
    dbFilename: needsFile ? path.join(dir, 'temporal.db') : undefined,
    fairness,
    extraArgs: [
      ...(fairness
        ? []
        : FAIRNESS_DYNAMIC_CONFIG.filter((s) => !s.startsWith('matching.enableFairness')).flatMap((s) => [
            '--dynamic-config-value',
            s,
          ])),
      ...options.serverArgs,
    ],
  };
  const server: SoakServer = { address: '', process: await startDevServerProcess(settings) };
  server.address = server.process!.address;
  cleanups.push(() => server.process?.stop('SIGKILL'));
  log(
    `dev server ${executable} on ${server.address}, state ${settings.dbFilename ?? 'in memory'}, fairness ` +
      (fairness ? 'on' : 'off'),
  );
  server.restart = async (downMs) => {
    log('fault: stopping the dev server');
    await server.process!.stop('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, downMs));
    server.process = await startDevServerProcess(settings);
    log('fault: the dev server is started again');
    await answered();
  };
  return server;
}
