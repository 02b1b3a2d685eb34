/**
 * `npm run soak`: N tuneflow jobs on a real Temporal dev server with K `tuneflow worker` processes, the mock service
 * and the callback receiver (`tuneflow callbacks`), under a fault profile; judged against the mock's own journal and
 * the server's histories. Progress on stderr while it runs, a table at the end, and with --json one JSON object as the
 * last line of stdout. Exit 0 when every invariant holds, 1 when one is broken, 2 for a bad flag.
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { TuneflowClient } from '../../src/client';
import { startMockService, type MockService, type MockStats } from '../../src/mock-service';
import { describeServer, provisionTemporal } from '../../src/temporal-server';
import { soakCluster } from '../cluster/soak';
import { freePort, startDevServerProcess, type DevServerProcess } from '../../src/temporal-server/dev-server';
import type { TuneflowOptions } from '../../src/workflows/inputs';
import { FaultInjection, neverTrainIds, type FaultCounts } from './faults';
import { planJobs, startJob, type SoakJob } from './jobs';
import { callbackTimes, judgeRun, percentile, readHistory, type History, type JobOutcome } from './judge';
import { FlagError, parseSoakOptions, USAGE, type SoakOptions } from './options';
import { CuttableProxy, startTuneflow, stopProcess, tuneflowCommand, usageOf, type TuneflowProcess } from './processes';

/** The options every job runs with: polls that recover lost callbacks quickly, deadlines well inside the run's. */
/** A callback signature: never in a log. */
const SIGNATURE = /sig=[0-9a-f]{64}/g;

const JOB_OPTIONS: TuneflowOptions = {
  pollInterval: '5 seconds',
  maxPollInterval: '20 seconds',
  trainingTimeout: '90 seconds',
  promptTimeout: '2 minutes',
};

/** The figures of a run; the JSON line is this object. */
export interface SoakReport {
  profile: string;
  jobs: number;
  workers: number;
  completed: number;
  /** Failed with a type the mock's truth allows: TuneNeverTrained for a tune that never trained, ... */
  failedTyped: number;
  /** Failed with a type no injected fault explains, untyped, or closed otherwise. */
  failedOther: number;
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
  /** Peak resident memory of the largest worker process. */
  workerRssMiB: number;
  /** CPU of every worker process (killed ones included) per job. */
  workerCpuMsPerJob: number;
  serverRssMiB: number | null;
  /** CPU of the dev server (its last start), the receiver and the harness (mock, client, judge) per job. */
  serverCpuMsPerJob: number | null;
  receiverCpuMsPerJob: number | null;
  harnessCpuMsPerJob: number;
  reactionP50Ms: number | null;
  reactionP99Ms: number | null;
  reactions: number;
  jobsPerSecond: number;
  jobLatencyP50Ms: number | null;
  jobLatencyP99Ms: number | null;
  wallSeconds: number;
  historyEventsPerJob: number;
  historyBytesPerJob: number;
  workflowTasksPerJob: number;
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
  forgedWithLeakedUrls: { sent: number; delivered: number; signals: number };
  /** Runs whose history holds data only a forged callback carried. */
  forgedDataRuns: number;
  /** Runs Temporal terminated (a history grown too large, say). */
  terminated: number;
  /** Signed callback URLs in the logs of the workers and the receiver. */
  signedUrlsInLogs: number;
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
}

function stderr(line: string): void {
  process.stderr.write(`soak: ${line}\n`);
}

/** Runs `work` over `items`, `limit` at a time. */
async function eachLimited<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) await work(items[next++]);
    }),
  );
}

