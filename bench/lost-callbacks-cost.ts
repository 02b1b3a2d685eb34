/**
 * What one long job costs in API calls when every callback is lost: a tune that trains 20 minutes, then P prompts that
 * take 2 minutes, with tuneflow's default poll schedule, counted by the mock service; against the official client's
 * schedule (a poll every 5 s per object, given up after 600 s), computed.
 *
 * It runs on the time-skipping test server with time skipping locked (a plain client): the mock's training and
 * inference are real timers, so the server's clock must keep step with them. The run takes the job's real time
 * (about 25 minutes) and almost no CPU.
 *
 * Run alone: `npx tsx bench/lost-callbacks-cost.ts [prompts]` (default 4 prompts).
 */
import type { MockStats } from '../src/mock-service';
import { openTemporal, provisionTemporal } from '../src/temporal-server';
import type { TrainThenGenerateResult } from '../src/contract/inputs';
import { installQuietRuntime } from '../test/workflows/global-setup';
import { bundleWorkflows, WorkflowHarness } from '../test/workflows/harness';

const TRAINING_S = 20 * 60;
const GENERATION_S = 2 * 60;
const OFFICIAL_EVERY_S = 5;
const OFFICIAL_CAP_S = 600;

/** The official client's polls of one object that takes `takesS`: every 5 s until done, given up at 600 s. */
function officialPolls(takesS: number): { polls: number; gaveUp: boolean } {
  const polls = Math.ceil(Math.min(takesS, OFFICIAL_CAP_S) / OFFICIAL_EVERY_S);
  return { polls, gaveUp: takesS > OFFICIAL_CAP_S };
}

function apiCalls(stats: MockStats): Record<string, number> {
  return Object.fromEntries(Object.entries(stats.routes).filter(([route]) => !/\/(images|files)\//.test(route)));
}

async function run(prompts: number): Promise<void> {
  installQuietRuntime();
  const env = await openTemporal(await provisionTemporal('test-server'));
  const harness = await WorkflowHarness.start(env, await bundleWorkflows());
  try {
    const started = Date.now();
    const outcome = await harness.scenario(
      {
        mock: { trainingTime: `${TRAINING_S}s`, inferenceTime: `${GENERATION_S}s`, faults: { callbackDropRate: 1 } },
      },
      (s) =>
        s.withWorker(async () => {
          const input = {
            tune: { name: 'dog', branch: 'fast', image_urls: [`${s.mock.url}/images/training-1.png`] },
            prompts: Array.from({ length: prompts }, (_, i) => ({ text: `sks dog, portrait ${i}` })),
          };
          return s.settle<TrainThenGenerateResult>(await s.start('trainThenGenerate', input, 'real'));
        }),
    );
    if (outcome.error) throw outcome.error;
    const routes = apiCalls(outcome.stats);
    const total = Object.values(routes).reduce((a, b) => a + b, 0);
    const tune = officialPolls(TRAINING_S);
    const prompt = officialPolls(GENERATION_S);
    const official = 1 + tune.polls + prompts * (1 + prompt.polls);
    console.log(`one job: ${TRAINING_S / 60} min training, ${GENERATION_S / 60} min generation, ${prompts} prompts`);
    console.log(
      `  tuneflow (default schedule, every callback lost): ${total} calls in ${Math.round((Date.now() - started) / 1000)} s`,
    );
    for (const [route, count] of Object.entries(routes)) console.log(`      ${route.padEnd(28)} ${count}`);
    console.log(
      `  official client (poll every ${OFFICIAL_EVERY_S} s per object, ${OFFICIAL_CAP_S} s cap): ${official} calls ` +
        `(1 create + ${tune.polls} tune polls${tune.gaveUp ? ', then it gives up: the tune takes longer than the cap' : ''}` +
        ` + ${prompts} x (1 create + ${prompt.polls} polls))`,
    );
  } finally {
    await harness.close();
    await env.teardown();
  }
}

run(Number(process.argv[2] ?? 4)).catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
