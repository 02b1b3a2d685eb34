/**
 * `npm run cluster`: a real Temporal cluster on this machine (bench/cluster/cluster.ts), up until Ctrl-C, for trying
 * tuneflow by hand on what operators run (`TEMPORAL_ADDRESS=<address> npx tuneflow worker`, `... start`). The soak
 * runs on one of its own with `npm run soak -- --cluster`. Exit 0 after Ctrl-C, 1 when the cluster cannot start.
 */
import * as fs from 'node:fs';
import { PINNED_SERVER } from '../../src/temporal-server/cluster-server';
import { startCluster } from './cluster';

const USAGE = `Usage: npm run cluster

Builds (once, cached) and starts the Temporal server ${PINNED_SERVER.version} from its Go module on a throwaway PostgreSQL, loopback
only, with the default namespace; prints its address and runs until Ctrl-C, then removes everything it made.
Needs Go (the first time) and PostgreSQL's binaries; the message says the ways out when either is missing.
`;

async function main(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (argv.length) {
    process.stderr.write(`cluster: unknown arguments ${argv.join(' ')} (see npm run cluster -- --help)\n`);
    return 2;
  }
  const cluster = await startCluster();
  process.stdout.write(
    `Temporal cluster on ${cluster.address} (namespace ${cluster.namespace}); Ctrl-C stops it.\n` +
      `  TEMPORAL_ADDRESS=${cluster.address} npx tuneflow worker\n`,
  );
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await cluster.stop();
  fs.rmSync(cluster.dir, { recursive: true, force: true });
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`cluster: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
