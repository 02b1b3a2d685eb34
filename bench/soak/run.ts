/**
 * One soak phase on tuneflow's side: its server, the mock service, the receiver and the workers, the jobs started on
 * schedule and followed under the faults, then measured, judged against the mock's journal and reported. `runSoak` reads
 * as the steps it takes; `npm run soak` (./index.ts) runs it once a round.
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as v8 from 'node:v8';
import { Client, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { TuneflowClient } from '../../src/client';
import { durationToMs } from '../../src/duration';
import { DEFAULT_TENANT } from '../../src/contract/tenants';
import { GALLERY_TUNES, startMockService, type MockService } from '../../src/mock-service';
import { solidPng } from '../../src/mock-service/png';
import { freePort } from '../../src/temporal-server/dev-server';
import type { TuneflowOptions } from '../../src/contract/inputs';
import {
  agree,
  MetricsScrapes,
  soakCountsOf,
  type AgreedFigures,
  type MetricsTarget,
  type SoakCounts,
} from './agreement';
import { sdkDefaultCache, sizingOf } from './sizing';
import { refusalLines, type SoakReport } from './report';
import { FaultInjection, neverTrainIds, type FaultCounts } from './faults';
import { jobsByBuild, makeCurrent, rolloutBuilds } from './rollout';
import { heapPeaks } from './gc-trace';
import {
  HostileStarters,
  judgeAttacks,
  prepareUploads,
  SECOND_TENANT,
  SOAK_TENANT_TUNES,
  UNPRICED_ROUTES,
  type UploadWorld,
} from './hostile';
import {
  ADMISSION_LIMIT_MS,
  FLOOD_TENANT,
  ORDINARY_TENANT,
  fairShareRun,
  planFairShare,
  planned,
  startFairShare,
  type FairSharePlan,
  type FairShareRun,
} from './fair-share';
import { planJobs, startJob, tenantOf, type SoakJob } from './jobs';
import { callbackTimes, JournalIndex, judgeRun, readHistory, SIGNATURE, type JobOutcome } from './judge';
import { judgeTenancy } from './tenancy';
import { SoakStorage } from './storage';
import {
  apiCallsOf,
  followRuns,
  orNull,
  PhaseClock,
  phaseDetail,
  phaseFigures,
  readOutcomes,
  startOnSchedule,
  type PhaseUsage,
  type Sample,
  type StartTimes,
} from './measure';
import type { SoakOptions } from './options';
import {
  CuttableProxy,
  endPhase,
  startTuneflow,
  stopProcess,
  tuneflowCommand,
  usageOf,
  workerNodeFlags,
  type TuneflowProcess,
} from './processes';
import { startSoakServer, type SoakServer } from './server';
import { SoakWorkers, workerEnvironment } from './workers';

export function stderr(line: string): void {
  process.stderr.write(`soak: ${line}\n`);
}

/** What a phase leaves for the charts beside its figures: the samples and every reaction. */
export interface PhaseDetail {
  samples: Sample[];
  reactionMs: number[];
  /** Each planned job's command sequence (judge.ts), in plan order; empty for a job not read. */
  sequences: string[][];
  mockUrl: string;
  /** Under fair-share: the run's two tenants' latencies, alone and with the flood (fair-share.ts). */
  fairShare?: FairShareRun;
}

/** The options every job runs with: polls that recover lost callbacks quickly, deadlines well inside the run's. */
export function jobOptions(options: Pick<SoakOptions, 'trainingTime' | 'inferenceTime'>): TuneflowOptions {
  // A longer training (a steady run with many in flight) keeps the deadline well past it.
  const seconds = (d: string) => durationToMs(d, 'duration') / 1000;
  return {
    pollInterval: '5 seconds',
    maxPollInterval: '20 seconds',
    trainingTimeout: `${Math.max(90, 2 * seconds(options.trainingTime) + 30)} seconds`,
    promptTimeout: `${Math.max(120, 2 * seconds(options.inferenceTime) + 60)} seconds`,
  };
}

/**
 * Runs one phase: the services up, the jobs started and followed, then measured, judged and reported; everything it
 * started is stopped, and its folder of logs kept only when an invariant broke (or --keep).
 *
 * @example
 * const { report, detail } = await runSoak(parseSoakOptions(['--jobs', '20']), 'r1');
 */
