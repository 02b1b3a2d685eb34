/**
 * The README's "Call it from another namespace", run as printed on a dev server as `tuneflow dev-server` runs it (the
 * `default` namespace alone): the operator's commands (the caller's namespace, the endpoint), then the caller's
 * workflow exactly as the README shows it, type-checked and bundled as the caller's worker bundles it, in the new
 * namespace, calling tuneflow's worker (TuneflowPlugin, as "Run it locally" runs it: `default`, task queue `tuneflow`)
 * against the mock service: an order that completes with one tune, and one refused, which the caller branched on.
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
import { TuneflowPlugin } from '../../src/plugin';
import { freePort, startDevServerProcess, type DevServerProcess } from '../../src/temporal-server/dev-server';
import { bundleWorkflows } from './bundle';
import { devServerExecutable, devServerTest } from './environment';
import { installQuietRuntime } from './global-setup';
import { API_KEY, CALLBACK_SECRET } from './harness';
import { summarize } from './history-summary';

jest.setTimeout(240_000);

const ROOT = path.resolve(__dirname, '../..');
const HEADING = '## Call it from another namespace';

/** The first fenced block of `language` after `heading`, and its text. */
function blockUnder(markdown: string, heading: string, language: string): string {
  const at = markdown.indexOf(`\n${heading}\n`);
  if (at < 0) throw new Error(`README has no ${heading}`);
  const block = new RegExp(`\`\`\`${language}\\n([\\s\\S]*?)\`\`\``).exec(markdown.slice(at))?.[1];
  if (block === undefined) throw new Error(`no ${language} block under ${heading}`);
  return block;
}

/** Shell commands: continuation lines joined, comments dropped. */
const commandsOf = (block: string) =>
  block
    .replace(/\\\n\s*/g, '')
    .split('\n')
    .map((line) => line.replace(/\s+# .*$/, '').trim())
    .filter((line) => line && !line.startsWith('#'));

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
    ]);
    const temporal = `temporal() { '${devServerExecutable()}' "$@" --address ${server!.address}; }`;
    for (const command of commands) await promisify(execFile)('bash', ['-c', `${temporal}; ${command}`]);

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
      const [done, refused] = await tuneflowWorker.runUntil(
        callerWorker.runUntil(
          Promise.all([
            order('readme-order', [`${mock.url}/images/training-1.png`]),
            order('readme-refused', ['ftp://example.com/1.jpg']),
          ]),
        ),
      );
      expect(done).toEqual({ tuneId: expect.any(Number), images: [expect.stringMatching(/^http/)] });
      expect(refused).toEqual({ refused: 'tune.image_urls[0]' });

      // One tune, for the order that completed; tuneflow's run is the key's, scoped to the caller's namespace, in
      // tuneflow's.
      expect(mock.stats().routes['POST /tunes']).toBe(1);
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
