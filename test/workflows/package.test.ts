/**
 * The package as its users get it (DESIGN.md tier 7): `npm pack`, the tarball installed into an empty project outside
 * the repository (so none of its dev dependencies can be reached), a TypeScript project there that imports
 * `tuneflow-temporal`, `tuneflow-temporal/workflows` and `tuneflow-temporal/testing` (test/consumer), compiled by its
 * own TypeScript; then that user's worker, with tuneflow added by one plugin, runs a parent workflow of the user's
 * whose child is `trainThenGenerate`, against the mock service on a real Temporal dev server, callbacks included.
 * Beside it, another team's caller project (test/consumer/caller), which imports `tuneflow-temporal/nexus` alone,
 * compiles against the same installed tarball and calls tuneflow through a Nexus endpoint from a namespace of its own,
 * served by the tarball's own `tuneflow worker`.
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { inputSchema } from '../../src/contract/input-schema';
import { WORKFLOW_NAMES } from '../../src/contract/jobs';
import { startMockService, type MockStats } from '../../src/mock-service';
import { freePort, startDevServerProcess, type DevServerProcess } from '../../src/temporal-server/dev-server';
import type { TrainThenGenerateResult } from '../../src/contract/inputs';
import { currentVerdict, devServerExecutable, devServerTest } from './environment';
import { summarize } from './history-summary';
import { startWorkerProcess } from './worker-process';

const ROOT = path.resolve(__dirname, '../..');
const CONSUMER = path.join(__dirname, '../consumer');
const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
  dependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};
/** The SDK version this repository builds the prebuilt workflow bundle with (its installed @temporalio/workflow). */
const BUNDLED_SDK = (
  JSON.parse(
    fs.readFileSync(path.join(path.dirname(require.resolve('@temporalio/workflow')), '..', 'package.json'), 'utf8'),
  ) as { version: string }
).version;
/** What users install (`tuneflow` on the registry is another project); the command stays `tuneflow`. */
const PACKAGE = manifest.name;
/** The caller's namespace and tuneflow's, on the one dev server. */
const SHOP = 'shop';
const IMAGES = 'images';

/** npm and node as a user runs them: none of the variables `npm test` set for this process. */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name)));
  return { ...env, ...extra };
}

async function run(command: string, args: string[], cwd: string, env = userEnv()) {
  try {
    return await promisify(execFile)(command, args, { cwd, env, maxBuffer: 64 * 1024 * 1024 });
  } catch (err) {
    const { stdout, stderr } = err as { stdout?: string; stderr?: string };
    throw new Error(`${command} ${args.join(' ')} failed in ${cwd}:\n${stdout ?? ''}\n${stderr ?? ''}`);
  }
}

/** The build this test packs must be of the current sources (`npm test` builds first). */
function assertBuilt(): void {
  const built = path.join(ROOT, 'lib', 'index.js');
  if (!fs.existsSync(built)) throw new Error('lib/ is not built: run `npm run build` (npm test does)');
  const newest = (dir: string): number =>
    Math.max(
      ...fs.readdirSync(dir, { withFileTypes: true }).map((entry) => {
        const full = path.join(dir, entry.name);
        return entry.isDirectory() ? newest(full) : fs.statSync(full).mtimeMs;
      }),
    );
  if (newest(path.join(ROOT, 'src')) > fs.statSync(built).mtimeMs)
    throw new Error('lib/ is older than src/: run `npm run build` (npm test does)');
}

let project: string;
let tarball: string;
let installOutput: { stdout: string; stderr: string };
let server: DevServerProcess | undefined;

