/**
 * `tuneflow replay`: the replay gate (src/deployments/replay-gate.ts) on the command line, for CI before a deploy.
 */
import * as path from 'node:path';
import { loadVersioning, VERSIONING_VARIABLES } from '../config';
import { loadTracingConfig } from '../tracing-environment';
import {
  DEFAULT_GATE_RUNS,
  gateCountProblem,
  gateQuery,
  GATE_WORKFLOW_TYPES,
  MAX_GATE_RUNS,
  replayGate,
  type GateRun,
} from '../deployments/replay-gate';
import { buildIdProblem, defaultBuildId, deploymentNameProblem, type DeploymentVersion } from '../deployments/versions';
import { tuneflowReplayOptions, workflowSource } from '../plugin';
import {
  connectTemporal,
  ExitCode,
  parseFlags,
  processIO,
  runCommand,
  UsageError,
  type CommandIO,
} from './command-line';

export const REPLAY_USAGE = `Usage: tuneflow replay [--query Q] [--count N] [--deployment-name D] [--build-id B]
                       [--workflows PATH] [--json]

Before a deploy: reads the namespace's most recent runs, open and closed, of ${GATE_WORKFLOW_TYPES.join(', ')} and replays, with
this package's workflow code (or --workflows), each run the new build would take: unversioned runs, auto-upgrade runs
and runs already on the new build. A run pinned to another build finishes there and is not replayed. Names each run
that would not replay, and exits 1 if any would not.

Options:
  --query Q            more of the visibility query, joined with AND: 'StartTime > "2026-11-01T00:00:00Z"'
  --count N            the most recent runs read, 1 to ${MAX_GATE_RUNS} (default ${DEFAULT_GATE_RUNS})
  --deployment-name D  the new build's deployment (default TUNEFLOW_DEPLOYMENT_NAME; unset: an unversioned build,
                       which takes no pinned run)
  --build-id B         the new build (default TUNEFLOW_BUILD_ID, else the package version and its workflow bundle's
                       hash, as its worker takes it)
  --workflows PATH     the workflows module the new build's workers run (a workflows index of your own beside
                       tuneflow's), bundled here; needs --build-id with a deployment
  --json               the runs replayed, failed and skipped, as one JSON object
  -h, --help           show this help

Environment: TEMPORAL_ADDRESS (default localhost:7233), TEMPORAL_NAMESPACE (default default), TEMPORAL_TLS*,
TEMPORAL_API_KEY, TEMPORAL_PROFILE; TUNEFLOW_DEPLOYMENT_NAME, TUNEFLOW_BUILD_ID. Exit 0: every run it would take
replays; 1: some would not; 2: a bad flag or setting; 3: Temporal unreachable.
`;

export async function replayCommand(argv: string[], io: CommandIO = processIO()): Promise<ExitCode> {
  const json = argv.includes('--json');
  return runCommand(
    'replay',
    io,
    async () => {
      const { values } = parseFlags({
        args: argv,
        options: {
          query: { type: 'string' },
          count: { type: 'string' },
          'deployment-name': { type: 'string' },
          'build-id': { type: 'string' },
          workflows: { type: 'string' },
          json: { type: 'boolean' },
          help: { type: 'boolean', short: 'h' },
        },
      });
      if (values.help) {
        io.stdout.write(REPLAY_USAGE);
        return ExitCode.ok;
      }
      const count =
        values.count === undefined ? DEFAULT_GATE_RUNS : /^\d+$/.test(values.count) ? Number(values.count) : NaN;
      const countProblem = gateCountProblem(count);
      if (countProblem)
        throw new UsageError(`--count: ${countProblem.replace(/got .*$/, `got ${JSON.stringify(values.count)}`)}`);
      // The bundle the new build's workers run: the traced one where their OTEL_* settings turn tracing on.
      const source = values.workflows
        ? { workflowsPath: path.resolve(values.workflows) }
        : workflowSource(loadTracingConfig(io.env) !== undefined);
      const build = newBuild(
        values['deployment-name'],
        values['build-id'],
        source,
        io.env,
        values.workflows !== undefined,
      );
      const { client, close } = await connectTemporal(io.env);
      try {
        const gate = await replayGate({
          client,
          query: values.query,
          count,
          build,
          replayer: tuneflowReplayOptions(source),
        });
        const read = gate.replayed.length + gate.failed.length + gate.skipped.length + gate.gone.length;
        if (json) io.stdout.write(`${JSON.stringify({ query: gateQuery(values.query), build, ...gate })}\n`);
        else {
          io.stdout.write(
            `${read} runs read (${gateQuery(values.query)}), with build ${build ? `${build.deploymentName}.${build.buildId}` : 'unversioned'}: ` +
              `${gate.replayed.length} replayed, ${gate.failed.length} would not replay, ` +
              `${gate.skipped.length} pinned to other builds not replayed` +
              (gate.gone.length ? `, ${gate.gone.length} gone before they were read` : '') +
              '\n',
          );
          for (const run of gate.failed) io.stdout.write(`would not replay: ${describeRun(run)}: ${run.error}\n`);
        }
        return gate.failed.length ? ExitCode.failed : ExitCode.ok;
      } finally {
        await close();
      }
    },
    { json },
  );
}

/** `trainThenGenerate order-1 (run 1f2e..., unversioned)`. */
function describeRun(run: GateRun): string {
  const on = run.version ? `, on ${run.version}` : '';
  const behavior = run.behavior === 'unversioned' ? 'unversioned' : run.behavior.toLowerCase().replace('_', '-');
  return `${run.workflowType} ${run.workflowId} (run ${run.runId}, ${behavior}${on})`;
}

/** The new build from the flags, else the variables, else the package's own default; undefined: unversioned. */
function newBuild(
  deploymentFlag: string | undefined,
  buildIdFlag: string | undefined,
  source: ReturnType<typeof workflowSource>,
  env: NodeJS.ProcessEnv,
  withWorkflows: boolean,
): DeploymentVersion | undefined {
  const fromEnv = deploymentFlag === undefined ? loadVersioning(env) : undefined;
  const deploymentName = deploymentFlag ?? fromEnv?.deploymentName;
  if (deploymentName === undefined) {
    if (buildIdFlag !== undefined)
      throw new UsageError(`--build-id: needs --deployment-name (or ${VERSIONING_VARIABLES.deploymentName})`);
    return undefined;
  }
  const nameProblem = deploymentNameProblem(deploymentName);
  if (nameProblem) throw new UsageError(`--deployment-name: ${nameProblem}`);
  const fromVariable = env[VERSIONING_VARIABLES.buildId]?.trim() || undefined;
  const buildId = buildIdFlag ?? fromVariable ?? defaultBuildId(source);
  if (!buildId)
    throw new UsageError(
      withWorkflows
        ? '--build-id: required with --workflows (the build ID of the workers that run them)'
        : '--build-id: required where no prebuilt workflow bundle is installed (npm run build writes it)',
    );
  const buildProblem = buildIdProblem(buildId);
  if (buildProblem)
    throw new UsageError(`${buildIdFlag !== undefined ? '--build-id' : VERSIONING_VARIABLES.buildId}: ${buildProblem}`);
  return { deploymentName, buildId };
}
