/**
 * How many API calls one trainThenGenerate run (one tune, two prompts) makes, counted by the mock service: with
 * callbacks working, and with every callback lost (the workflow finishes by polling). Needs a Temporal server, provisioned
 * as for the workflow tests (src/temporal-server); without one it says why and measures nothing.
 *
 * Run alone: `npx tsx bench/api-calls.ts`.
 */
import type { MockStats } from '../src/mock-service';
import { openTemporal, provisionTemporal } from '../src/temporal-server';
import { installQuietRuntime } from '../test/workflows/global-setup';
import { bundleWorkflows, WorkflowHarness } from '../test/workflows/harness';
import { play, scenarios } from '../test/workflows/scenarios';

/** API calls only: the mock's own control routes and image downloads are not the service's API. */
function apiCalls(stats: MockStats): { total: number; routes: Record<string, number> } {
  const routes = Object.fromEntries(Object.entries(stats.routes).filter(([route]) => !route.includes('/__mock')));
  return { total: Object.values(routes).reduce((a, b) => a + b, 0), routes };
}

export async function benchApiCalls(): Promise<void> {
  let server;
  try {
    server = await provisionTemporal('test-server');
  } catch (err) {
    console.log(`api calls per run: not measured (${(err as Error).message})`);
    return;
  }
  installQuietRuntime();
  const env = await openTemporal(server);
  const harness = await WorkflowHarness.start(env, await bundleWorkflows());
  try {
    console.log('api calls per trainThenGenerate run (1 tune, 2 prompts), counted by the mock service');
    for (const definition of [scenarios.callbacksHappyPath, scenarios.callbacksDropped]) {
      const outcome = await play(harness, definition);
      if (outcome.error) throw outcome.error;
      const { total, routes } = apiCalls(outcome.stats);
      const callbacks = outcome.stats.callbacks;
      console.log(
        `  ${definition.name.padEnd(24)} ${String(total).padStart(3)} calls  ` +
          `(callbacks sent ${callbacks.sent}, dropped ${callbacks.dropped}; polls ${outcome.progress.counts.polls})`,
      );
      for (const [route, count] of Object.entries(routes)) console.log(`      ${route.padEnd(28)} ${count}`);
    }
  } finally {
    await harness.close();
    await env.teardown();
  }
}

if (require.main === module) {
  benchApiCalls().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
