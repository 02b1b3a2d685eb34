/**
 * The soak's hook into the cluster tier (`npm run soak -- --cluster`): the cluster in place of the dev server, its
 * server restarted by the server-restart fault, and what the soak's report cannot see (the server's CPU over every
 * start, PostgreSQL's, and the bytes and rows the jobs left in its databases) printed when it stops.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startCluster, type ClusterServerProcess } from './cluster';
import { footprint, footprintPerJob } from './footprint';

export interface SoakCluster {
  process: ClusterServerProcess;
  restartServer: (downMs: number) => Promise<void>;
}

/**
 * Starts a cluster in `dir`/cluster; its stop goes on `cleanups`.
 *
 * @example
 * ({ process: server.process, restartServer } = await soakCluster(dir, options.jobs, stderr, cleanups));
 */
export async function soakCluster(
  dir: string,
  jobs: number,
  log: (line: string) => void,
  cleanups: Array<() => Promise<unknown> | unknown>,
): Promise<SoakCluster> {
  // PostgreSQL may run as another user (see ./postgres.ts): it must get through the soak's folder to its own.
  fs.chmodSync(dir, 0o711);
  const cluster = await startCluster({ dir: path.join(dir, 'cluster'), log: (line) => log(`cluster: ${line}`) });
  const before = await footprint(cluster.postgres);
  cleanups.push(async () => {
    const { serverCpuMs, serverStarts, postgresCpuMs } = cluster.usage();
    const after = await footprint(cluster.postgres).catch((err: Error) => err);
    await cluster.stop();
    const postgres = cluster.postgres.cpuMs();
    log(
      `cluster: server CPU ${Math.round(serverCpuMs)} ms over ${serverStarts} start(s), ` +
        `${(serverCpuMs / jobs).toFixed(1)} ms a job; PostgreSQL CPU ${Math.round(Math.max(postgres, postgresCpuMs))} ms, ` +
        `${(Math.max(postgres, postgresCpuMs) / jobs).toFixed(1)} ms a job`,
    );
    if (after instanceof Error) log(`cluster: the databases could not be read: ${after.message}`);
    else
      for (const { database, bytes, rows } of footprintPerJob(before, after, jobs))
        log(
          `cluster: database ${database}: ${bytes} bytes a job; rows a job: ` +
            (rows.map(([table, n]) => `${table} ${n}`).join(', ') || 'none'),
        );
  });
  return {
    process: cluster.server,
    async restartServer(downMs) {
      log("fault: stopping the cluster's Temporal server");
      await cluster.restartServer(downMs);
      log("fault: the cluster's Temporal server is back");
    },
  };
}
