/**
 * Jobs an operator can find (README "Finding jobs"), on the Temporal CLI's dev server:
 *
 * - runs in each phase at once (training, generating, completed, failed over budget) are listed by the README's own
 *   `temporal workflow list --query` commands, run as printed, by the README's Web UI link (its query, asked of the UI
 *   server's API) and by phase; their histories hold the check (a local activity) and one upsert per change of phase;
 * - on a namespace without the attributes, the worker (`tuneflow worker`) says so at start, naming the command; its
 *   runs complete, unlisted; `tuneflow search-attributes` (the README's command) registers them, and the same
 *   running worker lists the runs it starts from then on.
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { startMockService } from '../../src/mock-service';
import { SEARCH_ATTRIBUTES, SearchAttribute } from '../../src/contract/search-attributes';
import { freePort, startDevServerProcess } from '../../src/temporal-server/dev-server';
import type { TrainThenGenerateInput, TrainThenGenerateResult } from '../../src/workflows';
import { blocksUnder, commandsOf, README } from '../readme-blocks';
import { devServerExecutable, devServerTest, startDevServer, temporalOnPath, useWorkflowHarness } from './environment';
import { API_KEY, resultOf, waitFor } from './harness';
import { summarize } from './history-summary';
import { IMAGE_URLS } from './scenarios';
import { startWorkerProcess } from './worker-process';
import { EARLIER_PATCHES_FOLDED } from '../../src/workflows/patches';

jest.setTimeout(240_000);

const BIN = path.resolve(__dirname, '../../bin/tuneflow.js');
const HEADING = '### Finding jobs';
/** The README's two blocks under "Finding jobs": the register command, and the three questions. */
const [REGISTER, QUESTIONS] = blocksUnder(HEADING, 'sh');
/** The tune the README's third question names; the test asks it of the tune its own run made. */
const PRINTED_TUNE_ID = '1504963';

/** The Web UI's port on the first test's server: the README's saved view is asked of the UI server's own API. */
let uiPort = 0;
const harness = useWorkflowHarness(async () => startDevServer({ uiPort: (uiPort = await freePort()) }));

/** A README command, run by bash as a user would, against `address`: its stdout. */
async function sh(command: string, address: string): Promise<string> {
  const env = { PATH: temporalOnPath(), HOME: process.env.HOME, TEMPORAL_ADDRESS: address };
  const { stdout } = await promisify(execFile)('bash', ['-euo', 'pipefail', '-c', command], { env });
  return stdout;
}

/** `tuneflow <args>` against `address`: exit code and output. */
async function tuneflow(args: string[], address: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, TEMPORAL_ADDRESS: address };
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [BIN, ...args], { env });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const { code, stdout, stderr } = err as { code: number; stdout: string; stderr: string };
    return { code, stdout, stderr };
  }
}

/**
 * Asks `list` until it answers `expected` (visibility lags the runs by a moment); `expected` as a function is read at
 * each ask, for a query whose answer moves with the clock.
 */
async function listedAs(
  list: () => Promise<string[]>,
  expected: string[] | (() => string[]),
  what: string,
): Promise<void> {
  const wanted = () => [...(typeof expected === 'function' ? expected() : expected)].sort();
  let last: string[] = [];
  await waitFor(
    async () => {
      last = (await list()).sort();
      return JSON.stringify(last) === JSON.stringify(wanted());
    },
    () => `${what} to list ${wanted().join(', ') || 'nothing'}; last listed: ${last.join(', ') || 'none'}`,
  );
}

/** The workflow IDs among `output` (the CLI's table) that are `ids`. */
const idsIn = (output: string, ids: string[]) => ids.filter((id) => output.includes(id));

const job = (name: string, prompts: TrainThenGenerateInput['prompts'], options = {}): TrainThenGenerateInput => ({
  tune: { name, branch: 'sd15', image_urls: IMAGE_URLS },
  prompts,
  options,
});

