/**
 * `tuneflow queue-limits`: the service's rate held by the Temporal server for the whole task queue (every worker
 * obeys it, whatever it was started with), each tenant's share of it, and the tenants' weights. Without flags it shows
 * what the server holds.
 */
import { DEFAULT_TASK_QUEUE, loadTaskQueue } from '../config';
import { tenantNameProblem } from '../contract/tenants';
import {
  describeLimits,
  lacksQueueConfig,
  queueLimits,
  setQueueLimits,
  weightProblem,
  type QueueLimitsUpdate,
} from '../task-queue-limits';
import {
  connectTemporal,
  ExitCode,
  parseFlags,
  processIO,
  runCommand,
  UsageError,
  type CommandIO,
} from './command-line';

export const QUEUE_LIMITS_USAGE = `Usage: tuneflow queue-limits [--rate N|off] [--tenant-rate N|off] [--weight TENANT=W ...]

Shows, or sets, what the Temporal server holds for the task queue's activities, for every worker on it: a worker
started without a limit, or with another one (TUNEFLOW_SERVICE_RATE, maxTaskQueueActivitiesPerSecond), changes nothing
once the server holds one. Each tenant's tasks are dispatched in proportion to its weight (its fairness key is the
tenant; tuneflow's activities carry weight 1, and the weights set here win over it).

Options:
  --rate N           activity tasks per second from the whole queue (keep it under the service's rate limit); off:
                     remove the server's limit (the workers' own apply again)
  --tenant-rate N    each tenant's tasks per second, times its weight (a tenant of weight 2 gets 2N); off: remove
  --weight T=W       tenant T's weight (${'0.001'} to 1000; a plan's share); repeat for more tenants
  --task-queue Q     (default: TUNEFLOW_TASK_QUEUE, else ${DEFAULT_TASK_QUEUE})
  -h, --help         show this help

The same as \`temporal task-queue config set --task-queue Q --task-queue-type activity --queue-rps-limit N
--fairness-key-rps-limit-default N --fairness-key-weight T=W\`. Fairness needs the server's dynamic config
matching.enableFairness=true (\`tuneflow dev-server\` sets it).

Environment: TEMPORAL_ADDRESS (default localhost:7233), TEMPORAL_NAMESPACE (default default), TEMPORAL_TLS*,
TEMPORAL_API_KEY, TEMPORAL_PROFILE; TUNEFLOW_TASK_QUEUE. Exit 2: a bad flag, nothing set; 3: Temporal unreachable;
1: the server holds no task queue limits (an older server).
`;

/** A rate flag: a positive number, or `off` (null: remove the limit); undefined when not given. */
function rateFlag(flag: string, value: string | undefined): number | null | undefined {
  if (value === undefined) return undefined;
  if (value === 'off') return null;
  const rate = Number(value);
  if (value.trim() === '' || !Number.isFinite(rate) || rate <= 0)
    throw new UsageError(
      `--${flag}: must be a positive number of tasks per second or off, got ${JSON.stringify(value)}`,
    );
  return rate;
}

/** The --weight flags as tenant -> weight, each checked. */
function weightFlags(values: string[] | undefined): Record<string, number> | undefined {
  if (!values?.length) return undefined;
  const weights: Record<string, number> = {};
  for (const value of values) {
    const at = value.indexOf('=');
    const tenant = value.slice(0, at);
    const weight = Number(value.slice(at + 1));
    if (at < 0) throw new UsageError(`--weight: must be TENANT=WEIGHT, got ${JSON.stringify(value)}`);
    const problem = tenantNameProblem(tenant);
    if (problem) throw new UsageError(`--weight: tenant ${JSON.stringify(tenant)} ${problem}`);
    const bad = value.slice(at + 1).trim() === '' ? 'must be a number' : weightProblem(weight);
    if (bad) throw new UsageError(`--weight: ${tenant}'s weight ${bad}, got ${JSON.stringify(value.slice(at + 1))}`);
    weights[tenant] = weight;
  }
  return weights;
}

export async function queueLimitsCommand(argv: string[], io: CommandIO = processIO()): Promise<ExitCode> {
  return runCommand('queue-limits', io, async () => {
    const { values } = parseFlags({
      args: argv,
      options: {
        rate: { type: 'string' },
        'tenant-rate': { type: 'string' },
        weight: { type: 'string', multiple: true },
        'task-queue': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    if (values.help) {
      io.stdout.write(QUEUE_LIMITS_USAGE);
      return ExitCode.ok;
    }
    // Every flag checked before anything is sent.
    const update: QueueLimitsUpdate = {
      queueRate: rateFlag('rate', values.rate),
      tenantRate: rateFlag('tenant-rate', values['tenant-rate']),
      weights: weightFlags(values.weight),
    };
    const taskQueue = values['task-queue'] ?? loadTaskQueue(io.env);
    const changes = Object.values(update).some((value) => value !== undefined);
    const { client, close } = await connectTemporal(io.env);
    try {
      const target = { service: client.workflowService, namespace: client.options.namespace, taskQueue };
      const limits = changes ? await setQueueLimits(target, update) : await queueLimits(target);
      io.stdout.write(`task queue ${taskQueue} (namespace ${target.namespace}): ${describeLimits(limits)}\n`);
      return ExitCode.ok;
    } catch (err) {
      if (!lacksQueueConfig(err)) throw err;
      io.stderr.write(
        `tuneflow queue-limits: the server at this address holds no task queue limits (${(err as Error).message}): ` +
          'give every worker the same TUNEFLOW_SERVICE_RATE instead\n',
      );
      return ExitCode.failed;
    } finally {
      await close();
    }
  });
}
