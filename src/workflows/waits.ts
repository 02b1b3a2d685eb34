/**
 * A run's waits: callbacks first, polls as the safety net, a deadline at the end. A failed poll is counted and the
 * wait goes on; the poll schedule and the reads callbacks ask for are decided once a run, by their patches.
 */
import { CancellationScope, condition, log, sleep } from '@temporalio/workflow';
import { patchedOrFolded } from './patches';
import type { WaitRecord } from '../contract/failures';
import { pollDelay, type PollSchedule } from '../contract/poll-schedule';
import type { CallbackReads, Waiting } from './callback-reads';
import { isTransientFailure } from './policies';
import type { Counts } from './state';

/**
 * Runs with this marker poll quickly where no callback was asked for (POLL_ONLY_FIRST_MS after the expected end, then
 * doubling): polls are all such a run has. Runs started before it poll on the callback schedule (minutes apart).
 * Decided at each wait that polls only.
 */
export const POLL_ONLY_SCHEDULE = 'poll-only-schedule';

/**
 * Runs with this marker read an object again for its callbacks only after a back-off (callback-reads.ts): a run's
 * reads are bounded by what it waits for, not by what arrives. Runs started before it read for every callback, two
 * seconds apart.
 */
export const CALLBACK_READS_BACK_OFF = 'callback-reads-back-off';

/** The workflow's clock: the time of the activation being processed, the same on every replay. */
export const now = (): number => Date.now();

/** One wait: what ends it, when it gives up, when its first poll is due, and how it reads. */
export interface Wait {
  /** What the wait is for, in timer and activity summaries (the Web UI shows them). */
  subject: 'training' | 'prompts';
  done: () => boolean;
  timeoutMs: number;
  untilExpectedMs: number;
  /** No callback is on its way (none was asked for, or the object is another run's): polls are all there is. */
  pollOnly: boolean;
  /** Reads what the wait waits for from the service: a poll, or a read a callback asked for (`summary` says which). */
  read: (summary: string) => Promise<void>;
  reads: CallbackReads;
  waiting: () => Waiting;
  /** The objects of the wait done now (its tune trained, its prompts settled): what a poll found is told apart. */
  doneIds: () => readonly number[];
}

/** A duration for a summary, e.g. `2m 1s`. */
function spell(msValue: number): string {
  const seconds = Math.round(msValue / 1000);
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const parts = [h && `${h}h`, m && `${m}m`, (seconds % 60 || (!h && !m)) && `${seconds % 60}s`];
  return parts.filter(Boolean).join(' ');
}

/**
 * Callbacks first, polls as the safety net: waits for `done` until a callback asks for a read or a poll is due, reads,
 * and again, until `done` or the deadline; at the deadline it polls one last time before giving up. A read a callback
 * asked for leaves the poll schedule where it was: polls are for callbacks that never come.
 */
export async function waitFor(
  wait: Wait,
  schedule: PollSchedule,
  counts: Counts,
): Promise<{ done: boolean; record: WaitRecord }> {
  const { subject, done, timeoutMs, untilExpectedMs, read, reads, waiting } = wait;
  const record: WaitRecord = { timeoutMs, polls: 0, failedPolls: 0 };
  if (done()) return { done: true, record };
  const failure = subject === 'training' ? 'TuneNeverTrained' : 'PromptsNeverSettled';
  const deadline = new Deadline(timeoutMs, `${subject}: the deadline, ${failure} after ${spell(timeoutMs)}`);
  const readDue = () => (reads.dueAt(waiting()) ?? Infinity) <= now();
  // Decided at the run's first wait: runs started before the back-off read for callbacks as they did.
  reads.backOff = patchedOrFolded(CALLBACK_READS_BACK_OFF);
  // Decided where the schedule first differs: runs started before poll-only runs polled quickly go on as they were.
  const pollOnly = wait.pollOnly && patchedOrFolded(POLL_ONLY_SCHEDULE);
  try {
    let pollAt: number | undefined;
    for (;;) {
      const start = now();
      const made = record.polls + record.failedPolls;
      pollAt ??= start + pollDelay(made, schedule, untilExpectedMs, pollOnly);
      const wakeAt = Math.min(pollAt, reads.dueAt(waiting()) ?? Infinity);
      // A read already due needs no timer; a callback that comes meanwhile may bring its read forward.
      const changes = reads.changes;
      // Static words (the Web UI shows them beside the timer's own duration and time).
      const summary =
        wakeAt < pollAt
          ? `${subject}: waiting for the other callbacks, then one read`
          : `${subject}: poll ${made + 1}` +
            (made === 0 && untilExpectedMs > 0 ? ` at the eta + ${spell(pollAt - start - untilExpectedMs)}` : '') +
            (pollOnly ? ' (polling only: no callback was asked for)' : ', unless a callback comes first');
      const met =
        wakeAt <= start ||
        (await condition(() => done() || deadline.passed || readDue() || reads.changes !== changes, wakeAt - start, {
          summary,
        }));
      if (done()) return { done: true, record };
      if (readDue()) {
        const startedAt = now();
        await pollSafely(() => read(`${subject}: read, as a callback asked`), counts, record, 'callback');
        reads.read(startedAt);
        if (done()) return { done: true, record };
        continue;
      }
      // Woken for a read no longer needed (its object done meanwhile): the poll stays due when it was.
      if (!deadline.passed && !(!met && wakeAt === pollAt) && now() < pollAt) continue;
      const why = deadline.passed ? 'the last poll, at the deadline' : `poll ${made + 1}`;
      const doneBefore = new Set(wait.doneIds());
      await pollSafely(() => read(`${subject}: ${why}`), counts, record);
      for (const id of wait.doneIds()) if (!doneBefore.has(id)) reads.doneByPoll.add(id);
      pollAt = undefined;
      if (done()) return { done: true, record };
      if (deadline.passed) return { done: false, record };
    }
  } finally {
    deadline.clear();
  }
}

/**
 * A poll (or a read a callback asked for) that fails after its retries is counted and the wait goes on; failures
 * that cannot heal end the run.
 */
export function pollSafely(
  pollOnce: () => Promise<void>,
  counts: Counts,
  record?: WaitRecord,
  cause: 'poll' | 'callback' = 'poll',
): Promise<void> {
  // Reads for callbacks are counted apart: the poll schedule grows with polls only.
  if (cause === 'callback' && record) record.callbackReads = (record.callbackReads ?? 0) + 1;
  // A `.then` with both handlers, as `counted`: one promise, and the wait resumes in as many turns as with an await.
  return pollOnce().then(
    () => {
      if (cause === 'poll') {
        counts.polls++;
        if (record) record.polls++;
      }
    },
    (err: unknown) => {
      if (!isTransientFailure(err)) throw err;
      const error = failureMessage(err);
      if (record) {
        if (cause === 'poll') record.failedPolls++;
        record.lastPollError = error;
      }
      log.warn('poll failed; waiting on for a callback or the next poll', { error });
    },
  );
}

/** A deadline as a durable timer: workflow code reads no clock, and a restarted worker keeps the same deadline. */
class Deadline {
  passed = false;
  private readonly scope = new CancellationScope();

  constructor(timeoutMs: number, summary: string) {
    this.scope
      .run(() => sleep(timeoutMs, { summary }))
      .then(
        () => (this.passed = true),
        () => undefined, // cleared, or the workflow was cancelled
      );
  }

  clear(): void {
    this.scope.cancel();
  }
}

/** An error's message with its cause's, for a log line. */
export function failureMessage(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
  return `${err.message}${cause}`;
}
