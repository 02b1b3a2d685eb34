/**
 * Following a run in a terminal: one line that says what the run does and waits for, how long it has run, its
 * prompts, cost and counts; redrawn in place (and cut to the terminal's width) on a TTY, printed on change
 * elsewhere. Log lines and notices go above it, never glued to it. Driven by the `progress` query, the run's
 * history (its next timer) and the workers on its task queue (src/cli/run-watch.ts).
 */
import { setMaxListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TuneflowHandle } from '../client';
import type { ImageInspection } from '../contract/inspection';
import type { Progress } from '../contract/messages';
import {
  asksForCallbacks,
  formatDuration,
  nextTimer,
  progressWithin,
  workersOn,
  type PendingTimer,
  type TaskQueueWorkers,
} from './run-watch';
import { retryingCall, type RetryingCall } from '../retrying-call';
import { durationToMs } from '../duration';

/**
 * Money as the service counts it and in dollars: `156000 mc ($1.56)`.
 * @example describeCost({ mc: 156_000, usd: 1.56 }) // '156000 mc ($1.56)'
 */
export function describeCost(cost: { mc: number; usd: number }): string {
  return `${cost.mc} mc ($${cost.usd.toFixed(2)})`;
}

/**
 * What inspection found, one line per image: where the input holds it, the image, its flags, what else was said.
 * @example describeInspection(inspection) // ['tune.image_urls[1] https://example.com/2.jpg: blurry (age 25-34)']
 */
export function describeInspection(inspection: readonly ImageInspection[] | undefined): string[] {
  return (inspection ?? []).map(({ field, image, flags, characteristics }) => {
    const said = Object.entries(characteristics)
      .filter(([, value]) => value !== null && value !== '')
      .map(([key, value]) => `${key} ${String(value)}`);
    return `${field} ${image}: ${flags.length ? flags.join(', ') : 'no flag'}${said.length ? ` (${said.join(', ')})` : ''}`;
  });
}

/** What one redraw shows. */
export interface RunView {
  /** The last answer of the progress query; none before the first. */
  progress?: Progress;
  elapsedMs: number;
  taskQueue: string;
  /** The run's earliest pending timer, and now, to say "in 1m52s". */
  timer?: PendingTimer;
  /** Whether the run asked for callbacks (false: its worker polls only); unknown before its first create. */
  callbacks?: boolean;
  now: number;
  /** Unknown until asked; `polling: false` is said first, before anything else. */
  workers?: TaskQueueWorkers;
  /** A call that failed and will be tried again: said before what the phase waits for. */
  retrying?: RetryingCall;
}

/**
 * Why a call is retrying, and when it tries again: `createTune failed (attempt 2 next, in 25s): POST /tunes could not
 * reach the service ...`.
 * @example describeRetry({ activity: 'createTune', attempt: 2, cause: 'POST /tunes failed with 500: ...' }, Date.now())
 */
export function describeRetry(retrying: RetryingCall, now: number): string {
  const dueMs = retrying.nextAt ? retrying.nextAt.getTime() - now : undefined;
  const when = dueMs === undefined ? '' : dueMs > 0 ? `, in ${formatDuration(dueMs)}` : ', now';
  return `${retrying.activity} failed (attempt ${retrying.attempt} next${when}): ${retrying.cause}`;
}

/**
 * What the run does now, in words: `waiting for the training callback, next poll in 1m52s`.
 * @example describeWait({ progress, elapsedMs: 9_000, taskQueue: 'tuneflow', now: Date.now() })
 */
