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
  PhaseClock,
  phaseDetail,
  phaseFigures,
  readOutcomes,
  startOnSchedule,
  type PhaseFigures,
  type PhaseUsage,
  type Sample,
  type StartTimes,
} from '../soak/measure';
import type { SoakOptions } from '../soak/options';
import { endPhase, startNode, stopProcess, workerNodeFlags, type TuneflowProcess } from '../soak/processes';
import { startSoakServer, type SoakServer } from '../soak/server';
import { SoakWorkers } from '../soak/workers';
import { startMockService, type MockService } from '../../src/mock-service';
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
  const floor = new FloorPhase(options, runId, (line) => log(`floor: ${line}`));
  try {
    await floor.setUp();
    const followed = await floor.startAndFollow((job) => jobInput(job, imageHost, jobOptions));
    const used = floor.measure();
    return await floor.judge(followed, used);
  } finally {
    await floor.tearDown();
  }
}

/** The floor's phase; each step is a method, in the order `runFloor` calls them (tuneflow's: bench/soak/run.ts). */
class FloorPhase {
  private readonly dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-floor-'));
  private readonly taskQueue: string;
  private readonly cleanups: Array<() => Promise<unknown> | unknown> = [];
  private readonly violations: string[] = [];
  private readonly jobs: SoakJob[];
  private readonly started: SoakJob[] = [];
  private readonly notStarted: string[] = [];
  // Set by setUp, in this order.
  private server!: SoakServer;
  private client!: Client;
  private mock!: MockService;
  private receiver!: TuneflowProcess;
  private workers!: SoakWorkers;
  /** Set when the jobs start. */
  private clock!: PhaseClock;

  constructor(
    private readonly options: SoakOptions,
    private readonly runId: string,
    private readonly say: (line: string) => void,
  ) {
    this.taskQueue = `floor-${runId}`;
    this.jobs = planJobs(`${runId}f`, options.jobs);
  }

  /** The server, the floor's bundle and scripts, its own mock service, its receiver and its workers. */
  async setUp(): Promise<void> {
    const { options, dir, cleanups } = this;
    this.server = await startSoakServer(
      { ...options, profiles: ['none'] },
      dir,
      cleanups,
      this.say,
      async () => undefined,
    );
    const built = await buildFloor(dir);
    const connection = await Connection.connect({ address: this.server.address });
    cleanups.push(() => connection.close());
    this.client = new Client({ connection });

    // The service: a mock of the floor's own, as tuneflow's run has (in this process, as tuneflow's is).
    const apiKey = `floor-key-${this.runId}-0123456789`;
    const mock = await startMockService({
      port: 0,
      trainingTime: options.trainingTime as `${number}s`,
      inferenceTime: options.inferenceTime as `${number}s`,
      apiKeys: [apiKey],
    });
    this.mock = mock;
    cleanups.push(() => mock.close());

    // The receiver: a process of its own, as tuneflow's is; the workers sign the URLs it checks.
    const secret = randomBytes(24).toString('hex');
    const receiverPort = await freePort();
    const receiver = await startNode(
      'floor-receiver',
      [built.receiver],
      {
        TEMPORAL_ADDRESS: this.server.address,
        FLOOR_CALLBACK_SECRET: secret,
        FLOOR_RECEIVER_PORT: String(receiverPort),
        NODE_PATH: path.resolve(__dirname, '../../node_modules'),
      },
      'floor receiver listening on',
      path.join(dir, 'floor-receiver.log'),
    );
    this.receiver = receiver;
    cleanups.push(() => stopProcess(receiver));

    const env = {
      TEMPORAL_ADDRESS: this.server.address,
      FLOOR_SERVICE_URL: mock.url,
      FLOOR_API_KEY: apiKey,
      FLOOR_RECEIVER_URL: `http://127.0.0.1:${receiverPort}`,
      FLOOR_CALLBACK_SECRET: secret,
      FLOOR_TASK_QUEUE: this.taskQueue,
      FLOOR_BUNDLE: built.bundle,
      // The compiled worker lives in the run's folder: its packages are the repository's.
      NODE_PATH: path.resolve(__dirname, '../../node_modules'),
      ...(options.maxCachedWorkflows !== undefined && {
        FLOOR_MAX_CACHED_WORKFLOWS: String(options.maxCachedWorkflows),
      }),
    };
    const args = [...workerNodeFlags(options), built.worker];
    this.workers = new SoakWorkers({ name: 'floor-worker', args, env, ready: 'floor worker started', dir }, this.say);
    await this.workers.start(options.workers);
    cleanups.push(() => this.workers.stop());
    this.say(`${options.workers} floor worker(s), task queue ${this.taskQueue}`);
  }

