/**
 * Every code block of README.md runs as printed: here, or in the test named beside it (which reads the README's own
 * text), or it is listed below with the reason it is not run. A block added to the README, or one moved under another
 * heading, fails the first test until it is placed here.
 *
 * "Use it in your own worker" is run here, as a newcomer runs it: a new project made by the README's commands (the
 * one liberty: `tuneflow-temporal` is the tarball `npm pack` makes of this repository), its tsconfig.json and source
 * files as printed, compiled by its own TypeScript, then the worker and the start against a real dev server and the
 * mock service. The README's fixed ports (8080, and Temporal's 7233 through TEMPORAL_ADDRESS) are free ones here.
 * First, the worker with callbacks on a port another process holds: it stops naming the variable and the real error.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { KeyInUseError } from '../../src/contract/keys';
import { startMockService, type MockService } from '../../src/mock-service';
import { startDevServerProcess, type DevServerProcess } from '../../src/temporal-server/dev-server';
import { commandsOf, readmeBlocks } from '../readme-blocks';
import { devServerExecutable, devServerTest } from './environment';
import { summarize } from './history-summary';
import { queueLimits } from '../../src/task-queue-limits';

jest.setTimeout(600_000);

const ROOT = path.resolve(__dirname, '../..');
const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  name: string;
  peerDependencies: Record<string, string>;
};

const OWN_WORKER = '## Use it in your own worker';

/** Where each block is run, or why it is not. */
const PLACES: Record<string, { here: string } | { by: string } | { notRun: string }> = {
  '## Quick start #1': { by: '.ci/run' },
  '## Run it locally #1': { by: 'test/workflows/run-locally.test.ts' },
  '## What it does #1': { notRun: 'a diagram' },
  [`${OWN_WORKER} #1`]: { here: 'the new project' },
  [`${OWN_WORKER} #2`]: { here: "the project's tsconfig.json" },
  [`${OWN_WORKER} #3`]: { here: 'src/workflows.ts' },
  [`${OWN_WORKER} #4`]: { here: 'src/worker.ts' },
  [`${OWN_WORKER} #5`]: { here: 'src/start.ts' },
  [`${OWN_WORKER} #6`]: { here: 'compiled, the worker and the start' },
  '### From TypeScript #1': { by: 'test/workflows/nexus-readme.test.ts' },
  '### One key, one job, one payment #1': { here: "KeyInUseError's message" },
  '### From another namespace #1': { by: 'test/workflows/nexus-readme.test.ts' },
  '### From another namespace #2': { by: 'test/workflows/nexus-readme.test.ts' },
  '### From another namespace #3': { here: "KeyInUseError's message, the BAD_REQUEST HandlerError's own" },
  '### Tenants #1': { by: 'test/workflows/tenants.test.ts' },
  '### A fair share #1': { here: "the operator's commands, then what the server holds" },
  "### A team's spend ceiling #1": {
    notRun:
      "an operator's commands against a worker whose tenants have budgets; test/workflows/tenant-spend.test.ts runs `tuneflow spend --tenant shop --json` against a ledger on a dev server, and test/cli/cli.test.ts refuses its bad flags",
  },
  '### Callers in any language #1': { by: 'test/workflows/schema-start.test.ts' },
  '### Versioned deploys #1': { by: 'test/workflows/worker-versioning.test.ts' },
  '### Versioned deploys #2': { by: 'test/workflows/worker-versioning.test.ts' },
  '### Images in your storage #1': { by: 'test/workflows/image-storage.test.ts' },
  '### A live page for your end users #1': { by: 'test/workflows/live-page.test.ts' },
  '### Compressed payloads #1': { by: 'test/workflows/compressed-payloads.test.ts' },
  '### Finding jobs #1': { by: 'test/workflows/search-attributes.test.ts' },
  '### Finding jobs #2': { by: 'test/workflows/search-attributes.test.ts' },
  '### Dashboard and alerts #1': { by: 'test/deploy/alerts.test.ts' },
  '### The worker #1': {
    notRun:
      'a production worker: a cluster at temporal:7233, a real API key and a public callback URL; the same command on local values is "Run it locally"\'s terminal 3',
  },
  '## The mock service #1': { by: 'test/mock-service/production.test.ts' },
};

