/**
 * Judges a soak run by the service's side (the mock's journal) and by the histories the server kept: per job exactly
 * one tune and one prompt per requested prompt, every job closed with success or a documented failure type, none open
 * at the deadline, the API key in no history; and the figures (history size, callback-to-reaction latency).
 */
import type { WorkflowHandle } from '@temporalio/client';
import * as proto from '@temporalio/proto';
import type { MockJournal } from '../../src/mock-service';
import { FailureType } from '../../src/workflows/failures';
import type { SoakJob } from './jobs';

type History = proto.temporal.api.history.v1.IHistory;
type HistoryEvent = proto.temporal.api.history.v1.IHistoryEvent;
const EventType = proto.temporal.api.enums.v1.EventType;

export type JobStatus = 'completed' | 'failed' | 'open' | 'other';

/** What one job's history says. */
export interface JobOutcome {
  job: SoakJob;
  status: JobStatus;
  failureType?: string;
  failureMessage?: string;
  closedAt?: number;
  events: number;
  /** Workflow tasks completed (a worker's unit of workflow work). */
  workflowTasks: number;
  bytes: number;
  /** The tune the run reports (result or failure details), when it says. */
  resultPrompts?: number;
  keyInHistory: boolean;
  /** Signals whose payload matches no callback the mock sent: forged ones that got through. */
  unmatchedSignals: number;
  /** Milliseconds from the mock's callback to the run's next command, for callbacks that alone moved the run on. */
  reactions: number[];
}

const DOCUMENTED_FAILURES = new Set<string>(Object.values(FailureType));

function millis(time: HistoryEvent['eventTime']): number {
  if (!time) return 0;
  return Number(time.seconds ?? 0) * 1000 + Math.floor((time.nanos ?? 0) / 1e6);
}

function payloadJson(payloads: { data?: Uint8Array | null }[] | null | undefined): unknown {
  const data = payloads?.[0]?.data;
  if (!data) return undefined;
  try {
    return JSON.parse(Buffer.from(data).toString('utf8'));
  } catch {
    return undefined;
  }
}

function idsOf(value: unknown): string {
  const list = Array.isArray(value) ? value : [value];
  return list.map((entity) => (entity as { id?: unknown } | null)?.id).join(',');
}

/** The first time the mock sent a callback about each entity (or list of entities), keyed by their ids. */
export function callbackTimes(journal: MockJournal): Map<string, number> {
  const times = new Map<string, number>();
  for (const callback of journal.callbacks) {
    const key = callback.ids.join(',');
    const known = times.get(key);
    if (known === undefined || callback.sentAt < known) times.set(key, callback.sentAt);
  }
  return times;
}

/**
 * Reads one job's history and judges it.
 *
 * @example
 * const outcome = await judgeHistory(job, handle, apiKey, callbackTimes(mock.journal()));
 */
