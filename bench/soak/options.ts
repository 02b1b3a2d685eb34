/**
 * The soak run's flags and its fault profiles. A bad flag is named, with the rule it breaks, before anything starts.
 */
import { parseArgs } from 'node:util';
import { durationToMs } from '../../src/duration';
import { isServiceMargin, MAX_SERVICE_MARGIN } from '../../src/config';

/** One kind of fault, alone; `all` mixes them. */
export const PROFILES = {
  none: 'no fault: the baseline',
  'status-500': '500 bursts: every API request for 2.6 s of each 13 s (20 %), not processed',
  'status-504': '20 % of API requests processed, then answered 504',
  'status-429': '429 storms with Retry-After: every API request for 3.4 s of each 17 s (20 %)',
  'callbacks-lost': 'every callback lost: polling alone finishes the jobs',
  'callbacks-disordered': 'callbacks duplicated (50 %), reordered and late (0.5 to 6 s)',
  'forged-callbacks': 'a flood of forged callbacks at the receiver (bad, missing and replayed signatures)',
  'never-train': "every fifth job's tune never trains: those jobs must fail TuneNeverTrained at their deadline",
  'worker-kill': 'once half the jobs started, a worker SIGKILLed and started again, then every 30 s while runs wait',
  'server-restart':
    'once half the jobs started, the dev server stopped and started again on its state file (down 10 s)',
  'receiver-cut':
    "the receiver's Temporal connection cut for 20 s while a callback is due (callbacks refused meanwhile)",
  'hostile-starters':
    'two tenants, and starters tuneflow does not control against each other: other input under live keys, raw ' +
    '"allow duplicate" starts after close, titles of other runs, the other tenant\'s tune ids, squatted claims, raw ' +
    'starts under tenant IDs without the memo, the longest keys, 20,000-deep attributes, answers without cost under ' +
    'maxCostMc, file paths outside the upload directory, prompts smuggled past the budget',
  'fair-share':
    "two tenants on a rate-limited queue: the second tenant's --ordinary jobs alone, then the first's --jobs as a " +
    'flood and the same ordinary jobs beside it, on a dev server with fairness on and on one without it, each round; ' +
    "the ordinary jobs' p90 with the flood over their p90 alone (needs --service-limit and --service-rate)",
} as const;
export type ProfileName = keyof typeof PROFILES;

