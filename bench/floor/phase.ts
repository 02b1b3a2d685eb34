/**
 * The floor's half of `npm run soak -- --compare-floor`: the same job plan (kinds, prompts, inputs, start schedule)
 * through the floor's workflows (./workflows.ts) on a fresh server with the same flags, with as many worker processes
 * as tuneflow had, the same worker options (SDK defaults, the same cache size, the same node flags), a mock service
 * of its own with the same delays, and a receiver process of its own (./receiver.ts) where tuneflow's is. Measured
 * as tuneflow's run is (bench/soak/measure.ts), so the ratios compare like with like.
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import * as ts from 'typescript';
import type { TuneflowOptions } from '../../src/contract/inputs';
import { heapPeaks } from '../soak/gc-trace';
import { jobInput, planJobs, type SoakJob } from '../soak/jobs';
import { callbackTimes, readHistory } from '../soak/judge';
import {
  apiCallsOf,
  followRuns,
  phaseFigures,
  readOutcomes,
  startOnSchedule,
  WorkerUsage,
  type PhaseFigures,
  type Sample,
} from '../soak/measure';
import type { SoakOptions } from '../soak/options';
import {
  startNode,
  stopGracefully,
  stopProcess,
  usageOf,
  workerNodeFlags,
  type TuneflowProcess,
} from '../soak/processes';
import { startSoakServer } from '../soak/server';
import { machineCpu, machineCpuMsSince } from '../machine';
import { startMockService } from '../../src/mock-service';
import { freePort } from '../../src/temporal-server/dev-server';

export interface FloorRun {
  figures: PhaseFigures;
  samples: Sample[];
  reactionMs: number[];
  /** Each planned job's command sequence, in plan order. */
  sequences: string[][];
  /** What keeps the floor's figures from standing: runs that did not complete, starts that failed. */
  violations: string[];
  /** The floor's requests to its mock, by route (images aside): tuneflow's, when it makes the same. */
  apiCallsByRoute: Record<string, number>;
}

/**
 * Bundles the floor's workflows into `dir` (as `npm run build` bundles tuneflow's: the worker loads it, it does not
 * bundle) and compiles its worker and receiver scripts to JavaScript (no TypeScript loader in the measured processes).
 */
async function buildFloor(dir: string): Promise<{ bundle: string; worker: string; receiver: string }> {
  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve('./workflows'),
    logger: new DefaultLogger('WARN'),
  });
  const bundle = path.join(dir, 'floor-bundle.js');
  fs.writeFileSync(bundle, code);
  const compile = (name: string) => {
    const source = fs.readFileSync(path.join(__dirname, `${name}.ts`), 'utf8');
    const { outputText } = ts.transpileModule(source, {
      compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
    });
    const file = path.join(dir, `floor-${name}.js`);
    fs.writeFileSync(file, outputText);
    return file;
  };
  return { bundle, worker: compile('worker'), receiver: compile('receiver') };
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

    // The service: a mock of the floor's own, as tuneflow's run has (in this process, as tuneflow's is).
    const apiKey = `floor-key-${runId}-0123456789`;
    const mock = await startMockService({
      port: 0,
      trainingTime: options.trainingTime as `${number}s`,
      inferenceTime: options.inferenceTime as `${number}s`,
      apiKeys: [apiKey],
    });
    cleanups.push(() => mock.close());

    // The receiver: a process of its own, as tuneflow's is; the workers sign the URLs it checks.
    const secret = randomBytes(24).toString('hex');
    const receiverPort = await freePort();
    const receiver = await startNode(
      'floor-receiver',
      [built.receiver],
      {
        TEMPORAL_ADDRESS: server.address,
        FLOOR_CALLBACK_SECRET: secret,
        FLOOR_RECEIVER_PORT: String(receiverPort),
        NODE_PATH: path.resolve(__dirname, '../../node_modules'),
      },
      'floor receiver listening on',
      path.join(dir, 'floor-receiver.log'),
    );
    cleanups.push(() => stopProcess(receiver));

    const env = {
      TEMPORAL_ADDRESS: server.address,
      FLOOR_SERVICE_URL: mock.url,
      FLOOR_API_KEY: apiKey,
      FLOOR_RECEIVER_URL: `http://127.0.0.1:${receiverPort}`,
      FLOOR_CALLBACK_SECRET: secret,
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
        );
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
    const receiverCpuMs = usageOf(receiver.child.pid)?.cpuMs;

    const sent = callbackTimes(mock.journal());
    const outcomes = await readOutcomes(client, started, deadline, (job, history) =>
      readHistory(job, history, 'the floor holds no API key', sent),
    );
    const incomplete = outcomes.filter((o) => o.status !== 'completed');
    for (const o of incomplete.slice(0, 20))
      violations.push(`floor: ${o.job.workflowId} ${o.status}${o.failureMessage ? `: ${o.failureMessage}` : ''}`);
    if (incomplete.length > 20) violations.push(`floor: ${incomplete.length - 20} more runs did not complete`);
    for (const line of notStarted) violations.push(`floor: never started: ${line}`);
    const failedCallbacks = mock.stats().callbacks.failed;
    if (failedCallbacks) violations.push(`floor: ${failedCallbacks} callbacks were not answered 200`);

    const figures = phaseFigures({
      jobs,
      outcomes,
      finished: outcomes.length - incomplete.length,
      workerCpuMs,
      workerMainThreadCpuMs,
      peakRssBytes: usage.peakRssBytes,
      baseRssBytes: usage.baseRssBytes,
      serverCpuMs,
      receiverCpuMs,
      machineCpuMs,
      times,
      samples,
      t0,
      loadAverage,
    });
    if (options.traceGc) figures.heaps = heapPeaks(fs.readFileSync(path.join(dir, 'floor-worker-1.log'), 'utf8'));
    const reactionMs = outcomes.flatMap((o) => o.reactions.map((r) => r.ms));
    const sequences = jobs.map((job) => outcomes.find((o) => o.job === job)?.sequence ?? []);
    return { figures, samples, reactionMs, sequences, violations, apiCallsByRoute: apiCallsOf(mock.stats()).routes };
  } finally {
    for (const cleanup of cleanups.reverse()) await Promise.resolve(cleanup()).catch(() => undefined);
    if (violations.length === 0 && !options.keep) fs.rmSync(dir, { recursive: true, force: true });
    else say(`logs kept in ${dir}`);
  }
}