export function describeWait(view: RunView): string {
  const { progress, timer, workers, taskQueue } = view;
  if (workers && !workers.polling) return `no worker polls task queue ${taskQueue}`;
  if (view.retrying) return describeRetry(view.retrying, view.now);
  if (!progress) return 'waiting for a worker to take the run';
  const dueMs = timer ? timer.firesAt.getTime() - view.now : 0;
  const due = dueMs > 0 ? `in ${formatDuration(dueMs)}` : 'now';
  // The timer's own summary is for the Web UI; a progress line says only when.
  const next = timer ? `${timer.deadline ? 'deadline' : 'next poll'} ${due}` : undefined;
  // A run whose worker polls only waits for the poll, not for a callback.
  const waiting = (what: string, callback: string) => {
    const head =
      view.callbacks === undefined
        ? `waiting for ${what}`
        : view.callbacks
          ? `waiting for ${callback}`
          : `waiting for ${what} (polling only)`;
    return next ? `${head}, ${next}` : head;
  };
  switch (progress.phase) {
    case 'inspecting':
      return 'inspecting the training images';
    case 'creating-tune':
      return 'creating the tune';
    case 'training':
      return waiting('training', 'the training callback');
    case 'creating-prompts':
      return 'creating the prompts';
    case 'generating': {
      const left = progress.prompts.total - progress.prompts.settled;
      const prompts = left === 1 ? '1 prompt' : `${left} prompts`;
      return waiting(prompts, left === 1 ? "the prompt's callback" : `${prompts}' callbacks`);
    }
    case 'cleaning-up':
      return 'deleting what the run created';
    default:
      return progress.phase;
  }
}

/**
 * One line, most telling first (what is cut to fit a narrow terminal is the counts at the end):
 * `training  elapsed 12s  waiting for the training callback, next poll in 1m52s  0/3 prompts  tune 123 ...`
 */
export function renderProgress(view: RunView): string {
  const p = view.progress;
  const parts = [p?.phase ?? 'started', `elapsed ${formatDuration(view.elapsedMs)}`];
  const wait = describeWait(view);
  if (wait !== p?.phase) parts.push(wait);
  if (p) {
    const { total, settled, failed } = p.prompts;
    parts.push(
      `${settled}/${total} prompts${failed ? ` (${failed} failed)` : ''}`,
      p.tuneId ? `tune ${p.tuneId}` : 'no tune yet',
      // Runs of an older worker answer without a cost.
      ...(p.cost ? [`cost $${p.cost.usd.toFixed(2)}`] : []),
      `callbacks ${p.counts.callbacks}`,
      `polls ${p.counts.polls}`,
      `api calls ${p.counts.apiCalls}`,
    );
  }
  return parts.join('  ');
}

/** Where the live line goes: stdout, and whether it is a terminal and how wide. */
export type LineOutput = NodeJS.WritableStream & { isTTY?: boolean; columns?: number };

/**
 * The one line that redraws in place on a terminal. Everything else printed while it shows (log lines, notices) goes
 * through `print`, which clears it, prints, and draws it again: nothing is glued to it and no half line is left.
 */
export class LiveLine {
  private current = '';
  private change: string | undefined;
  private shown = false;
  /** The last `whole` said above the line. */
  private saidWhole: string | undefined;

  constructor(private readonly out: LineOutput) {}

  get isTTY(): boolean {
    return !!this.out.isTTY;
  }

  /**
   * Shows `line`: in place on a terminal (cut to its width); elsewhere as a new line when `change` (default: the line
   * itself) changed, so a log file gets a line per event, not one per second of a ticking clock. `whole`: a part of
   * the line that must not be lost to the cut (a retry's reason), printed whole above it when the line is cut.
   */
  draw(line: string, change = line, whole?: string): void {
    // What a cut would hide (a retry's reason) is said once above, whole: the terminal wraps it, nothing is lost.
    if (this.isTTY && whole !== undefined && whole !== this.saidWhole && !this.fits(line)) {
      this.saidWhole = whole;
      this.print(whole);
    }
    if (!this.isTTY) {
      if (change !== this.change) this.out.write(`${line}\n`);
      this.current = line;
      this.change = change;
      return;
    }
    if (line === this.current && this.shown) return;
    this.current = line;
    this.out.write(`\r\x1b[2K${fit(line, this.out.columns)}`);
    this.shown = true;
  }

  /** Prints `text` (whole lines) above the live line, on `stream` (default: the line's own output). */
  print(text: string, stream: NodeJS.WritableStream = this.out): void {
    if (this.shown) this.out.write('\r\x1b[2K');
    stream.write(text.endsWith('\n') ? text : `${text}\n`);
    if (this.shown) this.out.write(fit(this.current, this.out.columns));
  }