export async function runSoak(
  options: SoakOptions,
  runId: string,
  /** The dev server's matching.enableFairness: off only for fair-share's comparison. */
  fairness = true,
): Promise<{ report: SoakReport; detail: PhaseDetail }> {
  const soak = new SoakRun(options, runId, fairness);
  try {
    await soak.setUp();
    const followed = await soak.startAndFollow();
    const used = soak.measure();
    await soak.settle();
    const counted = await soak.lastScrape();
    const judged = await soak.judge();
    return soak.report(followed, used, judged, counted);
  } finally {
    await soak.tearDown();
  }
}

/** What following the runs left: when each job started, the samples taken each second. */
interface Followed {
  t0: number;
  times: StartTimes;
  samples: Sample[];
}

/** What the processes and the mock used, read as soon as the runs closed (before the judge adds its own). */
interface Used extends PhaseUsage {
  harnessCpuMs: number;
  stats: ReturnType<MockService['stats']>;
  apiCalls: number;
  routes: Record<string, number>;
}

/** The judge's findings over the runs' histories and the mock's journal. */
interface Judged {
  outcomes: JobOutcome[];
  verdict: ReturnType<typeof judgeRun>;
  faultCounts: FaultCounts;
  hostileFigures: SoakReport['hostile'];
  tenancy: SoakReport['tenancy'];
  storage: SoakReport['storage'];
  logLeaks: number;
  signedUrlsInLogs: number;
  /** Runs that ended as workflow code ends them (completed or failed): the jobs' and the attacks'. */
  ended: number;
}

/** One phase's state; each step is a method, in the order `runSoak` calls them. */
class SoakRun {
  private readonly dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-soak-'));
  private readonly apiKey = `soak-key-${randomBytes(12).toString('hex')}`;
  private readonly secret = randomBytes(24).toString('hex');
  private readonly taskQueue: string;
  private readonly jobOptions: TuneflowOptions;
  private readonly cleanups: Array<() => Promise<unknown> | unknown> = [];
  private readonly violations: string[] = [];
  private readonly jobs: SoakJob[];
  /** The tenants the plan's jobs take turns as: a second one under hostile-starters, whose attacks cross them. */
  private readonly tenants: string[];
  /** Under fair-share: the jobs by stage (the ordinary tenant's alone, the flood, the ordinary beside it). */
  private readonly fairShare?: FairSharePlan;
  private readonly started: SoakJob[] = [];
  private readonly notStarted: Array<{ job: SoakJob; error: string }> = [];
  /** Runs closed so far, as the progress loop last counted them. */
  private closed = 0;
  // Set by setUp, in this order.
  private server!: SoakServer;
  private mock!: MockService;
  private proxy?: CuttableProxy;
  private receiverUrl!: string;
  private receiver!: TuneflowProcess;
  /** With --metrics: where the receiver serves `/metrics`, and the run's scrapes of it and of every worker. */
  private receiverMetrics?: MetricsTarget;
  private scrapes?: MetricsScrapes;
  private uploads?: UploadWorld;
  /** With --storage: the store every worker copies the images to. */
  private storage?: SoakStorage;
  private workers!: SoakWorkers;
  /** Under --rollout: build B's workers' command and environment, and the workers once started. */
  private buildB?: { args: string[]; env: Record<string, string> };
  private workersB?: SoakWorkers;
  private rollingOut?: Promise<void>;
  /** Under fair-share: how long the ordinary jobs waited for the flood's admission, after its last start. */
  private admissionSeconds?: number;
  /** The harness's own client; undefined until the workers run. */
  private client?: Client;
  /** A TuneflowClient per tenant (`{ tenant }`: the IDs and memo of that tenant's starter). */
  private tuneflows!: Map<string, TuneflowClient>;
  private faults!: FaultInjection;
  // Set when the jobs start.
  private clock!: PhaseClock;
  private hostile?: HostileStarters;
  private launching?: Promise<void>;

  constructor(
    private readonly options: SoakOptions,
    private readonly runId: string,
    private readonly fairness = true,
  ) {
    this.taskQueue = `soak-${runId}`;
    this.jobOptions = jobOptions(options);
    if (options.profiles.includes('fair-share')) {
      this.tenants = [FLOOD_TENANT, ORDINARY_TENANT];
      this.fairShare = planFairShare(runId, options.jobs, options.ordinaryJobs);
      this.jobs = planned(this.fairShare);
      return;
    }
    this.tenants = this.hostileStarters ? [DEFAULT_TENANT, SECOND_TENANT] : [DEFAULT_TENANT];
    this.jobs = planJobs(runId, options.jobs, this.tenants);
  }

