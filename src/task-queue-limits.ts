/**
 * The service's rate held in one place: the Temporal server's configuration of the task queue's activity tasks (its
 * queue limit, a default limit per tenant scaled by the tenant's weight, the weights themselves), which every worker on
 * the queue obeys whatever it was started with. `tuneflow queue-limits` and the plugin at a worker's start set it.
 */
import { randomUUID } from 'node:crypto';
import type { Connection, WorkflowService } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import { temporal } from '@temporalio/proto';
import { tenantNameProblem } from './contract/tenants';

const { CommandType, TaskQueueType, TaskQueueKind } = temporal.api.enums.v1;

/** What the server holds for a task queue's activity tasks. */
export interface QueueLimits {
  /** Activity tasks per second the server dispatches from the whole queue, all workers together; undefined: none set. */
  queueRate?: number;
  /** Each tenant's tasks per second, scaled by its weight (a tenant of weight 2 gets twice this); undefined: none. */
  tenantRate?: number;
  /** The operator's weight of each tenant, over the weight its tasks carry (tuneflow's carry 1). */
  weights: Record<string, number>;
}

/** What to change: a field left out is left as the server holds it; `null` removes a limit. */
export interface QueueLimitsUpdate {
  queueRate?: number | null;
  tenantRate?: number | null;
  weights?: Record<string, number>;
}

/** Where the queue is, and who asks (the server records it beside the limit). */
export interface QueueLimitsTarget {
  service: WorkflowService;
  namespace: string;
  taskQueue: string;
  identity?: string;
}

/** Weights the server takes: it clamps others to this range. */
export const MIN_WEIGHT = 0.001;
export const MAX_WEIGHT = 1000;

/**
 * Why a weight is refused, in words; undefined for a good one.
 *
 * @example
 * weightProblem(2); // undefined
 */
export function weightProblem(weight: number): string | undefined {
  if (!Number.isFinite(weight) || weight < MIN_WEIGHT || weight > MAX_WEIGHT)
    return `must be a number from ${MIN_WEIGHT} to ${MAX_WEIGHT}`;
  return undefined;
}

/**
 * The limits the server holds for `taskQueue`'s activity tasks.
 *
 * @example
 * await queueLimits({ service: client.workflowService, namespace: 'default', taskQueue: 'tuneflow' }); // { queueRate: 9, weights: {} }
 */
