/**
 * `npm run record-nexus-histories [-- <scenario> ...]`: plays the Nexus scenarios (test/workflows/nexus-scenarios.ts)
 * on a dev server of its own (two namespaces, an endpoint made with the Temporal CLI) and keeps both sides' histories:
 * tuneflow's runs as test/histories/nexus/<key>.json (test/replay.test.ts replays them with every workflow change,
 * like every history there), the caller's workflows as test/nexus/histories/<caller workflow ID>.json
 * (test/nexus/replay.test.ts replays them against the caller's workflows).
 *
 * The server is the Temporal CLI's dev server, provisioned as everywhere else (src/temporal-server); an address in
 * TEMPORAL_ADDRESS is not used: the scenarios make their own namespaces and endpoint.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { describeServer, provisionTemporal } from '../src/temporal-server';
import { historyToJson } from '../test/workflows/history-json';
import { nexusScenarios, type NexusScenario } from '../test/workflows/nexus-scenarios';
import { NexusWorld } from '../test/workflows/nexus-world';

const ROOT = path.join(__dirname, '..');
const HANDLER_HISTORIES = path.join(ROOT, 'test', 'histories', 'nexus');
const CALLER_HISTORIES = path.join(ROOT, 'test', 'nexus', 'histories');

async function run(names: string[]): Promise<number> {
  const all: NexusScenario[] = Object.values(nexusScenarios);
  const unknown = names.filter((name) => !all.some((s) => s.name === name));
  if (unknown.length) {
    process.stderr.write(`unknown scenario ${unknown.join(', ')}; known: ${all.map((s) => s.name).join(', ')}\n`);
    return 2;
  }
  const server = await provisionTemporal('dev-server', { acceptAddress: false, strict: true });
  if (server.kind !== 'dev-server' || server.executable.type !== 'existing-path') {
    process.stderr.write(`record-nexus-histories: needs the Temporal CLI as a file, got ${describeServer(server)}\n`);
    return 2;
  }
  process.stdout.write(`record-nexus-histories: on the ${describeServer(server)}\n`);
  Runtime.install({ logger: new DefaultLogger('ERROR') }); // the refusals and failures played are not news
  const world = await NexusWorld.open(server.executable.path);
  fs.mkdirSync(HANDLER_HISTORIES, { recursive: true });
  fs.mkdirSync(CALLER_HISTORIES, { recursive: true });
  try {
    for (const scenario of names.length ? all.filter((s) => names.includes(s.name)) : all) {
      const outcome = await scenario.play(world);
      const sides = [
        ...Object.entries(outcome.handler).map(([id, history]) => ({ dir: HANDLER_HISTORIES, id, history })),
        ...Object.entries(outcome.caller).map(([id, history]) => ({ dir: CALLER_HISTORIES, id, history })),
      ];
      for (const { dir, id, history } of sides) {
        // The file name is the workflow ID: the replay tests replay each history under it.
        const file = path.join(dir, `${id}.json`);
        fs.writeFileSync(file, `${historyToJson(history)}\n`);
        process.stdout.write(`${scenario.name}: ${history.events?.length} events -> ${path.relative(ROOT, file)}\n`);
      }
    }
  } finally {
    await world.close();
  }
  return 0;
}

run(process.argv.slice(2)).then(
  (code) => (process.exitCode = code),
  (err) => {
    process.stderr.write(`record-nexus-histories: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  },
);
