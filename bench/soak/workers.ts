/**
 * A phase's worker processes (`tuneflow worker`, or the floor's): started with the run's settings, sampled for CPU and
 * memory, killed one at a time by the worker-kill fault (and started again in place, as a supervisor would), stopped
 * gracefully at the end.
 */
import * as path from 'node:path';
import { freePort } from '../../src/temporal-server/dev-server';
import type { MetricsTarget } from './agreement';
import { WorkerUsage } from './measure';
import type { SoakOptions } from './options';
import { startNode, stopGracefully, stopProcess, type TuneflowProcess } from './processes';

/**
 * The workers of one run.
 *
 * @example
 * const workers = new SoakWorkers({ name: 'worker', args: [...tuneflowCommand().args, 'worker'], env, ready, dir }, log);
 * await workers.start(2); workers.sample(); await workers.killOne(); await workers.stop();
 */
export class SoakWorkers {
  /** CPU and memory over every worker the run started, the killed ones included. */
  readonly usage = new WorkerUsage();
  private readonly running: TuneflowProcess[] = [];
  /** With `metrics`: each worker started, where it serves `/metrics` (a killed one's last scrape still counts). */
  private readonly metricsPorts: Array<{ worker: TuneflowProcess; port: number }> = [];
  private starts = 0;
  private nextKill = 0;

  constructor(
    /**
     * Each worker's `node` arguments (flags first), environment and the line that says it is ready; `name-N` names
     * the Nth started, and its log in `dir` (`name-N.log`). With `metrics`, each serves `/metrics` on a free port
     * of its own (TUNEFLOW_METRICS_ADDRESS).
     */
    private readonly settings: {
      name: string;
      args: string[];
      env: Record<string, string>;
      ready: string;
      dir: string;
      metrics?: boolean;
    },
    private readonly log: (line: string) => void,
  ) {}

  async start(count: number): Promise<void> {
    this.running.push(...(await Promise.all(Array.from({ length: count }, () => this.startOne()))));
  }

  /** The workers' CPU since they started (the killed ones' included) and their memory now. */
  sample(): { cpuMs: number; mainThreadCpuMs: number; rssBytes: number } {
    return this.usage.sample(this.running.map((w) => w.child.pid));
  }

  /** `count` workers, one at a time, each started again as a supervisor would while it cannot start (the server down). */
  async startPersistently(count: number, giveUpAt = Infinity): Promise<void> {
    for (let i = 0; i < count; i++) this.running.push(await this.startAgainUntilReady(giveUpAt));
  }

  /** SIGKILLs the next worker in turn and starts another in its place. */
  async killOne(): Promise<void> {
    const index = this.nextKill++ % this.running.length;
    const victim = this.running[index];
    this.sample();
    this.usage.dying(victim.child.pid);
    this.log(`fault: SIGKILL ${victim.name}`);
    await stopProcess(victim, 'SIGKILL');
    this.running[index] = await this.startAgainUntilReady();
  }

  /** As a supervisor would: a worker that cannot reach Temporal yet (the server is down) exits; start it again. */
  private async startAgainUntilReady(giveUpAt = Infinity): Promise<TuneflowProcess> {
    for (;;) {
      try {
        return await this.startOne();
      } catch (err) {
        if (Date.now() > giveUpAt) throw err;
        this.log(`${(err as Error).message.split('\n')[0]}; starting it again in 1 s`);
        await new Promise((resolve) => setTimeout(resolve, 1_000));
      }
    }
  }

  /** Every worker started with `metrics`, to scrape: the killed ones too, no longer running. */
  metricsTargets(): MetricsTarget[] {
    return this.metricsPorts.map(({ worker, port }) => ({
      name: worker.name,
      port,
      running: () => worker.child.exitCode === null && worker.child.signalCode === null,
    }));
  }

  /** Stops every worker gracefully (a CPU profile is written on exit); kills one that hangs. */
  async stop(): Promise<void> {
    await Promise.all(this.running.map((w) => stopGracefully(w)));
  }

  private async startOne(): Promise<TuneflowProcess> {
    const n = ++this.starts;
    const { name, args, env, ready, dir, metrics } = this.settings;
    const port = metrics ? await freePort() : undefined;
    const own = port === undefined ? env : { ...env, TUNEFLOW_METRICS_ADDRESS: `127.0.0.1:${port}` };
    const worker = await startNode(`${name}-${n}`, args, own, ready, path.join(dir, `${name}-${n}.log`));
    this.usage.started(worker.child.pid);
    if (port !== undefined) this.metricsPorts.push({ worker, port });
    return worker;
  }
}

/** The workers' settings: the run's service, task queue and receiver (each worker's own receiver listens unused). */
export function workerEnvironment(
  options: SoakOptions,
  run: {
    temporalAddress: string;
    apiKey: string;
    apiUrl: string;
    taskQueue: string;
    receiverUrl: string;
    secret: string;
    uploadDir: string | undefined;
    /** The operator's grants of tunes to tenants (TUNEFLOW_TENANT_TUNES), by tenant (`*`: every one). */
    tenantTunes?: Readonly<Record<string, readonly number[]>>;
    /** TUNEFLOW_STORAGE and the variables of its store. */
    storage?: Record<string, string>;
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
    ...(options.serviceMargin !== undefined && { TUNEFLOW_SERVICE_MARGIN: String(options.serviceMargin) }),
    ...(options.compressPayloads && { TUNEFLOW_COMPRESS_PAYLOADS: 'on' }),
    ...(options.maxCachedWorkflows !== undefined && {
      TUNEFLOW_MAX_CACHED_WORKFLOWS: String(options.maxCachedWorkflows),
    }),
    ...(run.uploadDir && { TUNEFLOW_UPLOAD_DIR: run.uploadDir }),
    ...run.storage,
    ...(run.tenantTunes && {
      TUNEFLOW_TENANT_TUNES: Object.entries(run.tenantTunes)
        .map(([tenant, ids]) => `${tenant}=${ids.join('+')}`)
        .join(';'),
    }),
  };
}