const blocks = readmeBlocks();

describe('every code block of the README', () => {
  test('is run here or by a named test that reads the README, or is listed with its reason', () => {
    expect(blocks.map((b) => b.id).sort()).toEqual(Object.keys(PLACES).sort());
    for (const block of blocks) {
      const place = PLACES[block.id];
      if (!('by' in place)) continue;
      const test = fs.readFileSync(path.join(ROOT, place.by), 'utf8');
      if (place.by === '.ci/run') {
        expect(commandsOf(block.text)).toContain(test.trim().split('\n').pop());
        continue;
      }
      // It reads README.md, under this block's heading.
      expect(test).toMatch(/README/);
      expect(test).toContain(block.heading.replace(/^#+ /, ''));
    }
  });

  test("a refused key reads as printed: KeyInUseError's message, which a Nexus caller's HandlerError carries as it is", () => {
    const printed = (id: string) => blocks.find((b) => b.id === id)!.text.trim();
    const refusal = (fields: string[]) =>
      new KeyInUseError('order-1234', { workflow: 'trainThenGenerate' }, fields).message;
    expect(printed('### One key, one job, one payment #1')).toBe(refusal(['input.prompts[0].text']));
    // The caller's HandlerError (type BAD_REQUEST) has the message alone (test/workflows/nexus-readme.test.ts).
    expect(printed('### From another namespace #3')).toBe(refusal(['input.tune.name']));
  });
});

/** npm, node and bash as a user runs them: none of the variables `npm test` or tuneflow's own runs set. */
function userEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !/^(npm_|TUNEFLOW_|TEMPORAL_|OTEL_)/i.test(name)),
  );
  return { ...env, npm_config_prefer_offline: 'true', npm_config_fund: 'false', npm_config_audit: 'false', ...extra };
}

async function bash(script: string, cwd: string, env: NodeJS.ProcessEnv) {
  try {
    return await promisify(execFile)('bash', ['-euo', 'pipefail', '-c', script], {
      cwd,
      env,
      maxBuffer: 64 * 1024 * 1024,
    });
  } catch (err) {
    const { stdout, stderr } = err as { stdout?: string; stderr?: string };
    throw new Error(`\`${script}\` failed in ${cwd}:\n${stdout ?? ''}\n${stderr ?? ''}`);
  }
}

