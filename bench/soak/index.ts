/**
 * `npm run soak`: N tuneflow jobs on a real Temporal dev server with K `tuneflow worker` processes, the mock service
 * and the callback receiver (`tuneflow callbacks`), under a fault profile; judged against the mock's own journal and
 * the server's histories. With --compare-floor the same plan then runs through the floor (bench/floor: bare workflows
 * of the same Temporal shape) and the report adds tuneflow / floor; with --report DIR, a page of charts. Progress on
 * stderr while it runs, a table at the end, and with --json one JSON object as the last line of stdout. Exit 0 when
 * every invariant holds, 1 when one is broken, 2 for a bad flag.
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as v8 from 'node:v8';
import { Client, Connection } from '@temporalio/client';
import { TuneflowClient } from '../../src/client';
import { durationToMs } from '../../src/duration';
import { startMockService, type MockService } from '../../src/mock-service';
import { solidPng } from '../../src/mock-service/png';
import { freePort } from '../../src/temporal-server/dev-server';
import type { TuneflowOptions } from '../../src/contract/inputs';
import { runFloor, type FloorRun } from '../floor/phase';
import { sdkDefaultCache, sizingLines, sizingOf, type Sizing } from './sizing';
import { FLOOR_COLOR, TUNEFLOW_COLOR, writeReportPage, type ChartedRun } from './charts';
import { FaultInjection, neverTrainIds, type FaultCounts } from './faults';
import { heapPeaks, type HeapPeak } from './gc-trace';
import { HostileStarters, prepareUploads, type HostileCounts } from './hostile';
import { planJobs, startJob, type SoakJob } from './jobs';
import { callbackTimes, HISTORY_PARTS, judgeRun, readHistory, SIGNATURE, type JobOutcome } from './judge';
import {
  COMPARED,
  COMPARED_NAMES,
  followRuns,
  medianRatios,
  phaseFigures,
  ratiosOf,
  readOutcomes,
  apiCallsOf,
  roundFigures,
  roundsTable,
  sameShape,
  startOnSchedule,
  WorkerUsage,
  type FloorShape,
  type PhaseFigures,
  type Ratios,
  type ReactionFigures,
  type Round,
  type Sample,
} from './measure';
import { FlagError, parseSoakOptions, USAGE, type SoakOptions } from './options';
import {
  CuttableProxy,
  startTuneflow,
  stopGracefully,
  stopProcess,
  tuneflowCommand,
  usageOf,
  workerNodeFlags,
  type TuneflowProcess,
} from './processes';
import { startSoakServer } from './server';
import { machineCpu, machineCpuMsSince } from '../machine';

/**
 * The figures of a run; the JSON line is this object. With --compare-floor, `floor` holds the floor's figures for the
 * same plan and `ratios` tuneflow's divided by the floor's.
 */