  private get hostileStarters(): boolean {
    return this.options.profiles.includes('hostile-starters');
  }

  async setUp(): Promise<void> {
    this.server = await startSoakServer(
      this.options,
      this.dir,
      this.cleanups,
      stderr,
      () => this.answering(),
      this.fairness,
    );
    this.mock = await startMockService({
      port: 0,
      trainingTime: this.options.trainingTime as `${number}s`,
      inferenceTime: this.options.inferenceTime as `${number}s`,
      apiKeys: [this.apiKey],
    });
    this.cleanups.push(() => this.mock.close());
    await this.startReceiver();
    await this.startWorkers();
    await this.connect();
    if (this.options.versioned) {
      const { deploymentName, a } = rolloutBuilds(this.runId);
      const ms = await makeCurrent(this.client!, deploymentName, a);
      stderr(`rollout: build ${a} of ${deploymentName} current (${ms} ms after its workers started)`);
    }
    this.faults = this.faultInjection();
    if (this.options.metrics) {
      const receiver = this.receiverMetrics!;
      this.scrapes = new MetricsScrapes(
        () => [...this.workers.metricsTargets(), receiver],
        this.options.scrapeIntervalSeconds * 1000,
      );
      await this.scrapes.start();
      this.cleanups.push(() => this.scrapes?.stop());
    }
  }

  /**
   * The receiver, as `tuneflow callbacks`. Under the receiver-cut fault it reaches Temporal through a proxy the fault
   * can sever. Without it, it connects directly, as the floor's signals do: the proxy's copying cost the harness about
   * 1 ms of CPU a job.
   */
  private async startReceiver(): Promise<void> {
    const address = this.server.address;
    const [host, port] = [address.slice(0, address.lastIndexOf(':')), address.split(':').pop()];
    const proxy = this.options.profiles.includes('receiver-cut')
      ? new CuttableProxy({ host, port: Number(port) })
      : undefined;
    if (proxy) {
      await proxy.listen();
      this.cleanups.push(() => proxy.close());
    }
    this.proxy = proxy;
    const receiverPort = await freePort();
    this.receiverUrl = `http://127.0.0.1:${receiverPort}`;
    const metricsPort = this.options.metrics ? await freePort() : undefined;
    const receiver = await startTuneflow(
      'receiver',
      ['callbacks', '--port', String(receiverPort), '--host', '127.0.0.1'],
      {
        TEMPORAL_ADDRESS: proxy ? `127.0.0.1:${proxy.port}` : address,
        TUNEFLOW_CALLBACK_SECRET: this.secret,
        TUNEFLOW_LOG_LEVEL: 'WARN',
        TUNEFLOW_METRICS_ADDRESS: metricsPort === undefined ? 'off' : `127.0.0.1:${metricsPort}`,
      },
      'callbacks listening on',
      path.join(this.dir, 'receiver.log'),
    );
    this.receiver = receiver;
    if (metricsPort !== undefined)
      this.receiverMetrics = {
        name: 'receiver',
        port: metricsPort,
        running: () => receiver.child.exitCode === null && receiver.child.signalCode === null,
      };
    this.cleanups.push(() => stopProcess(receiver));
  }

  /** The workers: their callbacks go to the receiver above (each worker's own receiver listens unused on a free port). */
  private async startWorkers(): Promise<void> {
    if (this.hostileStarters) this.uploads = prepareUploads(this.dir, solidPng('soak-upload', 64));
    if (this.options.storage) {
      const storage = await SoakStorage.start(this.options.storage, this.dir, this.taskQueue);
      this.storage = storage;
      this.cleanups.push(() => storage.close());
    }
    const env = workerEnvironment(this.options, {
      temporalAddress: this.server.address,
      apiKey: this.apiKey,
      apiUrl: this.mock.url,
      taskQueue: this.taskQueue,
      receiverUrl: this.receiverUrl,
      secret: this.secret,
      uploadDir: this.uploads?.uploadDir,
      // The operator's grants: the base tune every tenant's generate jobs use.
      tenantTunes: this.tenants.length > 1 ? SOAK_TENANT_TUNES : undefined,
      storage: this.storage?.env,
    });
    const args = [...workerNodeFlags(this.options), ...tuneflowCommand().args, 'worker'];
    const builds = rolloutBuilds(this.runId);
    // Versioned, the workers are build A; under --rollout build B's start once half the jobs started (rollOut), with the same settings.
    const versioned = (buildId: string) =>
      this.options.versioned
        ? { ...env, TUNEFLOW_DEPLOYMENT_NAME: builds.deploymentName, TUNEFLOW_BUILD_ID: buildId }
        : env;
    this.buildB = { args, env: versioned(builds.b) };
    this.workers = new SoakWorkers(
      {
        name: 'worker',
        args,
        env: versioned(builds.a),
        ready: 'tuneflow worker started',
        dir: this.dir,
        metrics: this.options.metrics,
      },
      stderr,
    );
    await this.workers.start(this.options.workers);
    // Stopped gracefully, so a CPU profile is written; killed if one hangs.
    this.cleanups.push(() => this.workers.stop());
    const how = tuneflowCommand().built ? 'the built bin' : 'the sources (tsx; run npm run build for the bin)';
    stderr(
      `${this.options.workers} worker(s) from ${how}, receiver ${this.receiverUrl}, mock ${this.mock.url}, ` +
        `task queue ${this.taskQueue}`,
    );
  }