describe(OWN_WORKER, () => {
  let scratch: string;
  let server: DevServerProcess | undefined;
  let mock: MockService | undefined;
  let worker: ChildProcess | undefined;

  afterAll(async () => {
    if (worker?.exitCode === null) process.kill(-worker.pid!, 'SIGKILL');
    await server?.stop();
    await mock?.close();
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
  });

  devServerTest(
    'a new project made as printed runs its own workflow, whose trainThenGenerate child trains once however often the order starts',
    async () => {
      const own = blocks.filter((b) => b.heading === OWN_WORKER);
      const [setup, tsconfig, ...rest] = own;
      const sources = rest.filter((b) => b.language === 'ts');
      const [commands] = rest.filter((b) => b.language === 'sh');
      expect([setup.language, tsconfig.language, commands.language]).toEqual(['sh', 'json', 'sh']);

      // The SDK the README installs is the one tuneflow depends on.
      const install = commandsOf(setup.text).find((c) => c.startsWith('npm install tuneflow-temporal '))!;
      for (const pkg of ['client', 'worker', 'workflow'])
        expect(install).toContain(`@temporalio/${pkg}@${manifest.peerDependencies[`@temporalio/${pkg}`]}`);

      scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-readme-'));
      const packed = await bash(`npm pack --ignore-scripts --json --pack-destination ${scratch}`, ROOT, userEnv({}));
      const tarball = path.join(scratch, (JSON.parse(packed.stdout) as Array<{ filename: string }>)[0].filename);
      [server, mock] = await Promise.all([
        startDevServerProcess({ executable: devServerExecutable() }),
        startMockService(),
      ]);
      const mockHost = new URL(mock.url).host;
      const env = userEnv({ TEMPORAL_ADDRESS: server.address });
      const onOurPorts = (text: string) => text.replaceAll('127.0.0.1:8080', mockHost);

      // The project, made by the README's commands: the tarball for the registry's package.
      const made = commandsOf(setup.text).map((c) =>
        c.startsWith('npm install tuneflow-temporal ') ? c.replace('tuneflow-temporal', tarball) : c,
      );
      await bash(made.join('\n'), scratch, env);
      const project = path.join(scratch, 'portraits');
      expect(JSON.parse(fs.readFileSync(path.join(project, 'package.json'), 'utf8')).type).toBe('module');
      fs.writeFileSync(path.join(project, 'tsconfig.json'), tsconfig.text);
      for (const source of sources) {
        const file = /^\/\/ (src\/\S+\.ts)\n/.exec(source.text)?.[1];
        if (!file) throw new Error(`a TypeScript block under ${OWN_WORKER} does not start with its file name`);
        fs.mkdirSync(path.dirname(path.join(project, file)), { recursive: true });
        fs.writeFileSync(path.join(project, file), onOurPorts(source.text));
      }

      // tsc, then the worker left running as in its terminal, then the start, twice.
      const [compile, startWorker, start, ...none] = commandsOf(onOurPorts(commands.text));
      expect([compile, none]).toEqual(['npx tsc', []]);
      expect(startWorker).toMatch(/node lib\/worker\.js$/);
      await bash(compile, project, env);

      // With callbacks while another process holds the receiver's port (terminal 3's worker): the worker stops,
      // naming the variable and the listen's own error, which the example's `connection.close()` does not mask.
      const holder = net.createServer();
      await new Promise<void>((resolve) => holder.listen(0, '0.0.0.0', resolve));
      const heldPort = (holder.address() as net.AddressInfo).port;
      const refused = await bash(startWorker, project, {
        ...env,
        TUNEFLOW_CALLBACK_BASE_URL: `http://127.0.0.1:${heldPort}`,
        TUNEFLOW_CALLBACK_SECRET: 'a-secret-of-16-characters-or-more',
        TUNEFLOW_CALLBACK_PORT: String(heldPort),
      }).then(
        () => 'the worker ran',
        (err: Error) => err.message,
      );
      await new Promise((resolve) => holder.close(resolve));
      expect(refused).toMatch(
        new RegExp(`TUNEFLOW_CALLBACK_PORT: port ${heldPort} is taken \\(listen EADDRINUSE: address already in use`),
      );
      expect(refused).not.toContain('IllegalStateError');

      let workerOutput = '';
      worker = spawn('bash', ['-c', startWorker], { cwd: project, env, detached: true, stdio: 'pipe' });
      worker.stdout!.on('data', (c: Buffer) => (workerOutput += c));
      worker.stderr!.on('data', (c: Buffer) => (workerOutput += c));
      const workerExit = new Promise<number | null>((resolve) => worker!.on('close', resolve));

      const ordered = () =>
        bash(start, project, env).catch((err: Error) => {
          throw new Error(`${err.message}\nthe worker said:\n${workerOutput}`);
        });
      const first = await ordered();
      // The plugin said what it set up, through the worker's logger: the service it calls, no callbacks, no uploads.
      expect(workerOutput).toMatch(/tuneflow worker started/);
      expect(workerOutput).toContain(`apiUrl: 'http://${mockHost}'`);
      expect(workerOutput).toContain("callbacks: 'off (polling only)'");
      const again = await ordered();
      expect(first.stdout).toMatch(/tuneId: \d+/);
      expect(first.stdout.match(new RegExp(`'http://${mockHost}/[^']+'`, 'g'))).toHaveLength(2);
      // Each image copied to the embedded default storage, portraits/images, with its SHA-256.
      const copies = [...first.stdout.matchAll(/location: '(file:\/\/[^']+)',\s+sha256: '([0-9a-f]{64})'/g)];
      expect(copies).toHaveLength(2);
      for (const [, location, digest] of copies) {
        expect(location).toMatch(
          new RegExp(`^file://${project}/images/default/order-1001-tune/prompt-\\d+/image-[01]\\.png$`),
        );
        const bytes = fs.readFileSync(new URL(location));
        expect(createHash('sha256').update(bytes).digest('hex')).toBe(digest);
      }
      expect(workerOutput).toContain(`storage: 'folder ${project}/images'`);
      expect(again.stdout).toBe(first.stdout);
      // One tune and one prompt, though the order ran twice: the second run's child found the key claimed.
      expect(mock.stats().routes['POST /tunes']).toBe(1);
      expect(mock.stats().routes['POST /tunes/:id/prompts']).toBe(1);

      // Ctrl-C in its terminal: the worker drains and exits 0.
      process.kill(-worker.pid!, 'SIGINT');
      expect(await workerExit).toBe(0);

      const connection = await Connection.connect({ address: server.address });
      try {
        const client = new Client({ connection });
        const order = await client.workflow.getHandle('order-1001').fetchHistory();
        const started = order.events!.find((e) => e.startChildWorkflowExecutionInitiatedEventAttributes);
        expect(started!.startChildWorkflowExecutionInitiatedEventAttributes!.workflowType!.name).toBe(
          'trainThenGenerate',
        );
        expect(started!.startChildWorkflowExecutionInitiatedEventAttributes!.workflowId).toBe('order-1001-tune');
        const runs: string[] = [];
        for await (const run of client.workflow.list({ query: `WorkflowId = 'order-1001-tune'` })) runs.push(run.runId);
        expect(runs).toHaveLength(2);
        const child = summarize(
          await client.workflow.getHandle('order-1001-tune', runs[runs.length - 1]).fetchHistory(),
        );
        expect(child.activities).toEqual(['createTune', 'retrieveTune', 'createPrompt', 'listPrompts', 'storeImages']);
        const repeat = summarize(await client.workflow.getHandle('order-1001-tune', runs[0]).fetchHistory());
        expect(repeat.activities).toEqual(['priorJob']);
      } finally {
        await connection.close();
      }
    },
  );
});