beforeAll(async () => {
  if (currentVerdict().devServer.kind === 'unavailable') return;
  assertBuilt();
  project = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-consumer-'));
  const packed = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', project], ROOT);
  tarball = path.join(project, (JSON.parse(packed.stdout) as Array<{ filename: string }>)[0].filename);
  fs.cpSync(path.join(CONSUMER, 'src'), path.join(project, 'src'), { recursive: true });
  fs.copyFileSync(path.join(CONSUMER, 'tsconfig.json'), path.join(project, 'tsconfig.json'));
  // The caller project: its own sources and tsconfig, resolving packages from the same installed node_modules.
  fs.cpSync(path.join(CONSUMER, 'caller'), path.join(project, 'caller'), { recursive: true });
  // The user's own SDK, at the version tuneflow takes as a peer: npm installs the rest of it beside.
  const temporal = manifest.peerDependencies['@temporalio/worker'];
  fs.writeFileSync(
    path.join(project, 'package.json'),
    JSON.stringify({
      name: 'portraits',
      private: true,
      dependencies: {
        [PACKAGE]: `file:${path.basename(tarball)}`,
        '@temporalio/client': temporal,
        '@temporalio/worker': temporal,
        '@temporalio/workflow': temporal,
      },
      devDependencies: {
        typescript: manifest.devDependencies.typescript,
        '@types/node': manifest.devDependencies['@types/node'],
      },
    }),
  );
  // From npm's cache where `npm ci` filled it; the registry otherwise.
  installOutput = await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund'], project);
  server = await startDevServerProcess({
    executable: devServerExecutable(),
    extraArgs: ['--namespace', IMAGES, '--namespace', SHOP],
  });
}, 600_000);

afterAll(async () => {
  await server?.stop();
  if (project) fs.rmSync(project, { recursive: true, force: true });
});

devServerTest(
  'the tarball installs with its own dependencies only, and its entry points type-check',
  async () => {
    const installed = path.join(project, 'node_modules');
    expect(JSON.parse(fs.readFileSync(path.join(installed, PACKAGE, 'package.json'), 'utf8')).version).toBe(
      manifest.version,
    );
    // None of the repository's dev dependencies came along (the user's own TypeScript and node types aside), unless
    // a dependency of the package needs it too (@temporalio/proto comes with @temporalio/client).
    const userOwn = ['typescript', '@types/node'];
    const needed = dependencyClosure(installed, path.join(installed, PACKAGE));
    const devOnly = Object.keys(manifest.devDependencies).filter(
      (name) => !userOwn.includes(name) && !needed.has(name),
    );
    expect(devOnly.filter((name) => fs.existsSync(path.join(installed, name)))).toEqual([]);
    // No script npm runs (or lists for review) when it installs the package: the build runs when it is packed.
    const shipped = JSON.parse(fs.readFileSync(path.join(installed, PACKAGE, 'package.json'), 'utf8')) as {
      scripts?: Record<string, string>;
      peerDependencies?: Record<string, string>;
    };
    const lifecycle = ['preinstall', 'install', 'postinstall', 'preprepare', 'prepare', 'postprepare'];
    expect(Object.keys(shipped.scripts ?? {}).filter((name) => lifecycle.includes(name))).toEqual([]);
    expect(`${installOutput.stdout}${installOutput.stderr}`).not.toContain(`${PACKAGE}@${manifest.version} (`);
    // The SDK as a peer at one exact version, the one the prebuilt workflow bundle was built with: one SDK a worker.
    const peers = shipped.peerDependencies ?? {};
    expect(Object.keys(peers).filter((name) => !name.startsWith('@temporalio/'))).toEqual([]);
    for (const [name, version] of Object.entries(peers)) {
      expect({ name, version }).toEqual({ name, version: BUNDLED_SDK });
      const beside = JSON.parse(fs.readFileSync(path.join(installed, name, 'package.json'), 'utf8')) as {
        version: string;
      };
      expect({ name, installed: beside.version }).toEqual({ name, installed: version });
    }
    // Only the built package: no sources, tests or histories.
    expect(fs.readdirSync(path.join(installed, PACKAGE)).sort()).toEqual([
      'LICENSE',
      'README.md',
      'bin',
      'lib',
      'package.json',
    ]);

    // type-checks.ts holds @ts-expect-error lines: types that decayed to `any` fail the compile.
    await run(process.execPath, [path.join(installed, 'typescript', 'bin', 'tsc'), '-p', '.'], project);
    expect(fs.readdirSync(path.join(project, 'dist')).sort()).toEqual(['main.js', 'type-checks.js', 'workflows.js']);
    // Plain require works too, with the documented entry points and nothing else.
    const probe = `
    const t = require('tuneflow-temporal'), w = require('tuneflow-temporal/workflows'), m = require('tuneflow-temporal/testing');
    let internal = 'refused';
    try { require('tuneflow-temporal/lib/client'); internal = 'allowed'; } catch {}
    console.log(JSON.stringify({ plugin: typeof t.TuneflowPlugin, client: typeof t.TuneflowClient,
      workflow: typeof w.trainThenGenerate, mock: typeof m.startMockService, internal,
      bin: require('tuneflow-temporal/package.json').bin,
      schemas: ${JSON.stringify(WORKFLOW_NAMES)}.map((w) => [require('tuneflow-temporal/schemas/' + w + '.json'),
        require('tuneflow-temporal/schemas/nexus/' + w + '.json')]) }));`;
    const { stdout } = await run(process.execPath, ['-e', probe], project);
    expect(JSON.parse(stdout)).toEqual({
      plugin: 'function',
      client: 'function',
      workflow: 'function',
      mock: 'function',
      internal: 'refused',
      bin: { tuneflow: 'bin/tuneflow.js' },
      // The JSON Schemas it ships for callers in any language.
      schemas: WORKFLOW_NAMES.map((w) => [inputSchema(w), inputSchema(w, { nexus: true })]),
    });
    const help = await run(path.join(installed, '.bin', 'tuneflow'), ['--help'], project);
    expect(help.stdout).toContain('Usage: tuneflow <command>');
    const schema = await run(path.join(installed, '.bin', 'tuneflow'), ['schema', 'packTune'], project);
    expect(JSON.parse(schema.stdout)).toEqual(inputSchema('packTune'));
  },
  300_000,
);