devServerTest(
  "runs in each phase are found by the README's queries (training, failed over budget today, a tune's job) and by phase",
  async () => {
    const h = harness();
    const address = h.env.address;
    // Trains for an hour: the run stays in training.
    await h.scenario({ mock: { trainingTime: '1h' } }, (slow) =>
      slow.withWorker(async () => {
        const training = await slow.start('trainThenGenerate', job('dog', [{ text: 'sks dog' }]), 'real');
        const { tuneId: trainingTuneId } = await slow.progressUntil(training, (p) => p.phase === 'training');
        // Trains in a second, generates for an hour: one run stays generating; one without prompts completes; one
        // whose training costs more than its limit fails OverBudget before anything is created.
        await h.scenario({ mock: { trainingTime: '1s', inferenceTime: '1h' } }, (quick) =>
          quick.withWorker(async () => {
            const generating = await quick.start('trainThenGenerate', job('cat', [{ text: 'sks cat' }]), 'real');
            const completed = await quick.start('trainThenGenerate', job('man', []), 'real');
            const overBudget = await quick.start(
              'trainThenGenerate',
              job('woman', [{ text: 'ohwx woman' }], { maxCostMc: 100_000, tuneCostMc: 150_000 }),
              'real',
            );
            await quick.progressUntil(generating, (p) => p.phase === 'generating');
            const done = resultOf(await quick.settle<TrainThenGenerateResult>(completed));
            const failed = await quick.settle(overBudget);
            expect(failed.error).toBeDefined();
            expect(failed.stats.routes['POST /tunes']).toBe(2); // the generating and the completed runs' tunes alone
            const ours = [training, generating, completed, overBudget].map((w) => w.workflowId);

            // The README's three questions, as printed (the tune id: the one this run made).
            const [trainingNow, overBudgetToday, ofTune] = commandsOf(QUESTIONS);
            expect(ofTune).toContain(PRINTED_TUNE_ID);
            const ask = (command: string) => async () => idsIn(await sh(command, address), ours);
            await listedAs(ask(trainingNow), [training.workflowId], 'the training query');
            // The README's Web UI link: its query, asked of the UI server's API as the page asks it, lists the same.
            const link = new URL(/`(http:\/\/localhost:8233\/[^`]+)`/.exec(fs.readFileSync(README, 'utf8'))![1]);
            expect(link.pathname).toBe('/namespaces/default/workflows');
            const page = `http://127.0.0.1:${uiPort}/api/v1/namespaces/default/workflows?query=`;
            const viaUi = async () => {
              const answer = await fetch(page + encodeURIComponent(link.searchParams.get('query')!));
              return answer.ok ? idsIn(await answer.text(), ours) : [];
            };
            await listedAs(viaUi, [training.workflowId], "the README's Web UI link");
            // "Today" is the day the query asks on (UTC, as the README's `date -u`): a run that closed just before
            // midnight is yesterday's once the day turns.
            const closedOn = (await overBudget.describe()).closeTime!.toISOString().slice(0, 10);
            const today = () => (new Date().toISOString().slice(0, 10) === closedOn ? [overBudget.workflowId] : []);
            await listedAs(ask(overBudgetToday), today, 'the over-budget query');
            const tuneQuery = ofTune.replace(PRINTED_TUNE_ID, String(done.tune.id));
            // Each mock counts ids from the same start: the training run's tune, on the other mock, may share it.
            const ofThatTune = [completed, ...(trainingTuneId === done.tune.id ? [training] : [])];
            await listedAs(
              ask(tuneQuery),
              ofThatTune.map((w) => w.workflowId),
              "the tune's query",
            );

            // Each phase lists its runs, through the client as a starter would.
            const byPhase = (phase: string) => async () => {
              const ids: string[] = [];
              for await (const run of h.realTime.workflow.list({ query: `TuneflowPhase = '${phase}'` }))
                if (ours.includes(run.workflowId)) ids.push(run.workflowId);
              return ids;
            };
            await listedAs(byPhase('generating'), [generating.workflowId], 'generating');
            await listedAs(byPhase('completed'), [completed.workflowId], 'completed');
            await listedAs(byPhase('failed'), [overBudget.workflowId], 'failed');

            // The completed run's attributes: its tune and what it cost, as its result says.
            const described = await completed.describe();
            expect(described.typedSearchAttributes.get(SearchAttribute.tuneId)).toBe(done.tune.id);
            expect(described.typedSearchAttributes.get(SearchAttribute.costMc)).toBe(done.cost.mc);
            expect(described.typedSearchAttributes.get(SearchAttribute.failure)).toBeUndefined();

            // Its history: the check once, at the start (a local activity), then one upsert per phase.
            const history = summarize(await completed.fetchHistory());
            expect(history.patches).toEqual([EARLIER_PATCHES_FOLDED]);
            expect(history.localActivities).toEqual(['searchAttributesRegistered']);
            expect(history.activities).toEqual(['createTune', 'retrieveTune']);
            expect(history.upserts.map((u) => u.TuneflowPhase)).toEqual([
              'creating-tune',
              'training',
              'creating-prompts',
              'generating',
              'completed',
            ]);
            const overBudgetHistory = summarize(await overBudget.fetchHistory());
            expect(overBudgetHistory.activities).toEqual([]);
            expect(overBudgetHistory.upserts.at(-1)).toEqual({
              TuneflowPhase: 'failed',
              TuneflowFailure: 'OverBudget',
            });

            await cancelAll([training, generating]);
          }),
        );
      }),
    );
  },
);