describe('### A fair share', () => {
  let server: DevServerProcess | undefined;

  afterAll(async () => {
    await server?.stop();
  });

  devServerTest(
    "the operator's commands as printed set the queue's rate, the weights and each tenant's rate on the server, and the last says what it holds",
    async () => {
      const [block] = blocks.filter((b) => b.heading === '### A fair share');
      const commands = commandsOf(block.text);
      expect(commands.map((c) => c.split(' ').slice(0, 3).join(' '))).toEqual(
        Array(4).fill('npx tuneflow queue-limits'),
      );
      server = await startDevServerProcess({ executable: devServerExecutable() });
      // As a user runs them, one after another in the checkout (npx runs this package's bin) on TEMPORAL_ADDRESS.
      const env = userEnv({ TEMPORAL_ADDRESS: server.address });
      const outputs: string[] = [];
      for (const command of commands) outputs.push((await bash(command, ROOT, env)).stdout);

      const connection = await Connection.connect({ address: server.address });
      try {
        const held = await queueLimits({
          service: connection.workflowService,
          namespace: 'default',
          taskQueue: 'tuneflow',
        });
        expect(held).toEqual({ queueRate: 16, tenantRate: 4, weights: { shop: 2, studio: 0.5 } });
      } finally {
        await connection.close();
      }
      // Each command answers with what the server then holds; the last, which sets nothing, with all three.
      expect(outputs[0]).toBe(
        'task queue tuneflow (namespace default): queue 16/s, no per-tenant limit, every weight 1\n',
      );
      expect(outputs[3]).toBe(
        'task queue tuneflow (namespace default): queue 16/s, each tenant 4/s times its weight, weights shop=2,studio=0.5\n',
      );
      expect(outputs[2]).toBe(outputs[3]);
    },
  );
});