interface ConsumerRun {
  result: { tuneId: number; images: string[]; child: TrainThenGenerateResult };
  childWorkflowId: string;
  stats: MockStats;
  callbackWorkflowIds: (string | null)[];
  receiverOpenWhileRunning: boolean;
  receiverClosedAfter: boolean;
}

devServerTest(
  'npm refuses the tarball beside another version of the SDK (a worker holds one SDK)',
  async () => {
    const other = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-other-sdk-'));
    try {
      fs.writeFileSync(
        path.join(other, 'package.json'),
        JSON.stringify({
          name: 'other-sdk',
          private: true,
          dependencies: { [PACKAGE]: `file:${tarball}`, '@temporalio/client': '1.23.0' },
        }),
      );
      const refused = await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund'], other).then(
        () => 'installed',
        (err: Error) => err.message,
      );
      expect(refused).toMatch(/ERESOLVE/);
      expect(refused).toContain(`peer @temporalio/client@"${manifest.peerDependencies['@temporalio/client']}"`);
      expect(fs.existsSync(path.join(other, 'node_modules', PACKAGE))).toBe(false);
    } finally {
      fs.rmSync(other, { recursive: true, force: true });
    }
  },
  300_000,
);

devServerTest(
  "a user's worker with TuneflowPlugin runs the user's parent workflow and its trainThenGenerate child, by callbacks",
  async () => {
    const orderId = `order-${Date.now()}`;
    const callbackPort = await freePort();
    const env = userEnv({
      TEMPORAL_ADDRESS: server!.address,
      ORDER_ID: orderId,
      CALLBACK_PORT: String(callbackPort),
    });
    const { stdout } = await run(process.execPath, ['dist/main.js'], project, env);
    const out = JSON.parse(stdout.trim().split('\n').pop()!) as ConsumerRun;

    // Typed results through the child: one tune, both prompts' images.
    expect(out.result.tuneId).toBe(out.result.child.tune.id);
    expect(out.result.child.prompts.map((p) => p.text)).toEqual([
      'ohwx person, oil painting',
      'ohwx person, at the beach',
    ]);
    expect(out.result.images).toHaveLength(3);
    // Exactly one tune and one prompt per prompt; callbacks ended every wait, by the reads they asked for: the tune
    // once, the prompts by one list call (two if their callbacks came apart); nothing was polled.
    const { 'GET /tunes/:id/prompts': lists, ...rest } = out.stats.routes;
    expect(rest).toEqual({ 'POST /tunes': 1, 'GET /tunes/:id': 1, 'POST /tunes/:id/prompts': 2 });
    expect([1, 2]).toContain(lists);
    expect(out.stats.callbacks).toMatchObject({ sent: 3, failed: 0 });
    // The callbacks were addressed to the child, by its own workflow ID.
    expect(out.childWorkflowId).toBe(`${orderId}-tune`);
    expect(out.callbackWorkflowIds).toEqual([out.childWorkflowId, out.childWorkflowId, out.childWorkflowId]);
    // The plugin's receiver ran for the worker's lifetime, and closed with it.
    expect(out.receiverOpenWhileRunning).toBe(true);
    expect(out.receiverClosedAfter).toBe(true);

    const connection = await Connection.connect({ address: server!.address });
    try {
      const client = new Client({ connection });
      const parent = await client.workflow.getHandle(orderId).fetchHistory();
      const started = parent.events!.find((e) => e.childWorkflowExecutionStartedEventAttributes);
      expect(started?.childWorkflowExecutionStartedEventAttributes).toMatchObject({
        workflowType: { name: 'trainThenGenerate' },
        workflowExecution: { workflowId: out.childWorkflowId },
      });
      expect(summarize(parent).activities).toEqual([]);
      const child = summarize(await client.workflow.getHandle(out.childWorkflowId).fetchHistory());
      expect(child.activities).toEqual([
        'createTune',
        'retrieveTune',
        'createPrompt',
        'createPrompt',
        ...Array(lists).fill('listPrompts'),
      ]);
      expect(child.signals).toEqual(['callback', 'callback', 'callback']);
      expect(child.timers.every((t) => t.ended === 'cancelled')).toBe(true);
    } finally {
      await connection.close();
    }
  },
  300_000,
);

