/**
 * Judges a soak run by the service's side (the mock's journal) and by the histories the server kept. Pure functions
 * of a journal and histories, so each rule is tested on seeded defects (test/bench/judge.test.ts):
 *
 * - per job exactly one tune and one prompt per requested prompt (a pack: its own prompts once); anything more is a
 *   duplicate, a surplus pack prompt included;
 * - nothing lost: every object made for a job is in what the run reports (a completed run's result, a failed run's
 *   failure details, or reachable through the tune it reports) or was cleaned up where the job asked for cleanup,
 *   and a completed job lacks none of what it asked for;
 * - each job closed with an outcome the mock's truth allows: completed only when its tune trained and its prompts
 *   settled; TuneNeverTrained only when the tune had not trained, PromptsNeverSettled only when a prompt had not
 *   settled, when the run gave up; any other failure, typed or not, is a violation; none open at the deadline;
 * - the API key and signed callback URLs in no history; every callback signal matches a callback the mock sent (else a forgery got through);
 * - and the figures: history size, workflow tasks, callback-to-reaction latency.
 */
import type { ResultPrompt } from '../../src/contract/results';
import * as proto from '@temporalio/proto';
import type { JournalPrompt, JournalTune, MockJournal } from '../../src/mock-service';
import { FailureType } from '../../src/contract/failures';
import { titleWorkflowId } from '../../src/contract/tenants';
import { markOf, type SoakJob } from './jobs';
import { readTouches, type RunTouches } from './tenancy';

/** A reaction: when the callback was sent, how long until the run's next command, and where that time went. */
export interface Reaction {
  sentAt: number;
  ms: number;
  /** The callback to its signal in history, the signal to the task that took it starting, the task to the command. */
  parts?: { deliveryMs: number; waitMs: number; taskMs: number };
}

export type History = proto.temporal.api.history.v1.IHistory;
type HistoryEvent = proto.temporal.api.history.v1.IHistoryEvent;
const EventType = proto.temporal.api.enums.v1.EventType;

export type JobStatus = 'completed' | 'failed' | 'open' | 'other';

/**
 * What every forged body carries and the service never says (an image host, a model URL, a date): found anywhere in a
 * run's history, a forged body wrote the run's state.
 */
export const FORGED_DATA_MARK = 'forged.invalid';

/** A callback URL's signature, not redacted: the capability itself, never to be kept in a history (or a result). */
export const SIGNATURE = /sig(=|%3D)[0-9a-f]{64}/;

/** What a history's bytes carry, by event: see historyPart. */
export const HISTORY_PARTS = [
  'result',
  'activity answers',
  'activity requests',
  'workflow tasks',
  'search attributes',
  'markers',
  'start',
  'other',
] as const;
export type HistoryPart = (typeof HISTORY_PARTS)[number];

/**
 * What an event carries: the run's result (or failure), an activity's answer or its request (input, options,
 * summary), the workflow tasks' bookkeeping, search attributes (tuneflow's and the SDK's TemporalChangeVersion),
 * markers (patches, local activities), the start (input), or other (timers, signals, children, activity starts).
 */