export interface SoakReport extends PhaseFigures {
  profile: string;
  workers: number;
  /** Where the workers ran tuneflow from: the built bin (as users do) or the sources (tsx). */
  tuneflowFrom: 'bin' | 'sources';
  completed: number;
  /** Failed with a type the mock's truth allows: TuneNeverTrained for a tune that never trained, ... */
  failedTyped: number;
  /** Failed with a type no injected fault explains, untyped, or closed otherwise. */
  failedOther: number;
  /**
   * The service's rate limit (--service-limit: the mock's requests a second for the run's key) and the workers'
   * TUNEFLOW_SERVICE_RATE (--service-rate); null when not set.
   */
  serviceLimit: number | null;
  serviceRate: number | null;
  /** Requests the mock answered 429 for being over its rate limit. */
  rateLimited: number;
  /** Activity attempts after the first, over every job (each 429 is one, after its backoff). */
  activityRetries: number;
  /** Jobs the harness could not start. */
  notStarted: number;
  duplicates: number;
  lost: number;
  stuck: number;
  apiCalls: number;
  apiCallsPerJob: number;
  apiCallsByRoute: Record<string, number>;
  /**
   * The calls the jobs need when every callback comes: 1 + P for trainThenGenerate (the tune, the prompts) and for
   * generate (a read of the tune, the prompts), 2 for packTune (the tune, one read of the prompts the pack made).
   */
  apiCallsMinimum: number;
  serverRssMiB: number | null;
  /** CPU of the harness (mock, client, judge) per job. */
  harnessCpuMsPerJob: number;
  /** Histories and log lines that hold the API key. */
  apiKeyLeaks: number;
  /** Forged callbacks that reached the receiver, and those it answered. */
  forgedSent: number;
  forgedAnswered: number;
  /** Forged callbacks answered 2xx, or signals that match no callback the mock sent. */
  forgedAccepted: number;
  /**
   * Forgeries made with URLs the service holds (leaked capabilities): sent, answered `delivered` (they wake runs), and
   * the signals they caused. Harmless by design; what must stay 0 is forged data in any history (forgedDataRuns).
   */
  forgedWithLeakedUrls: { sent: number; delivered: number; signals: number; pacedSent: number; pacedDelivered: number };
  /** Runs whose history holds data only a forged callback carried. */
  forgedDataRuns: number;
  /**
   * The hostile starters (`--profile hostile-starters`): what they tried and how it ended, second tunes under any
   * title (key) and tunes under hostile keys (a file read outside the upload directory, a smuggled job), from the
   * mock's journal.
   */
  hostile?: HostileCounts & { secondTunes: number; hostileTunes: number };
  /** Runs Temporal terminated (a history grown too large, say). */
  terminated: number;
  /** Signed callback URLs in the logs of the workers and the receiver. */
  signedUrlsInLogs: number;
  /** Runs whose history or result holds a signed callback URL. */
  signedUrlsInHistories: number;
  /** Faults that took effect (see faults.ts), and the mock's callback faults. */
  faults: FaultCounts & {
    callbacksDropped: number;
    callbacksDuplicated: number;
    callbacksFailed: number;
  };
  failureTypes: Record<string, number>;
  /** The three slowest jobs, for a look at their histories. */
  slowest: Array<{ workflowId: string; ms: number }>;
  /** Every broken invariant, in words; empty when the run passed. */
  violations: string[];
  floor?: PhaseFigures;
  /** The floor's requests to its mock by route, beside apiCallsByRoute. */
  floorApiCallsByRoute?: Record<string, number>;
  /** tuneflow / floor of the figures above (the first round's, with --rounds). */
  ratios?: Ratios;
  /** With --rounds: each round's order and tuneflow / floor, and their median. */
  rounds?: Round[];
  medianRatios?: Ratios;
  /** Jobs that issued the floor's commands for the same job, and the first few that did not. */
  floorShape?: FloorShape;
  /** What the run says of sizing workers: memory a run in flight, jobs a second a core, the cache, the warning sign. */
  sizing: Sizing;
}

function stderr(line: string): void {
  process.stderr.write(`soak: ${line}\n`);
}

/** What a phase leaves for the charts beside its figures: the samples and every reaction. */
export interface PhaseDetail {
  samples: Sample[];
  reactionMs: number[];
  /** Each planned job's command sequence (judge.ts), in plan order; empty for a job not read. */
  sequences: string[][];
  mockUrl: string;
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

async function run(options: SoakOptions, runId: string): Promise<{ report: SoakReport; detail: PhaseDetail }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-soak-'));
  const apiKey = `soak-key-${randomBytes(12).toString('hex')}`;
  const secret = randomBytes(24).toString('hex');
  const taskQueue = `soak-${runId}`;
  const cleanups: Array<() => Promise<unknown> | unknown> = [];
  const violations: string[] = [];
  const JOB_OPTIONS = jobOptions(options);

