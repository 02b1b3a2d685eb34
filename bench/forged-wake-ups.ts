/**
 * `npx tsx bench/forged-wake-ups.ts [training seconds]`: what a URL holder's wake-ups cost one job. One
 * trainThenGenerate (1 prompt, the mock's training 30 s by default) three times on a dev server, with the callback
 * receiver and a worker as the tests run them: clean; under a burst (500 validly signed wake-ups about its tune in 5 s,
 * each body changed so none is coalesced); under a paced flood (one such wake-up every 2.1 s while it trains). For each:
 * the service calls the job made, the job's time, and the answers the receiver gave the forgeries and the service's own
 * callbacks (a genuine callback must never fail: the service does not retry).
 */
import { request } from 'undici';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { describeServer, openTemporal, provisionTemporal } from '../src/temporal-server';
import { API_KEY, bundleWorkflows, WorkflowHarness, type Scenario } from '../test/workflows/harness';

type Mode = 'clean' | 'burst' | 'paced';

async function flood(s: Scenario, mode: Mode, done: () => boolean, statuses: Map<number, number>): Promise<void> {
  if (mode === 'clean') return;
  let held = s.mock.heldCallbacks(API_KEY).find((c) => c.kind === 'tune');
  for (; !held && !done(); held = s.mock.heldCallbacks(API_KEY).find((c) => c.kind === 'tune'))
    await new Promise((resolve) => setTimeout(resolve, 100));
  if (!held) return;
  let n = 0;
  const send = async () => {
    const body = JSON.stringify({ id: held.id, trained_at: null, nonce: n++ });
    const res = await request(held.url, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
    await res.body.dump();
    statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
  };
  if (mode === 'burst') {
    for (let i = 0; i < 50 && !done(); i++) {
      await Promise.all(Array.from({ length: 10 }, send));
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return;
  }
  while (!done()) {
    await send();
    await new Promise((resolve) => setTimeout(resolve, 2_100));
  }
}

async function run(): Promise<void> {
  const training = Number(process.argv[2] ?? 30);
  const server = await provisionTemporal('dev-server');
  process.stderr.write(`forged-wake-ups: on the ${describeServer(server)}\n`);
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const env = await openTemporal(server);
  const harness = await WorkflowHarness.start(env, await bundleWorkflows());
  const rows: string[] = [];
  try {
    for (const mode of ['clean', 'burst', 'paced'] as const) {
      await harness.scenario({ mock: { trainingTime: `${training}s`, inferenceTime: '2s' } }, (s) =>
        s.withWorker(async () => {
          const input = {
            tune: { name: 'dog', branch: 'fast', image_urls: ['https://example.com/1.jpg'] },
            prompts: [{ text: 'sks dog' }],
          };
          const started = Date.now();
          const handle = await s.start('trainThenGenerate', input, 'real');
          let finished = false;
          const statuses = new Map<number, number>();
          const flooding = flood(s, mode, () => finished, statuses);
          await handle.result();
          finished = true;
          await flooding;
          const seconds = (Date.now() - started) / 1000;
          const { total: _total, ...byRoute } = { total: 0, ...s.mock.stats().routes };
          const calls = Object.values(byRoute as Record<string, number>).reduce((a, b) => a + b, 0);
          const genuine = s.mock.stats().callbacks;
          rows.push(
            `${mode.padEnd(6)} API calls ${String(calls).padStart(3)}  job ${seconds.toFixed(1)} s  forgeries ` +
              `${JSON.stringify(Object.fromEntries(statuses))}  service callbacks ${JSON.stringify(genuine)}`,
          );
          process.stderr.write(`${rows.at(-1)}\n`);
        }),
      );
    }
  } finally {
    await harness.close();
    await env.teardown();
  }
  process.stdout.write(`${rows.join('\n')}\n`);
}

run().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