export interface SoakOptions {
  jobs: number;
  workers: number;
  /** The profiles in force: one, or every one for `all`. */
  profiles: ProfileName[];
  profileName: string;
  /** The harness's deadline from the first start: a run still open then is stuck. */
  durationMs: number;
  json: boolean;
  /** Jobs started per second; 0 starts them all at once. */
  rate: number;
  /** With a rate: the last `burst` jobs start all at once after the steady part (their reactions reported apart). */
  burst: number;
  /** Run the same plan through the floor (bench/floor) afterwards and report tuneflow / floor. */
  compareFloor: boolean;
  /**
   * With compareFloor: how many times to run the pair, the order turned each time (tuneflow first, then the floor
   * first), reporting each round's ratios and their median.
   */
  rounds: number;
  /**
   * With compareFloor: run the two sides of each round at once, on the same machine at the same moment, so that what
   * else the machine does weighs on both alike (each gets about half of it); else one after the other.
   */
  together: boolean;
  /** Write a page with charts (and the full report) into this directory. */
  reportDir?: string;
  trainingTime: string;
  inferenceTime: string;
  /** Keep the dev server's state in a file even when no fault needs it. */
  dbFile: boolean;
  /** Run on the cluster tier (bench/cluster): the full Temporal server on PostgreSQL instead of a dev server. */
  cluster: boolean;
  /** The workers are build A of a worker deployment (Worker Versioning), A current before the first job. */
  versioned: boolean;
  /** A versioned deploy once half the jobs started (bench/soak/rollout.ts): build A's workers, then build B's made current. */
  rollout: boolean;
  /** More flags for `temporal server start-dev`, e.g. `--dynamic-config-value frontend.rps=10000`. */
  serverArgs: string[];
  /**
   * V8 heap limit of each worker process in MiB (`--max-old-space-size`). The SDK sizes its workflow cache from it
   * (about 600 cached runs per GB above 200 MB), so this trades memory for replays.
   */
  workerHeapMiB?: number;
  /** Runs each worker keeps in its cache (TUNEFLOW_MAX_CACHED_WORKFLOWS); unset, the SDK's default. */
  maxCachedWorkflows?: number;
  /** Keep the run's directory (logs, the dev server's state file) even when every invariant holds. */
  keep: boolean;
  /** The mock's rate limit: at most this many requests a second for the run's API key, 429 above it. */
  serviceLimit?: number;
  /**
   * TUNEFLOW_SERVICE_RATE of every worker: the service's rate as the operator states it; the task queue's activities
   * per second, all workers together, are it less the margin.
   */
  serviceRate?: number;
  /** TUNEFLOW_SERVICE_MARGIN of every worker; undefined: tuneflow's default (0.1). */
  serviceMargin?: number;
  /** Write a CPU profile of each worker process into this directory (`node --cpu-prof`). */
  cpuProfDir?: string;
  /** With the fair-share profile: the second tenant's jobs, run alone and again beside the flood of --jobs. */
  ordinaryJobs: number;
  /** Trace each worker's garbage collection (`node --trace-gc`) and report each V8 heap's peaks (bench/soak/gc-trace.ts). */
  traceGc: boolean;
  /** TUNEFLOW_COMPRESS_PAYLOADS=on for every worker: activity payloads stored compressed. */
  compressPayloads: boolean;
  /** Every worker copies the images (TUNEFLOW_STORAGE): to a folder, or to SeaweedFS (src/s3-server). */
  storage?: 'folder' | 's3';
  /**
   * Serve `/metrics` from each worker and the receiver, scrape them every `scrapeIntervalSeconds` and hold their
   * figures to the soak's own (bench/soak/agreement.ts).
   */
  metrics: boolean;
  scrapeIntervalSeconds: number;
  /** Run the plan twice at once, with metrics and without, and report what they cost the workers and the receiver. */
  compareMetrics: boolean;
}