devServerTest(
  'a run that inspects is inspecting from its first upsert, never creating-tune before it, and its progress says so',
  async () => {
    const h = harness();
    // Each inspection answers 3 s late: the run's first progress comes while none has answered.
    const faults = { answerDelayMs: 3_000, faultRoutes: ['POST /images/inspect'] };
    await h.scenario({ mock: { trainingTime: '1s', faults } }, (s) =>
      s.withWorker(async () => {
        const run = await s.start('trainThenGenerate', job('dog', [], { inspect: { refuse: ['blurry'] } }), 'real');
        const first = await s.progressUntil(run, () => true);
        expect(first.phase).toBe('inspecting');
        const outcome = await s.settle<TrainThenGenerateResult>(run);
        expect(resultOf(outcome).inspection).toHaveLength(IMAGE_URLS.length);
        const history = summarize(outcome.history);
        expect(history.activities.slice(0, 3)).toEqual(['inspectImage', 'inspectImage', 'createTune']);
        // One upsert per phase, inspecting the first: never creating-tune before it.
        expect(history.upserts.map((u) => u.TuneflowPhase)).toEqual([
          'inspecting',
          'creating-tune',
          'training',
          'creating-prompts',
          'generating',
          'completed',
        ]);
        expect(history.patches).toEqual([EARLIER_PATCHES_FOLDED]);
        expect(outcome.stats.routes).toMatchObject({ 'POST /images/inspect': 2, 'POST /tunes': 1 });
      }),
    );
  },
);

async function cancelAll(handles: WorkflowHandle[]): Promise<void> {
  await Promise.all(handles.map((h) => h.cancel()));
  await Promise.all(handles.map((h) => h.result().catch(() => undefined)));
}

devServerTest(
  "without the attributes: the worker says so at start, naming the command; runs complete unlisted; the README's command registers them, and the same worker's next runs are listed",
  async () => {
    const server = await startDevServerProcess({ executable: devServerExecutable(), searchAttributes: false });
    const mock = await startMockService({ port: 0, trainingTime: '1s', inferenceTime: '500ms' });
    const connection = await Connection.connect({ address: server.address });
    const client = new Client({ connection });
    const taskQueue = 'bare-namespace';
    const worker = await startWorkerProcess({
      temporalAddress: server.address,
      apiKey: API_KEY,
      apiUrl: mock.url,
      taskQueue,
    });
    try {
      // Said once, at start: which ones, and the command that registers them.
      const warningLine = () =>
        worker
          .log()
          .split('\n')
          .find((line) => line.includes('search attributes'));
      await waitFor(
        async () => warningLine() !== undefined,
        () => `the warning, in:\n${worker.log()}`,
      );
      const warning = warningLine();
      for (const { name } of SEARCH_ATTRIBUTES) expect(warning).toContain(name);
      expect(warning).toContain('tuneflow search-attributes');
      expect(warning).toContain('temporal operator search-attribute create --namespace default');

      const run = (id: string) =>
        client.workflow.execute('trainThenGenerate', {
          taskQueue,
          workflowId: id,
          args: [job('dog', [{ text: 'sks dog' }])],
        }) as Promise<TrainThenGenerateResult>;
      const unlisted = await run('before-registration');
      expect(unlisted.prompts[0].images?.length).toBeGreaterThan(0);
      const before = summarize(await client.workflow.getHandle('before-registration').fetchHistory());
      expect(before.localActivities).toEqual(['searchAttributesRegistered']);
      expect(before.upserts).toEqual([]);

      // The README's command, as printed (npx runs this package's bin: the same file).
      expect(commandsOf(REGISTER)).toEqual(['npx tuneflow search-attributes']);
      expect(await tuneflow(['search-attributes', '--check'], server.address)).toMatchObject({ code: 1 });
      const registered = await tuneflow(['search-attributes'], server.address);
      expect(registered).toMatchObject({ code: 0 });
      expect(registered.stdout).toContain(`registered ${SEARCH_ATTRIBUTES.map((a) => a.name).join(', ')}`);
      expect(await tuneflow(['search-attributes'], server.address)).toMatchObject({
        code: 0,
        stdout: 'namespace default has every one already\n',
      });
      expect(await tuneflow(['search-attributes', '--check'], server.address)).toMatchObject({ code: 0 });

      // The running worker asks again 10 s after its last ask: a run started after that keeps them.
      await new Promise((resolve) => setTimeout(resolve, 10_500));
      const listed = await run('after-registration');
      const after = summarize(await client.workflow.getHandle('after-registration').fetchHistory());
      expect(Object.assign({}, ...after.upserts)).toMatchObject({
        TuneflowPhase: 'completed',
        TuneflowTuneId: listed.tune.id,
      });
      const completedIds = async () => {
        const ids: string[] = [];
        for await (const r of client.workflow.list({ query: "TuneflowPhase = 'completed'" })) ids.push(r.workflowId);
        return ids;
      };
      await listedAs(completedIds, ['after-registration'], 'the completed query');
    } finally {
      worker.child.kill('SIGTERM');
      await worker.exited;
      await connection.close();
      await mock.close();
      await server.stop();
    }
  },
);
