/**
 * The floor's half of `npm run soak -- --compare-floor`: the same job plan (kinds, prompts, inputs, start schedule)
 * through the floor's workflows (./workflows.ts) on a fresh server with the same flags, with as many worker processes
 * as tuneflow had, the same worker options (SDK defaults, the same cache size, the same node flags) and the mock's
 * delays (./service.ts). Measured as tuneflow's run is (bench/soak/measure.ts), so the ratios compare like with like.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import * as ts from 'typescript';
import { durationToMs } from '../../src/duration';
import { callbackSignal } from '../../src/contract/messages';
import type { TuneflowOptions } from '../../src/contract/inputs';
import { heapPeaks } from '../soak/gc-trace';
import { jobInput, planJobs, type SoakJob } from '../soak/jobs';
import { callbackTimes, readHistory } from '../soak/judge';
import {
  followRuns,
  phaseFigures,
  readOutcomes,
  startOnSchedule,
  WorkerUsage,
  type PhaseFigures,
  type Sample,
} from '../soak/measure';
import type { SoakOptions } from '../soak/options';
import { startNode, stopGracefully, usageOf, workerNodeFlags, type TuneflowProcess } from '../soak/processes';
import { startSoakServer } from '../soak/server';
import { machineCpu, machineCpuMsSince } from '../machine';
import { FLUX_BASE_TUNE, startMockService } from '../../src/mock-service';
import { FloorService, type FloorRequest } from './service';

export interface FloorRun {
  figures: PhaseFigures;
  samples: Sample[];
  reactionMs: number[];
  /** Each planned job's command sequence, in plan order. */
  sequences: string[][];
  /** What keeps the floor's figures from standing: runs that did not complete, starts that failed. */
  violations: string[];
}

/**
 * Bundles the floor's workflows into `dir` (as `npm run build` bundles tuneflow's: the worker loads it, it does not
 * bundle) and compiles its worker script to JavaScript (no TypeScript loader in the measured process).
 */
async function buildFloor(dir: string): Promise<{ bundle: string; worker: string }> {
  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve('./workflows'),
    logger: new DefaultLogger('WARN'),
  });
  const bundle = path.join(dir, 'floor-bundle.js');
  fs.writeFileSync(bundle, code);
  const source = fs.readFileSync(path.join(__dirname, 'worker.ts'), 'utf8');
  const { outputText } = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
  });
  const worker = path.join(dir, 'floor-worker.js');
  fs.writeFileSync(worker, outputText);
  return { bundle, worker };
}

/**
 * Runs the plan of `runId` through the floor and measures it.
 *
 * @example
 * const floor = await runFloor(options, runId, mock.url, jobOptions(options), stderr);
 */
