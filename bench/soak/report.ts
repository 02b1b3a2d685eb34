/**
 * The soak's report: its figures (the JSON line), and in words the table `npm run soak` prints at the end and the rows
 * compared with the floor (the report page's table too).
 */
import type { StorageFigures } from './storage';
import * as os from 'node:os';
import type { RateLimitRefusal } from '../../src/mock-service/faults';
import { AGREED, AGREED_NAMES, type MetricsFigures } from './agreement';
import { fairShareRows, type FairShareFigures } from './fair-share';
import type { FaultCounts } from './faults';
import type { HeapPeak } from './gc-trace';
import type { AttacksVerdict, HostileCounts } from './hostile';
import { HISTORY_PARTS } from './judge';
import {
  COMPARED,
  COMPARED_NAMES,
  roundsTable,
  type FloorShape,
  type PhaseFigures,
  type Ratios,
  type ReactionFigures,
  type Round,
  type RoundFigures,
} from './measure';
import { sizingLines, type Sizing } from './sizing';
import type { TenancyVerdict } from './tenancy';

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
   * The hostile starters (`--profile hostile-starters`): what they tried and how it ended, second tunes under any key
   * (from the mock's journal), and the runs the attacks started, judged: made and ended as they must, by kind, and
   * the stuck, duplicated and lost over them (hostile.ts).
   */
  hostile?: HostileCounts & { secondTunes: number } & Omit<AttacksVerdict, 'violations'>;
  /**
   * With two tenants (hostile-starters): each tenant's runs, objects, uploads and charges from the journal, and what
   * crossed tenants (each must be 0): objects read, created on or deleted across them, other requests on another
   * tenant's, runs over their maxCostMc, and objects or charges joined to no run (tenancy.ts).
   */
  tenancy?: Omit<TenancyVerdict, 'violations'>;
  /** With --storage: the completed jobs' images held to the store (none lost, none stored twice). */
  storage?: StorageFigures;
  /**
   * Under fair-share: each round's run with fairness and without, both tenants' p50 / p90 job latencies (the ordinary
   * tenant's alone and beside the flood), the ratio of its p90s, the 429s; the median ratios (fair-share.ts). The
   * report's other figures are the first round's run with fairness.
   */
  fairShare?: FairShareFigures;
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
  /**
   * With --metrics: the workers' and the receiver's `/metrics`, summed over every process's last scrape, against the
   * soak's own counts, each with its bound (the largest rise between two scrapes); late callbacks and polls per job.
   */
  metrics?: MetricsFigures;
  /** With --compare-metrics: each round's side with metrics and side without, metrics on / off, and the median. */
  metricsCost?: MetricsCost;
}

/** What the metrics cost: the same plan at once with them and without, round by round. */
export interface MetricsCost {
  rounds: Array<{ on: RoundFigures; off: RoundFigures; ratios: Ratios }>;
  medianRatios: Ratios;
}

/** The figures --compare-metrics sets side by side. */
const COST_FIGURES = [
  'workerAndReceiverCpuMsPerJob',
  'workerCpuMsPerJob',
  'receiverCpuMsPerJob',
  'workerRssMiB',
  'jobsPerSecond',
] as const;

/**
 * The rate limit's refusals by the second they came in (from the run's start): how many, their routes, and how
 * bunched the requests before them were (the most in 100 ms and in a second up to one). Says when the 429s came.
 *
 * @example
 * refusalLines([{ at: t0 + 317_200, route: 'GET /tunes/:id', inLast100Ms: 9, inLastSecond: 31 }], t0);
 * // ['317 s: 1 (GET /tunes/:id 1); at most 9 requests in 100 ms, 31 in 1 s']
 */
export function refusalLines(refusals: readonly RateLimitRefusal[], t0: number): string[] {
  const bySecond = new Map<number, RateLimitRefusal[]>();
  for (const refusal of refusals) {
    const second = Math.floor((refusal.at - t0) / 1000);
    const group = bySecond.get(second);
    if (group) group.push(refusal);
    else bySecond.set(second, [refusal]);
  }
  return [...bySecond].map(([second, group]) => {
    const routes = new Map<string, number>();
    for (const { route } of group) routes.set(route, (routes.get(route) ?? 0) + 1);
    const named = [...routes].map(([route, n]) => `${route} ${n}`).join(', ');
    const most = (of: (r: RateLimitRefusal) => number) => Math.max(...group.map(of));
    return (
      `${second} s: ${group.length} (${named}); at most ${most((r) => r.inLast100Ms)} requests in 100 ms, ` +
      `${most((r) => r.inLastSecond)} in 1 s`
    );
  });
}

