/**
 * `npm run record-histories [-- <scenario> ...]`: plays the workflow scenarios (test/workflows/scenarios.ts) on a
 * real Temporal server against the mock service, and writes each one's history to test/histories/<scenario>.json,
 * the fixtures test/replay.test.ts replays every workflow change against.
 *
 * The server: TEMPORAL_ADDRESS (and TEMPORAL_NAMESPACE) when set, else a dev server of its own, provisioned as
 * everywhere else (src/temporal-server). Time is real there: the whole set takes about as long as its slowest
 * scenario (the 60 s wait after a 504).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { describeServer, openTemporal, provisionTemporal } from '../src/temporal-server';
import { bundleWorkflows, WorkflowHarness, type Settled } from '../test/workflows/harness';
import { historyToJson } from '../test/workflows/history-json';
import { replayedWorkflowId, summarize } from '../test/workflows/history-summary';
import { play, scenarios, type ScenarioDefinition } from '../test/workflows/scenarios';

const HISTORIES = path.join(__dirname, '..', 'test', 'histories');
/** Scenarios played at once: each brings its own mock service and worker. */
const AT_ONCE = 4;

async function run(names: string[]): Promise<number> {
  // Some scenarios' workflows have no progress query (keyClaim): what is recorded needs none.
  const all: ScenarioDefinition<Settled<unknown>>[] = Object.values(scenarios);
  const unknown = names.filter((name) => !all.some((s) => s.name === name));
  if (unknown.length) {
    process.stderr.write(
      `record-histories: unknown scenario ${unknown.join(', ')}; known: ${all.map((s) => s.name).join(', ')}\n`,
    );
    return 2;
  }
  const chosen = names.length ? all.filter((s) => names.includes(s.name)) : all;

  const server = await provisionTemporal('dev-server');
  process.stdout.write(`record-histories: on the ${describeServer(server)}\n`);
  Runtime.install({ logger: new DefaultLogger('ERROR') }); // the scenarios' expected failures are not news
  const env = await openTemporal(server);
  const harness = await WorkflowHarness.start(env, await bundleWorkflows());
  fs.mkdirSync(HISTORIES, { recursive: true });
  let failures = 0;
  try {
    const queue = [...chosen];
    const lane = async () => {
      for (let scenario = queue.shift(); scenario; scenario = queue.shift()) {
        try {
          // The scenario's name is its workflow ID (a scenario under a `tuneflow:` ID makes it from the name): the
          // replay test replays each history under the ID its start event records.
          const outcome = await play(harness, scenario, scenario.name);
          if (replayedWorkflowId(outcome.history, scenario.name) !== outcome.workflowId)
            throw new Error(
              `its history would replay as ${replayedWorkflowId(outcome.history, scenario.name)}, not ` +
                `${outcome.workflowId} (a server whose start events do not record the workflow ID)`,
            );
          const file = path.join(HISTORIES, `${scenario.name}.json`);
          fs.writeFileSync(file, `${historyToJson(outcome.history)}\n`);
          const ending = outcome.error ? `ended with ${(outcome.error as Error).message}` : 'completed';
          const { events, bytes, activities, timers } = summarize(outcome.history);
          process.stdout.write(
            `${scenario.name}: ${outcome.workflowId}, ${events} events, ${bytes} bytes, ${ending} -> ` +
              `${path.relative(process.cwd(), file)}\n` +
              `  activities ${activities.join(' ')}\n  timers ${timers.map((t) => `${t.ms}ms:${t.ended}`).join(' ')}\n`,
          );
        } catch (err) {
          failures++;
          process.stderr.write(`${scenario.name}: not recorded: ${err instanceof Error ? err.stack : String(err)}\n`);
        }
      }
    };
    await Promise.all(Array.from({ length: AT_ONCE }, lane));
  } finally {
    await harness.close();
    await env.teardown();
  }
  return failures ? 1 : 0;
}

run(process.argv.slice(2)).then(
  (code) => (process.exitCode = code),
  (err) => {
    process.stderr.write(`record-histories: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  },
);