  try {
    /** Resolves once the harness's client is answered (set once the client exists). */
    let answering: () => Promise<void> = async () => undefined;
    const server = await startSoakServer(options, dir, cleanups, stderr, () => answering());
    const [host, port] = [server.address.slice(0, server.address.lastIndexOf(':')), server.address.split(':').pop()];

    const mock: MockService = await startMockService({
      port: 0,
      trainingTime: options.trainingTime as `${number}s`,
      inferenceTime: options.inferenceTime as `${number}s`,
      apiKeys: [apiKey],
    });
    cleanups.push(() => mock.close());

    // Under the receiver-cut fault the receiver reaches Temporal through a proxy the fault can sever. Without it, it
    // connects directly, as the floor's signals do: the proxy's copying cost the harness about 1 ms of CPU a job.
    const proxy = options.profiles.includes('receiver-cut')
      ? new CuttableProxy({ host, port: Number(port) })
      : undefined;
    if (proxy) {
      await proxy.listen();
      cleanups.push(() => proxy.close());
    }
    const receiverPort = await freePort();
    const receiverUrl = `http://127.0.0.1:${receiverPort}`;
    const receiver = await startTuneflow(
      'receiver',
      ['callbacks', '--port', String(receiverPort), '--host', '127.0.0.1'],
      {
        TEMPORAL_ADDRESS: proxy ? `127.0.0.1:${proxy.port}` : server.address,
        TUNEFLOW_CALLBACK_SECRET: secret,
        TUNEFLOW_LOG_LEVEL: 'WARN',
      },
      'callbacks listening on',
      path.join(dir, 'receiver.log'),
    );
    cleanups.push(() => stopProcess(receiver));

    const hostileProfile = options.profiles.includes('hostile-starters');
    const uploads = hostileProfile ? prepareUploads(dir, solidPng('soak-upload', 64)) : undefined;
    // Workers: their callbacks go to the receiver above (each worker's own receiver listens unused on a free port).
    const workerEnv = workerEnvironment(options, {
      temporalAddress: server.address,
      apiKey,
      apiUrl: mock.url,
      taskQueue,
      receiverUrl,
      secret,
      uploadDir: uploads?.uploadDir,
    });
    const nodeFlags = workerNodeFlags(options);
    const workers: TuneflowProcess[] = [];
    let workerStarts = 0;
    const usage = new WorkerUsage();
    const startWorker = async () => {
      const worker = await startTuneflow(
        `worker-${++workerStarts}`,
        ['worker'],
        workerEnv,
        'tuneflow worker started',
        path.join(dir, `worker-${workerStarts}.log`),
        nodeFlags,
      );
      usage.started(worker.child.pid);
      return worker;
    };
    for (const started of await Promise.all(Array.from({ length: options.workers }, startWorker)))
      workers.push(started);
    // Stopped gracefully, so a CPU profile is written; killed if one hangs.
    cleanups.push(() => Promise.all(workers.map((w) => stopGracefully(w))));
    const sampleWorkers = () => usage.sample(workers.map((w) => w.child.pid));
    const how = tuneflowCommand().built ? 'the built bin' : 'the sources (tsx; run npm run build for the bin)';
    stderr(
      `${options.workers} worker(s) from ${how}, receiver ${receiverUrl}, mock ${mock.url}, task queue ${taskQueue}`,
    );

    const connection = await Connection.connect({ address: server.address });
    cleanups.push(() => connection.close());
    const client = new Client({ connection });
    const tuneflow = new TuneflowClient({ client, taskQueue });
    const query = `TaskQueue = "${taskQueue}"`;
    answering = async () => {
      for (const since = Date.now(); ; ) {
        try {
          await client.workflow.count(query);
          return;
        } catch (err) {
          if (Date.now() - since > 60_000) throw err;
          await new Promise((resolve) => setTimeout(resolve, 500));
        }
      }
    };

    const jobs = planJobs(runId, options.jobs);
    const started: SoakJob[] = [];
    const notStarted: Array<{ job: SoakJob; error: string }> = [];
    let closed = 0;
    let nextKill = 0;
    const faults = new FaultInjection(
      options.profiles,
      {
        mock,
        async killWorker() {
          const index = nextKill++ % workers.length;
          const victim = workers[index];
          sampleWorkers();
          usage.dying(victim.child.pid);
          stderr(`fault: SIGKILL ${victim.name}`);
          await stopProcess(victim, 'SIGKILL');
          // As a supervisor would: a worker that cannot reach Temporal yet (the server is down) exits; start it again.
          for (;;) {
            try {
              workers[index] = await startWorker();
              return;
            } catch (err) {
              stderr(`${(err as Error).message.split('\n')[0]}; starting it again in 1 s`);
              await new Promise((resolve) => setTimeout(resolve, 1_000));
            }
          }
        },
        restartServer: server.restart,
        cutReceiver: () => {
          stderr("fault: cutting the receiver's Temporal connection");
          proxy?.sever();
        },
        restoreReceiver: () => proxy?.restore(),
        receiverUrl,
        secret,
        workflowIds: () => started.map((j) => j.workflowId),
        heldCallbacks: () => mock.heldCallbacks(apiKey),
        progress: () => ({ total: jobs.length, started: started.length, closed }),
      },
      neverTrainIds(jobs, options.profiles),
      stderr,
      {},
      options.serviceLimit === undefined ? {} : { rateLimitPerSecond: options.serviceLimit },
    );

    const t0 = Date.now();
    const loadAtStart = os.loadavg()[0];
    const machineAtStart = machineCpu();
    const deadline = t0 + options.durationMs;
    faults.start();
    cleanups.push(() => faults.stop());
    // A start that fails for good is reported, not thrown: the other jobs still run and are judged.
    const hostile = uploads
      ? new HostileStarters({ client, tuneflow, taskQueue, mockUrl: mock.url, uploads, options: JOB_OPTIONS })
      : undefined;
    hostile?.startRefused(runId, Math.max(2, Math.round(jobs.length / 20)));
    const start = async (job: SoakJob) => {
      try {
        await startJob(tuneflow, job, mock.url, JOB_OPTIONS);
        hostile?.onStarted(job, jobs.indexOf(job));
        started.push(job);
      } catch (err) {
        notStarted.push({ job, error: (err as Error).message.split('\n')[0] });
      }
    };
    const starting = startOnSchedule(jobs, options, t0, start);
    const allStarted = () => started.length + notStarted.length === jobs.length;

    const samples = await followRuns({
      client,
      taskQueue,
      t0,
      deadline,
      allStarted,
      sample: sampleWorkers,
      progress: (running, failed) => {
        closed = started.length - running;
        const stats = mock.stats();
        const counts = faults.counts;
        return (
          `[${String(Math.round((Date.now() - t0) / 1000)).padStart(4)}s] closed ${closed}/${jobs.length} ` +
          `(failed ${failed}), in flight ${running} | faults: 500 ${counts.status500}, 429 ${counts.status429}, ` +
          `504 ${counts.status504}, never-train ${counts.neverTrain}, callbacks dropped ` +
          `${stats.callbacks.dropped} duplicated ${stats.callbacks.duplicated} failed ${stats.callbacks.failed}, ` +
          `kills ${counts.workerKills}, server restarts ${counts.serverRestarts}, receiver cuts ` +
          `${counts.receiverCuts}, forged ${faults.forgeries.sent}` +
          (options.serviceLimit === undefined ? '' : `, over the rate limit ${stats.rateLimited}`) +
          ` | worker RSS ${Math.round(usage.peakRssBytes / 2 ** 20)} MiB`
        );
      },
      log: stderr,
    });
    const times = await starting;
    const loadAverage = { start: loadAtStart, end: os.loadavg()[0] };
    const machineCpuMs = machineCpuMsSince(machineAtStart);
    const { cpuMs: workerCpuMs, mainThreadCpuMs: workerMainThreadCpuMs } = sampleWorkers();
    const serverCpuMs = server.process ? usageOf(server.process.pid)?.cpuMs : undefined;
    const receiverCpuMs = usageOf(receiver.child.pid)?.cpuMs;
    const harnessCpu = process.cpuUsage();
    const harnessCpuMs = (harnessCpu.user + harnessCpu.system) / 1000;
    const stats = mock.stats();
    const { total: apiCalls, routes } = apiCallsOf(stats);
    await faults.stop();
    // Past the deadline the runs still open are stuck: the workers and the receiver stop first, so nothing moves
    // between the journal and the histories read below (a run that went on, or a callback signalled late, would be
    // judged against a journal that missed it).
    const pastDeadline = Date.now() > deadline;
    if (pastDeadline) {
      await Promise.all(workers.map((w) => stopGracefully(w)));
      await stopProcess(receiver);
    }
    // Raw "allow duplicate" starts of closed jobs' keys: after the figures, which they would only blur. Not past the
    // deadline: no worker is left to run them.
    if (pastDeadline && hostile) stderr('past the deadline: the after-close starts of hostile-starters are left out');
    else await hostile?.afterClose(started);

    // Judge: each job's history, against the journal. A job that visibility reported closed but whose history still
    // ends open (visibility leads) is read again until the deadline.
    const faultCounts = faults.counts;
    const journal = mock.journal();
    const outcomes = await readOutcomes(client, started, deadline, (job, history) =>
      readHistory(job, history, apiKey, callbackTimes(journal), faults.forgeries.leakedIds),
    );
    const verdict = judgeRun(outcomes, journal, JOB_OPTIONS.cleanupOnCancel ?? false);
    violations.push(...verdict.violations);
    const hostileFigures = hostile && { ...hostile.counts, ...hostile.judge(journal) };
    if (hostile) violations.push(...hostile.violations);
    for (const { job, error } of notStarted) violations.push(`${job.workflowId}: never started: ${error}`);

    const { logLeaks, signedUrlsInLogs } = secretsInLogs(dir, apiKey);
    if (logLeaks) violations.push(`the API key is in ${logLeaks} log lines`);
    if (signedUrlsInLogs) violations.push(`${signedUrlsInLogs} signed callback URLs in the logs`);
    const forgedAccepted = faults.forgeries.accepted + verdict.unmatchedSignals;
    if (faults.forgeries.accepted) violations.push(`${faults.forgeries.accepted} forged callbacks were answered 2xx`);

    const figures = phaseFigures({
      jobs,
      outcomes,
      finished: verdict.completed + verdict.failedTyped,
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
    if (options.traceGc) figures.heaps = heapPeaks(fs.readFileSync(path.join(dir, 'worker-1.log'), 'utf8'));
    const serverUsage = server.process ? usageOf(server.process.pid) : undefined;
    const round = (n: number | undefined, digits = 0) =>
      n === undefined ? null : Math.round(n * 10 ** digits) / 10 ** digits;
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
      notStarted: notStarted.length,
      duplicates: verdict.duplicates,
      lost: verdict.lost,
      stuck: verdict.stuck,
      apiCalls,
      apiCallsPerJob: round(apiCalls / jobs.length, 2)!,
      apiCallsByRoute: routes,
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
      serverRssMiB: round(serverUsage && serverUsage.rssBytes / 2 ** 20, 1),
      harnessCpuMsPerJob: round(harnessCpuMs / jobs.length, 1)!,
      apiKeyLeaks: verdict.keyLeaks + logLeaks,
      forgedSent: faults.forgeries.sent,
      forgedAnswered: faults.forgeries.answered,
      forgedAccepted,
      forgedWithLeakedUrls: {
        sent: faults.forgeries.leakedSent,
        delivered: faults.forgeries.leakedDelivered,
        signals: verdict.forgedSignals,
        pacedSent: faults.forgeries.pacedSent,
        pacedDelivered: faults.forgeries.pacedDelivered,
      },
      forgedDataRuns: verdict.forgedData,
      terminated: verdict.terminated,
      signedUrlsInLogs,
      signedUrlsInHistories: verdict.signedUrlLeaks,
      faults: {
        ...faultCounts,
        callbacksDropped: stats.callbacks.dropped,
        callbacksDuplicated: stats.callbacks.duplicated,
        callbacksFailed: stats.callbacks.failed,
      },
      failureTypes: verdict.failureTypes,
      ...(hostileFigures && { hostile: hostileFigures }),
      slowest: slowestOf(outcomes, 3),
      violations,
    };
    const reactionMs = outcomes.flatMap((o) => o.reactions.map((r) => r.ms));
    const sequences = jobs.map((job) => outcomes.find((o) => o.job === job)?.sequence ?? []);
    return { report, detail: { samples, reactionMs, sequences, mockUrl: mock.url } };
  } finally {
    // Workers first, gracefully (a CPU profile is written on exit), then everything else in reverse.
    for (const cleanup of cleanups.reverse()) await Promise.resolve(cleanup()).catch(() => undefined);
    if (violations.length === 0 && !options.keep) fs.rmSync(dir, { recursive: true, force: true });
    else stderr(`logs kept in ${dir}`);
  }
}

/** The workers' settings: the run's service, task queue and receiver (each worker's own receiver listens unused). */
function workerEnvironment(
  options: SoakOptions,
  run: {
    temporalAddress: string;
    apiKey: string;
    apiUrl: string;
    taskQueue: string;
    receiverUrl: string;
    secret: string;
    uploadDir: string | undefined;
  },
): Record<string, string> {
  return {
    TEMPORAL_ADDRESS: run.temporalAddress,
    TUNEFLOW_API_KEY: run.apiKey,
    TUNEFLOW_API_URL: run.apiUrl,
    TUNEFLOW_TASK_QUEUE: run.taskQueue,
    TUNEFLOW_CALLBACK_BASE_URL: run.receiverUrl,
    TUNEFLOW_CALLBACK_SECRET: run.secret,
    TUNEFLOW_CALLBACK_PORT: '0',
    TUNEFLOW_CALLBACK_HOST: '127.0.0.1',
    TUNEFLOW_METRICS_ADDRESS: 'off',
    TUNEFLOW_LOG_LEVEL: 'INFO',
    ...(options.serviceRate !== undefined && { TUNEFLOW_SERVICE_RATE: String(options.serviceRate) }),
    ...(options.maxCachedWorkflows !== undefined && {
      TUNEFLOW_MAX_CACHED_WORKFLOWS: String(options.maxCachedWorkflows),
    }),
    ...(run.uploadDir && { TUNEFLOW_UPLOAD_DIR: run.uploadDir }),
  };
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

/** The first worker's V8 heaps in words: `main 163 / 139 / 46, thread 2 124 / 103 / 58` (peaks, MiB), or n/a. */
function heapsText(heaps: readonly HeapPeak[] | undefined): string {
  if (!heaps?.length) return 'n/a';
  return heaps.map((h) => `${h.heap} ${h.committedMiB} / ${h.usedMiB} / ${h.liveMiB ?? 'n/a'}`).join(', ');
}

/** A part of the run's reactions in words: `p50 / p99 ms (count, ~in flight, seconds)`. */
function reactionText(part: ReactionFigures | null): string {
  if (!part) return 'none';
  const parts = part.partsP99Ms;
  const where = parts
    ? `; p99 to the server ${parts.delivery}, waiting for the worker ${parts.wait}, the task ${parts.task} ms`
    : '';
  return `${part.p50Ms} / ${part.p99Ms} ms (${part.count}; ~${part.inFlight} in flight over ${part.seconds} s${where})`;
}

/** The figures tuneflow is compared on, in words: name, tuneflow's, the floor's, the ratio. */
export function comparisonRows(report: SoakReport): string[][] {
  const floor = report.floor;
  const row = (key: (typeof COMPARED)[number], unit = '') => {
    const show = (n: number | null | undefined) => (n === null || n === undefined ? 'n/a' : `${n}${unit}`);
    const ratio = report.ratios?.[key];
    const name = COMPARED_NAMES[key];
    return floor
      ? [name, show(report[key]), show(floor[key]), ratio === null || ratio === undefined ? 'n/a' : `${ratio}x`]
      : [name, show(report[key])];
  };
  return [
    row('workerAndReceiverCpuMsPerJob', ' ms'),
    row('workerCpuMsPerJob', ' ms'),
    row('workerMainThreadCpuMsPerJob', ' ms'),
    row('receiverCpuMsPerJob', ' ms'),
    row('workerRssMiB', ' MiB'),
    row('jobsPerSecond'),
    row('serverCpuMsPerJob', ' ms'),
    row('historyEventsPerJob'),
    row('workflowTasksPerJob'),
    row('historyBytesPerJob'),
    row('activitiesPerJob'),
    row('timersPerJob'),
    row('signalsPerJob'),
    ...(
      [
        ...HISTORY_PARTS.map((part): [string, (r: PhaseFigures) => string] => [
          `  history bytes per job: ${part}`,
          (r) => String(r.historyBytesByPartPerJob[part]),
        ]),
        ['reaction p50 / p99, steady rate', (r) => reactionText(r.reaction.steady)],
        ['reaction p50 / p99, burst', (r) => reactionText(r.reaction.burst)],
        ['activity scheduled to completed p50 / p99', (r) => `${r.activityP50Ms} / ${r.activityP99Ms} ms`],
        ['V8 heaps: committed / used / live MiB', (r) => heapsText(r.heaps)],
        ['load average at start / end', (r) => `${r.loadAverage.start} / ${r.loadAverage.end}`],
      ] as Array<[string, (r: PhaseFigures) => string]>
    ).map(([name, text]) => (floor ? [name, text(report), text(floor), ''] : [name, text(report)])),
  ];
}

function table(report: SoakReport): string {
  const rows: Array<[string, string | number | null]> = [
    ['profile', report.profile],
    ['jobs / workers', `${report.jobs} / ${report.workers} (tuneflow from the ${report.tuneflowFrom})`],
    ['completed', report.completed],
    ['failed as the faults allow', `${report.failedTyped} ${JSON.stringify(report.failureTypes)}`],
    ['failed otherwise', report.failedOther],
    ['not started', report.notStarted],
    ['duplicates', report.duplicates],
    ['lost', report.lost],
    ['stuck', report.stuck],
    ['API calls (per job; needed)', `${report.apiCalls} (${report.apiCallsPerJob}; ${report.apiCallsMinimum})`],
    [
      "service's rate limit / TUNEFLOW_SERVICE_RATE",
      `${report.serviceLimit === null ? 'none' : `${report.serviceLimit}/s`} / ${report.serviceRate === null ? 'unset' : `${report.serviceRate}/s`}`,
    ],
    ['429s over the rate limit / activity retries', `${report.rateLimited} / ${report.activityRetries}`],
    ['jobs/s (wall)', `${report.jobsPerSecond} (${report.wallSeconds} s)`],
    [
      'load average (1 min) at start / end',
      `${report.loadAverage.start} / ${report.loadAverage.end} on ${os.cpus().length} CPUs`,
    ],
    ['job latency p50 / p99', `${report.jobLatencyP50Ms} / ${report.jobLatencyP99Ms} ms`],
    ['callback-to-reaction p50 / p99', `${report.reactionP50Ms} / ${report.reactionP99Ms} ms (${report.reactions})`],
    ['activity scheduled to completed p50 / p99', `${report.activityP50Ms} / ${report.activityP99Ms} ms`],
    ['  at the steady rate', reactionText(report.reaction.steady)],
    ['  in the burst', reactionText(report.reaction.burst)],
    ['worker peak RSS', `${report.workerRssMiB} MiB`],
    ...(report.heaps ? [['  V8 heaps: committed / used / live', heapsText(report.heaps)] as [string, string]] : []),
    ['worker CPU per job', `${report.workerCpuMsPerJob} ms`],
    ['  its main thread (activities)', `${report.workerMainThreadCpuMsPerJob} ms`],
    ['server RSS', report.serverRssMiB === null ? 'n/a' : `${report.serverRssMiB} MiB`],
    [
      'CPU per job: server / receiver / harness',
      `${report.serverCpuMsPerJob} / ${report.receiverCpuMsPerJob} / ${report.harnessCpuMsPerJob} ms`,
    ],
    [
      'history per job',
      `${report.historyEventsPerJob} events, ${report.historyBytesPerJob} bytes, ${report.workflowTasksPerJob} workflow tasks`,
    ],
    ['  by part', HISTORY_PARTS.map((part) => `${part} ${report.historyBytesByPartPerJob[part]}`).join(', ')],
    ['API key leaks', report.apiKeyLeaks],
    [
      'forged callbacks sent / answered / accepted',
      `${report.forgedSent} / ${report.forgedAnswered} / ${report.forgedAccepted}`,
    ],
    [
      'forged with leaked URLs sent / delivered / signals; paced sent / delivered',
      `${report.forgedWithLeakedUrls.sent} / ${report.forgedWithLeakedUrls.delivered} / ${report.forgedWithLeakedUrls.signals}; ` +
        `${report.forgedWithLeakedUrls.pacedSent} / ${report.forgedWithLeakedUrls.pacedDelivered}`,
    ],
    [
      'runs with forged data / terminated / signed URLs in logs / in histories',
      `${report.forgedDataRuns} / ${report.terminated} / ${report.signedUrlsInLogs} / ${report.signedUrlsInHistories}`,
    ],
    ['faults', JSON.stringify(report.faults)],
    ...(report.hostile ? [['hostile starters', JSON.stringify(report.hostile)] as [string, string]] : []),
  ];
  const width = Math.max(...rows.map(([name]) => name.length));
  const lines = [...rows.map(([name, value]) => `${name.padEnd(width)}  ${value}`), '', ...sizingLines(report.sizing)];
  const floor = report.floor;
  if (floor) {
    const floorName = 'floor';
    const compared = [['', 'tuneflow', floorName, `tuneflow / ${floorName}`], ...comparisonRows(report)];
    const widths = [0, 1, 2].map((i) => Math.max(...compared.map((row) => row[i].length)));
    lines.push('', 'the floor: the same plan through bare workflows of the same Temporal shape (bench/floor)');
    if (report.floorShape)
      lines.push(
        `jobs with the floor's activities in the floor's order: ${report.floorShape.sameActivities} of ` +
          `${report.floorShape.compared}; with its whole sequence: ${report.floorShape.sameSequence} (callbacks ` +
          'taken in one workflow task or in two part the others)',
      );
    for (const row of compared) lines.push(row.map((cell, i) => (i < 3 ? cell.padEnd(widths[i]) : cell)).join('  '));
  }
  if (report.rounds && report.medianRatios) lines.push('', ...roundsTable(report.rounds, report.medianRatios));
  return lines.join('\n');
}

async function main(argv: string[]): Promise<number> {
  let options: SoakOptions | undefined;
  try {
    options = parseSoakOptions(argv);
    if (options?.compareFloor && !tuneflowCommand().built)
      throw new FlagError(
        '--compare-floor: tuneflow must run from the built bin, as users run it (npm run build first): from the ' +
          'sources each worker bundles at start and carries tsx',
      );
  } catch (err) {
    if (!(err instanceof FlagError)) throw err;
    process.stderr.write(`soak: ${err.message} (see npm run soak -- --help)\n`);
    return 2;
  }
  if (!options) {
    process.stdout.write(USAGE);
    return 0;
  }
  const runId = Date.now().toString(36);
  // Each round runs the pair on fresh servers; the order turns each round, so neither side always runs on the
  // machine the other just left.
  let first: { tuneflow: { report: SoakReport; detail: PhaseDetail }; floor?: FloorRun } | undefined;
  const rounds: Round[] = [];
  const laterViolations: string[] = [];
  let imageHost: string | undefined;
  for (let r = 1; r <= options.rounds; r++) {
    const id = options.rounds > 1 ? `${runId}-${r}` : runId;
    const floorFirst = !options.together && r % 2 === 0; // round 1 ran tuneflow, so its mock's URL is known
    const order = options.together ? 'together' : floorFirst ? 'floor first' : 'tuneflow first';
    if (options.rounds > 1) stderr(`round ${r} of ${options.rounds}: ${order}`);
    let floor: FloorRun | undefined;
    let tuneflow: { report: SoakReport; detail: PhaseDetail };
    if (options.together)
      // The image URLs in the inputs only weigh: a loopback URL as long as a mock's does for the floor.
      [tuneflow, floor] = await Promise.all([
        run(options, id),
        runFloor(options, id, 'http://127.0.0.1:40000', jobOptions(options), stderr),
      ]);
    else {
      floor = floorFirst ? await runFloor(options, id, imageHost!, jobOptions(options), stderr) : undefined;
      tuneflow = await run(options, id);
      imageHost = tuneflow.detail.mockUrl;
      if (options.compareFloor && !floorFirst) {
        stderr('tuneflow done; now the floor, the same plan');
        floor = await runFloor(options, id, imageHost, jobOptions(options), stderr);
      }
    }
    if (first === undefined) first = { tuneflow, floor };
    else
      laterViolations.push(
        ...[...tuneflow.report.violations, ...(floor?.violations ?? [])].map((v) => `round ${r}: ${v}`),
      );
    if (floor) {
      const ratios = ratiosOf(tuneflow.report, floor.figures);
      rounds.push({ order, ratios, tuneflow: roundFigures(tuneflow.report), floor: roundFigures(floor.figures) });
      if (options.rounds > 1) stderr(`round ${r}: tuneflow / floor ${JSON.stringify(ratios)}`);
    }
  }
  const { report, detail } = first!.tuneflow;
  const charted: ChartedRun[] = [{ name: 'tuneflow', color: TUNEFLOW_COLOR, ...detail }];
  const floor = first!.floor;
  if (floor) {
    report.floor = floor.figures;
    report.ratios = ratiosOf(report, floor.figures);
    report.violations.push(...floor.violations);
    report.floorShape = sameShape(detail.sequences, floor.sequences);
    report.floorApiCallsByRoute = floor.apiCallsByRoute;
    charted.push({ name: 'floor', color: FLOOR_COLOR, samples: floor.samples, reactionMs: floor.reactionMs });
  }
  if (rounds.length > 1) {
    report.rounds = rounds;
    report.medianRatios = medianRatios(rounds.map((round) => round.ratios));
    report.violations.push(...laterViolations);
  }
  process.stdout.write(`\n${table(report)}\n`);
  for (const violation of report.violations.slice(0, 20)) process.stdout.write(`VIOLATION ${violation}\n`);
  if (options.reportDir) {
    const rows = comparisonRows(report);
    const head = report.floor ? ['', 'tuneflow', 'floor', 'tuneflow / floor'] : ['', 'tuneflow'];
    const title = `npm run soak -- ${process.argv.slice(2).join(' ')}`;
    const page = writeReportPage(options.reportDir, title, head, rows, charted, report);
    stderr(`report page: ${page}`);
  }
  if (options.json) process.stdout.write(`${JSON.stringify(report)}\n`);
  return report.violations.length ? 1 : 0;
}

/** Exits once stdout is flushed: nothing the run opened may keep the process (or the test awaiting it) alive. */
function exit(code: number): void {
  process.stdout.write('', () => process.exit(code));
}

main(process.argv.slice(2)).then(exit, (err: unknown) => {
  process.stderr.write(`soak: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  exit(1);
});