export function historyPart(event: proto.temporal.api.history.v1.IHistoryEvent): HistoryPart {
  if (event.workflowExecutionCompletedEventAttributes || event.workflowExecutionFailedEventAttributes) return 'result';
  if (event.activityTaskCompletedEventAttributes || event.activityTaskFailedEventAttributes) return 'activity answers';
  if (event.activityTaskScheduledEventAttributes) return 'activity requests';
  if (
    event.workflowTaskScheduledEventAttributes ||
    event.workflowTaskStartedEventAttributes ||
    event.workflowTaskCompletedEventAttributes ||
    event.workflowTaskFailedEventAttributes ||
    event.workflowTaskTimedOutEventAttributes
  )
    return 'workflow tasks';
  if (event.upsertWorkflowSearchAttributesEventAttributes) return 'search attributes';
  if (event.markerRecordedEventAttributes) return 'markers';
  if (event.workflowExecutionStartedEventAttributes) return 'start';
  return 'other';
}

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
  /** The history's bytes by what they carry (HISTORY_PARTS). */
  bytesByPart: Record<HistoryPart, number>;
  /** Prompts in a completed run's result. */
  resultPrompts?: number;
  /** A completed run's result prompts, as it gave them (their images and stored copies), for the storage's judge. */
  resultPromptList?: ResultPrompt[];
  /** The objects the run reports: a completed run's result, a failed run's failure details. */
  reported: { tuneIds: number[]; promptIds: number[] };
  keyInHistory: boolean;
  /** A signed callback URL somewhere in the history, its result included. */
  signedUrlInHistory: boolean;
  /** Signals whose ids match no callback the mock sent, nor a forgery made with a leaked valid URL. */
  unmatchedSignals: number;
  /** Signals that forgeries made with a leaked valid URL caused (wake-ups: harmless by design). */
  forgedSignals: number;
  /** The history holds data only a forgery carried (FORGED_DATA_MARK): a forged body wrote the run's state. */
  forgedData: boolean;
  /** Why the run was terminated, when it was (Temporal terminates a run whose history grows too large). */
  terminated?: string;
  /** What the run held and asked the service about, for the tenancy judge (./tenancy.ts). */
  touches: RunTouches;
  /** From the mock's callback to the run's next command, for callbacks that alone moved the run on. */
  reactions: Reaction[];
  /** The run's Temporal shape: activities scheduled, timers started, signals taken. */
  commands: { activities: number; timers: number; signals: number };
  /**
   * The run's commands and what woke it, in order, markers aside: `createTune`, `timer 90s`, `cancel`, `fired`,
   * `callback` ... Two runs of the same job with the same shape have the same sequence (bar timing races).
   */
  sequence: string[];
  /** Each completed activity's time from scheduled to completed (queueing, retries and the call itself). */
  activityMs: number[];
  /** Attempts after the first, over the run's activities (a 429 answered is one, with its backoff before it). */
  activityRetries: number;
}

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

/**
 * The ids a callback signal names, in either form: the old signals carry the object or a list of objects (`id`),
 * the `callback` signal `{ kind, ids }`.
 */
export function signalIds(payload: unknown): number[] {
  const ids = (payload as { ids?: unknown } | null)?.ids;
  const list = Array.isArray(ids) ? ids : (Array.isArray(payload) ? payload : [payload]).map((e) => e?.id);
  return list.filter((id): id is number => typeof id === 'number');
}

/** One key per set of ids, whatever their order. */
function idsKey(ids: readonly number[]): string {
  return [...ids].sort((a, b) => a - b).join(',');
}

/** The first time the mock sent a callback about each object (or list of objects), keyed by their ids. */
export function callbackTimes(journal: {
  callbacks: ReadonlyArray<{ ids: readonly number[]; sentAt: number }>;
}): Map<string, number> {
  const times = new Map<string, number>();
  for (const callback of journal.callbacks) {
    const key = idsKey(callback.ids);
    const known = times.get(key);
    if (known === undefined || callback.sentAt < known) times.set(key, callback.sentAt);
  }
  return times;
}

/** The tune and prompt ids a result or failure details object names. */
function idsIn(value: unknown): { tuneIds: number[]; promptIds: number[] } {
  const v = (value ?? {}) as {
    tune?: { id?: unknown };
    tuneId?: unknown;
    prompts?: Array<{ id?: unknown }>;
    promptIds?: unknown[];
  };
  const numbers = (list: unknown[]) => list.filter((id): id is number => typeof id === 'number');
  return {
    tuneIds: numbers([v.tune?.id, v.tuneId]),
    promptIds: numbers([
      ...(Array.isArray(v.prompts) ? v.prompts.map((p) => p?.id) : []),
      ...(Array.isArray(v.promptIds) ? v.promptIds : []),
    ]),
  };
}