export const USAGE = `Usage: npm run soak -- [--jobs N] [--workers K] [--profile NAME[,NAME...]|all] [--duration D] [--json]

Runs N tuneflow jobs (trainThenGenerate, generate and packTune, 1 to 8 prompts each) on a real Temporal dev server
with K \`tuneflow worker\` processes, the mock service and the callback receiver, injects a fault profile, and checks
the invariants against the mock's own journal. Exit 0 when they hold, 1 when one is broken, 2 for a bad flag.

Options:
  --jobs N              jobs to run (default 100)
  --workers K           worker processes (default 1)
  --profile NAME|all    fault profile (default none; several joined by commas mix as in all):
${Object.entries(PROFILES)
  .map(([name, what]) => `                          ${name.padEnd(21)} ${what}`)
  .join('\n')}
                          all                   every fault at once, fair-share apart (lighter rates; status faults
                                                in the first minute; the cut ends once a callback was
                                                refused, and the restart follows it)
  --duration D          deadline from the first start; runs open then are stuck (default 4 minutes)
  --rate R              jobs started per second (default 0: all at once, a burst); the reaction figures are
                        then those of the steady part (runs in flight level) apart from any burst
  --burst B             with --rate: the last B of the jobs start all at once after the steady ones, reported
                        apart (with about R x the job's length in flight already)
  --compare-floor       then the same plan through the floor (bench/floor: bare workflows of tuneflow's Temporal
                        shape, tuneflow's requests over bare undici, callbacks through a bare receiver) on a fresh
                        server with the same flags, workers and delays; the report adds the floor's figures and
                        tuneflow / floor (needs npm run build and --profile none)
  --rounds N            with --compare-floor: N pairs, tuneflow first then the floor first in turn; the report adds
                        each round's tuneflow / floor and their median (default 1); with --compare-metrics: N pairs
                        with metrics and without, and the median of metrics on / off; with fair-share: N rounds of a
                        run with fairness and one without, the first of the two turning each round
  --ordinary M          with fair-share: the second tenant's jobs (default 20), alone and again beside the flood
  --together            with --compare-floor: each round runs both sides at once (the machine's other work, and
                        each side's, weighs on both alike) instead of one after the other
  --metrics             each worker and the receiver serve /metrics (TUNEFLOW_METRICS_ADDRESS on a free port); the
                        soak scrapes them every --scrape-interval and once more after the jobs ended, and the report
                        sets each figure (jobs ended, API calls, 429s, callbacks, charged) beside the soak's own, with
                        the largest rise between two scrapes as the bound the difference must keep within
  --scrape-interval S   with --metrics or --compare-metrics: seconds between scrapes, 1 to 60 (default 5)
  --compare-metrics     the same plan twice at once, each on its own server, mock and receiver: one side with
                        --metrics, one with TUNEFLOW_METRICS_ADDRESS=off; the report adds each side's worker and
                        receiver CPU per job, RSS peak and jobs/s and metrics on / off, by round with --rounds
  --report DIR          write DIR/index.html (charts: worker memory and runs in flight over time, reaction
                        latencies; tuneflow beside the floor when compared) and DIR/report.json
  --training-time D     how long the mock trains a tune (default 10s)
  --inference-time D    how long the mock takes for a prompt (default 3s)
  --db-file             keep the dev server's state in a SQLite file even when no fault needs it
  --cluster             on a Temporal cluster instead (bench/cluster: the server built from its Go module, on a
                        throwaway PostgreSQL); needs Go the first time and PostgreSQL's binaries
  --versioned           the workers are build A of a worker deployment (TUNEFLOW_DEPLOYMENT_NAME), A made current
                        before the first job: what versioning costs a job (with --compare-floor, against the floor)
  --rollout             --versioned, and the workers are build A of a worker deployment; once half the jobs started as many workers
                        of build B start and B is made current (A's jobs finish on A); stderr says each build's jobs
  --server-arg ARG      one more flag for \`temporal server start-dev\` (repeatable)
  --cpu-prof DIR        write a CPU profile of each worker process (node --cpu-prof) into DIR
  --compress-payloads   the workers store activity payloads compressed (TUNEFLOW_COMPRESS_PAYLOADS=on)
  --storage KIND        the workers copy every image to storage (TUNEFLOW_STORAGE): folder (the embedded default), or
                        s3 (a SeaweedFS the soak starts, its bucket versioned); the report counts images lost or
                        stored twice
  --trace-gc            trace each worker's garbage collection (node --trace-gc) and report the first worker's V8
                        heaps apart (its main thread, where activities run, and its workflow thread): peak committed,
                        peak in use, live after a full collection
  --worker-heap MIB     V8 heap limit of each worker (--max-old-space-size); the SDK sizes its workflow cache from it
  --max-cached N        runs each worker keeps cached (TUNEFLOW_MAX_CACHED_WORKFLOWS): bounds its memory
  --service-limit N     the service's rate limit: the mock answers 429 (Retry-After) above N requests a second for
                        the run's API key, whatever the profile; the report counts those 429s
  --service-rate R      TUNEFLOW_SERVICE_RATE=R for every worker: the task queue starts at most R less the margin
                        activities a second, all workers together (compare a run with it and one without,
                        --service-limit alike)
  --service-margin M    TUNEFLOW_SERVICE_MARGIN=M for every worker, 0 to 0.5 (default tuneflow's, 0.1)
  --keep                keep the run's directory (logs, the server's state file) even when it passed
  --json                last line: one JSON object with the figures
  --help                this text

Temporal: TEMPORAL_ADDRESS (a running server; the server-restart fault is then left out), else a dev server
provisioned by src/temporal-server.
`;

/** A flag that breaks its rule; the message names it. */
export class FlagError extends Error {
  override name = 'FlagError';
}