  private async connect(): Promise<void> {
    const connection = await Connection.connect({ address: this.server.address });
    this.cleanups.push(() => connection.close());
    this.client = new Client({ connection });
    const client = this.client;
    this.tuneflows = new Map(
      this.tenants.map((tenant) => [tenant, new TuneflowClient({ client, taskQueue: this.taskQueue, tenant })]),
    );
  }

  /** Resolves once the harness's client is answered (at once before it exists): the server is back after a restart. */
  private async answering(): Promise<void> {
    const client = this.client;
    if (!client) return;
    for (const since = Date.now(); ; ) {
      try {
        await client.workflow.count(`TaskQueue = "${this.taskQueue}"`);
        return;
      } catch (err) {
        if (Date.now() - since > 60_000) throw err;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  }

  private faultInjection(): FaultInjection {
    const { mock, options } = this;
    return new FaultInjection(
      options.profiles,
      {
        mock,
        killWorker: () => this.workers.killOne(),
        restartServer: this.server.restart,
        cutReceiver: () => {
          stderr("fault: cutting the receiver's Temporal connection");
          this.proxy?.sever();
        },
        restoreReceiver: () => this.proxy?.restore(),
        receiverUrl: this.receiverUrl,
        secret: this.secret,
        workflowIds: () => this.started.map((j) => j.workflowId),
        heldCallbacks: () => mock.heldCallbacks(this.apiKey),
        progress: () => ({ total: this.jobs.length, started: this.started.length, closed: this.closed }),
      },
      neverTrainIds(this.jobs, options.profiles),
      stderr,
      {},
      {
        ...(options.serviceLimit !== undefined && { rateLimitPerSecond: options.serviceLimit }),
        // Answers without their price, all along: the hostile starters' maxCostMc jobs must stay within it.
        ...(this.hostileStarters && { unpricedRoutes: UNPRICED_ROUTES }),
      },
    );
  }

  /**
   * Starts the faults and the jobs on schedule, then follows the runs each second until every one is closed or the
   * deadline. A start that fails for good is kept for the report, not thrown: the other jobs still run and are judged.
   */
  async startAndFollow(): Promise<Followed> {
    const { options, jobs } = this;
    const clock = (this.clock = new PhaseClock(options.durationMs));
    const t0 = clock.t0;
    this.faults.start();
    this.cleanups.push(() => this.faults.stop());
    const client = this.client!;
    this.hostile = this.uploads
      ? new HostileStarters(
          {
            client,
            tuneflows: this.tuneflows,
            taskQueue: this.taskQueue,
            mockUrl: this.mock.url,
            uploads: this.uploads,
            options: this.jobOptions,
            started: () => this.started,
            journal: () => this.mock.journal(),
          },
          this.runId,
          Math.max(2, Math.round(jobs.length / 20)),
        )
      : undefined;
    this.launching = this.hostile?.launch();
    if (this.options.rollout) this.rollingOut = this.rollOut();
    const start = async (job: SoakJob) => {
      try {
        await startJob(this.tuneflows.get(tenantOf(job).tenant)!, job, this.mock.url, this.jobOptions);
        this.hostile?.onStarted(job, jobs.indexOf(job));
        this.started.push(job);
      } catch (err) {
        this.notStarted.push({ job, error: (err as Error).message.split('\n')[0] });
      }
    };
    const starting = this.fairShare
      ? startFairShare(
          this.fairShare,
          start,
          (job) => this.closedOrDeadline(job),
          stderr,
          () => this.workflowTasksDone(ADMISSION_LIMIT_MS),
        ).then((waitedMs): StartTimes => {
          this.admissionSeconds = Math.round(waitedMs / 100) / 10;
          return { burstAt: t0, burstIds: new Set(jobs.map((j) => j.workflowId)) };
        })
      : startOnSchedule(jobs, options, t0, start);
    const samples = await followRuns({
      client,
      taskQueue: this.taskQueue,
      t0,
      deadline: clock.deadline,
      // The attacks' runs too: they run on the same task queue, and are judged as the jobs are.
      allStarted: () =>
        this.started.length + this.notStarted.length === jobs.length && (this.hostile?.launched ?? true),
      sample: () => this.workers.sample(),
      progress: (running, failed) => {
        // The attacks' runs count as running too: the jobs closed are at least these (the process faults wait on them).
        this.closed = Math.max(0, this.started.length - running);
        return this.progressLine(t0, running, failed);
      },
      log: stderr,
    });
    return { t0, times: await starting, samples };
  }

  /**
   * Once half the jobs started: build B's workers (as many as A's) and B made current; A's jobs go on on A. Says how
   * long B took to be current, and, when every job closed, how many jobs each build ran. Never rejects: a rollout
   * that fails is said, and the soak judges the jobs as they are.
   */
  private async rollOut(): Promise<void> {
    const { deploymentName, a, b } = rolloutBuilds(this.runId);
    try {
      while (this.started.length + this.notStarted.length < this.jobs.length / 2) {
        if (Date.now() > this.clock.deadline) throw new Error('half the jobs never started: no rollout');
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      const workersB = new SoakWorkers(
        { name: 'worker-b', ...this.buildB!, ready: 'tuneflow worker started', dir: this.dir },
        stderr,
      );
      this.workersB = workersB;
      this.cleanups.push(() => workersB.stop());
      // Halfway is when the server-restart fault strikes too: a B worker that cannot connect yet is started again.
      await workersB.startPersistently(this.options.workers, this.clock.deadline);
      const ms = await makeCurrent(this.client!, deploymentName, b);
      stderr(
        `rollout: build ${b} current after ${this.started.length} of ${this.jobs.length} starts (${ms} ms after ` +
          `its workers started); build ${a} drains`,
      );
      while (this.closed < this.started.length || this.started.length + this.notStarted.length < this.jobs.length) {
        if (Date.now() > this.clock.deadline) break;
        await new Promise((resolve) => setTimeout(resolve, 1_000));
      }
      const byBuild = await jobsByBuild(
        this.client!,
        this.started.map((job) => job.workflowId),
      );
      stderr(
        `rollout: jobs by build: ${a} ${byBuild[a] ?? 0}, ${b} ${byBuild[b] ?? 0}, other ${Object.entries(byBuild)
          .filter(([build]) => build !== a && build !== b)
          .reduce((n, [, count]) => n + count, 0)}`,
      );
    } catch (err) {
      // The jobs are judged all the same; the soak fails for the rollout it did not make.
      stderr(`rollout: ${(err as Error).message}`);
      this.violations.push(`rollout: ${(err as Error).message}`);
    }
  }

  /**
   * Resolves once the task queue holds no workflow task waiting for a worker (the server's approximate backlog, asked
   * every half second, each ask within 5 s), or after `limitMs`; never rejects. A failed ask is said once and asked
   * again; a server that reports no stats is said, and the ordinary jobs start without waiting.
   */
  private async workflowTasksDone(limitMs: number): Promise<void> {
    const until = Date.now() + limitMs;
    let failed = false;
    for (;;) {
      try {
        const connection = this.client!.connection;
        const described = await connection.withDeadline(Date.now() + 5_000, () =>
          connection.workflowService.describeTaskQueue({
            namespace: this.client!.options.namespace,
            taskQueue: { name: this.taskQueue, kind: temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
            taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
            reportStats: true,
          }),
        );
        if (!described.stats) {
          stderr("fair share: the server reports no task queue stats; the flood's admission is not waited for");
          return;
        }
        if (Number(described.stats.approximateBacklogCount ?? 0) === 0) return;
      } catch (err) {
        if (!failed) stderr(`fair share: asking for the workflow task backlog failed (${(err as Error).message})`);
        failed = true;
      }
      if (Date.now() >= until) {
        stderr(`fair share: the flood's workflow tasks still wait after ${limitMs / 1000} s; the ordinary jobs start`);
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }

  /** Resolves once the job's run has closed, however it ended, or at the run's deadline. */
  private async closedOrDeadline(job: SoakJob): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, Math.max(0, this.clock.deadline - Date.now()));
    });
    try {
      await Promise.race([
        job.handle!.result().then(
          () => undefined,
          () => undefined,
        ),
        deadline,
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  private progressLine(t0: number, running: number, failed: number): string {
    const stats = this.mock.stats();
    const counts = this.faults.counts;
    return (
      `[${String(Math.round((Date.now() - t0) / 1000)).padStart(4)}s] closed ${this.closed}/${this.jobs.length} ` +
      `(failed ${failed}), in flight ${running} | faults: 500 ${counts.status500}, 429 ${counts.status429}, ` +
      `504 ${counts.status504}, never-train ${counts.neverTrain}, callbacks dropped ` +
      `${stats.callbacks.dropped} duplicated ${stats.callbacks.duplicated} failed ${stats.callbacks.failed}, ` +
      `kills ${counts.workerKills}, server restarts ${counts.serverRestarts}, receiver cuts ` +
      `${counts.receiverCuts}, forged ${this.faults.forgeries.sent}` +
      (this.options.serviceLimit === undefined ? '' : `, over the rate limit ${stats.rateLimited}`) +
      ` | worker RSS ${Math.round(this.workers.usage.peakRssBytes / 2 ** 20)} MiB`
    );
  }

  /** What every process used, read at once when the runs closed: the judge's reads must not count. */
  measure(): Used {
    const used = this.clock.usage(this.workers, this.server.process?.pid, this.receiver.child.pid);
    const harnessCpu = process.cpuUsage();
    const stats = this.mock.stats();
    const { total: apiCalls, routes } = apiCallsOf(stats);
    return {
      ...used,
      harnessCpuMs: (harnessCpu.user + harnessCpu.system) / 1000,
      stats,
      apiCalls,
      routes,
    };
  }

  /**
   * Stops the faults. Past the deadline the runs still open are stuck: the workers and the receiver stop first, so
   * nothing moves between the journal and the histories the judge reads (a run that went on, or a callback signalled
   * late, would be judged against a journal that missed it).
   */
  async settle(): Promise<void> {
    await this.faults.stop();
    await this.rollingOut;
    await this.launching;
    await this.hostile?.endSquatters();
    const pastDeadline = Date.now() > this.clock.deadline;
    if (pastDeadline) {
      await this.workers.stop();
      await this.workersB?.stop();
      await stopProcess(this.receiver);
    }
    // Raw "allow duplicate" starts of closed jobs' keys: after the figures, which they would only blur. Not past the
    // deadline: no worker is left to run them.
    if (pastDeadline && this.hostile)
      stderr('past the deadline: the after-close starts of hostile-starters are left out');
    else await this.hostile?.afterClose(this.started);
  }

  /**
   * With --metrics: once every callback the mock sent has its answer (10 s at most), the last scrape and, at that
   * moment, the soak's own counts of the same things (the jobs ended are the judge's, from the histories).
   */
  async lastScrape(): Promise<SoakCounts | undefined> {
    if (!this.scrapes) return undefined;
    for (const since = Date.now(); Date.now() - since < 10_000; )
      if (this.mock.journal().callbacks.some((c) => c.status === null && c.failure === null))
        await new Promise((resolve) => setTimeout(resolve, 200));
      else break;
    await this.scrapes.stop();
    this.scrapes.writeLast(this.dir);
    const { sent, leakedSent, pacedSent } = this.faults.forgeries;
    return soakCountsOf(
      this.mock.stats(),
      this.mock.journal(),
      this.mock.ledger(this.apiKey).charges,
      sent + leakedSent + pacedSent,
      this.hostileStarters,
    );
  }

  /**
   * Each job's history against the mock's journal, and the logs for secrets. A job that visibility reported closed but
   * whose history still ends open (visibility leads) is read again until the deadline.
   */
  async judge(): Promise<Judged> {
    const { faults, hostile, violations } = this;
    const faultCounts = faults.counts;
    const journal = this.mock.journal();
    const outcomes = await readOutcomes(this.client!, this.started, this.clock.deadline, (job, history) =>
      readHistory(job, history, this.apiKey, callbackTimes(journal), faults.forgeries.leakedIds),
    );
    const verdict = judgeRun(outcomes, journal, this.jobOptions.cleanupOnCancel ?? false);
    violations.push(...verdict.violations);
    // The attacks' runs, judged as the jobs are and by what each attack must come to.
    const attackOutcomes = hostile
      ? await readOutcomes(this.client!, hostile.runs, this.clock.deadline, (job, history) =>
          readHistory(job, history, this.apiKey, callbackTimes(journal), faults.forgeries.leakedIds),
        )
      : [];
    const index = new JournalIndex(journal);
    let hostileFigures: SoakReport['hostile'];
    if (hostile) {
      const { violations: attackViolations, ...attacks } = judgeAttacks(attackOutcomes, (job) => index.truth(job));
      hostileFigures = { ...hostile.counts, ...hostile.judge(journal), ...attacks };
      violations.push(...hostile.violations, ...attackViolations);
    }
    // Every object, upload and charge joined to a tenant; nothing of one reached, made on or deleted by another.
    const tenancy =
      this.tenants.length > 1
        ? judgeTenancy(
            [...outcomes, ...attackOutcomes].map(({ job, touches }) => ({ workflowId: job.workflowId, touches })),
            journal,
            this.mock.ledger(this.apiKey).charges,
            {
              grants: SOAK_TENANT_TUNES,
              fixtures: GALLERY_TUNES,
            },
          )
        : undefined;
    if (tenancy) violations.push(...tenancy.violations);
    const storage = this.storage && (await this.storage.judge(outcomes));
    if (storage) violations.push(...storage.violations);
    for (const { job, error } of this.notStarted) violations.push(`${job.workflowId}: never started: ${error}`);
    const { logLeaks, signedUrlsInLogs } = secretsInLogs(this.dir, this.apiKey);
    if (logLeaks) violations.push(`the API key is in ${logLeaks} log lines`);
    if (signedUrlsInLogs) violations.push(`${signedUrlsInLogs} signed callback URLs in the logs`);
    if (faults.forgeries.accepted) violations.push(`${faults.forgeries.accepted} forged callbacks were answered 2xx`);
    const ended = [...outcomes, ...attackOutcomes].filter((o) => o.status === 'completed' || o.status === 'failed');
    return {
      outcomes,
      verdict,
      faultCounts,
      hostileFigures,
      tenancy,
      storage: storage?.figures,
      logLeaks,
      signedUrlsInLogs,
      ended: ended.length,
    };
  }

  report(
    followed: Followed,
    used: Used,
    judged: Judged,
    counted: SoakCounts | undefined,
  ): { report: SoakReport; detail: PhaseDetail } {
    const { options, jobs, faults } = this;
    const { outcomes, verdict, faultCounts } = judged;
    const { stats, apiCalls } = used;
    // When the 429s came, and how bunched: the count alone does not say what sent them together.
    for (const line of refusalLines(stats.rateLimitRefusals, followed.t0)) stderr(`429s at ${line}`);
    const finished = verdict.completed + verdict.failedTyped;
    // The workers' memory as it stands now: a worker restarted while the faults stopped counts.
    const { peakRssBytes, baseRssBytes } = this.workers.usage;
    const figures = phaseFigures({ jobs, outcomes, finished, ...used, ...followed, peakRssBytes, baseRssBytes });
    if (options.traceGc) figures.heaps = heapPeaks(fs.readFileSync(path.join(this.dir, 'worker-1.log'), 'utf8'));
    const serverUsage = this.server.process ? usageOf(this.server.process.pid) : undefined;
    const report: SoakReport = {
      profile: options.profileName,
      workers: options.workers,
      tuneflowFrom: tuneflowCommand().built ? 'bin' : 'sources',
      completed: verdict.completed,
      failedTyped: verdict.failedTyped,
      failedOther: verdict.failedOther,
      serviceLimit: options.serviceLimit ?? null,
      serviceRate: options.serviceRate ?? null,
      rateLimited: stats.rateLimited,
      activityRetries: outcomes.reduce((sum, o) => sum + o.activityRetries, 0),
      notStarted: this.notStarted.length,
      duplicates: verdict.duplicates,
      lost: verdict.lost,
      stuck: verdict.stuck,
      apiCalls,
      apiCallsPerJob: orNull(apiCalls / jobs.length, 2)!,
      apiCallsByRoute: used.routes,
      apiCallsMinimum: jobs.reduce((sum, job) => sum + (job.kind === 'packTune' ? 2 : 1 + job.prompts), 0),
      ...figures,
      sizing: sizingOf(figures, {
        workers: options.workers,
        maxCached: options.maxCachedWorkflows,
        // The workers run this node with its default heap limit unless --worker-heap sets one.
        ...(options.workerHeapMiB === undefined && {
          defaultCache: sdkDefaultCache(v8.getHeapStatistics().heap_size_limit / 2 ** 20),
        }),
      }),
      serverRssMiB: orNull(serverUsage && serverUsage.rssBytes / 2 ** 20, 1),
      harnessCpuMsPerJob: orNull(used.harnessCpuMs / jobs.length, 1)!,
      apiKeyLeaks: verdict.keyLeaks + judged.logLeaks,
      forgedSent: faults.forgeries.sent,
      forgedAnswered: faults.forgeries.answered,
      forgedAccepted: faults.forgeries.accepted + verdict.unmatchedSignals,
      forgedWithLeakedUrls: {
        sent: faults.forgeries.leakedSent,
        delivered: faults.forgeries.leakedDelivered,
        signals: verdict.forgedSignals,
        pacedSent: faults.forgeries.pacedSent,
        pacedDelivered: faults.forgeries.pacedDelivered,
      },
      forgedDataRuns: verdict.forgedData,
      terminated: verdict.terminated,
      signedUrlsInLogs: judged.signedUrlsInLogs,
      signedUrlsInHistories: verdict.signedUrlLeaks,
      faults: {
        ...faultCounts,
        callbacksDropped: stats.callbacks.dropped,
        callbacksDuplicated: stats.callbacks.duplicated,
        callbacksFailed: stats.callbacks.failed,
      },
      failureTypes: verdict.failureTypes,
      ...(judged.hostileFigures && { hostile: judged.hostileFigures }),
      ...(judged.tenancy && { tenancy: judged.tenancy }),
      ...(judged.storage && { storage: judged.storage }),
      slowest: slowestOf(outcomes, 3),
      ...(counted && { metrics: this.metricsFigures({ ...counted, jobs: judged.ended }, counted.unpricedMc) }),
      violations: this.violations,
    };
    return {
      report,
      detail: {
        samples: followed.samples,
        ...phaseDetail(jobs, outcomes),
        mockUrl: this.mock.url,
        ...(this.fairShare && {
          fairShare: fairShareRun(this.fairShare, outcomes, {
            fairness: this.fairness,
            rateLimited: stats.rateLimited,
            admissionSeconds: this.admissionSeconds ?? 0,
            wallSeconds: figures.wallSeconds,
            loadAverage: figures.loadAverage,
          }),
        }),
      },
    };
  }

  /** The metrics' figures against the soak's (`counted`); a violation for each one further apart than its bound. */
  private metricsFigures(counted: AgreedFigures, unpricedMc: number): NonNullable<SoakReport['metrics']> {
    const scrapes = this.scrapes!;
    const { agreed, only, processes, lost } = scrapes.figures();
    const { figures, violations } = agree(agreed, counted, scrapes.sums, lost);
    this.violations.push(...violations);
    return {
      scrapeIntervalSeconds: this.options.scrapeIntervalSeconds,
      unpricedMc,
      scrapes: scrapes.sums.length,
      processes,
      processesLost: lost.length,
      figures,
      ...only,
    };
  }

  /** Workers first, gracefully (a CPU profile is written on exit), then everything else in reverse. */
  async tearDown(): Promise<void> {
    await endPhase(this.cleanups, this.dir, this.violations.length > 0 || this.options.keep, stderr);
  }
}

/**
 * The API key and signed callback URLs in the run's logs: none may be there (a signed URL is a capability; results
 * and histories are judged per job).
 */
function secretsInLogs(dir: string, apiKey: string): { logLeaks: number; signedUrlsInLogs: number } {
  const logs = fs
    .readdirSync(dir)
    .filter((name) => name.endsWith('.log'))
    .map((name) => fs.readFileSync(path.join(dir, name), 'utf8'));
  return {
    logLeaks: logs.reduce((sum, text) => sum + text.split(apiKey).length - 1, 0),
    signedUrlsInLogs: logs.reduce((sum, text) => sum + (text.match(new RegExp(SIGNATURE, 'g')) ?? []).length, 0),
  };
}

/** The `count` jobs that took longest from start to close. */
function slowestOf(outcomes: readonly JobOutcome[], count: number): Array<{ workflowId: string; ms: number }> {
  return outcomes
    .flatMap(({ job, closedAt }) =>
      closedAt !== undefined && job.startedAt !== undefined
        ? [{ workflowId: job.workflowId, ms: closedAt - job.startedAt }]
        : [],
    )
    .sort((a, b) => b.ms - a.ms)
    .slice(0, count);
}
