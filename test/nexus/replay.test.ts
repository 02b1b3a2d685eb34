/**
 * The caller's side of the Nexus scenarios (test/nexus/histories/, recorded by `npm run record-nexus-histories` in
 * the `shop` namespace) replays against the caller's workflows, which know tuneflow by its contract alone: a change to
 * the contract that would break a caller's running workflow (an operation or service renamed, say) fails here. The
 * replay is strict: the operations scheduled must be the history's, by endpoint, service and name, which Temporal's
 * own replay does not compare.
 * tuneflow's side of the same calls (test/histories/nexus/) replays in test/replay.test.ts with every other history.
 * Needs no server.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { History } from '@temporalio/common/lib/proto-utils';
import { DefaultLogger, Worker, bundleWorkflowCode, type WorkflowBundle } from '@temporalio/worker';
import { installQuietRuntime } from '../workflows/global-setup';
import { API_KEY, CALLBACK_SECRET } from '../workflows/harness';
import { historyFromJson } from '../workflows/history-json';
import { replayedWorkflowId } from '../workflows/history-summary';

// A replay's time follows the machine's load (over jest's 5 s on two shared cores), not the history: this catches a
// replay that hangs, never one that is slow.
jest.setTimeout(300_000);

const CALLER_HISTORIES = path.join(__dirname, 'histories');
const HANDLER_HISTORIES = path.join(__dirname, '..', 'histories', 'nexus');

const jsonFiles = (dir: string) =>
  fs.existsSync(dir)
    ? fs
        .readdirSync(dir)
        .filter((name) => name.endsWith('.json'))
        .sort()
    : [];
const read = (file: string): History => historyFromJson(JSON.parse(fs.readFileSync(file, 'utf8')));
const callers = jsonFiles(CALLER_HISTORIES);

let bundle: WorkflowBundle;
beforeAll(async () => {
  installQuietRuntime();
  bundle = await bundleForStrictReplay(require.resolve('./caller-workflows'));
}, 120_000);

/** The caller's workflows bundled with the operation-reporting interceptor. */
function bundleForStrictReplay(workflowsPath: string): Promise<WorkflowBundle> {
  return bundleWorkflowCode({
    workflowsPath,
    workflowInterceptorModules: [require.resolve('./operation-interceptors')],
    logger: new DefaultLogger('WARN'),
  });
}

/** Replays `history`, then compares the operations the workflow scheduled with the history's. */
async function replayStrictly(workflowBundle: WorkflowBundle, history: History, workflowId: string): Promise<void> {
  const scheduled: string[] = [];
  const report = (_info: unknown, endpoint: string, service: string, operation: string) =>
    void scheduled.push(`${endpoint}/${service}/${operation}`);
  await Worker.runReplayHistory(
    { workflowBundle, sinks: { operations: { scheduled: { fn: report, callDuringReplay: true } } } },
    history,
    workflowId,
  );
  const recorded = (history.events ?? []).flatMap((e) => {
    const op = e.nexusOperationScheduledEventAttributes;
    return op ? [`${op.endpoint}/${op.service}/${op.operation}`] : [];
  });
  if (JSON.stringify(scheduled) !== JSON.stringify(recorded))
    throw new Error(
      `replay of ${workflowId}: the workflow scheduled ${scheduled.join(', ')}; the history has ${recorded.join(', ')}`,
    );
}

test('every scenario left both sides: each call that started a run links to its recorded run, and back', () => {
  expect(callers.length).toBeGreaterThanOrEqual(10);
  // Each recorded run by its workflow ID (a caller's key, scoped to the caller's namespace), and its file.
  const handlerFiles = new Map(
    jsonFiles(HANDLER_HISTORIES).map((name) => {
      const history = read(path.join(HANDLER_HISTORIES, name));
      return [replayedWorkflowId(history, path.basename(name, '.json')), name];
    }),
  );
  const handlers = new Set(handlerFiles.keys());
  let linked = 0;
  for (const name of callers) {
    const history = read(path.join(CALLER_HISTORIES, name));
    for (const event of history.events ?? []) {
      if (!event.nexusOperationStartedEventAttributes) continue;
      const run = event.links?.[0]?.workflowEvent;
      expect(run?.namespace).toBe('images');
      expect(handlers).toContain(run!.workflowId);
      linked++;
    }
  }
  // Every recorded run was started by a recorded caller, whose operation its start links to.
  for (const id of handlers) {
    const started = read(path.join(HANDLER_HISTORIES, handlerFiles.get(id)!)).events![0]
      .workflowExecutionStartedEventAttributes;
    const caller = started?.completionCallbacks?.[0]?.links?.[0]?.workflowEvent?.workflowId;
    expect(callers).toContain(`${caller}.json`);
  }
  expect(linked).toBeGreaterThanOrEqual(6);
});

test('no caller history carries the API key, the callback secret or a signed callback URL', () => {
  for (const name of callers) {
    const text = fs.readFileSync(path.join(CALLER_HISTORIES, name), 'utf8');
    const payloads = [...text.matchAll(/"data":\s*"([A-Za-z0-9+/=]+)"/g)].map((m) =>
      Buffer.from(m[1], 'base64').toString(),
    );
    for (const form of [text, ...payloads]) {
      expect(form).not.toContain(API_KEY);
      expect(form).not.toContain(CALLBACK_SECRET);
      expect(form).not.toMatch(/sig(=|%3D)[0-9a-fA-F]{16,}/);
    }
  }
});

for (const name of callers)
  test(`test/nexus/histories/${name} replays strictly with the caller's workflows`, async () => {
    await replayStrictly(bundle, read(path.join(CALLER_HISTORIES, name)), name.slice(0, -5));
  });

test('a deliberately broken caller change fails the strict replay of the recorded caller histories', async () => {
  const broken = await bundleForStrictReplay(require.resolve('./broken-callers'));
  const history = read(path.join(CALLER_HISTORIES, 'shop-train-then-generate.json'));
  await expect(replayStrictly(broken, history, 'shop-train-then-generate')).rejects.toThrow(
    'the workflow scheduled tuneflow/tuneflow/generate; the history has tuneflow/tuneflow/trainThenGenerate',
  );
  // Temporal's own replay lets it pass: the reason for the strict one. (The sink the interceptor reports to, ignored.)
  const sinks = { operations: { scheduled: { fn: () => undefined } } };
  await Worker.runReplayHistory({ workflowBundle: broken, sinks }, history, 'shop-train-then-generate');
}, 120_000);
