/**
 * Builds workflow histories event by event, as a Temporal server would record them, so the replayer can check the
 * commands the workflow code issues on each path (activities, timers, signals, cancellation) without a server.
 */
import type { History } from '@temporalio/common/lib/proto-utils';
import { historyFromJson } from './history-json';

/** An event in Temporal's JSON form of a history (the form history files are kept in). */
type Event = Record<string, unknown>;

const base64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');
/** A payload as the default converter writes one (JSON), in its JSON form (base64 fields). */
const payloads = (value: unknown) => ({
  payloads: [{ metadata: { encoding: base64('json/plain') }, data: base64(JSON.stringify(value)) }],
});
const id = (n: number) => String(n);
const duration = (ms: number) => `${ms / 1000}s`;
const TASK_QUEUE = { name: 'tuneflow', kind: 'TASK_QUEUE_KIND_NORMAL' };

/**
 * A history under construction. Activity and timer ids are the workflow's sequence numbers ('1', '2', ...), as
 * the TypeScript SDK assigns them.
 *
 * @example
 * const history = new HistoryBuilder('trainThenGenerate', input).workflowTask()
 *   .scheduleActivity('1', 'createTune').completeActivity('1', tune)
 *   .workflowTask().completed().history();
 */
export class HistoryBuilder {
  private readonly events: Event[] = [];
  private time = Date.parse('2025-01-01T00:00:00.000Z');
  private lastTaskCompleted = 0;
  private readonly scheduled = new Map<string, number>();
  private readonly timers = new Map<string, number>();

  constructor(workflowType: string, input: unknown) {
    this.add('EVENT_TYPE_WORKFLOW_EXECUTION_STARTED', {
      workflowExecutionStartedEventAttributes: {
        workflowType: { name: workflowType },
        taskQueue: TASK_QUEUE,
        input: payloads(input),
        workflowTaskTimeout: duration(10_000),
        originalExecutionRunId: 'run-1',
        firstExecutionRunId: 'run-1',
        attempt: 1,
      },
    });
  }

  private add(eventType: string, attributes: Event, afterMs = 0): number {
    this.time += afterMs;
    const eventId = this.events.length + 1;
    this.events.push({ eventId: id(eventId), eventTime: new Date(this.time).toISOString(), eventType, ...attributes });
    return eventId;
  }

  /** A workflow task: scheduled, started, completed (its commands are the events that follow). */
  workflowTask(afterMs = 10): this {
    const scheduled = this.add(
      'EVENT_TYPE_WORKFLOW_TASK_SCHEDULED',
      { workflowTaskScheduledEventAttributes: { taskQueue: TASK_QUEUE, startToCloseTimeout: duration(10_000) } },
      afterMs,
    );
    const started = this.add('EVENT_TYPE_WORKFLOW_TASK_STARTED', {
      workflowTaskStartedEventAttributes: { scheduledEventId: id(scheduled), requestId: `task-${scheduled}` },
    });
    this.lastTaskCompleted = this.add('EVENT_TYPE_WORKFLOW_TASK_COMPLETED', {
      workflowTaskCompletedEventAttributes: { scheduledEventId: id(scheduled), startedEventId: id(started) },
    });
    return this;
  }

  /** The marker `patched(patchId)` records in the workflow task it is first called in. */
  patchMarker(patchId: string): this {
    this.add('EVENT_TYPE_MARKER_RECORDED', {
      markerRecordedEventAttributes: {
        markerName: 'core_patch',
        details: { 'patch-data': payloads({ id: patchId, deprecated: false }) },
        workflowTaskCompletedEventId: id(this.lastTaskCompleted),
      },
    });
    return this;
  }

  scheduleActivity(activityId: string, activityType: string): this {
    const eventId = this.add('EVENT_TYPE_ACTIVITY_TASK_SCHEDULED', {
      activityTaskScheduledEventAttributes: {
        activityId,
        activityType: { name: activityType },
        taskQueue: TASK_QUEUE,
        input: payloads({}),
        startToCloseTimeout: duration(120_000),
        workflowTaskCompletedEventId: id(this.lastTaskCompleted),
      },
    });
    this.scheduled.set(activityId, eventId);
    return this;
  }

  completeActivity(activityId: string, result: unknown, afterMs = 100): this {
    const scheduledEventId = id(this.activityEvent(activityId));
    const started = this.add(
      'EVENT_TYPE_ACTIVITY_TASK_STARTED',
      { activityTaskStartedEventAttributes: { scheduledEventId, attempt: 1, requestId: `activity-${activityId}` } },
      afterMs,
    );
    this.add('EVENT_TYPE_ACTIVITY_TASK_COMPLETED', {
      activityTaskCompletedEventAttributes: { scheduledEventId, startedEventId: id(started), result: payloads(result) },
    });
    return this;
  }

  /** The activity scheduled and answered, then the workflow task that reads its answer. */
  callActivity(activityId: string, activityType: string, result: unknown): this {
    return this.scheduleActivity(activityId, activityType).completeActivity(activityId, result).workflowTask();
  }