  /**
   * Starts the jobs on schedule (each start tried up to 30 times, a second apart), then follows the runs until every
   * one is closed or the deadline.
   */
  async startAndFollow(
    inputOf: (job: SoakJob) => unknown,
  ): Promise<{ t0: number; times: StartTimes; samples: Sample[] }> {
    const { client, jobs, started, notStarted, taskQueue } = this;
    const start = async (job: SoakJob) => {
      for (let attempt = 1; ; attempt++) {
        try {
          await client.workflow.start(job.kind, {
            taskQueue,
            workflowId: job.workflowId,
            args: [inputOf(job)],
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
    const clock = (this.clock = new PhaseClock(this.options.durationMs));
    const t0 = clock.t0;
    const starting = startOnSchedule(jobs, this.options, t0, start);
    const samples = await followRuns({
      client,
      taskQueue,
      t0,
      deadline: clock.deadline,
      allStarted: () => started.length + notStarted.length === jobs.length,
      sample: () => this.workers.sample(),
      progress: (running) =>
        `[${String(Math.round((Date.now() - t0) / 1000)).padStart(4)}s] closed ${started.length - running}/` +
        `${jobs.length}, in flight ${running} | worker RSS ${Math.round(this.workers.usage.peakRssBytes / 2 ** 20)} MiB`,
      log: this.say,
    });
    return { t0, times: await starting, samples };
  }

  /** What every process used, read at once when the runs closed: the judge's reads must not count. */
  measure(): PhaseUsage {
    return this.clock.usage(this.workers, this.server.process?.pid, this.receiver.child.pid);
  }

  /** Each run's history: every one must have completed, every callback been answered 200. */
  async judge(followed: { t0: number; times: StartTimes; samples: Sample[] }, used: PhaseUsage): Promise<FloorRun> {
    const { jobs, violations, options } = this;
    const sent = callbackTimes(this.mock.journal());
    const outcomes = await readOutcomes(this.client, this.started, this.clock.deadline, (job, history) =>
      readHistory(job, history, 'the floor holds no API key', sent),
    );
    const incomplete = outcomes.filter((o) => o.status !== 'completed');
    for (const o of incomplete.slice(0, 20))
      violations.push(`floor: ${o.job.workflowId} ${o.status}${o.failureMessage ? `: ${o.failureMessage}` : ''}`);
    if (incomplete.length > 20) violations.push(`floor: ${incomplete.length - 20} more runs did not complete`);
    for (const line of this.notStarted) violations.push(`floor: never started: ${line}`);
    const failedCallbacks = this.mock.stats().callbacks.failed;
    if (failedCallbacks) violations.push(`floor: ${failedCallbacks} callbacks were not answered 200`);

    const finished = outcomes.length - incomplete.length;
    const { peakRssBytes, baseRssBytes } = this.workers.usage;
    const figures = phaseFigures({ jobs, outcomes, finished, ...used, ...followed, peakRssBytes, baseRssBytes });
    if (options.traceGc) figures.heaps = heapPeaks(fs.readFileSync(path.join(this.dir, 'floor-worker-1.log'), 'utf8'));
    const apiCallsByRoute = apiCallsOf(this.mock.stats()).routes;
    return { figures, samples: followed.samples, ...phaseDetail(jobs, outcomes), violations, apiCallsByRoute };
  }

  async tearDown(): Promise<void> {
    await endPhase(this.cleanups, this.dir, this.violations.length > 0 || this.options.keep, this.say);
  }
}
