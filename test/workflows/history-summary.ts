/**
 * What a workflow did, read off its recorded history: the activities it scheduled (in order), the timers it started
 * (with their durations), which it cancelled and which fired, and the signals it got. Workflow tests assert on this,
 * not only on the outcome: a run that reached the right result by the wrong path (a poll where a callback should
 * have ended the wait, a retry that came too early) fails its test.
 */
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import type { History } from '@temporalio/common/lib/proto-utils';
import { claimWorkflowId } from '../../src/contract/keys';
import { decompressed } from '../../src/codec/compression';
import { historyToJson } from './history-json';

export interface Timer {
  /** The duration the workflow asked for, in ms. */
  ms: number;
  ended: 'fired' | 'cancelled' | 'open';
}

export interface Attempt {
  activity: string;
  /** The attempt that completed or failed for good (1 = no retry). */
  attempt: number;
  /** Scheduled to started: the retry delays, summed. */
  waitedMs: number;
  /** The failure type of the attempt before, where the server records it (a real server does; the test server not). */
  lastFailureType?: string;
}

export interface ActivityCall {
  activity: string;
  /** The activity's first argument, decoded. */
  input: unknown;
  /** Its result, decoded, when it completed. */
  result?: unknown;
}

export interface HistorySummary {
  /** Activity types, in the order they were scheduled. */
  activities: string[];
  /** The same, with inputs and results. */
  calls: ActivityCall[];
  /** Each activity's last attempt. */
  attempts: Attempt[];
  /** Timers in the order they were started. */
  timers: Timer[];
  /** Signal names, in the order they arrived. */
  signals: string[];
  /** The ids of the patch markers (`patched()`), in the order they were recorded. */
  patches: string[];
  /** Local activities (their markers), in order. */
  localActivities: string[];
  /** Each upsert of tuneflow's search attributes, in order: the attributes it set, by name. */
  upserts: Array<Record<string, unknown>>;
  events: number;
  /** The history's size in Temporal's JSON form. */
  bytes: number;
}

/**
 * @example
 * expect(summarize(outcome.history).activities).toEqual(['createTune', 'createPrompt', 'createPrompt']);
 */
export function summarize(history: History): HistorySummary {
  const events = history.events ?? [];
  const activities: string[] = [];
  const calls: ActivityCall[] = [];
  const callAt = new Map<number, ActivityCall>();
  const attempts: Attempt[] = [];
  const timers = new Map<string, Timer>();
  const signals: string[] = [];
  const patches: string[] = [];
  const localActivities: string[] = [];
  const upserts: Array<Record<string, unknown>> = [];
  const scheduledAt = new Map<number, { activity: string; at: number }>();
  for (const event of events) {
    const eventId = Number(event.eventId);
    const at = event.eventTime ? tsToMs(event.eventTime) : 0;
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (scheduled) {
      const activity = scheduled.activityType?.name ?? '?';
      activities.push(activity);
      scheduledAt.set(eventId, { activity, at });
      const call: ActivityCall = { activity, input: decode(scheduled.input?.payloads?.[0]) };
      calls.push(call);
      callAt.set(eventId, call);
    }
    const completed = event.activityTaskCompletedEventAttributes;
    if (completed) {
      const call = callAt.get(Number(completed.scheduledEventId));
      if (call) call.result = decode(completed.result?.payloads?.[0]);
    }
    const started = event.activityTaskStartedEventAttributes;
    if (started) {
      const from = scheduledAt.get(Number(started.scheduledEventId));
      if (from)
        attempts.push({
          activity: from.activity,
          attempt: started.attempt ?? 1,
          waitedMs: at - from.at,
          lastFailureType: started.lastFailure?.applicationFailureInfo?.type ?? undefined,
        });
    }
    const timer = event.timerStartedEventAttributes;
    if (timer) timers.set(timer.timerId!, { ms: tsToMs(timer.startToFireTimeout), ended: 'open' });
    const fired = event.timerFiredEventAttributes?.timerId ?? event.timerCanceledEventAttributes?.timerId;
    if (fired) timers.get(fired)!.ended = event.timerFiredEventAttributes ? 'fired' : 'cancelled';
    const signal = event.workflowExecutionSignaledEventAttributes;
    if (signal) signals.push(signal.signalName ?? '?');
    const marker = event.markerRecordedEventAttributes;
    if (marker?.markerName === 'core_patch')
      patches.push((decode(marker.details?.['patch-data']?.payloads?.[0]) as { id: string }).id);
    if (marker?.markerName === 'core_local_activity')
      localActivities.push(localActivityType(decode(marker.details?.data?.payloads?.[0])));
    const upsert = event.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields;
    // tuneflow's own: the SDK upserts TemporalChangeVersion for each new patch too.
    const own = Object.entries(upsert ?? {}).filter(([name]) => name.startsWith('Tuneflow'));
    if (own.length) upserts.push(Object.fromEntries(own.map(([name, value]) => [name, decode(value)])));
  }
  return {
    activities,
    calls,
    attempts,
    timers: [...timers.values()],
    signals,
    patches,
    localActivities,
    upserts,
    events: events.length,
    bytes: Buffer.byteLength(historyToJson(history)),
  };
}

/** The activity type a local activity's marker records (core writes its data in snake case). */
function localActivityType(data: unknown): string {
  const { activity_type, activityType } = (data ?? {}) as { activity_type?: string; activityType?: string };
  return activity_type ?? activityType ?? JSON.stringify(data);
}

/**
 * Milliseconds of a protobuf Timestamp or Duration, whichever form its seconds take (a Long from a server, a number
 * from a history read back from JSON).
 */
function tsToMs(value: { seconds?: unknown; nanos?: number | null } | null | undefined): number {
  if (!value) return 0;
  const seconds = value.seconds as number | { toNumber(): number } | null | undefined;
  const whole = typeof seconds === 'number' ? seconds : (seconds?.toNumber() ?? 0);
  return whole * 1000 + Math.floor((value.nanos ?? 0) / 1e6);
}

/** A payload's value, as a worker reads it: decompressed where it was stored so, then the SDK's default converter. */
function decode(payload: Payload | null | undefined): unknown {
  return payload ? defaultPayloadConverter.fromPayload(decompressed(payload)) : undefined;
}

/**
 * The workflow ID a history is replayed under: the one its start event records (a server's history keeps it, and
 * `historyToJSON` and `temporal workflow show --output json` write it), which no file name can hold for a run under a
 * `tuneflow:` ID; else the run's own, read from its key-claim child (`claimWorkflowId(workflowId)`) where it has one,
 * since the claim's command carries it; else `fallback` (the file name). A Nexus run's ID is its caller's scoped key,
 * not its file name.
 *
 * @example
 * await replayStrictly(bundle, history, replayedWorkflowId(history, path.basename(file, '.json')));
 */
export function replayedWorkflowId(history: History, fallback: string): string {
  const recorded = history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowId;
  if (recorded) return recorded;
  const prefix = claimWorkflowId('');
  for (const event of history.events ?? []) {
    const child = event.startChildWorkflowExecutionInitiatedEventAttributes;
    if (child?.workflowType?.name === 'keyClaim' && child.workflowId?.startsWith(prefix))
      return child.workflowId.slice(prefix.length);
  }
  return fallback;
}