  /** A sink for a logger: its lines go above the live line. */
  sink(stream: NodeJS.WritableStream): { write(text: string): void; isTTY?: boolean } {
    return { write: (text) => this.print(text, stream), isTTY: (stream as { isTTY?: boolean }).isTTY };
  }

  /** Whether `line` shows whole on this output (elsewhere than a terminal, always). */
  fits(line: string): boolean {
    return fit(line, this.isTTY ? this.out.columns : undefined) === line;
  }

  /** Leaves the last line on screen and moves below it. */
  end(): void {
    if (this.shown) this.out.write('\n');
    this.shown = false;
  }
}

/** What the line says but its clocks (elapsed time, time to the next timer): what makes a new line in a log file. */
function whatChanged(view: RunView): string {
  const { progress, callbacks, workers, timer, retrying } = view;
  const retry = retrying && [retrying.activity, retrying.attempt, retrying.cause];
  return JSON.stringify([progress, callbacks, workers?.polling, timer?.firesAt, timer?.summary, retry]);
}

/** Cuts a line to a terminal's width, leaving the last column free so it never wraps. */
function fit(line: string, columns: number | undefined): string {
  if (!columns || line.length < columns) return line;
  return `${line.slice(0, Math.max(1, columns - 2))}…`;
}

/**
 * How long a followed run's call may go on failing to reach the service (every attempt refused, unanswered or timed
 * out) before the command following it gives up following: the run itself goes on retrying, as a durable job does.
 */
export const UNREACHABLE_LIMIT = '2 minutes';
export const UNREACHABLE_LIMIT_MS = durationToMs(UNREACHABLE_LIMIT, 'UNREACHABLE_LIMIT');

/** The failure types of a call that did not reach the service: refused, unresolved, or no answer in time. */
const UNREACHED: readonly string[] = ['ConnectionFailure', 'ClientTimeout'];

/**
 * A followed run's call has failed to reach the service for `forMs` (at least the limit): following stopped, the run
 * goes on.
 */
export class ServiceUnreachableError extends Error {
  override name = 'ServiceUnreachableError';
  constructor(
    readonly retrying: RetryingCall,
    readonly forMs: number,
  ) {
    super(`${retrying.activity} has not reached the service for ${formatDuration(forMs)}: ${retrying.cause}`);
  }
}

export interface FollowOptions {
  line: LiveLine;
  /** Stops following (Ctrl-C): `follow` rejects with the signal's reason, the run goes on. */
  signal?: AbortSignal;
  /** How often to redraw and ask the workflow. @default 500 ms */
  intervalMs?: number;
  /** How often to ask which workers poll and what timer the run sleeps on. @default 2 s */
  lookEveryMs?: number;
  /**
   * How long a call of the run may fail to reach the service before `follow` rejects with ServiceUnreachableError
   * (the run goes on). @default UNREACHABLE_LIMIT_MS
   */
  unreachableLimitMs?: number;
}

/**
 * Shows progress until the run ends, then returns its result (or throws its failure). Says once when no worker polls
 * the run's task queue, and again when one does. Gives up (ServiceUnreachableError) when a call of the run has failed
 * to reach the service for `unreachableLimitMs`.
 */
