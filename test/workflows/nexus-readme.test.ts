/**
 * The README's "Call it from another namespace", run as printed on a dev server as `tuneflow dev-server` runs it (the
 * `default` namespace alone): the operator's commands (the caller's namespace, the endpoint), then the caller's
 * workflow exactly as the README shows it, type-checked and bundled as the caller's worker bundles it, in the new
 * namespace, calling tuneflow's worker (TuneflowPlugin, as "Run it locally" runs it: `default`, task queue `tuneflow`)
 * against the mock service: an order that completes with one tune, and one refused, which the caller branched on; the
 * same order twice more (its result again) and once with other photos (KeyInUse): one tune. And "Starting workflows
 * from another service", the TuneflowClient example, run twice and once with another prompt: one tune for its key.
 *
 * Liberties: `temporal` is the provisioned Temporal CLI given this server's address; `tuneflow-temporal/nexus` resolves
 * to this repository's src/nexus (test/workflows/package.test.ts runs a caller against the packed tarball).
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Worker } from '@temporalio/worker';
import * as ts from 'typescript';
import { startMockService } from '../../src/mock-service';
import { TunesApi } from '../../src/api';
import { tuneflowFailureOf } from '../../src/nexus';
import { loadTenantSettings } from '../../src/tenants';
import { TuneflowPlugin } from '../../src/plugin';
import { freePort, startDevServerProcess, type DevServerProcess } from '../../src/temporal-server/dev-server';
import { bundleWorkflows } from './bundle';
import { devServerExecutable, devServerTest } from './environment';
import { installQuietRuntime } from './global-setup';
import { API_KEY, CALLBACK_SECRET } from './harness';
import { summarize } from './history-summary';
import { blocksUnder, commandsOf } from '../readme-blocks';

jest.setTimeout(240_000);

const ROOT = path.resolve(__dirname, '../..');
const HEADING = '### From another namespace';

/** The first fenced block of `language` under `heading` in README.md. */
const blockUnder = (markdown: string, heading: string, language: string) => blocksUnder(heading, language, markdown)[0];

/**
 * The README's TuneflowClient example ("Starting workflows from another service"), run as a script with `prompt` as its
 * prompt's text. Liberties: the package import is this repository's sources, and the connection names this test's
 * server (printed, it takes the default, localhost:7233).
 */
async function startSnippet(readme: string, address: string, prompt: string): Promise<string> {
  const snippet = blockUnder(readme, '### From TypeScript', 'ts');
  expect(snippet).toContain("from 'tuneflow-temporal'");
  expect(snippet).toContain('Connection.connect()');
  const file = path.join(ROOT, `.readme-start-${process.pid}.mts`);
  fs.writeFileSync(
    file,
    snippet
      .replace("from 'tuneflow-temporal'", `from ${JSON.stringify(path.join(ROOT, 'src/index.ts'))}`)
      .replace('Connection.connect()', `Connection.connect({ address: ${JSON.stringify(address)} })`)
      .replace('ohwx woman on a beach', prompt),
  );
  try {
    const { stdout } = await promisify(execFile)('node', ['--import', 'tsx', file], { cwd: ROOT });
    return stdout;
  } catch (err) {
    throw new Error((err as { stderr?: string }).stderr ?? String(err));
  } finally {
    fs.rmSync(file, { force: true });
  }
}

/** Shell commands: continuation lines joined, comments dropped. */

/** Type-checks the caller's file as its project would, `tuneflow-temporal/nexus` being this repository's contract. */
function typeErrors(file: string): string[] {
  const program = ts.createProgram([file], {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.CommonJS,
    moduleResolution: ts.ModuleResolutionKind.Node10,
    skipLibCheck: true,
    types: [],
    baseUrl: ROOT,
    paths: { 'tuneflow-temporal/nexus': ['src/nexus/index.ts'], '*': ['node_modules/*'] },
  });
  return ts
    .getPreEmitDiagnostics(program)
    .map(
      (d) => `${d.file ? path.basename(d.file.fileName) : ''}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`,
    );
}

let server: DevServerProcess | undefined;
let scratch: string;
beforeAll(async () => {
  installQuietRuntime();
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-nexus-readme-'));
  server = await startDevServerProcess({ executable: devServerExecutable() });
}, 180_000);
afterAll(async () => {
  await server?.stop();
  if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
});

