/**
 * What the command line can tell about a run from outside, without ever blocking on it: whether a worker polls its
 * task queue (a query or a result waits for one, so a run with none would hold the command), when it next wakes by
 * itself (its earliest pending timer, read from the history: a poll, a read or a deadline), and its progress query
 * under a short deadline.
 */
import type { WorkflowClient, WorkflowHandle } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { optionalTsToMs } from '@temporalio/common/lib/time';
import type { TuneflowHandle } from '../client';
import type { TrainThenGenerateInput } from '../contract/inputs';
import { progressQuery, type Progress } from '../contract/messages';
import { resolveOptions } from '../contract/options';
import { decompressed } from '../codec/compression';

/**
 * A live worker long-polls again as soon as a poll ends (the server holds one for about a minute): a task queue
 * whose newest poll is older than this has no worker left.
 */
const LIVE_POLL_MS = 75_000;
/** How long a query may take before the command goes on without its answer. */
export const QUERY_DEADLINE_MS = 3_000;

/** Workers on a task queue, as the server saw them poll for workflow tasks. */
export interface TaskQueueWorkers {
  polling: boolean;
  /** The newest poll the server remembers (it forgets pollers after a few minutes). */
  lastSeenAt?: Date;
}

/**
 * Whether any worker polls `taskQueue` for workflow tasks now (DescribeTaskQueue's pollers).
 * @example const { polling } = await workersOn(client.workflow, 'tuneflow');
 */
export async function workersOn(
  client: WorkflowClient,
  taskQueue: string,
  now = Date.now(),
): Promise<TaskQueueWorkers> {
  const { pollers } = await client.workflowService.describeTaskQueue({
    namespace: client.options.namespace,
    // Numbers, not the proto enums: TASK_QUEUE_KIND_NORMAL and TASK_QUEUE_TYPE_WORKFLOW.
    taskQueue: { name: taskQueue, kind: 1 },
    taskQueueType: 1,
  });
  const times = (pollers ?? []).map((p) => optionalTsToMs(p.lastAccessTime)).filter((t) => t !== undefined);
  if (times.length === 0) return { polling: false };
  const last = Math.max(...times);
  return { polling: now - last < LIVE_POLL_MS, lastSeenAt: new Date(last) };
}

/**
 * The progress query, or undefined when no answer came within `deadlineMs` (no worker, a worker restarting). The query
 * alone: the commands read what is retrying from the description they already have.
 */
export async function progressWithin(
  handle: TuneflowHandle<unknown>,
  deadlineMs = QUERY_DEADLINE_MS,
): Promise<Progress | undefined> {
  try {
    return await handle.handle.client.connection.withDeadline(Date.now() + deadlineMs, () =>
      handle.handle.query(progressQuery),
    );
  } catch {
    return undefined;
  }
}

type History = Awaited<ReturnType<WorkflowHandle['fetchHistory']>>;

/** The timer a run sleeps on now, the earliest to fire. */
export interface PendingTimer {
  firesAt: Date;
  /** A deadline (trainingTimeout or promptTimeout) rather than a poll or a read. */
  deadline: boolean;
  /** The summary the workflow gave the timer (the Web UI shows it too), when it gave one. */
  summary?: string;
}

/**
 * The earliest timer started and neither fired nor cancelled, from the run's history.
 * @example const timer = nextTimer(await handle.fetchHistory()); // { firesAt, deadline: false }
 */
export function nextTimer(history: History): PendingTimer | undefined {
  const events = history.events ?? [];
  const deadlines = deadlinesOf(events[0]);
  const pending = new Map<string, PendingTimer>();
  for (const event of events) {
    const started = event.timerStartedEventAttributes;
    if (started?.timerId) {
      const duration = optionalTsToMs(started.startToFireTimeout) ?? 0;
      const at = optionalTsToMs(event.eventTime) ?? 0;
      pending.set(started.timerId, {
        firesAt: new Date(at + duration),
        deadline: deadlines.includes(duration),
        summary: summaryOf(event.userMetadata?.summary),
      });
    }
    const ended = event.timerFiredEventAttributes?.timerId ?? event.timerCanceledEventAttributes?.timerId;
    if (ended) pending.delete(ended);
  }
  return [...pending.values()].sort((a, b) => a.firesAt.getTime() - b.firesAt.getTime())[0];
}

/**
 * Whether the run asked the service for callbacks: its first create's answer carries the callback URL it gave (with
 * `sig=redacted`), or none when its worker polls only. Undefined until a create answered.
 */
export function asksForCallbacks(history: History): boolean | undefined {
  const creates = new Set<string>();
  for (const event of history.events ?? []) {
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (scheduled?.activityType?.name?.startsWith('create') && event.eventId) creates.add(event.eventId.toString());
    const completed = event.activityTaskCompletedEventAttributes;
    const payload = completed?.result?.payloads?.[0];
    if (!payload || !creates.has(completed?.scheduledEventId?.toString() ?? '')) continue;
    try {
      // Stored compressed where the worker compresses activity payloads (TUNEFLOW_COMPRESS_PAYLOADS).
      const answer = defaultPayloadConverter.fromPayload<unknown>(decompressed(payload));
      const first = (Array.isArray(answer) ? answer[0] : answer) as { callback?: unknown } | undefined;
      return typeof first?.callback === 'string' && first.callback !== '';
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** The run's wait deadlines in ms, from the options it was started with. */
function deadlinesOf(first: NonNullable<History['events']>[number] | undefined): number[] {
  try {
    const payload = first?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
    if (!payload) return [];
    const input = defaultPayloadConverter.fromPayload<Partial<TrainThenGenerateInput>>(payload);
    const options = resolveOptions(input?.options);
    return [options.trainingTimeoutMs, options.promptTimeoutMs];
  } catch {
    // Options the run refused: it failed at once and waits for nothing.
    return [];
  }
}

function summaryOf(payload: Parameters<typeof defaultPayloadConverter.fromPayload>[0] | null | undefined) {
  if (!payload) return undefined;
  try {
    const text = defaultPayloadConverter.fromPayload<unknown>(payload);
    return typeof text === 'string' && text ? text : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A duration as a person reads it on one line: `42s`, `1m52s`, `2h05m`.
 * @example formatDuration(112_000) // '1m52s'
 */
export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}