export async function follow<R>(handle: TuneflowHandle<R>, options: FollowOptions): Promise<R> {
  const { line, signal, intervalMs = 500, lookEveryMs = 2_000, unreachableLimitMs = UNREACHABLE_LIMIT_MS } = options;
  /** The call failing to reach the service, and since when (its first failure seen), while it goes on failing so. */
  let unreached: { activity: string; since: number } | undefined;
  const connection = handle.handle.client.connection;
  let done = false;
  // The result's long poll is cut when following stops: the connection may close under it (the demo's Ctrl-C). The
  // SDK adds an abort listener for each poll it makes (about one a minute) and never removes it: its own signal, and
  // no warning for a run followed for hours.
  signal?.throwIfAborted();
  const polls = new AbortController();
  setMaxListeners(100_000, polls.signal);
  signal?.addEventListener('abort', () => polls.abort(signal.reason), { once: true });
  const result = connection
    .withAbortSignal(polls.signal, () => handle.result())
    .finally(() => {
      done = true;
    });
  result.catch(() => undefined);
  const aborted = new Promise<void>((resolve) => signal?.addEventListener('abort', () => resolve(), { once: true }));
  const description = await handle.handle.describe();
  const startedAt = description.startTime.getTime();
  const taskQueue = description.taskQueue;
  const view: RunView = { elapsedMs: 0, taskQueue, now: Date.now() };
  let lookedAt = 0;
  let historyLength = -1;
  const look = async () => {
    lookedAt = Date.now();
    const workers = await workersOn(handle.handle.client, taskQueue).catch(() => view.workers);
    if (workers && view.workers?.polling !== workers.polling && (view.workers || !workers.polling))
      line.print(
        workers.polling
          ? `a worker polls task queue ${taskQueue} now`
          : `no worker polls task queue ${taskQueue}${workers.lastSeenAt ? ` (last seen ${formatDuration(Date.now() - workers.lastSeenAt.getTime())} ago)` : ''}: the run waits until one does (\`tuneflow worker\` with TUNEFLOW_TASK_QUEUE=${taskQueue})`,
      );
    view.workers = workers;
    // The history only when it grew: a timer starts or ends with an event.
    const description = await handle.handle.describe();
    view.retrying = retryingCall(description);
    const failing = view.retrying;
    if (!failing || !UNREACHED.includes(failing.type ?? '')) unreached = undefined;
    else if (unreached?.activity !== failing.activity)
      unreached = { activity: failing.activity, since: failing.failedAt?.getTime() ?? Date.now() };
    const length = description.historyLength;
    if (length !== historyLength) {
      const history = await handle.handle.fetchHistory();
      view.timer = nextTimer(history);
      view.callbacks ??= asksForCallbacks(history);
      historyLength = length;
    }
  };
  while (!done) {
    signal?.throwIfAborted();
    try {
      if (Date.now() - lookedAt >= lookEveryMs) await look();
      // A query waits for a worker: asked only when one polls.
      if (view.workers?.polling) {
        const phase = view.progress?.phase;
        view.progress = (await progressWithin(handle)) ?? view.progress;
        // A new phase, or a timer that fired: the history is read again at once, and no stale timer is shown.
        if (view.progress?.phase !== phase || (view.timer && view.timer.firesAt.getTime() <= Date.now())) {
          view.timer = undefined;
          lookedAt = 0;
          historyLength = -1;
        }
      }
    } catch (err) {
      signal?.throwIfAborted();
      // The server or a worker restarting: the next round will tell.
      void err;
    }
    view.now = Date.now();
    view.elapsedMs = view.now - startedAt;
    const retrying = view.retrying;
    const reason = retrying && `${retrying.activity} failed (attempt ${retrying.attempt} next): ${retrying.cause}`;
    if (!done) line.draw(renderProgress(view), whatChanged(view), reason);
    if (!done && unreached && view.retrying && view.now - unreached.since >= unreachableLimitMs) {
      polls.abort('unreachable');
      line.end();
      throw new ServiceUnreachableError(view.retrying, view.now - unreached.since);
    }
    // One abort listener for the whole follow, not one per tick.
    await Promise.race([sleep(intervalMs), aborted, result.catch(() => undefined)]);
  }
  signal?.throwIfAborted();
  // The last state: asked without the worker check (the run just closed, so a worker was there).
  view.progress = (await progressWithin(handle)) ?? view.progress;
  const closedAt = (await handle.handle.describe().catch(() => undefined))?.closeTime;
  Object.assign(view, { workers: undefined, timer: undefined, now: Date.now() });
  view.elapsedMs = (closedAt?.getTime() ?? view.now) - startedAt;
  line.draw(renderProgress(view));
  line.end();
  return result;
}