function bytesByPart(events: proto.temporal.api.history.v1.IHistoryEvent[]): Record<HistoryPart, number> {
  const parts = Object.fromEntries(HISTORY_PARTS.map((part) => [part, 0])) as Record<HistoryPart, number>;
  for (const event of events)
    parts[historyPart(event)] += proto.temporal.api.history.v1.HistoryEvent.encode(event).finish().length;
  return parts;
}

/**
 * Reads one job's history: how it closed, what it reports, its size, whether it holds the API key, which callback
 * signals match the mock's callbacks (`callbacks`, from callbackTimes) and how fast the run reacted to them.
 *
 * @example
 * const outcome = readHistory(job, await handle.fetchHistory(), apiKey, callbackTimes(mock.journal()));
 */
export function readHistory(
  job: SoakJob,
  history: History,
  apiKey: string,
  callbacks: Map<string, number>,
  /** Ids named by forgeries made with leaked valid URLs. */
  forgedIds: ReadonlySet<number> = new Set(),
): JobOutcome {
  const events = history.events ?? [];
  const raw = Buffer.from(proto.temporal.api.history.v1.History.encode(history).finish());
  const outcome: JobOutcome = {
    job,
    status: 'open',
    events: events.length,
    workflowTasks: events.filter((e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED).length,
    bytes: raw.length,
    bytesByPart: bytesByPart(events),
    reported: { tuneIds: [], promptIds: [] },
    keyInHistory: raw.includes(apiKey) || raw.includes(Buffer.from(apiKey).toString('base64')),
    signedUrlInHistory: SIGNATURE.test(raw.toString('latin1')),
    unmatchedSignals: 0,
    forgedSignals: 0,
    forgedData: raw.includes(FORGED_DATA_MARK),
    reactions: [],
    commands: {
      activities: events.filter((e) => e.activityTaskScheduledEventAttributes).length,
      timers: events.filter((e) => e.timerStartedEventAttributes).length,
      signals: events.filter((e) => e.workflowExecutionSignaledEventAttributes).length,
    },
    sequence: commandSequence(events),
    activityMs: [],
    activityRetries: 0,
    touches: readTouches(events),
  };
  readClose(outcome, events[events.length - 1]);
  readActivities(outcome, events);
  readReactions(outcome, events, callbacks, forgedIds);
  return outcome;
}

/** The job's commands and what woke it, in order: activity types, `timer 30s`, `cancel`, `fired`, signal names. */
function commandSequence(events: readonly HistoryEvent[]): string[] {
  return events.flatMap((e) => {
    const step =
      e.activityTaskScheduledEventAttributes?.activityType?.name ??
      (e.timerStartedEventAttributes &&
        `timer ${Number(e.timerStartedEventAttributes.startToFireTimeout?.seconds)}s`) ??
      (e.timerCanceledEventAttributes && 'cancel') ??
      (e.timerFiredEventAttributes && 'fired') ??
      e.workflowExecutionSignaledEventAttributes?.signalName;
    return step ? [step] : [];
  });
}

/** How the run closed, when, and what it reported (its result's ids, or its failure's); `open` when it did not. */
function readClose(outcome: JobOutcome, last: HistoryEvent | undefined): void {
  if (last?.workflowExecutionCompletedEventAttributes) {
    outcome.status = 'completed';
    outcome.closedAt = millis(last.eventTime);
    const result = payloadJson(last.workflowExecutionCompletedEventAttributes.result?.payloads) as
      | { prompts?: unknown[] }
      | undefined;
    outcome.resultPrompts = Array.isArray(result?.prompts) ? result.prompts.length : undefined;
    if (Array.isArray(result?.prompts)) outcome.resultPromptList = result.prompts as ResultPrompt[];
    outcome.reported = idsIn(result);
  } else if (last?.workflowExecutionFailedEventAttributes) {
    outcome.status = 'failed';
    outcome.closedAt = millis(last.eventTime);
    const failure = last.workflowExecutionFailedEventAttributes.failure;
    outcome.failureType = failure?.applicationFailureInfo?.type ?? undefined;
    outcome.failureMessage = [failure?.message, failure?.cause?.message].filter(Boolean).join(': ') || undefined;
    outcome.reported = idsIn(payloadJson(failure?.applicationFailureInfo?.details?.payloads));
  } else if (last && isClosing(last)) {
    outcome.status = 'other';
    outcome.closedAt = millis(last.eventTime);
    const terminated = last.workflowExecutionTerminatedEventAttributes;
    if (terminated) outcome.terminated = terminated.reason || 'no reason given';
  }
}

/** Each activity's time from scheduled to completed, and the attempts after the first. */
function readActivities(outcome: JobOutcome, events: readonly HistoryEvent[]): void {
  const scheduledAt = new Map<number, number>();
  for (const event of events) {
    if (event.activityTaskScheduledEventAttributes) scheduledAt.set(Number(event.eventId), millis(event.eventTime));
    const completed = event.activityTaskCompletedEventAttributes;
    const at = completed && scheduledAt.get(Number(completed.scheduledEventId));
    if (at !== undefined && at !== null) outcome.activityMs.push(millis(event.eventTime) - at);
    // The started event is written once the activity closes, with the attempt that closed it.
    const attempt = event.activityTaskStartedEventAttributes?.attempt;
    if (attempt && attempt > 1) outcome.activityRetries += attempt - 1;
  }
}

/**
 * Callback-to-reaction: signals taken by a workflow task that nothing else triggered, to that task's first command.
 * Each reaction in three parts: the callback to its signal in history (receiver and server), the signal to the task
 * that took it starting (waiting for a worker), and that task to its command. Signals that match no callback the mock
 * sent are counted: as forged with a leaked URL when every id they name is in `forgedIds`, as unmatched otherwise.
 */
function readReactions(
  outcome: JobOutcome,
  events: readonly HistoryEvent[],
  callbacks: Map<string, number>,
  forgedIds: ReadonlySet<number>,
): void {
  let pendingSignals: { sentAt: number; signaledAt: number }[] = [];
  let otherTrigger = false;
  let taken: { sentAt: number; signaledAt: number }[] = [];
  let takenAt = 0;
  for (let i = 0; i < events.length; i++) {
    const event = events[i];
    const signaled = event.workflowExecutionSignaledEventAttributes;
    if (signaled) {
      const ids = signalIds(payloadJson(signaled.input?.payloads));
      const sentAt = callbacks.get(idsKey(ids));
      if (sentAt !== undefined) pendingSignals.push({ sentAt, signaledAt: millis(event.eventTime) });
      else if (ids.length > 0 && ids.every((id) => forgedIds.has(id))) outcome.forgedSignals++;
      else outcome.unmatchedSignals++;
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
      takenAt = millis(event.eventTime);
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
      if (command)
        for (const { sentAt, signaledAt } of taken)
          outcome.reactions.push({
            sentAt,
            ms: millis(command.eventTime) - sentAt,
            parts: {
              deliveryMs: signaledAt - sentAt,
              waitMs: takenAt - signaledAt,
              taskMs: millis(command.eventTime) - takenAt,
            },
          });
      taken = [];
    }
  }
}

function isClosing(event: HistoryEvent): boolean {
  return !!(
    event.workflowExecutionTerminatedEventAttributes ||
    event.workflowExecutionCanceledEventAttributes ||
    event.workflowExecutionTimedOutEventAttributes ||
    event.workflowExecutionContinuedAsNewEventAttributes
  );
}

/** What the mock made for one job, and what became of it. */
export interface JobTruth {
  /** Tunes titled with the job's workflow ID, whatever the run (none for generate, which uses a gallery tune). */
  tunes: JournalTune[];
  /** Prompts marked with the job's workflow ID; for a pack, those on the job's tunes or that its create made. */
  prompts: JournalPrompt[];
}

/**
 * Indexes the journal once: tunes by title, prompts by the job mark in their text, by tune and by the title a pack
 * create carried.
 */
export class JournalIndex {
  private readonly tunesByTitle = new Map<string, JournalTune[]>();
  private readonly promptsByJob = new Map<string, JournalPrompt[]>();
  private readonly promptsByTune = new Map<number, JournalPrompt[]>();
  private readonly promptsByRequest = new Map<string, JournalPrompt[]>();

  constructor(journal: MockJournal) {
    const add = <K, V>(map: Map<K, V[]>, key: K, value: V) => map.set(key, [...(map.get(key) ?? []), value]);
    // tuneflow titles a tune `<workflow ID>#<run ID>`: a job's tunes are those of its workflow ID, every run's.
    for (const tune of journal.tunes) add(this.tunesByTitle, titleWorkflowId(tune.title), tune);
    for (const prompt of journal.prompts) {
      add(this.promptsByTune, prompt.tuneId, prompt);
      const job = markOf(prompt.text)?.workflowId;
      if (job) add(this.promptsByJob, job, prompt);
      if (prompt.requestTitle !== null) add(this.promptsByRequest, titleWorkflowId(prompt.requestTitle), prompt);
    }
  }

  /**
   * What the mock made for `job`.
   *
   * @example
   * const truth = index.truth(job); // { tunes: [...], prompts: [...] }
   */
  truth(job: SoakJob): JobTruth {
    const tunes = job.kind === 'generate' ? [] : (this.tunesByTitle.get(job.workflowId) ?? []);
    if (job.kind !== 'packTune') return { tunes, prompts: this.promptsByJob.get(job.workflowId) ?? [] };
    // A pack's prompts: on the tune it made, or wherever its create put them (an existing tune's, `tune_ids`).
    const prompts = new Map<number, JournalPrompt>();
    for (const prompt of [
      ...tunes.flatMap((t) => this.promptsByTune.get(t.id) ?? []),
      ...(this.promptsByRequest.get(job.workflowId) ?? []),
    ])
      prompts.set(prompt.id, prompt);
    return { tunes, prompts: [...prompts.values()] };
  }
}

/** The position a prompt's mark gives it in its job's input, or undefined for a pack's own prompts. */
function markIndex(prompt: JournalPrompt): number | undefined {
  return markOf(prompt.text)?.index;
}

/** One job's verdict: counts for the report, and every broken invariant in words. */
export interface JobVerdict {
  duplicates: number;
  lost: number;
  /** The job closed with an outcome the mock's truth allows. */
  justified: boolean;
  violations: string[];
}

/**
 * Why a job may have failed with `type`, by the mock's truth when the run gave up at `closedAt`; undefined when
 * nothing the harness injected allows it.
 */
export function justification(type: string | undefined, truth: JobTruth, closedAt: number): string | undefined {
  if (type === FailureType.tuneNeverTrained) {
    const untrained = truth.tunes.find((t) => t.neverTrains || t.trainedAt === null || t.trainedAt > closedAt);
    return untrained && `tune ${untrained.id} never trained${untrained.neverTrains ? ' (never-train fault)' : ''}`;
  }
  if (type === FailureType.promptsNeverSettled) {
    const unsettled = truth.prompts.find((p) => p.settledAt === null || p.settledAt > closedAt);
    return unsettled && `prompt ${unsettled.id} never settled`;
  }
  // InvalidInput, InvalidOptions, MissingBaseTune, OverBudget, and every untyped failure: the soak injects none.
  return undefined;
}

/**
 * Judges one job against what the mock made for it. `cleanupAsked`: the job's options ask for cleanup, so objects the
 * run deleted count as accounted for. `expected`: failure types the job was made to meet (a hostile start's; `*` any
 * type), justified as the mock's truth justifies the faults'.
 *
 * @example
 * const verdict = judgeJob(outcome, index.truth(outcome.job), false);
 */
export function judgeJob(
  outcome: JobOutcome,
  truth: JobTruth,
  cleanupAsked: boolean,
  expected: readonly string[] = [],
): JobVerdict {
  const { job, status } = outcome;
  const id = job.workflowId;
  const violations: string[] = [];
  const completed = status === 'completed';

  // Duplicates: a second tune, a second copy of a requested prompt, a prompt beyond those asked, pack prompts beyond
  // the pack's own.
  let duplicates = Math.max(0, truth.tunes.length - 1);
  let missing = 0;
  if (completed && job.kind !== 'generate' && truth.tunes.length === 0) missing++;
  if (job.kind === 'packTune') {
    duplicates += Math.max(0, truth.prompts.length - job.prompts);
    if (completed) missing += Math.max(0, job.prompts - truth.prompts.length);
  } else {
    const made = new Map<number, number>();
    for (const prompt of truth.prompts) {
      const index = markIndex(prompt) ?? -1;
      made.set(index, (made.get(index) ?? 0) + 1);
    }
    for (const [index, count] of made) duplicates += index >= 0 && index < job.prompts ? count - 1 : count;
    if (completed) for (let i = 0; i < job.prompts; i++) if (!made.has(i)) missing++;
  }
  if (duplicates) violations.push(`${id}: ${duplicates} duplicate create(s)`);

  // Lost: made and not accounted for. A completed run's result must name every object; a failed run's failure
  // details name the tune, whose prompts it leads to.
  const tuneIds = new Set(outcome.reported.tuneIds);
  const promptIds = new Set(outcome.reported.promptIds);
  const ownTunes = new Set(truth.tunes.map((t) => t.id));
  const accounted = (object: { id: number; deletedAt: number | null }, reported: Set<number>) =>
    reported.has(object.id) || (cleanupAsked && object.deletedAt !== null);
  const unaccounted = [
    ...truth.tunes.filter((t) => !accounted(t, tuneIds)),
    ...truth.prompts.filter(
      (p) => !accounted(p, promptIds) && !(!completed && ownTunes.has(p.tuneId) && tuneIds.has(p.tuneId)),
    ),
  ];
  // A duplicate is an unreported copy already: counted once, as a duplicate. A run still open reports nothing yet
  // (it is stuck, not losing).
  const lost = missing + (status === 'open' ? 0 : Math.max(0, unaccounted.length - duplicates));
  if (missing) violations.push(`${id}: ${missing} requested object(s) missing on the service`);
  if (lost - missing > 0)
    violations.push(`${id}: ${lost - missing} object(s) made and neither reported by the run nor cleaned up`);
  if (completed && outcome.resultPrompts !== job.prompts)
    violations.push(`${id}: result has ${outcome.resultPrompts} prompts, asked ${job.prompts}`);

  // The outcome the mock's truth allows.
  let justified = true;
  if (completed) {
    // What the result names must have trained and settled on the service before the run said so.
    const closedAt = outcome.closedAt ?? Infinity;
    const untrained = truth.tunes.find(
      (t) => tuneIds.has(t.id) && (t.neverTrains || t.trainedAt === null || t.trainedAt > closedAt),
    );
    const unsettled = truth.prompts.find(
      (p) => promptIds.has(p.id) && (p.settledAt === null || p.settledAt > closedAt),
    );
    if (untrained) violations.push(`${id}: completed although tune ${untrained.id} never trained`);
    if (unsettled) violations.push(`${id}: completed although prompt ${unsettled.id} never settled`);
    justified = !untrained && !unsettled;
  } else if (status === 'failed') {
    justified =
      (outcome.failureType !== undefined && (expected.includes(outcome.failureType) || expected.includes('*'))) ||
      justification(outcome.failureType, truth, outcome.closedAt ?? Infinity) !== undefined;
    if (!justified)
      violations.push(
        `${id}: failed ${outcome.failureType ?? 'untyped'}, which no injected fault explains: ${outcome.failureMessage}`,
      );
  } else if (status === 'open') {
    justified = false;
    violations.push(`${id}: still open at the deadline`);
  } else {
    justified = false;
    violations.push(`${id}: closed without completing or failing`);
  }
  if (outcome.keyInHistory) violations.push(`${id}: the API key is in its history`);
  if (outcome.signedUrlInHistory) violations.push(`${id}: a signed callback URL is in its history`);
  if (outcome.forgedData) violations.push(`${id}: its history holds data only a forged callback carried`);
  if (outcome.terminated) violations.push(`${id}: terminated (${outcome.terminated})`);
  if (outcome.unmatchedSignals)
    violations.push(`${id}: ${outcome.unmatchedSignals} signal(s) match no callback the mock sent`);
  return { duplicates, lost, justified, violations };
}

/** The run's verdict: what the report shows and every broken invariant. */
export interface RunVerdict {
  completed: number;
  /** Failed with a type the mock's truth allows. */
  failedTyped: number;
  /** Failed with a type nothing injected allows, untyped, or closed otherwise. */
  failedOther: number;
  duplicates: number;
  lost: number;
  stuck: number;
  keyLeaks: number;
  /** Runs whose history (or result) holds a signed callback URL. */
  signedUrlLeaks: number;
  /** Signals that match no callback the mock sent. */
  unmatchedSignals: number;
  /** Signals caused by forgeries made with leaked valid URLs, and runs whose history holds forged data (must be 0). */
  forgedSignals: number;
  forgedData: number;
  /** Runs Temporal terminated (a history grown too large, say). */
  terminated: number;
  failureTypes: Record<string, number>;
  violations: string[];
}

/**
 * Judges every job of a run against the journal.
 *
 * @example
 * const verdict = judgeRun(outcomes, mock.journal(), false);
 */
export function judgeRun(outcomes: readonly JobOutcome[], journal: MockJournal, cleanupAsked: boolean): RunVerdict {
  const index = new JournalIndex(journal);
  const verdict: RunVerdict = {
    completed: 0,
    failedTyped: 0,
    failedOther: 0,
    duplicates: 0,
    lost: 0,
    stuck: 0,
    keyLeaks: 0,
    signedUrlLeaks: 0,
    unmatchedSignals: 0,
    forgedSignals: 0,
    forgedData: 0,
    terminated: 0,
    failureTypes: {},
    violations: [],
  };
  for (const outcome of outcomes) {
    const job = judgeJob(outcome, index.truth(outcome.job), cleanupAsked);
    verdict.duplicates += job.duplicates;
    verdict.lost += job.lost;
    verdict.violations.push(...job.violations);
    if (outcome.keyInHistory) verdict.keyLeaks++;
    if (outcome.signedUrlInHistory) verdict.signedUrlLeaks++;
    verdict.unmatchedSignals += outcome.unmatchedSignals;
    verdict.forgedSignals += outcome.forgedSignals;
    if (outcome.forgedData) verdict.forgedData++;
    if (outcome.terminated) verdict.terminated++;
    if (outcome.status === 'completed') verdict.completed++;
    else if (outcome.status === 'open') verdict.stuck++;
    else if (outcome.status === 'failed') {
      const type = outcome.failureType ?? 'untyped';
      verdict.failureTypes[type] = (verdict.failureTypes[type] ?? 0) + 1;
      if (job.justified) verdict.failedTyped++;
      else verdict.failedOther++;
    } else verdict.failedOther++;
  }
  return verdict;
}

/** The p-th percentile (0 to 100) of `values`, nearest rank; undefined when empty. */
export function percentile(values: number[], p: number): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}