function positiveInteger(name: string, value: string | undefined, fallback: number, max: number): number {
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > max)
    throw new FlagError(`${name}: must be a whole number from 1 to ${max}, got '${value}'`);
  return Number(value);
}

function duration(name: string, value: string | undefined, fallback: string): string {
  const text = value ?? fallback;
  try {
    if (durationToMs(text, name) <= 0) throw new Error();
  } catch {
    throw new FlagError(`${name}: must be a positive duration such as '90s' or '4 minutes', got '${text}'`);
  }
  return text;
}

/** The soak's flags, as `parseArgs` reads them (their rules: USAGE, and the checks below). */
const FLAGS = {
  jobs: { type: 'string' },
  workers: { type: 'string' },
  profile: { type: 'string' },
  duration: { type: 'string' },
  rate: { type: 'string' },
  burst: { type: 'string' },
  'compare-floor': { type: 'boolean' },
  rounds: { type: 'string' },
  'floor-http': { type: 'boolean' },
  together: { type: 'boolean' },
  report: { type: 'string' },
  'training-time': { type: 'string' },
  'inference-time': { type: 'string' },
  'db-file': { type: 'boolean' },
  cluster: { type: 'boolean' },
  versioned: { type: 'boolean' },
  rollout: { type: 'boolean' },
  'server-arg': { type: 'string', multiple: true },
  'cpu-prof': { type: 'string' },
  'trace-gc': { type: 'boolean' },
  'compress-payloads': { type: 'boolean' },
  storage: { type: 'string' },
  keep: { type: 'boolean' },
  'worker-heap': { type: 'string' },
  'max-cached': { type: 'string' },
  'service-limit': { type: 'string' },
  'service-rate': { type: 'string' },
  'service-margin': { type: 'string' },
  ordinary: { type: 'string' },
  metrics: { type: 'boolean' },
  'scrape-interval': { type: 'string' },
  'compare-metrics': { type: 'boolean' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Flags = ReturnType<typeof parseArgs<{ options: typeof FLAGS; strict: true }>>['values'];

/**
 * The options of `argv`, or undefined for --help; throws FlagError naming the flag.
 *
 * @example
 * parseSoakOptions(['--jobs', '20', '--profile', 'all', '--json']);
 */
export function parseSoakOptions(argv: string[]): SoakOptions | undefined {
  let v: Flags;
  try {
    v = parseArgs({ args: argv, strict: true, allowPositionals: false, options: FLAGS }).values;
  } catch (err) {
    throw new FlagError((err as Error).message);
  }
  if (v.help) return undefined;
  const profileName = v.profile ?? 'none';
  const profiles = profilesOf(profileName);
  const schedule = scheduleOf(v);
  const comparing = comparisonOf(v, profileName, profiles.includes('fair-share'));
  const metrics = metricsOf(v, comparing, profiles.includes('fair-share'));
  if (v.report !== undefined && !v.report.trim()) throw new FlagError('--report: must be a directory to write into');
  const service = serviceOf(v, comparing.compareFloor);
  const ordinaryJobs = fairShareOf(v, profiles, service);
  if (v['cpu-prof'] !== undefined && !v['cpu-prof'].trim())
    throw new FlagError('--cpu-prof: must be a directory to write the profiles into');
  return {
    ...schedule,
    workers: positiveInteger('--workers', v.workers, 1, 32),
    profiles,
    profileName,
    durationMs: durationToMs(duration('--duration', v.duration, '4 minutes'), '--duration'),
    json: v.json ?? false,
    ...comparing,
    ...metrics,
    reportDir: v.report,
    trainingTime: duration('--training-time', v['training-time'], '10s'),
    inferenceTime: duration('--inference-time', v['inference-time'], '3s'),
    dbFile: v['db-file'] ?? false,
    cluster: v.cluster ?? false,
    versioned: (v.versioned ?? false) || (v.rollout ?? false),
    rollout: v.rollout ?? false,
    serverArgs: v['server-arg'] ?? [],
    cpuProfDir: v['cpu-prof'],
    traceGc: v['trace-gc'] ?? false,
    compressPayloads: v['compress-payloads'] ?? false,
    storage: storageKind(v.storage),
    ordinaryJobs,
    keep: v.keep ?? false,
    workerHeapMiB:
      v['worker-heap'] === undefined ? undefined : positiveInteger('--worker-heap', v['worker-heap'], 0, 65_536),
    maxCachedWorkflows:
      v['max-cached'] === undefined ? undefined : positiveInteger('--max-cached', v['max-cached'], 0, 1_000_000),
    ...service,
  };
}

/** --profile: one profile, several joined by commas (they mix as in `all`), or all of them. */
function profilesOf(profileName: string): ProfileName[] {
  // fair-share is no fault but a run of its own (two servers a round), so not one of all.
  const names =
    profileName === 'all'
      ? Object.keys(PROFILES).filter((p) => p !== 'none' && p !== 'fair-share')
      : profileName.split(',');
  if (!names.every((name) => name in PROFILES))
    throw new FlagError(
      `--profile: must be one of ${[...Object.keys(PROFILES), 'all'].join(', ')} (or several joined by commas), got '${profileName}'`,
    );
  return names as ProfileName[];
}

/** --jobs, --rate and --burst: how many jobs, and when they start. */
function scheduleOf(v: Flags): Pick<SoakOptions, 'jobs' | 'rate' | 'burst'> {
  let rate = 0;
  if (v.rate !== undefined) {
    rate = Number(v.rate);
    if (!/^\d+(\.\d+)?$/.test(v.rate) || !(rate > 0))
      throw new FlagError(`--rate: must be a positive number of jobs per second, got '${v.rate}'`);
  }
  const jobs = positiveInteger('--jobs', v.jobs, 100, 100_000);
  const burst = v.burst === undefined ? 0 : positiveInteger('--burst', v.burst, 0, jobs);
  if (burst && !rate) throw new FlagError('--burst: needs --rate (without a rate every job starts in one burst)');
  if (burst >= jobs) throw new FlagError(`--burst: must leave jobs for the steady rate (at most ${jobs - 1})`);
  return { jobs, rate, burst };
}

/** --compare-floor, --rounds and --together: whether the floor runs too, how often, and beside tuneflow or after. */
function comparisonOf(
  v: Flags,
  profileName: string,
  fairShare: boolean,
): Pick<SoakOptions, 'compareFloor' | 'rounds' | 'together'> {
  const compareFloor = v['compare-floor'] ?? false;
  if (compareFloor && profileName !== 'none')
    throw new FlagError(`--compare-floor: the floor takes no faults; run it with --profile none, got '${profileName}'`);
  if (compareFloor && v.cluster) throw new FlagError('--compare-floor: runs on the dev server, not with --cluster');
  // B's workers are not among those the comparison measures: --versioned is versioning's cost.
  if (compareFloor && v.rollout) throw new FlagError('--rollout: not with --compare-floor (use --versioned)');
  const rounds = positiveInteger('--rounds', v.rounds, 1, 9);
  if (rounds > 1 && !compareFloor && !fairShare && !v['compare-metrics'])
    throw new FlagError(
      '--rounds: needs --compare-floor (rounds of tuneflow and the floor) or --profile fair-share (rounds with ' +
        'fairness and without), or --compare-metrics (rounds with metrics and without)',
    );
  const together = v.together ?? false;
  if (together && !compareFloor) throw new FlagError('--together: needs --compare-floor (it runs both sides at once)');
  if (v['floor-http'])
    throw new FlagError("--floor-http: gone; the floor always makes tuneflow's requests now (bench/floor/worker.ts)");
  return { compareFloor, rounds, together };
}

/** --metrics, --scrape-interval and --compare-metrics: whose /metrics are read, how often, beside a run without. */
function metricsOf(
  v: Flags,
  comparing: Pick<SoakOptions, 'compareFloor'>,
  fairShare: boolean,
): Pick<SoakOptions, 'metrics' | 'scrapeIntervalSeconds' | 'compareMetrics'> {
  const compareMetrics = v['compare-metrics'] ?? false;
  const metrics = v.metrics ?? false;
  if (compareMetrics && metrics)
    throw new FlagError('--metrics: --compare-metrics already runs one side with metrics; give one of the two');
  if (compareMetrics && comparing.compareFloor)
    throw new FlagError('--compare-metrics: one comparison a run; not with --compare-floor');
  if (compareMetrics && fairShare)
    throw new FlagError('--compare-metrics: fair-share runs its own pairs; not with --profile fair-share');
  // Two clusters at once would weigh on the machine as no single run does.
  if (compareMetrics && v.cluster) throw new FlagError('--compare-metrics: runs on dev servers, not with --cluster');
  if (v['scrape-interval'] !== undefined && !metrics && !compareMetrics)
    throw new FlagError('--scrape-interval: needs --metrics or --compare-metrics (nothing is scraped without)');
  const scrapeIntervalSeconds = positiveInteger('--scrape-interval', v['scrape-interval'], 5, 60);
  return { metrics, scrapeIntervalSeconds, compareMetrics };
}

/** --service-limit and --service-rate: the mock's rate limit and the workers' own; tuneflow's alone. */
function serviceOf(
  v: Flags,
  compareFloor: boolean,
): Pick<SoakOptions, 'serviceLimit' | 'serviceRate' | 'serviceMargin'> {
  const perSecond = (name: string, value: string | undefined) => {
    if (value === undefined) return undefined;
    if (!/^\d+(\.\d+)?$/.test(value) || !(Number(value) > 0))
      throw new FlagError(`${name}: must be a positive number of requests per second, got '${value}'`);
    return Number(value);
  };
  const serviceLimit = perSecond('--service-limit', v['service-limit']);
  const serviceRate = perSecond('--service-rate', v['service-rate']);
  if ((serviceLimit !== undefined || serviceRate !== undefined) && compareFloor)
    throw new FlagError(
      '--service-limit, --service-rate: the floor has no service rate; run them without --compare-floor',
    );
  const margin = v['service-margin'];
  if (margin !== undefined && serviceRate === undefined)
    throw new FlagError('--service-margin: needs --service-rate (the margin is a share of it)');
  if (margin !== undefined && !(/^\d+(\.\d+)?$/.test(margin) && isServiceMargin(Number(margin))))
    throw new FlagError(`--service-margin: must be a number from 0 to ${MAX_SERVICE_MARGIN}, got '${margin}'`);
  return { serviceLimit, serviceRate, serviceMargin: margin === undefined ? undefined : Number(margin) };
}

/**
 * --ordinary, and what fair-share needs: alone (its runs are its own: two stages, two servers a round), a rate to
 * share (the queue's, under the service's limit), and dev servers the soak starts with fairness on and off.
 */
function fairShareOf(
  v: Flags,
  profiles: readonly ProfileName[],
  service: Pick<SoakOptions, 'serviceLimit' | 'serviceRate'>,
): number {
  const fairShare = profiles.includes('fair-share');
  if (v.ordinary !== undefined && !fairShare)
    throw new FlagError("--ordinary: needs --profile fair-share (the second tenant's jobs beside the flood)");
  const ordinary = positiveInteger('--ordinary', v.ordinary, 20, 10_000);
  if (!fairShare) return ordinary;
  if (profiles.length > 1) throw new FlagError('--profile: fair-share runs alone, not mixed with other profiles');
  if (service.serviceLimit === undefined || service.serviceRate === undefined)
    throw new FlagError(
      "fair-share: needs --service-limit and --service-rate (a fair share of the queue's limit under the " +
        "service's)",
    );
  if (v.rate !== undefined) throw new FlagError('--rate: fair-share starts each of its stages all at once');
  if (v.cluster)
    throw new FlagError('fair-share: runs on dev servers it starts with fairness on and off, not --cluster');
  return ordinary;
}

function storageKind(value: string | undefined): 'folder' | 's3' | undefined {
  if (value === undefined) return undefined;
  if (value !== 'folder' && value !== 's3') throw new FlagError(`--storage: must be folder or s3, got ${value}`);
  return value;
}