function apiCallsOf(stats: MockStats): { total: number; routes: Record<string, number> } {
  const routes = Object.fromEntries(
    Object.entries(stats.routes).filter(([route]) => !/ \/(images|files)\//.test(route)),
  );
  return { total: Object.values(routes).reduce((a, b) => a + b, 0), routes };
}

interface Server {
  address: string;
  process?: DevServerProcess;
}

async function run(options: SoakOptions): Promise<SoakReport> {
  const runId = Date.now().toString(36);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-soak-'));
  const apiKey = `soak-key-${randomBytes(12).toString('hex')}`;
  const secret = randomBytes(24).toString('hex');
  const taskQueue = `soak-${runId}`;
  const cleanups: Array<() => Promise<unknown> | unknown> = [];
  const violations: string[] = [];

  try {
    // Temporal: a running server, or a dev server of our own (on a state file where a restart must find its state).
    const server: Server = { address: '' };
    let restartServer: ((downMs: number) => Promise<void>) | undefined;
    /** Resolves once the harness's client is answered (set once the client exists). */
    let answering: () => Promise<void> = async () => undefined;
    if (options.cluster) {
      // The cluster tier (bench/cluster): the full Temporal server on PostgreSQL, restarted by the server-restart fault.
      const cluster = await soakCluster(dir, options.jobs, stderr, cleanups);
      server.process = cluster.process;
      server.address = cluster.process.address;
      restartServer = async (downMs) => {
        await cluster.restartServer(downMs);
        await answering();
      };
    } else if (process.env.TEMPORAL_ADDRESS) {
      server.address = process.env.TEMPORAL_ADDRESS;
      if (options.profiles.includes('server-restart'))
        stderr('TEMPORAL_ADDRESS is set: the server is not ours to restart, the server-restart fault is left out');
    } else {
      const provisioned = await provisionTemporal('dev-server', { strict: true, acceptAddress: false, log: stderr });
      if (provisioned.kind !== 'dev-server' || provisioned.executable.type !== 'existing-path')
        throw new Error(`no dev server executable: ${describeServer(provisioned)}`);
      const executable = provisioned.executable.path;
      const needsFile = options.dbFile || options.profiles.includes('server-restart');
      const settings = {
        executable,
        port: await freePort(),
        dbFilename: needsFile ? path.join(dir, 'temporal.db') : undefined,
        extraArgs: options.serverArgs,
      };
      server.process = await startDevServerProcess(settings);
      server.address = server.process.address;
      cleanups.push(() => server.process?.stop('SIGKILL'));
      stderr(`dev server ${executable} on ${server.address}, state ${settings.dbFilename ?? 'in memory'}`);
      restartServer = async (downMs) => {
        stderr('fault: stopping the dev server');
        await server.process!.stop('SIGTERM');
        await new Promise((resolve) => setTimeout(resolve, downMs));
        server.process = await startDevServerProcess(settings);
        stderr('fault: the dev server is started again');
        await answering();
      };
    }
    const [host, port] = [server.address.slice(0, server.address.lastIndexOf(':')), server.address.split(':').pop()];

    const mock: MockService = await startMockService({
      port: 0,
      trainingTime: options.trainingTime as `${number}s`,
      inferenceTime: options.inferenceTime as `${number}s`,
      apiKeys: [apiKey],
    });
    cleanups.push(() => mock.close());

    // The receiver reaches Temporal through a proxy the receiver-cut fault can sever.
    const proxy = new CuttableProxy({ host, port: Number(port) });
    await proxy.listen();
    cleanups.push(() => proxy.close());
    const receiverPort = await freePort();
    const receiverUrl = `http://127.0.0.1:${receiverPort}`;
    const receiver = await startTuneflow(
      'receiver',
      ['callbacks', '--port', String(receiverPort), '--host', '127.0.0.1'],
      { TEMPORAL_ADDRESS: `127.0.0.1:${proxy.port}`, TUNEFLOW_CALLBACK_SECRET: secret, TUNEFLOW_LOG_LEVEL: 'WARN' },
      'callbacks listening on',
      path.join(dir, 'receiver.log'),
    );
    cleanups.push(() => stopProcess(receiver));

    // Workers: their callbacks go to the receiver above (each worker's own receiver listens unused on a free port).
    const workerEnv = {
      TEMPORAL_ADDRESS: server.address,
      TUNEFLOW_API_KEY: apiKey,
      TUNEFLOW_API_URL: mock.url,
      TUNEFLOW_TASK_QUEUE: taskQueue,
      TUNEFLOW_CALLBACK_BASE_URL: receiverUrl,
      TUNEFLOW_CALLBACK_SECRET: secret,
      TUNEFLOW_CALLBACK_PORT: '0',
      TUNEFLOW_CALLBACK_HOST: '127.0.0.1',
      TUNEFLOW_METRICS_ADDRESS: 'off',
      TUNEFLOW_LOG_LEVEL: 'INFO',
      ...(options.maxCachedWorkflows !== undefined && {
        TUNEFLOW_MAX_CACHED_WORKFLOWS: String(options.maxCachedWorkflows),
      }),
    };
    const nodeFlags = options.cpuProfDir ? ['--cpu-prof', '--cpu-prof-dir', path.resolve(options.cpuProfDir)] : [];
    if (options.workerHeapMiB) nodeFlags.push(`--max-old-space-size=${options.workerHeapMiB}`);
    const workers: TuneflowProcess[] = [];
    let workerStarts = 0;
    let deadWorkersCpuMs = 0;
    let peakRss = 0;
    /** CPU each worker spent starting (loading, bundling): not the jobs' work. */
    const startCpu = new Map<number | undefined, number>();
    const startWorker = async () => {
      const worker = await startTuneflow(
        `worker-${++workerStarts}`,
        ['worker'],
        workerEnv,
        'tuneflow worker started',
        path.join(dir, `worker-${workerStarts}.log`),
        nodeFlags,
      );
      startCpu.set(worker.child.pid, usageOf(worker.child.pid)?.cpuMs ?? 0);
      return worker;
    };
    for (const started of await Promise.all(Array.from({ length: options.workers }, startWorker)))
      workers.push(started);
    // Stopped gracefully, so a CPU profile is written; killed if one hangs.
    cleanups.push(() =>
      Promise.all(
        workers.map(async (w) => {
          const timer = setTimeout(() => w.child.kill('SIGKILL'), 15_000);
          await stopProcess(w, 'SIGTERM');
          clearTimeout(timer);
        }),
      ),
    );
    const sampleWorkers = () => {
      let cpu = 0;
      for (const worker of workers) {
        const usage = usageOf(worker.child.pid);
        if (!usage) continue;
        peakRss = Math.max(peakRss, usage.rssBytes);
        cpu += usage.cpuMs - (startCpu.get(worker.child.pid) ?? 0);
      }
      return cpu;
    };
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
          deadWorkersCpuMs += (usageOf(victim.child.pid)?.cpuMs ?? 0) - (startCpu.get(victim.child.pid) ?? 0);
          sampleWorkers();
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
        restartServer,
        cutReceiver: () => {
          stderr("fault: cutting the receiver's Temporal connection");
          proxy.sever();
        },
        restoreReceiver: () => proxy.restore(),
        receiverUrl,
        secret,
        workflowIds: () => started.map((j) => j.workflowId),
        heldCallbacks: () => mock.heldCallbacks(apiKey),
        progress: () => ({ total: jobs.length, started: started.length, closed }),
      },
      neverTrainIds(jobs, options.profiles),
      stderr,
    );

    const t0 = Date.now();
    const deadline = t0 + options.durationMs;
    faults.start();
    cleanups.push(() => faults.stop());
    // A start that fails for good is reported, not thrown: the other jobs still run and are judged.
    const start = async (job: SoakJob) => {
      try {
        await startJob(tuneflow, job, mock.url, JOB_OPTIONS);
        started.push(job);
      } catch (err) {
        notStarted.push({ job, error: (err as Error).message.split('\n')[0] });
      }
    };
    const starting = (async () => {
      if (options.rate > 0) {
        const starts: Promise<void>[] = [];
        for (let i = 0; i < jobs.length; i++) {
          const due = t0 + (i * 1000) / options.rate;
          if (due > Date.now()) await new Promise((resolve) => setTimeout(resolve, due - Date.now()));
          starts.push(start(jobs[i]));
        }
        await Promise.all(starts);
      } else {
        await eachLimited(jobs, 32, start);
      }
    })();
    const allStarted = () => started.length + notStarted.length === jobs.length;

    // Progress until every job is closed (visibility says so) or the deadline.
    let lastLine = 0;
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      sampleWorkers();
      try {
        const running = (await client.workflow.count(`${query} AND ExecutionStatus = "Running"`)).count;
        const failed = (await client.workflow.count(`${query} AND ExecutionStatus = "Failed"`)).count;
        closed = started.length - running;
        if (Date.now() - lastLine > 5_000 || (allStarted() && running === 0)) {
          lastLine = Date.now();
          const stats = mock.stats();
          const counts = faults.counts;
          stderr(
            `[${String(Math.round((Date.now() - t0) / 1000)).padStart(4)}s] closed ${closed}/${jobs.length} ` +
              `(failed ${failed}), in flight ${running} | faults: 500 ${counts.status500}, 429 ${counts.status429}, ` +
              `504 ${counts.status504}, never-train ${counts.neverTrain}, callbacks dropped ` +
              `${stats.callbacks.dropped} duplicated ${stats.callbacks.duplicated} failed ${stats.callbacks.failed}, ` +
              `kills ${counts.workerKills}, server restarts ${counts.serverRestarts}, receiver cuts ` +
              `${counts.receiverCuts}, forged ${faults.forgeries.sent} | worker RSS ${Math.round(peakRss / 2 ** 20)} MiB`,
          );
        }
        if (allStarted() && running === 0) break;
      } catch (err) {
        if (Date.now() - lastLine > 5_000) {
          lastLine = Date.now();
          stderr(`progress unavailable: ${(err as Error).message.split('\n')[0]}`);
        }
      }
      if (Date.now() > deadline) {
        stderr('deadline reached: runs still open are stuck');
        break;
      }
    }
    await starting;
    const workerCpuMs = deadWorkersCpuMs + sampleWorkers();
    const serverCpuMs = server.process ? usageOf(server.process.pid)?.cpuMs : undefined;
    const receiverCpuMs = usageOf(receiver.child.pid)?.cpuMs;
    const harnessCpu = process.cpuUsage();
    const harnessCpuMs = (harnessCpu.user + harnessCpu.system) / 1000;
    const stats = mock.stats();
    const { total: apiCalls, routes } = apiCallsOf(stats);
    await faults.stop();

    // Judge: each job's history, against the journal. A job that visibility reported closed but whose history still
    // ends open (visibility leads) is read again until the deadline.
    const faultCounts = faults.counts;
    const journal = mock.journal();
    const sentTimes = callbackTimes(journal);
    const outcomes = new Map<string, JobOutcome>();
    for (;;) {
      const pending = started.filter((job) => (outcomes.get(job.workflowId)?.status ?? 'open') === 'open');
      await eachLimited(pending, 16, async (job) => {
        for (let attempt = 1; ; attempt++) {
          try {
            const history = (await client.workflow.getHandle(job.workflowId).fetchHistory()) as History;
            outcomes.set(job.workflowId, readHistory(job, history, apiKey, sentTimes, faults.forgeries.leakedIds));
            return;
          } catch (err) {
            if (attempt >= 5) throw err;
            await new Promise((resolve) => setTimeout(resolve, 1_000));
          }
        }
      });
      if (!started.some((job) => outcomes.get(job.workflowId)?.status === 'open') || Date.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 2_000));
    }
    const verdict = judgeRun([...outcomes.values()], journal, JOB_OPTIONS.cleanupOnCancel ?? false);
    violations.push(...verdict.violations);
    for (const { job, error } of notStarted) violations.push(`${job.workflowId}: never started: ${error}`);

    let events = 0;
    let bytes = 0;
    let workflowTasks = 0;
    let lastClose = t0;
    const reactions: number[] = [];
    const latencies: number[] = [];
    const slowest: Array<{ workflowId: string; ms: number }> = [];
    for (const outcome of outcomes.values()) {
      const { job } = outcome;
      events += outcome.events;
      bytes += outcome.bytes;
      workflowTasks += outcome.workflowTasks;
      reactions.push(...outcome.reactions);
      if (outcome.closedAt) {
        lastClose = Math.max(lastClose, outcome.closedAt);
        if (job.startedAt) {
          latencies.push(outcome.closedAt - job.startedAt);
          slowest.push({ workflowId: job.workflowId, ms: outcome.closedAt - job.startedAt });
        }
      }
    }
    const logLeaks = fs
      .readdirSync(dir)
      .filter((name) => name.endsWith('.log'))
      .reduce((sum, name) => sum + fs.readFileSync(path.join(dir, name), 'utf8').split(apiKey).length - 1, 0);
    if (logLeaks) violations.push(`the API key is in ${logLeaks} log lines`);
    // A signed callback URL is a capability: none in any log (results and histories are judged per job).
    const signedUrlsInLogs = fs
      .readdirSync(dir)
      .filter((name) => name.endsWith('.log'))
      .reduce((sum, name) => sum + (fs.readFileSync(path.join(dir, name), 'utf8').match(SIGNATURE) ?? []).length, 0);
    if (signedUrlsInLogs) violations.push(`${signedUrlsInLogs} signed callback URLs in the logs`);
    const forgedAccepted = faults.forgeries.accepted + verdict.unmatchedSignals;
    if (faults.forgeries.accepted) violations.push(`${faults.forgeries.accepted} forged callbacks were answered 2xx`);

    const wall = Math.max(1, (lastClose - t0) / 1000);
    const serverUsage = server.process ? usageOf(server.process.pid) : undefined;
    const round = (n: number | undefined, digits = 0) =>
      n === undefined ? null : Math.round(n * 10 ** digits) / 10 ** digits;
    return {
      profile: options.profileName,
      jobs: jobs.length,
      workers: options.workers,
      completed: verdict.completed,
      failedTyped: verdict.failedTyped,
      failedOther: verdict.failedOther,
      notStarted: notStarted.length,
      duplicates: verdict.duplicates,
      lost: verdict.lost,
      stuck: verdict.stuck,
      apiCalls,
      apiCallsPerJob: round(apiCalls / jobs.length, 2)!,
      apiCallsByRoute: routes,
      apiCallsMinimum: jobs.reduce((sum, job) => sum + (job.kind === 'packTune' ? 2 : 1 + job.prompts), 0),
      workerRssMiB: round(peakRss / 2 ** 20, 1)!,
      workerCpuMsPerJob: round(workerCpuMs / jobs.length, 1)!,
      serverRssMiB: round(serverUsage && serverUsage.rssBytes / 2 ** 20, 1),
      serverCpuMsPerJob: round(serverCpuMs && serverCpuMs / jobs.length, 1),
      receiverCpuMsPerJob: round(receiverCpuMs && receiverCpuMs / jobs.length, 1),
      harnessCpuMsPerJob: round(harnessCpuMs / jobs.length, 1)!,
      reactionP50Ms: round(percentile(reactions, 50)),
      reactionP99Ms: round(percentile(reactions, 99)),
      reactions: reactions.length,
      jobsPerSecond: round((verdict.completed + verdict.failedTyped) / wall, 2)!,
      jobLatencyP50Ms: round(percentile(latencies, 50)),
      jobLatencyP99Ms: round(percentile(latencies, 99)),
      wallSeconds: round(wall, 1)!,
      historyEventsPerJob: round(events / jobs.length, 1)!,
      historyBytesPerJob: round(bytes / jobs.length)!,
      workflowTasksPerJob: round(workflowTasks / jobs.length, 1)!,
      apiKeyLeaks: verdict.keyLeaks + logLeaks,
      forgedSent: faults.forgeries.sent,
      forgedAnswered: faults.forgeries.answered,
      forgedAccepted,
      forgedWithLeakedUrls: {
        sent: faults.forgeries.leakedSent,
        delivered: faults.forgeries.leakedDelivered,
        signals: verdict.forgedSignals,
      },
      forgedDataRuns: verdict.forgedData,
      terminated: verdict.terminated,
      signedUrlsInLogs,
      faults: {
        ...faultCounts,
        callbacksDropped: stats.callbacks.dropped,
        callbacksDuplicated: stats.callbacks.duplicated,
        callbacksFailed: stats.callbacks.failed,
      },
      failureTypes: verdict.failureTypes,
      slowest: slowest.sort((a, b) => b.ms - a.ms).slice(0, 3),
      violations,
    };
  } finally {
    // Workers first, gracefully (a CPU profile is written on exit), then everything else in reverse.
    for (const cleanup of cleanups.reverse()) await Promise.resolve(cleanup()).catch(() => undefined);
    if (violations.length === 0 && !options.keep) fs.rmSync(dir, { recursive: true, force: true });
    else stderr(`logs kept in ${dir}`);
  }
}

