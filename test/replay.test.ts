/**
 * Replays every recorded history under test/histories/ with the current workflow code (DESIGN.md, testing tier 5):
 * a change that would break a running workflow fails here. Needs no server. Histories recorded on a real server
 * may be handed over in ../shared/histories/; they are copied in first. With no history at all, the bundle alone
 * still proves the workflow code bundles with deterministic imports only.
 *
 * A history file is Temporal's JSON form of a history (`historyToJSON`, `temporal workflow show --output json`);
 * its name, without `.json`, is the workflow ID it is replayed as (scripts/record-histories.ts records them so).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DefaultLogger, Runtime, Worker, type WorkflowBundle } from '@temporalio/worker';
import { TuneflowPlugin } from '../src/plugin';
import { API_KEY, CALLBACK_SECRET } from './workflows/harness';
import { historyFromJson } from './workflows/history-json';
import { bundleForStrictReplay, replayStrictly } from './workflows/strict-replay';

const HISTORIES = path.join(__dirname, 'histories');
const SHARED_HISTORIES = path.resolve(__dirname, '..', '..', 'shared', 'histories');

/** Copies histories handed over in ../shared/histories/ that are new; a tracked one is never overwritten. */
function copySharedHistories(): string[] {
  if (!fs.existsSync(SHARED_HISTORIES)) return [];
  fs.mkdirSync(HISTORIES, { recursive: true });
  const copied: string[] = [];
  for (const name of fs.readdirSync(SHARED_HISTORIES).filter((n) => n.endsWith('.json'))) {
    const from = path.join(SHARED_HISTORIES, name);
    const to = path.join(HISTORIES, name);
    if (fs.existsSync(to)) continue;
    fs.writeFileSync(to, fs.readFileSync(from, 'utf8'));
    copied.push(name);
  }
  return copied;
}

// Jest decides the tests when the file loads: the copy and the listing happen now.
const copied = copySharedHistories();
const files = fs.existsSync(HISTORIES)
  ? fs
      .readdirSync(HISTORIES)
      .filter((name) => name.endsWith('.json'))
      .sort()
  : [];

let bundle: WorkflowBundle;
const readHistory = (name: string) => historyFromJson(JSON.parse(fs.readFileSync(path.join(HISTORIES, name), 'utf8')));

beforeAll(async () => {
  try {
    Runtime.install({ logger: new DefaultLogger('WARN') });
  } catch {
    // Installed already by another test file of this process.
  }
  bundle = await bundleForStrictReplay();
}, 120_000);

test('the workflows bundle with deterministic imports only', () => {
  // Module paths appear in the bundle, so a forbidden one would show.
  expect(bundle.code).toContain('src/workflows/');
  // Nothing that does I/O is bundled into workflow code; zod is, for the input contract (src/workflows/contract.ts).
  for (const forbidden of ['node_modules/undici/', 'src/api/http', 'src/activities/', 'src/callbacks/'])
    expect(bundle.code).not.toContain(forbidden);
  expect(bundle.code).toContain('src/workflows/contract.ts');
  if (copied.length) console.info(`replay: copied ${copied.join(', ')} from ${SHARED_HISTORIES}`);
  if (!files.length)
    console.info(
      'replay: no histories under test/histories/ yet (npm run record-histories records them): nothing to replay',
    );
});

test('no recorded history carries the API key or the callback secret', () => {
  for (const name of files) {
    const text = fs.readFileSync(path.join(HISTORIES, name), 'utf8');
    expect(text).not.toContain(API_KEY);
    expect(text).not.toContain(CALLBACK_SECRET);
  }
});

for (const name of files) {
  test(`${name} replays with the current workflow code: same commands, activity types and timer durations`, async () => {
    await replayStrictly(bundle, readHistory(name), path.basename(name, '.json'));
  });
}

test('a deliberately broken workflow change fails the replay of the recorded histories', async () => {
  expect(files).toContain('callbacks-happy-path.json');
  const broken = await bundleForStrictReplay(require.resolve('./replay-fixtures/broken-workflows'));
  await expect(
    replayStrictly(broken, readHistory('callbacks-happy-path.json'), 'callbacks-happy-path'),
  ).rejects.toThrow(/nondeterminism/i);
}, 120_000);

test('a replay worker given only TuneflowPlugin gets its workflows; one with workflows of its own keeps them', async () => {
  const plugin = new TuneflowPlugin({ api: { apiKey: API_KEY } });
  const history = readHistory('callbacks-happy-path.json');
  await Worker.runReplayHistory({ plugins: [plugin] }, history, 'callbacks-happy-path');
  const own = require.resolve('./replay-fixtures/broken-workflows');
  await expect(
    Worker.runReplayHistory({ plugins: [plugin], workflowsPath: own }, history, 'callbacks-happy-path'),
  ).rejects.toThrow(/nondeterminism/i);
}, 120_000);
