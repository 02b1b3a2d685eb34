/**
 * Memory per run, tuneflow beside the floor (bench/floor: bare workflows of the same Temporal shape): each in a
 * process of its own with its workflows in the worker's own thread (the SDK's debugMode, so one heap holds them all),
 * N trainThenGenerate runs started and left waiting for a training that takes an hour; then the same runs to the end
 * (a 2 s training). The heap after a full collection, before and after, divided by N:
 * - in flight: what one cached run holds (its state, its copy of the bundle's modules not preloaded);
 * - completed: what a finished run leaves behind (nothing, when the difference is the JIT's warm-up), and the promises a
 *   run's workflow code made over its life: the SDK records a stack trace for each (its `__stack_trace` query), so they
 *   are a cost of every workflow task.
 * Needs a Temporal dev server (provisioned as for the soak). Run alone: `npx tsx bench/run-memory.ts [N]`.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { promiseHooks } from 'node:v8';
import { Context } from '@temporalio/activity';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { TuneflowPlugin } from '../src';
import { startMockService } from '../src/mock-service';
import { provisionTemporal } from '../src/temporal-server';
import { freePort, startDevServerProcess } from '../src/temporal-server/dev-server';
import { FloorService } from './floor/service';
import type { FloorActivities } from './floor/workflows';

type Side = 'tuneflow' | 'floor';
interface Measure {
  side: Side;
  phase: 'in flight' | 'completed';
  runs: number;
  heapKiBPerRun: number;
  /** Promises made in workflow code (the sandbox's realm), per run. */
  promisesPerRun: number;
}

const HOUR_MS = 3_600_000;
const TRAINING_MS = { 'in flight': HOUR_MS, completed: 2_000 } as const;

/** One side, one phase, in this (child) process: prints its Measure as JSON. */
async function measure(side: Side, phase: Measure['phase'], runs: number, address: string, mockUrl: string) {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with node --expose-gc');
  const heap = () => (gc(), gc(), process.memoryUsage().heapUsed);
  // Workflow code runs in the sandbox's own realm: its promises are not this realm's.
  let promises = 0;
  promiseHooks.onInit((promise) => {
    if (!(promise instanceof Promise)) promises++;
  });
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const connection = await NativeConnection.connect({ address });
  const client = new Client({ connection: await Connection.connect({ address }) });
  const taskQueue = `run-memory-${side}-${Date.now()}`;
  // tuneflow with its callback receiver, as the floor's runs get their callbacks: the same signals on both sides.
  const port = await freePort();
  const callbacks = {
    baseUrl: `http://127.0.0.1:${port}`,
    secret: 'run-memory-callback-secret',
    port,
    host: '127.0.0.1',
  };
  const worker =
    side === 'tuneflow'
      ? await Worker.create({
          connection,
          taskQueue,
          debugMode: true,
          workflowBundle: { codePath: require.resolve('../lib/workflow-bundle.js') },
          plugins: [new TuneflowPlugin({ api: { apiKey: 'run-memory', baseUrl: mockUrl }, callbacks })],
        })
      : await floorWorker(connection, client, taskQueue, TRAINING_MS[phase]);
  const running = worker.run();
  const input = {
    tune: { name: 'woman', branch: 'fast', image_urls: [`${mockUrl}/images/training-1.png`] },
    prompts: [{ text: 'ohwx woman, portrait' }, { text: 'ohwx woman, watercolor' }],
  };
  const start = (id: string) =>
    client.workflow.start('trainThenGenerate', { taskQueue, workflowId: id, args: [input] });
  // One run first: what every worker holds once (the shared context, the preloaded contract) is in the baseline.
  const warm = await start(`${taskQueue}-warm`);
  if (phase === 'completed') await warm.result();
  await settled(worker);
  const before = heap();
  const promisesBefore = promises;
  const handles = [];
  for (let i = 0; i < runs; i++) handles.push(await start(`${taskQueue}-${i}`));
  if (phase === 'completed') await Promise.all(handles.map((h) => h.result()));
  await settled(worker);
  const after = heap();
  const result: Measure = {
    side,
    phase,
    runs,
    heapKiBPerRun: Math.round(((after - before) / runs / 1024) * 10) / 10,
    promisesPerRun: Math.round(((promises - promisesBefore) / runs) * 10) / 10,
  };
  console.log(JSON.stringify(result));
  worker.shutdown();
  await running;
}