  /**
   * Activities of one type scheduled in one workflow task, their ids counting from `firstActivityId`, answered in
   * order with `results`, then the workflow task that reads the answers.
   */
  callActivitiesTogether(firstActivityId: number, activityType: string, results: readonly unknown[]): this {
    results.forEach((_, i) => this.scheduleActivity(String(firstActivityId + i), activityType));
    results.forEach((result, i) => this.completeActivity(String(firstActivityId + i), result));
    return this.workflowTask();
  }

  /** The activity's last attempt failed with a failure of `type`, and its retries are over. */
  failActivity(activityId: string, type: string, nonRetryable: boolean, afterMs = 100): this {
    const scheduledEventId = id(this.activityEvent(activityId));
    const started = this.add(
      'EVENT_TYPE_ACTIVITY_TASK_STARTED',
      { activityTaskStartedEventAttributes: { scheduledEventId, attempt: 1, requestId: `activity-${activityId}` } },
      afterMs,
    );
    this.add('EVENT_TYPE_ACTIVITY_TASK_FAILED', {
      activityTaskFailedEventAttributes: {
        scheduledEventId,
        startedEventId: id(started),
        failure: { message: `${type} (test)`, applicationFailureInfo: { type, nonRetryable } },
        retryState: nonRetryable ? 'RETRY_STATE_NON_RETRYABLE_FAILURE' : 'RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED',
      },
    });
    return this;
  }

  /** The workflow asked to cancel the activity (RequestCancelActivityTask). */
  requestActivityCancel(activityId: string): this {
    this.add('EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED', {
      activityTaskCancelRequestedEventAttributes: {
        scheduledEventId: id(this.activityEvent(activityId)),
        workflowTaskCompletedEventId: id(this.lastTaskCompleted),
      },
    });
    return this;
  }

  startTimer(timerId: string, ms: number): this {
    const eventId = this.add('EVENT_TYPE_TIMER_STARTED', {
      timerStartedEventAttributes: {
        timerId,
        startToFireTimeout: duration(ms),
        workflowTaskCompletedEventId: id(this.lastTaskCompleted),
      },
    });
    this.timers.set(timerId, eventId);
    return this;
  }

  fireTimer(timerId: string, afterMs = 0): this {
    this.add(
      'EVENT_TYPE_TIMER_FIRED',
      { timerFiredEventAttributes: { timerId, startedEventId: id(this.timerEvent(timerId)) } },
      afterMs,
    );
    return this;
  }

  /** The timer started and fired after its whole duration, then the workflow task it wakes. */
  timerFires(timerId: string, ms: number): this {
    return this.startTimer(timerId, ms).fireTimer(timerId, ms).workflowTask();
  }

  cancelTimer(timerId: string): this {
    this.add('EVENT_TYPE_TIMER_CANCELED', {
      timerCanceledEventAttributes: {
        timerId,
        startedEventId: id(this.timerEvent(timerId)),
        workflowTaskCompletedEventId: id(this.lastTaskCompleted),
      },
    });
    return this;
  }

  /** A wait starts: its deadline's timer, then its first poll's. */
  waitStarts(deadlineTimerId: string, deadlineMs: number, pollTimerId: string, pollMs: number): this {
    return this.startTimer(deadlineTimerId, deadlineMs).startTimer(pollTimerId, pollMs);
  }

  /** A wait ends: its poll's timer cancelled, then its deadline's. */
  waitEnds(pollTimerId: string, deadlineTimerId: string): this {
    return this.cancelTimer(pollTimerId).cancelTimer(deadlineTimerId);
  }

  signal(signalName: string, payload: unknown, afterMs = 100): this {
    this.add(
      'EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED',
      { workflowExecutionSignaledEventAttributes: { signalName, input: payloads(payload) } },
      afterMs,
    );
    return this;
  }

  cancelRequested(afterMs = 100): this {
    this.add(
      'EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED',
      { workflowExecutionCancelRequestedEventAttributes: { cause: 'requested by the test' } },
      afterMs,
    );
    return this;
  }

  completed(): this {
    this.add('EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED', {
      workflowExecutionCompletedEventAttributes: {
        result: payloads({}),
        workflowTaskCompletedEventId: id(this.lastTaskCompleted),
      },
    });
    return this;
  }

  failed(): this {
    this.add('EVENT_TYPE_WORKFLOW_EXECUTION_FAILED', {
      workflowExecutionFailedEventAttributes: {
        failure: { message: 'failed' },
        workflowTaskCompletedEventId: id(this.lastTaskCompleted),
      },
    });
    return this;
  }

  cancelled(): this {
    this.add('EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED', {
      workflowExecutionCanceledEventAttributes: { workflowTaskCompletedEventId: id(this.lastTaskCompleted) },
    });
    return this;
  }

  /** The JSON form, as history files keep it. */
  toJSON(): { events: Event[] } {
    return { events: this.events };
  }

  /** The history, as the replayer takes it. */
  history(): History {
    return historyFromJson({ events: this.events });
  }

  private activityEvent(activityId: string): number {
    const eventId = this.scheduled.get(activityId);
    if (eventId === undefined) throw new Error(`activity ${activityId} was never scheduled`);
    return eventId;
  }

  private timerEvent(timerId: string): number {
    const eventId = this.timers.get(timerId);
    if (eventId === undefined) throw new Error(`timer ${timerId} was never started`);
    return eventId;
  }
}