export async function judgeHistory(
  job: SoakJob,
  handle: WorkflowHandle,
  apiKey: string,
  callbacks: Map<string, number>,
): Promise<JobOutcome> {
  const history = (await handle.fetchHistory()) as History;
  const events = history.events ?? [];
  const bytes = encodedSize(history);
  const outcome: JobOutcome = {
    job,
    status: 'open',
    events: events.length,
    workflowTasks: events.filter((e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED).length,
    bytes: bytes.size,
    keyInHistory: bytes.raw.includes(apiKey) || bytes.raw.includes(Buffer.from(apiKey).toString('base64')),
    unmatchedSignals: 0,
    reactions: [],
  };
  const last = events[events.length - 1];
  if (last?.workflowExecutionCompletedEventAttributes) {
    outcome.status = 'completed';
    outcome.closedAt = millis(last.eventTime);
    const result = payloadJson(last.workflowExecutionCompletedEventAttributes.result?.payloads) as
      | { prompts?: unknown[] }
      | undefined;
    outcome.resultPrompts = Array.isArray(result?.prompts) ? result.prompts.length : undefined;
  } else if (last?.workflowExecutionFailedEventAttributes) {
    outcome.status = 'failed';
    outcome.closedAt = millis(last.eventTime);
    const failure = last.workflowExecutionFailedEventAttributes.failure;
    outcome.failureType = failure?.applicationFailureInfo?.type ?? undefined;
    outcome.failureMessage = failure?.message ?? undefined;
  } else if (last && isClosing(last)) {
    outcome.status = 'other';
    outcome.closedAt = millis(last.eventTime);
  }

  // Callback-to-reaction: signals taken by a workflow task that nothing else triggered, to that task's first command.
  let pendingSignals: { sentAt: number }[] = [];
  let otherTrigger = false;
  let taken: { sentAt: number }[] = [];
  for (let i = 0; i < events.length; i++) {
    const event = events[i];
    const signaled = event.workflowExecutionSignaledEventAttributes;
    if (signaled) {
      const sentAt = callbacks.get(idsOf(payloadJson(signaled.input?.payloads)));
      if (sentAt === undefined) outcome.unmatchedSignals++;
      else pendingSignals.push({ sentAt });
    } else if (
      event.activityTaskCompletedEventAttributes ||
      event.activityTaskFailedEventAttributes ||
      event.activityTaskTimedOutEventAttributes ||
      event.timerFiredEventAttributes ||
      event.workflowExecutionStartedEventAttributes
    ) {
      otherTrigger = true;
    } else if (event.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED) {
      taken = otherTrigger ? [] : pendingSignals;
      pendingSignals = [];
      otherTrigger = false;
    } else if (event.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED && taken.length) {
      const command = events
        .slice(i + 1)
        .find(
          (e) =>
            Number(e.activityTaskScheduledEventAttributes?.workflowTaskCompletedEventId ?? -1) ===
              Number(event.eventId) ||
            Number(e.workflowExecutionCompletedEventAttributes?.workflowTaskCompletedEventId ?? -1) ===
              Number(event.eventId),
        );
      if (command) for (const signal of taken) outcome.reactions.push(millis(command.eventTime) - signal.sentAt);
      taken = [];
    }
  }
  return outcome;
}

function isClosing(event: HistoryEvent): boolean {
  return !!(
    event.workflowExecutionTerminatedEventAttributes ||
    event.workflowExecutionCanceledEventAttributes ||
    event.workflowExecutionTimedOutEventAttributes ||
    event.workflowExecutionContinuedAsNewEventAttributes
  );
}

/** The history as the server sends it (protobuf), to count its bytes and look for the API key in every payload. */
function encodedSize(history: History): { size: number; raw: Buffer } {
  const raw = Buffer.from(proto.temporal.api.history.v1.History.encode(history).finish());
  return { size: raw.length, raw };
}

/** What the journal says about one job: tunes made for it and how often each requested prompt was made. */
export interface JournalVerdict {
  tunes: number;
  /** Requested prompts made more than once (extra copies), and extra tunes. */
  duplicates: number;
  /** Requested prompts (or the tune) a completed job lacks on the service. */
  lost: number;
  tuneIds: number[];
}

/** Indexes the journal once: tunes by title, prompts by the job mark in their text and by tune. */
export class JournalIndex {
  private readonly tunesByTitle = new Map<string, number[]>();
  private readonly promptsByMark = new Map<string, number>();
  private readonly promptsByTune = new Map<number, number>();

  constructor(journal: MockJournal) {
    for (const tune of journal.tunes)
      this.tunesByTitle.set(tune.title, [...(this.tunesByTitle.get(tune.title) ?? []), tune.id]);
    for (const prompt of journal.prompts) {
      this.promptsByTune.set(prompt.tuneId, (this.promptsByTune.get(prompt.tuneId) ?? 0) + 1);
      const mark = /\[(soak-[^\]\s]+ #\d+)\]/.exec(prompt.text)?.[1];
      if (mark) this.promptsByMark.set(mark, (this.promptsByMark.get(mark) ?? 0) + 1);
    }
  }

  /**
   * Judges one job against the journal: a job that completed must have its tune and every prompt exactly once; one
   * that failed may lack what it never got to make, but never has anything twice.
   */
  verdict(job: SoakJob, status: JobStatus): JournalVerdict {
    const tuneIds = job.kind === 'generate' ? [] : (this.tunesByTitle.get(job.workflowId) ?? []);
    let duplicates = Math.max(0, tuneIds.length - 1);
    let lost = 0;
    const completed = status === 'completed';
    if (job.kind !== 'generate' && completed && tuneIds.length === 0) lost++;
    if (job.kind === 'packTune') {
      // The service makes a pack's prompts with the tune: one set per tune made.
      const made = tuneIds.reduce((sum, id) => sum + (this.promptsByTune.get(id) ?? 0), 0);
      if (tuneIds.length === 1 && made !== job.prompts && completed) lost += Math.max(0, job.prompts - made);
    } else {
      // A failed job may have stopped before a create; a completed one lacks nothing.
      for (let i = 0; i < job.prompts; i++) {
        const made = this.promptsByMark.get(`${job.workflowId} #${i}`) ?? 0;
        duplicates += Math.max(0, made - 1);
        if (made === 0 && completed) lost++;
      }
    }
    return { tunes: tuneIds.length, duplicates, lost, tuneIds };
  }
}

/** True for a failure type the workflows document (FailureType). */
export function isDocumentedFailure(type: string | undefined): boolean {
  return type !== undefined && DOCUMENTED_FAILURES.has(type);
}

/** The p-th percentile (0 to 100) of `values`, nearest rank; undefined when empty. */
export function percentile(values: number[], p: number): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}