export async function queueLimits(target: QueueLimitsTarget): Promise<QueueLimits> {
  const described = await target.service.describeTaskQueue({
    namespace: target.namespace,
    taskQueue: { name: target.taskQueue, kind: TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
    taskQueueType: TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
    reportConfig: true,
  });
  return limitsOf(described.config);
}

/**
 * Sets what `update` names on the server, for every worker of the queue; returns what the server then holds. Refuses a
 * bad rate, weight or tenant before anything is sent.
 *
 * @example
 * await setQueueLimits(target, { queueRate: 9, tenantRate: 3, weights: { shop: 2 } });
 */
export async function setQueueLimits(target: QueueLimitsTarget, update: QueueLimitsUpdate): Promise<QueueLimits> {
  for (const [name, rate] of [
    ['queueRate', update.queueRate],
    ['tenantRate', update.tenantRate],
  ] as const)
    if (rate != null && !(Number.isFinite(rate) && rate > 0))
      throw new RangeError(`${name}: must be a positive number of tasks per second, got ${String(rate)}`);
  for (const [tenant, weight] of Object.entries(update.weights ?? {})) {
    const problem = tenantNameProblem(tenant) ?? weightProblem(weight);
    if (problem) throw new RangeError(`weights.${tenant}: ${problem}`);
  }
  const rateUpdate = (rate: number | null | undefined, reason: string) =>
    rate === undefined ? undefined : { rateLimit: rate === null ? undefined : { requestsPerSecond: rate }, reason };
  const answer = await target.service.updateTaskQueueConfig({
    namespace: target.namespace,
    identity: target.identity ?? 'tuneflow',
    taskQueue: target.taskQueue,
    taskQueueType: TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
    updateQueueRateLimit: rateUpdate(update.queueRate, "tuneflow: the service's rate limit"),
    updateFairnessKeyRateLimitDefault: rateUpdate(update.tenantRate, "tuneflow: each tenant's share"),
    setFairnessWeightOverrides: update.weights ?? {},
  });
  return limitsOf(answer.config);
}

function limitsOf(config: temporal.api.taskqueue.v1.ITaskQueueConfig | null | undefined): QueueLimits {
  const rate = (limit: temporal.api.taskqueue.v1.IRateLimitConfig | null | undefined) =>
    limit?.rateLimit?.requestsPerSecond ?? undefined;
  return {
    queueRate: rate(config?.queueRateLimit),
    tenantRate: rate(config?.fairnessKeysRateLimitDefault),
    weights: { ...(config?.fairnessWeightOverrides ?? {}) },
  };
}

/**
 * True when the server has no task queue configuration to set (the time-skipping test server, an older server):
 * the workers' own limit is all there is.
 */
export function lacksQueueConfig(err: unknown): boolean {
  // UNIMPLEMENTED, FAILED_PRECONDITION (numbers from the gRPC spec; @grpc/grpc-js is not a direct dependency).
  const code = (err as { code?: unknown }).code;
  return code === 12 || code === 9;
}

/**
 * The limits in words, for a log line or the command's answer.
 *
 * @example
 * describeLimits({ queueRate: 9, weights: { shop: 2 } }); // 'queue 9/s, no per-tenant limit, weights shop=2'
 */
export function describeLimits(limits: QueueLimits): string {
  // By tenant: the server's map comes in no fixed order.
  const weights = Object.entries(limits.weights).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return [
    limits.queueRate === undefined ? 'no queue limit' : `queue ${limits.queueRate}/s`,
    limits.tenantRate === undefined ? 'no per-tenant limit' : `each tenant ${limits.tenantRate}/s times its weight`,
    weights.length ? `weights ${weights.map(([tenant, weight]) => `${tenant}=${weight}`).join(',')}` : 'every weight 1',
  ].join(', ');
}

/** What a probe of the server's dispatch order found. */
export interface FairnessProbe {
  /** on: the server dispatches by tenant; off: first come, first served; unknown: the probe could not tell. */
  fairness: 'on' | 'off' | 'unknown';
  /** Why it could not tell. */
  reason?: string;
}

/** The pause after each of a probe's starts. */
const PROBE_PAUSE_MS = 50;

/**
 * How long a probe may take, its starts, polls and completions together (a second on a quiet server, more on a loaded
 * one); the terminations of runs it did not take come after, best effort.
 */
const FAIRNESS_PROBE_MS = 20_000;

/**
 * The least time a poll is given: the server refuses a long poll with under 2 s left ("Context timeout is too
 * short").
 */
const PROBE_POLL_MIN_MS = 3_000;

/** What the probe's runs are, in the namespace's list of runs. */
export const FAIRNESS_PROBE_WORKFLOW = 'tuneflowFairnessProbe';

/** Each tenant's tasks in a probe: a server without fairness takes them in alternation by chance once in 252 probes. */
const PROBE_TASKS_EACH = 5;

/**
 * Asks the server how it dispatches, since no API says whether `matching.enableFairness` is on: five workflow tasks of
 * tenant a, then five of tenant b, on a queue of the probe's own, all added before anything polls, then taken in turn
 * by raw polls. With fairness they come in alternation, a, b, a, b (each tenant's first before anyone's second);
 * without it, a's first or in no order by tenant. Each task is answered by completing its run, so nothing is left open
 * (a run the probe could not take times out in a minute). Exact on a queue of one partition (`tuneflow dev-server`,
 * the compose file); on a server whose queues have several, the tasks land on different partitions, and a server with
 * fairness may look like one without.
 *
 * @example
 * await probeFairness(client.connection, 'default', 'tuneflow'); // { fairness: 'on' }
 */
export async function probeFairness(
  connection: Pick<Connection, 'workflowService' | 'withDeadline'>,
  namespace: string,
  taskQueue: string,
  identity = 'tuneflow',
): Promise<FairnessProbe> {
  const service = connection.workflowService;
  const queue = {
    name: `${taskQueue}.fairness-probe-${randomUUID().slice(0, 8)}`,
    kind: TaskQueueKind.TASK_QUEUE_KIND_NORMAL,
  };
  const tenants = ['probe-a', 'probe-b'].flatMap((tenant) => Array<string>(PROBE_TASKS_EACH).fill(tenant));
  const ids = tenants.map((_, i) => `${queue.name}-${i + 1}`);
  const taken: string[] = [];
  const deadline = Date.now() + FAIRNESS_PROBE_MS;
  try {
    await connection.withDeadline(deadline, async () => {
      for (const [i, workflowId] of ids.entries()) {
        await service.startWorkflowExecution({
          namespace,
          workflowId,
          workflowType: { name: FAIRNESS_PROBE_WORKFLOW },
          taskQueue: queue,
          requestId: randomUUID(),
          identity,
          workflowExecutionTimeout: msToTs('1 minute'),
          priority: { fairnessKey: tenants[i] },
        });
        // The server hands a started run's task to matching on its own time, after the start's answer: a pause, so
        // the tasks reach the backlog in the order they were added.
        await new Promise((resolve) => setTimeout(resolve, PROBE_PAUSE_MS));
      }
    });
    while (taken.length < ids.length) {
      if (deadline - Date.now() < PROBE_POLL_MIN_MS) throw new Error(`out of time (${FAIRNESS_PROBE_MS / 1000} s)`);
      const task = await connection.withDeadline(deadline, () =>
        service.pollWorkflowTaskQueue({ namespace, taskQueue: queue, identity }),
      );
      if (!task.taskToken?.length) throw new Error('a poll came back empty');
      await connection.withDeadline(deadline, () =>
        service.respondWorkflowTaskCompleted({
          namespace,
          identity,
          taskToken: task.taskToken,
          commands: [
            {
              commandType: CommandType.COMMAND_TYPE_COMPLETE_WORKFLOW_EXECUTION,
              completeWorkflowExecutionCommandAttributes: {},
            },
          ],
        }),
      );
      // Taken once completed: a run whose completion failed is terminated below with the untaken.
      taken.push(task.workflowExecution?.workflowId ?? '');
    }
  } catch (err) {
    const reason = `${taken.length} of ${ids.length} probe tasks taken: ${(err as Error).message}`;
    return { fairness: 'unknown', reason };
  } finally {
    await endUntaken(service, namespace, ids, taken);
  }
  const tenantOf = (id: string) => tenants[ids.indexOf(id)];
  const alternating = taken.every((id, i) => tenantOf(id) === tenants[(i % 2) * PROBE_TASKS_EACH]);
  return { fairness: alternating ? 'on' : 'off' };
}

/** The probe's runs it did not take, terminated (best effort: each times out in a minute anyway). */
async function endUntaken(service: WorkflowService, namespace: string, ids: string[], taken: string[]): Promise<void> {
  await Promise.all(
    ids
      .filter((id) => !taken.includes(id))
      .map((workflowId) =>
        service
          .terminateWorkflowExecution({
            namespace,
            workflowExecution: { workflowId },
            reason: 'tuneflow fairness probe',
          })
          .catch(() => undefined),
      ),
  );
}
