/**
 * `npm run soak`: N tuneflow jobs on a real Temporal dev server with K `tuneflow worker` processes, the mock service
 * and the callback receiver (`tuneflow callbacks`), under a fault profile; judged against the mock's own journal and
 * the server's histories. With --compare-floor the same plan then runs through the floor (bench/floor: bare workflows
 * of the same Temporal shape) and the report adds tuneflow / floor; with --metrics the workers' and the receiver's
 * /metrics are held to the soak's own counts, and with --compare-metrics the same plan runs twice at once, with metrics
 * and without, for what they cost; with --report DIR, a page of charts. Progress on
 * stderr while it runs, a table at the end, and with --json one JSON object as the last line of stdout. Exit 0 when
 * every invariant holds, 1 when one is broken, 2 for a bad flag.
 */
import { runFloor, type FloorRun } from '../floor/phase';
import { judgeFairShare, type FairShareRound } from './fair-share';
import { FLOOR_COLOR, TUNEFLOW_COLOR, writeReportPage, type ChartedRun } from './charts';
import { medianRatios, ratiosOf, roundFigures, sameShape, type Round } from './measure';
import { FlagError, parseSoakOptions, USAGE, type SoakOptions } from './options';
import { tuneflowCommand } from './processes';
import { jobOptions, runSoak, stderr, type PhaseDetail } from './run';
import { comparisonRows, reportTable, type MetricsCost, type SoakReport } from './report';

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
  if (options.profiles.includes('fair-share')) return finish(options, await fairShareRounds(options, runId));
  if (options.compareMetrics) return finish(options, await metricsRounds(options, runId));
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
        runSoak(options, id),
        runFloor(options, id, 'http://127.0.0.1:40000', jobOptions(options), stderr),
      ]);
    else {
      floor = floorFirst ? await runFloor(options, id, imageHost!, jobOptions(options), stderr) : undefined;
      tuneflow = await runSoak(options, id);
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
  return finish(options, { report, charted });
}

/**
 * fair-share: each round a run on a dev server with fairness and one without, the first of the two turning each
 * round; the report is the first round's run with fairness, with every round's figures and every run's violations.
 */
async function fairShareRounds(
  options: SoakOptions,
  runId: string,
): Promise<{ report: SoakReport; charted: ChartedRun[] }> {
  let first: { report: SoakReport; detail: PhaseDetail } | undefined;
  const rounds: FairShareRound[] = [];
  const violations: string[] = [];
  for (let r = 1; r <= options.rounds; r++) {
    const fairFirst = r % 2 === 1;
    const order = fairFirst ? 'fair first' : 'line first';
    stderr(`round ${r} of ${options.rounds}: ${order}`);
    const runs: Record<'fair' | 'line', { report: SoakReport; detail: PhaseDetail }> = {} as never;
    for (const side of fairFirst ? (['fair', 'line'] as const) : (['line', 'fair'] as const)) {
      runs[side] = await runSoak(options, `${runId}-${r}${side[0]}`, side === 'fair');
      violations.push(
        ...runs[side].report.violations.map((v) => `round ${r}, fairness ${side === 'fair' ? 'on' : 'off'}: ${v}`),
      );
    }
    first ??= runs.fair;
    rounds.push({ order, fair: runs.fair.detail.fairShare!, line: runs.line.detail.fairShare! });
    stderr(
      `round ${r}: the ordinary tenant's p90 with the flood / alone: fairness on ${runs.fair.detail.fairShare!.ratioP90}x, ` +
        `off ${runs.line.detail.fairShare!.ratioP90}x`,
    );
  }
  const judged = judgeFairShare(rounds, {
    flood: options.jobs,
    ordinary: options.ordinaryJobs,
    serviceLimit: options.serviceLimit!,
    serviceRate: options.serviceRate!,
  });
  const { report, detail } = first!;
  report.fairShare = judged.figures;
  report.violations = [...violations, ...judged.violations];
  return { report, charted: [{ name: 'tuneflow', color: TUNEFLOW_COLOR, ...detail }] };
}

/**
 * --compare-metrics: each round the plan twice at once, each side on its own server, mock and receiver, one with
 * --metrics and one without (both on the machine at the same moment: its other work weighs on both alike); the report
 * is the first round's side with metrics, with each round's figures of both sides and every run's violations.
 */
async function metricsRounds(
  options: SoakOptions,
  runId: string,
): Promise<{ report: SoakReport; charted: ChartedRun[] }> {
  let first: { report: SoakReport; detail: PhaseDetail } | undefined;
  const cost: MetricsCost['rounds'] = [];
  const violations: string[] = [];
  for (let r = 1; r <= options.rounds; r++) {
    stderr(`round ${r} of ${options.rounds}: with metrics and without, at once`);
    const [on, off] = await Promise.all([
      runSoak({ ...options, metrics: true }, `${runId}-${r}m`),
      runSoak({ ...options, metrics: false }, `${runId}-${r}o`),
    ]);
    for (const [side, run] of [
      ['on', on],
      ['off', off],
    ] as const)
      violations.push(...run.report.violations.map((v) => `round ${r}, metrics ${side}: ${v}`));
    first ??= on;
    const ratios = ratiosOf(on.report, off.report);
    cost.push({ on: roundFigures(on.report), off: roundFigures(off.report), ratios });
    stderr(
      `round ${r}: worker and receiver CPU per job with metrics ${on.report.workerAndReceiverCpuMsPerJob} ms, ` +
        `without ${off.report.workerAndReceiverCpuMsPerJob} ms (${ratios.workerAndReceiverCpuMsPerJob}x)`,
    );
  }
  const { report, detail } = first!;
  report.metricsCost = { rounds: cost, medianRatios: medianRatios(cost.map((round) => round.ratios)) };
  report.violations = violations;
  return { report, charted: [{ name: 'tuneflow', color: TUNEFLOW_COLOR, ...detail }] };
}

/** Prints the table, the violations, the report page and the JSON line; the exit code. */
function finish(options: SoakOptions, { report, charted }: { report: SoakReport; charted: ChartedRun[] }): number {
  process.stdout.write(`\n${reportTable(report)}\n`);
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