export async function runFloor(
  options: SoakOptions,
  runId: string,
  /** tuneflow's mock URL: the image URLs in the inputs weigh the same. */
  imageHost: string,
  jobOptions: TuneflowOptions,
  log: (line: string) => void,
): Promise<FloorRun> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-floor-'));
  const taskQueue = `floor-${runId}`;
  const cleanups: Array<() => Promise<unknown> | unknown> = [];
  const violations: string[] = [];
  const say = (line: string) => log(`floor: ${line}`);
  try {
    const server = await startSoakServer({ ...options, profiles: ['none'] }, dir, cleanups, say, async () => undefined);
    const built = await buildFloor(dir);
    const connection = await Connection.connect({ address: server.address });
    cleanups.push(() => connection.close());
    const client = new Client({ connection });

    let signalsFailed = 0;
    const service = new FloorService(
      {
        trainingMs: durationToMs(options.trainingTime, 'training'),
        inferenceMs: durationToMs(options.inferenceTime, 'inference'),
      },
      (workflowId, wakeUp) =>
        void client.workflow
          .getHandle(workflowId)
          .signal(callbackSignal, wakeUp)
          .catch(() => signalsFailed++),
    );
    cleanups.push(() => service.close());

    // --floor-http: a mock of the floor's own (in this process, as tuneflow's is in the harness) to read from.
    const httpKey = 'floor-http-key-0123456789';
    const mock = options.floorHttp ? await startMockService({ apiKeys: [httpKey] }) : undefined;
    if (mock) cleanups.push(() => mock.close());

    const env = {
      TEMPORAL_ADDRESS: server.address,
      ...(mock && {
        FLOOR_HTTP_URL: mock.url,
        FLOOR_HTTP_KEY: httpKey,
        FLOOR_HTTP_PATH: `/tunes/${FLUX_BASE_TUNE.id}`,
      }),
      FLOOR_TASK_QUEUE: taskQueue,
      FLOOR_BUNDLE: built.bundle,
      // The compiled worker lives in the run's folder: its packages are the repository's.
      NODE_PATH: path.resolve(__dirname, '../../node_modules'),
      ...(options.maxCachedWorkflows !== undefined && {
        FLOOR_MAX_CACHED_WORKFLOWS: String(options.maxCachedWorkflows),
      }),
    };
    const usage = new WorkerUsage();
    const workers: TuneflowProcess[] = await Promise.all(
      Array.from({ length: options.workers }, async (_, i) => {
        const worker = await startNode(
          `floor-worker-${i + 1}`,
          [...workerNodeFlags(options), built.worker],
          env,
          'floor worker started',
          path.join(dir, `floor-worker-${i + 1}.log`),
          { ipc: true },
        );
        worker.child.on('message', (request: FloorRequest) => worker.child.send(service.answer(request)));
        usage.started(worker.child.pid);
        return worker;
      }),
    );
    cleanups.push(() => Promise.all(workers.map((w) => stopGracefully(w))));
    const sampleWorkers = () => usage.sample(workers.map((w) => w.child.pid));
    say(`${options.workers} floor worker(s), task queue ${taskQueue}`);

    const jobs = planJobs(`${runId}f`, options.jobs);
    const started: SoakJob[] = [];
    const notStarted: string[] = [];
    const start = async (job: SoakJob) => {
      const input = jobInput(job, imageHost, jobOptions);
      for (let attempt = 1; ; attempt++) {
        try {
          await client.workflow.start(job.kind, {
            taskQueue,
            workflowId: job.workflowId,
            args: [input],
            // As tuneflow's starters do (src/client.ts).
            workflowIdConflictPolicy: 'FAIL',
            workflowIdReusePolicy: 'REJECT_DUPLICATE',
          });
          job.startedAt = Date.now();
          started.push(job);
          return;
        } catch (err) {
          if (attempt >= 30) return void notStarted.push(`${job.workflowId}: ${(err as Error).message}`);
          await new Promise((resolve) => setTimeout(resolve, 1_000));
        }
      }
    };
    const t0 = Date.now();
    const loadAtStart = os.loadavg()[0];
    const machineAtStart = machineCpu();
    const deadline = t0 + options.durationMs;
    const starting = startOnSchedule(jobs, options, t0, start);
    const samples = await followRuns({
      client,
      taskQueue,
      t0,
      deadline,
      allStarted: () => started.length + notStarted.length === jobs.length,
      sample: sampleWorkers,
      progress: (running) =>
        `[${String(Math.round((Date.now() - t0) / 1000)).padStart(4)}s] closed ${started.length - running}/` +
        `${jobs.length}, in flight ${running} | worker RSS ${Math.round(usage.peakRssBytes / 2 ** 20)} MiB`,
      log: say,
    });
    const times = await starting;
    const loadAverage = { start: loadAtStart, end: os.loadavg()[0] };
    const machineCpuMs = machineCpuMsSince(machineAtStart);
    const { cpuMs: workerCpuMs, mainThreadCpuMs: workerMainThreadCpuMs } = sampleWorkers();
    const serverCpuMs = server.process ? usageOf(server.process.pid)?.cpuMs : undefined;

    const sent = callbackTimes({ callbacks: service.callbacks });
    const outcomes = await readOutcomes(client, started, deadline, (job, history) =>
      readHistory(job, history, 'the floor holds no API key', sent),
    );
    const incomplete = outcomes.filter((o) => o.status !== 'completed');
    for (const o of incomplete.slice(0, 20))
      violations.push(`floor: ${o.job.workflowId} ${o.status}${o.failureMessage ? `: ${o.failureMessage}` : ''}`);
    if (incomplete.length > 20) violations.push(`floor: ${incomplete.length - 20} more runs did not complete`);
    for (const line of notStarted) violations.push(`floor: never started: ${line}`);
    if (signalsFailed) violations.push(`floor: ${signalsFailed} callback signals failed`);

    const figures = phaseFigures({
      jobs,
      outcomes,
      finished: outcomes.length - incomplete.length,
      workerCpuMs,
      workerMainThreadCpuMs,
      peakRssBytes: usage.peakRssBytes,
      serverCpuMs,
      machineCpuMs,
      times,
      samples,
      t0,
      loadAverage,
    });
    if (options.traceGc) figures.heaps = heapPeaks(fs.readFileSync(path.join(dir, 'floor-worker-1.log'), 'utf8'));
    const reactionMs = outcomes.flatMap((o) => o.reactions.map((r) => r.ms));
    const sequences = jobs.map((job) => outcomes.find((o) => o.job === job)?.sequence ?? []);
    return { figures, samples, reactionMs, sequences, violations };
  } finally {
    for (const cleanup of cleanups.reverse()) await Promise.resolve(cleanup()).catch(() => undefined);
    if (violations.length === 0 && !options.keep) fs.rmSync(dir, { recursive: true, force: true });
    else say(`logs kept in ${dir}`);
  }
}