function table(report: SoakReport): string {
  const rows: Array<[string, string | number | null]> = [
    ['profile', report.profile],
    ['jobs / workers', `${report.jobs} / ${report.workers}`],
    ['completed', report.completed],
    ['failed as the faults allow', `${report.failedTyped} ${JSON.stringify(report.failureTypes)}`],
    ['failed otherwise', report.failedOther],
    ['not started', report.notStarted],
    ['duplicates', report.duplicates],
    ['lost', report.lost],
    ['stuck', report.stuck],
    ['API calls (per job; needed)', `${report.apiCalls} (${report.apiCallsPerJob}; ${report.apiCallsMinimum})`],
    ['jobs/s (wall)', `${report.jobsPerSecond} (${report.wallSeconds} s)`],
    ['job latency p50 / p99', `${report.jobLatencyP50Ms} / ${report.jobLatencyP99Ms} ms`],
    ['callback-to-reaction p50 / p99', `${report.reactionP50Ms} / ${report.reactionP99Ms} ms (${report.reactions})`],
    ['worker peak RSS', `${report.workerRssMiB} MiB`],
    ['worker CPU per job', `${report.workerCpuMsPerJob} ms`],
    ['server RSS', report.serverRssMiB === null ? 'n/a' : `${report.serverRssMiB} MiB`],
    [
      'CPU per job: server / receiver / harness',
      `${report.serverCpuMsPerJob} / ${report.receiverCpuMsPerJob} / ${report.harnessCpuMsPerJob} ms`,
    ],
    [
      'history per job',
      `${report.historyEventsPerJob} events, ${report.historyBytesPerJob} bytes, ${report.workflowTasksPerJob} workflow tasks`,
    ],
    ['API key leaks', report.apiKeyLeaks],
    [
      'forged callbacks sent / answered / accepted',
      `${report.forgedSent} / ${report.forgedAnswered} / ${report.forgedAccepted}`,
    ],
    [
      'forged with leaked URLs sent / delivered / signals',
      `${report.forgedWithLeakedUrls.sent} / ${report.forgedWithLeakedUrls.delivered} / ${report.forgedWithLeakedUrls.signals}`,
    ],
    [
      'runs with forged data / terminated / signed URLs in logs',
      `${report.forgedDataRuns} / ${report.terminated} / ${report.signedUrlsInLogs}`,
    ],
    ['faults', JSON.stringify(report.faults)],
  ];
  const width = Math.max(...rows.map(([name]) => name.length));
  return rows.map(([name, value]) => `${name.padEnd(width)}  ${value}`).join('\n');
}

async function main(argv: string[]): Promise<number> {
  let options: SoakOptions | undefined;
  try {
    options = parseSoakOptions(argv);
  } catch (err) {
    if (!(err instanceof FlagError)) throw err;
    process.stderr.write(`soak: ${err.message} (see npm run soak -- --help)\n`);
    return 2;
  }
  if (!options) {
    process.stdout.write(USAGE);
    return 0;
  }
  const report = await run(options);
  process.stdout.write(`\n${table(report)}\n`);
  for (const violation of report.violations.slice(0, 20)) process.stdout.write(`VIOLATION ${violation}\n`);
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