devServerTest(
  "another namespace's caller project, importing tuneflow-temporal/nexus alone, compiles against the tarball and runs an order through an endpoint to the tarball's own worker",
  async () => {
    // Compiled by its own TypeScript, against the installed tarball's types.
    await run(
      process.execPath,
      [path.join(project, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'caller'],
      project,
    );
    const dist = path.join(project, 'caller', 'dist');
    expect(fs.readdirSync(dist).sort()).toEqual(['main.js', 'workflows.js']);
    // What each compiled file requires: of tuneflow, the contract entry point alone.
    const required = (file: string) =>
      [
        ...new Set(
          [...fs.readFileSync(path.join(dist, file), 'utf8').matchAll(/require\("([^"]+)"\)/g)].map((m) => m[1]),
        ),
      ].sort();
    expect(required('workflows.js')).toEqual(['@temporalio/workflow', 'tuneflow-temporal/nexus']);
    expect(required('main.js')).toEqual(['./workflows', '@temporalio/client', '@temporalio/worker']);

    // tuneflow's side, as the image team runs it: the tarball's `tuneflow worker` in its namespace, and an endpoint
    // to its task queue made with the Temporal CLI, as an operator makes it.
    const apiKey = 'consumer-caller-test-key';
    const mock = await startMockService({
      host: '127.0.0.1',
      trainingTime: '1s',
      inferenceTime: '500ms',
      apiKeys: [apiKey],
    });
    const taskQueue = 'tuneflow';
    await run(
      devServerExecutable(),
      [
        ...['operator', 'nexus', 'endpoint', 'create', '--address', server!.address, '--name', 'tuneflow'],
        ...['--target-namespace', IMAGES, '--target-task-queue', taskQueue],
      ],
      project,
    );
    const worker = await startWorkerProcess({
      bin: path.join(project, 'node_modules', PACKAGE, 'bin', 'tuneflow.js'),
      temporalAddress: server!.address,
      apiKey,
      apiUrl: mock.url,
      taskQueue,
      callbackPort: await freePort(),
      // The operator's map: the endpoint is the shop's tenant.
      env: { TEMPORAL_NAMESPACE: IMAGES, TUNEFLOW_TENANT_ENDPOINTS: 'tuneflow=shop' },
    });
    const orderId = `shop-order-${Date.now()}`;
    try {
      const { stdout } = await run(
        process.execPath,
        ['caller/dist/main.js'],
        project,
        userEnv({
          TEMPORAL_ADDRESS: server!.address,
          TEMPORAL_NAMESPACE: SHOP,
          ORDER_ID: orderId,
          TUNEFLOW_ENDPOINT: 'tuneflow',
          IMAGE_URL: `${mock.url}/images/training-1.png`,
        }),
      );
      const result = JSON.parse(stdout.trim().split('\n').pop()!) as {
        tuneId: number;
        images: string[];
        refused: unknown;
      };
      expect(result.tuneId).toBeGreaterThan(0);
      expect(result.images).toHaveLength(2);
      // The refused follow-up reached the caller typed, naming the field; it created nothing.
      expect(result.refused).toEqual({ type: 'InvalidInput', field: 'prompts[0].num_images' });
      const { 'GET /tunes/:id/prompts': lists, ...rest } = mock.stats().routes;
      expect(rest).toEqual({ 'POST /tunes': 1, 'GET /tunes/:id': 1, 'POST /tunes/:id/prompts': 1 });
      expect(lists).toBeGreaterThanOrEqual(1);

      const connection = await Connection.connect({ address: server!.address });
      try {
        const shop = await new Client({ connection, namespace: SHOP }).workflow.getHandle(orderId).fetchHistory();
        const scheduled = shop.events!.flatMap((e) => e.nexusOperationScheduledEventAttributes ?? []);
        expect(scheduled.map((s) => [s.endpoint, s.service, s.operation])).toEqual([
          ['tuneflow', 'tuneflow', 'trainThenGenerate'],
          ['tuneflow', 'tuneflow', 'generate'],
        ]);
        expect(JSON.stringify(shop)).not.toContain(apiKey);
        // tuneflow's run, by the business key scoped to the caller's namespace, in tuneflow's; none for the refused key.
        const images = new Client({ connection, namespace: IMAGES }).workflow;
        const tuneRun = summarize(await images.getHandle(`tuneflow:nexus:${SHOP}:${orderId}-tune`).fetchHistory());
        expect(tuneRun.activities.slice(0, 2)).toEqual(['createTune', 'retrieveTune']);
        await expect(images.getHandle(`tuneflow:nexus:${SHOP}:${orderId}-tune-more`).describe()).rejects.toThrow(
          /not found/i,
        );
      } finally {
        await connection.close();
      }
    } finally {
      worker.child.kill('SIGTERM');
      await worker.exited;
      await mock.close();
    }
  },
  300_000,
);

/** The names of every package `from` needs, as installed under `root` (Node's lookup: nearest node_modules first). */
function dependencyClosure(root: string, from: string): Set<string> {
  const names = new Set<string>();
  const visit = (dir: string) => {
    const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>;
      optionalDependencies?: Record<string, string>;
      peerDependencies?: Record<string, string>;
    };
    const needs = { ...manifest.dependencies, ...manifest.optionalDependencies, ...manifest.peerDependencies };
    for (const name of Object.keys(needs)) {
      let found: string | undefined;
      for (let at = dir; !found && at.startsWith(root); at = path.dirname(at)) {
        const candidate = path.join(at, 'node_modules', name);
        if (fs.existsSync(path.join(candidate, 'package.json'))) found = candidate;
      }
      found ??= fs.existsSync(path.join(root, name, 'package.json')) ? path.join(root, name) : undefined;
      if (!found || names.has(`${name}@${found}`)) continue;
      names.add(`${name}@${found}`);
      names.add(name);
      visit(found);
    }
  };
  visit(from);
  return names;
}