devServerTest(
  "the README's endpoint commands and caller workflow, as printed, call tuneflow from another namespace",
  async () => {
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const commands = commandsOf(blockUnder(readme, HEADING, 'sh'));
    expect(commands).toEqual([
      expect.stringMatching(/^temporal operator namespace create --namespace shop$/),
      expect.stringMatching(/^temporal operator nexus endpoint create --name tuneflow /),
      expect.stringMatching(/^TUNEFLOW_TENANT_ENDPOINTS=\S+ npx tuneflow worker$/),
    ]);
    const temporal = `temporal() { '${devServerExecutable()}' "$@" --address ${server!.address}; }`;
    for (const command of commands.slice(0, 2)) await promisify(execFile)('bash', ['-c', `${temporal}; ${command}`]);
    // The worker's restart, as printed: its tenant map is the plugin's, from the same variable.
    const endpoints = /^TUNEFLOW_TENANT_ENDPOINTS=(\S+)/.exec(commands[2])![1];

    // The caller's workflow, as printed: its types hold against the contract, and it bundles with nothing else.
    const callerFile = path.join(scratch, 'workflows.ts');
    fs.writeFileSync(callerFile, blockUnder(readme, HEADING, 'ts'));
    expect(typeErrors(callerFile)).toEqual([]);
    const callerBundle = await bundleWorkflowCode({
      workflowsPath: callerFile,
      logger: new DefaultLogger('WARN'),
      webpackConfigHook: (config) => ({
        ...config,
        resolve: {
          ...config.resolve,
          alias: { ...config.resolve?.alias, 'tuneflow-temporal/nexus': path.join(ROOT, 'src/nexus/index.ts') },
          modules: [path.join(ROOT, 'node_modules'), 'node_modules'],
        },
      }),
    });

    const mock = await startMockService({ trainingTime: '1s', inferenceTime: '500ms' });
    const native = await NativeConnection.connect({ address: server!.address });
    const connection = await Connection.connect({ address: server!.address });
    const callbackPort = await freePort();
    try {
      const tuneflowWorker = await Worker.create({
        connection: native,
        namespace: 'default',
        taskQueue: 'tuneflow',
        workflowBundle: await bundleWorkflows(),
        plugins: [
          new TuneflowPlugin({
            api: { apiKey: API_KEY, baseUrl: mock.url },
            callbacks: { baseUrl: `http://127.0.0.1:${callbackPort}`, secret: CALLBACK_SECRET, port: callbackPort },
            logger: new DefaultLogger('ERROR'),
            tenants: loadTenantSettings({ TUNEFLOW_TENANT_ENDPOINTS: endpoints }),
          }),
        ],
      });
      const callerWorker = await Worker.create({
        connection: native,
        namespace: 'shop',
        taskQueue: 'shop',
        workflowBundle: callerBundle,
      });
      const shop = new Client({ connection, namespace: 'shop' });
      const order = (workflowId: string, imageUrls: string[]) =>
        shop.workflow.execute('shopOrder', { taskQueue: 'shop', workflowId, args: [workflowId, imageUrls] });
      const image = `${mock.url}/images/training-1.png`;
      const [done, refused, again, other, otherPrompt] = await tuneflowWorker.runUntil(
        callerWorker.runUntil(async () => {
          const first = await Promise.all([order('readme-order', [image]), order('readme-refused', ['ftp://x/1.jpg'])]);
          // The same order twice more, then with other photos under its key: one job, one tune.
          const repeated = [await order('readme-order', [image]), await order('readme-order', [image])];
          const otherPhotos = await order('readme-order', [`${mock.url}/images/training-2.png`]).then(
            () => undefined,
            (err: unknown) => tuneflowFailureOf(err),
          );
          // "Starting workflows from another service", as printed, twice, then with another prompt.
          for (let run = 0; run < 2; run++) await startSnippet(readme, server!.address, 'ohwx woman on a beach');
          const otherPrompt = await startSnippet(readme, server!.address, 'ohwx woman in the snow').then(
            () => 'completed',
            (err: Error) => err.message,
          );
          return [...first, repeated, otherPhotos, otherPrompt] as const;
        }),
      );
      // This worker has no storage: the order's copies are none.
      expect(done).toEqual({ tuneId: expect.any(Number), images: [expect.stringMatching(/^http/)], copies: [] });
      expect(refused).toEqual({ refused: 'tune.image_urls[0]' });
      expect(again).toEqual([done, done]);
      expect(other).toMatchObject({
        type: 'KeyInUse',
        details: { key: 'readme-order', fields: ['input.tune.image_urls[0]'] },
      });

      expect(otherPrompt).toContain(
        '"order-1234" names a trainThenGenerate job with other input (input.prompts[0].text differ)',
      );
      const api = new TunesApi({ apiKey: API_KEY, baseUrl: mock.url });
      // tuneflow titles a tune with its run's workflow ID and run ID.
      const titles = (await api.tunes.list()).map((t) => t.title);
      expect(titles.filter((title) => title?.startsWith('order-1234#'))).toHaveLength(1);
      await api.close();

      // One tune for the order that completed, one for order-1234; tuneflow's run of the order is the key's, scoped
      // to the caller's namespace, in tuneflow's.
      expect(mock.stats().routes['POST /tunes']).toBe(2);
      const runId = `tuneflow:nexus:shop:readme-order`;
      const run = summarize(await new Client({ connection }).workflow.getHandle(runId).fetchHistory());
      expect(run.activities.slice(0, 2)).toEqual(['createTune', 'retrieveTune']);
      const callerHistory = await shop.workflow.getHandle('readme-order').fetchHistory();
      expect(JSON.stringify(callerHistory)).not.toContain(API_KEY);
    } finally {
      await connection.close();
      await native.close();
      await mock.close();
    }
  },
);