/** --compare-metrics as lines of a table: each figure's with and without metrics and on / off, by round. */
export function metricsCostLines(cost: MetricsCost): string[] {
  const show = (n: number | null, unit = '') => (n === null ? 'n/a' : `${n}${unit}`);
  const rows = [
    [
      'metrics on / off',
      ...cost.rounds.flatMap((_, i) => [`${i + 1}: on`, `${i + 1}: off`, `${i + 1}: on / off`]),
      'median on / off',
    ],
    ...COST_FIGURES.map((key) => [
      COMPARED_NAMES[key],
      ...cost.rounds.flatMap((round) => [show(round.on[key]), show(round.off[key]), show(round.ratios[key], 'x')]),
      show(cost.medianRatios[key], 'x'),
    ]),
  ];
  const widths = rows[0].map((_, i) => Math.max(...rows.map((row) => row[i].length)));
  return [
    'what the metrics cost: the same plan at once with TUNEFLOW_METRICS_ADDRESS and without (CPU in ms, RSS in MiB)',
    ...rows.map((row) =>
      row
        .map((cell, i) => cell.padEnd(widths[i]))
        .join('  ')
        .trimEnd(),
    ),
  ];
}

/** The metrics section of the table: each figure from /metrics and from the soak, apart by, within. */
function metricsLines(metrics: MetricsFigures): string[] {
  const rows = [
    ['on /metrics against the soak', 'metrics', 'soak', 'difference', 'bound'],
    ...AGREED.map((figure) => {
      const { metrics: m, soak, difference, bound } = metrics.figures[figure];
      return [AGREED_NAMES[figure], String(m), String(soak), String(difference), String(bound)];
    }),
  ];
  const widths = rows[0].map((_, i) => Math.max(...rows.map((row) => row[i].length)));
  return [
    `metrics: ${metrics.scrapes} scrapes of ${metrics.processes} processes, every ${metrics.scrapeIntervalSeconds} s ` +
      `(the bound: the largest rise between two, and one interval of each of the ${metrics.processesLost} processes ` +
      'lost before the last)',
    ...rows.map((row) =>
      row.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join('  '),
    ),
    `callbacks by outcome ${JSON.stringify(metrics.callbackOutcomes)}; late ${JSON.stringify(metrics.lateCallbacks)}`,
    `polls per job ${metrics.pollsPerJob ?? 'n/a'} (${metrics.polls} polls); activity retries ${metrics.activityRetries}`,
    `charged for prompts no answer priced (hostile-starters' unpriced answers): ${metrics.unpricedMc} mc, on no metric`,
  ];
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

/** The hostile starters' and the tenants' rows of the table: none without hostile-starters. */
function hostileRows(report: SoakReport): Array<[string, string]> {
  const rows: Array<[string, string]> = [];
  const { hostile, tenancy, storage } = report;
  if (storage)
    rows.push([
      `images in storage (${storage.kind}): named / stored / lost / stored twice`,
      `${storage.images} / ${storage.stored} / ${storage.lost} / ${storage.storedTwice}`,
    ]);
  if (tenancy) {
    rows.push([
      'across tenants: read / created on / deleted / acted on',
      `${tenancy.read} / ${tenancy.createdOn} / ${tenancy.deleted} / ${tenancy.actedOn}`,
    ]);
    rows.push(['over maxCostMc / unattributed', `${tenancy.overMaxCost} / ${tenancy.unattributed}`]);
    for (const [tenant, t] of Object.entries(tenancy.tenants))
      rows.push([
        `  tenant ${tenant.length > 24 ? `${tenant.slice(0, 21)}...` : tenant}`,
        `${t.runs} runs, ${t.tunes} tunes, ${t.prompts} prompts, ${t.uploads} uploads, ${t.deleted} deleted, ` +
          `${t.chargedMc} mc`,
      ]);
  }
  if (hostile) {
    const { attacks, stuck, duplicates, lost, secondTunes, ...counts } = hostile;
    rows.push(['hostile starters', JSON.stringify(counts)]);
    rows.push([
      'attacks: stuck / duplicates / lost / second tunes',
      `${stuck} / ${duplicates} / ${lost} / ${secondTunes}`,
    ]);
    for (const [kind, a] of Object.entries(attacks))
      rows.push([
        `  attack ${kind}: made / as they must`,
        `${a.made} / ${a.asExpected} ${JSON.stringify(a.endings)}${a.slowestMs === null ? '' : `, slowest ${a.slowestMs} ms`}`,
      ]);
  }
  return rows;
}

/** The report as the table printed at the end of a run. */
export function reportTable(report: SoakReport): string {
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
    ...hostileRows(report),
    ...(report.fairShare ? fairShareRows(report.fairShare) : []),
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
  if (report.metrics) lines.push('', ...metricsLines(report.metrics));
  if (report.metricsCost) lines.push('', ...metricsCostLines(report.metricsCost));
  return lines.join('\n');
}