/** Once every run started has had its workflow tasks and activities (it then waits on its timers). */
async function settled(worker: Worker): Promise<void> {
  const busy = () => {
    const status = worker.getStatus();
    return status.numInFlightWorkflowActivations + status.numInFlightActivities > 0;
  };
  do await new Promise((r) => setTimeout(r, 3_000));
  while (busy());
}

/** The floor's worker, its activities answered in this process by the floor's service. */
async function floorWorker(connection: NativeConnection, client: Client, taskQueue: string, trainingMs: number) {
  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve('./floor/workflows'),
    logger: new DefaultLogger('WARN'),
  });
  const service = new FloorService({ trainingMs, inferenceMs: 1_000 }, (workflowId, wakeUp) => {
    client.workflow
      .getHandle(workflowId)
      .signal('callback', wakeUp)
      .catch(() => undefined);
  });
  let seq = 0;
  const names: Array<keyof FloorActivities> = [
    'createTune',
    'createPackTune',
    'retrieveTune',
    'createPrompt',
    'listPrompts',
  ];
  const activities = Object.fromEntries(
    names.map((activity) => [
      activity,
      async (input: Record<string, unknown>) => {
        const workflowId = Context.current().info.workflowExecution?.workflowId ?? '';
        const answer = service.answer({ seq: ++seq, workflowId, activity, input });
        if (answer.error) throw new Error(answer.error);
        return answer.result;
      },
    ]),
  );
  return Worker.create({ connection, taskQueue, debugMode: true, workflowBundle: { code }, activities });
}

export async function benchRunMemory(runs = 300): Promise<void> {
  const provisioned = await provisionTemporal('dev-server', { strict: true, acceptAddress: false });
  if (provisioned.kind !== 'dev-server' || provisioned.executable.type !== 'existing-path') {
    console.log('run memory: not measured (no Temporal dev server executable)');
    return;
  }
  const server = await startDevServerProcess({ executable: provisioned.executable.path });
  try {
    const results: Measure[] = [];
    for (const phase of ['in flight', 'completed'] as const) {
      const mock = await startMockService({ trainingTime: `${TRAINING_MS[phase] / 1000}s`, inferenceTime: '1s' });
      try {
        for (const side of ['tuneflow', 'floor'] as const) {
          // Not spawnSync: the mock answers from this process's event loop.
          const { stdout } = await promisify(execFile)(
            process.execPath,
            ['--expose-gc', '--import', 'tsx', __filename, side, phase, String(runs), server.address, mock.url],
            { encoding: 'utf8', timeout: 10 * 60_000, maxBuffer: 64 * 1024 * 1024 },
          );
          const line = stdout.trim().split('\n').pop() ?? '';
          if (!line.startsWith('{')) throw new Error(`run memory, ${side} ${phase}: no figures`);
          results.push(JSON.parse(line) as Measure);
        }
      } finally {
        await mock.close();
      }
    }
    console.log(`heap per run (KiB, after a full collection; ${runs} trainThenGenerate runs of 1 tune and 2 prompts)`);
    console.log(`  ${''.padEnd(12)} ${'tuneflow'.padStart(9)} ${'floor'.padStart(9)}  tuneflow / floor`);
    const row = (label: string, phase: Measure['phase'], key: 'heapKiBPerRun' | 'promisesPerRun') => {
      const [t, f] = (['tuneflow', 'floor'] as const).map(
        (side) => results.find((r) => r.side === side && r.phase === phase)![key],
      );
      const ratio = f > 0 ? `${(t / f).toFixed(2)}x` : 'n/a';
      console.log(`  ${label.padEnd(12)} ${String(t).padStart(9)} ${String(f).padStart(9)}  ${ratio}`);
    };
    for (const phase of ['in flight', 'completed'] as const) row(phase, phase, 'heapKiBPerRun');
    console.log('workflow promises per run, start to end (the SDK records a stack trace for each)');
    row('completed', 'completed', 'promisesPerRun');
  } finally {
    await server.stop();
  }
}

if (require.main === module) {
  const [side, phase, runs, address, mockUrl] = process.argv.slice(2);
  const done =
    side === 'tuneflow' || side === 'floor'
      ? measure(side, phase as Measure['phase'], Number(runs), address, mockUrl)
      : benchRunMemory(side ? Number(side) : undefined);
  done.then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
