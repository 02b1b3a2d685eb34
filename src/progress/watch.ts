/**
 * One watch per job, shared by all its viewers: a long poll of the run's history (GetWorkflowExecutionHistory with
 * waitNewEvent), and the `progress` query once per workflow task the run completed, never per viewer. A run's state
 * changes only in its workflow tasks, so a batch of events without a completed task is not news; the run's end is read
 * from its close event (and its result). A run first seen closed (a viewer who comes back after the end) is asked its
 * progress once, for the phases it went through (a worker replays it to answer); without an answer the end shows what
 * the close event and the result say. A thousand viewers of one job cost the Temporal calls of one.
 */
import { WorkflowFailedError, type Client } from '@temporalio/client';
import { optionalTsToMs } from '@temporalio/common/lib/time';
import { progressQuery, type Phase, type Progress } from '../contract/messages';
import type { ResultPrompt } from '../contract/results';
import type { Cost } from '../contract/cost';

/** How the run stands, in Temporal's words for a closed run. */
export type RunStatus = 'running' | 'completed' | 'failed' | 'cancelled' | 'terminated' | 'timed-out' | 'continued';

/** One image as a viewer gets it. */
export interface ViewedImage {
  promptId: number;
  index: number;
  /** What to show: the stored copy's URL (`storedImageUrl`) where the app gave one, else the service's URL. */
  src: string;
  /** The service's URL. */
  url: string;
  /** The worker stored and checked a copy of it. */
  stored: boolean;
}

/** What a viewer gets in each event: the whole state of the job, never a difference, so any event can be the first. */
export interface ProgressView {
  workflowId: string;
  status: RunStatus;
  /** The run's phase; undefined before its first workflow task answered. */
  phase?: Phase;
  /** Each phase so far with when it began (ISO time), in order. */
  phases: Array<{ phase: Phase; since: string }>;
  /** What the job waits for now, in words; none once it ended. */
  waitingFor?: string;
  prompts?: { total: number; settled: number; failed: number };
  /** The images of the prompts settled so far, in the prompts' order. */
  images: ViewedImage[];
  cost?: Cost;
  /** Why a run that did not complete ended: its failure's type and message. */
  failure?: { type?: string; message: string };
  /** When the run made the change this event tells (its newest history event's time, ms since the epoch). */
  changedAt: number;
}

/** One event of the stream: the state as of history event `id`, which resumes a stream (`Last-Event-ID`). */
export interface ProgressUpdate {
  id: number;
  view: ProgressView;
  /** The run has ended: the last event. */
  end: boolean;
  /** The event as the stream writes it, made once for all viewers. */
  text: string;
}

export interface WatchSettings {
  client: Client;
  /** A stored copy's location to a URL a browser loads, or undefined to show the service's URL. */
  storedImageUrl?: (location: string, image: { promptId: number; index: number }) => string | undefined;
  queryDeadlineMs: number;
  /** Counted per call the watch makes to Temporal. */
  counted: (call: 'history' | 'query' | 'result') => void;
}

type HistoryEvent = NonNullable<
  NonNullable<Awaited<ReturnType<Client['workflowService']['getWorkflowExecutionHistory']>>['history']>['events']
>[number];

/** More than a page means more to read at once: the state is not news until the history is read to its end. */
const PAGE_SIZE = 1000;
/** After a failed history read (a server restarting), before the next. */
const RETRY_MS = 1000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms).unref());

const WAITING_FOR: Partial<Record<Phase, string>> = {
  inspecting: 'the inspection of the training images',
  'creating-tune': 'the service to take the tune',
  training: 'the tune to train',
  'creating-prompts': 'the service to take the prompts',
  'cleaning-up': 'what the run created to be deleted',
};

function waitingFor({ phase, prompts }: Progress): string | undefined {
  if (phase !== 'generating') return WAITING_FOR[phase];
  return `${prompts.total - prompts.settled} of ${prompts.total} prompt${prompts.total === 1 ? '' : 's'} to settle`;
}

/**
 * The watch of one job: started by its first viewer, stopped (`stop`) when the stream says it has none left.
 *
 * @example
 * const watch = new JobWatch('order-1', settings); watch.subscribe((update) => write(update.text));
 */
export class JobWatch {
  readonly viewers = new Set<(update: ProgressUpdate) => void>();
  latest: ProgressUpdate | undefined;
  /** Settles once the history was first read: whether the job exists. */
  readonly found: Promise<boolean>;
  /** When the last viewer left (ms), for the stream's linger; undefined while someone watches. */
  idleSince: number | undefined = Date.now();
  readonly #abort = new AbortController();
  #resolveFound!: (found: boolean) => void;
  #progress: Progress | undefined;

  constructor(
    readonly workflowId: string,
    private readonly settings: WatchSettings,
  ) {
    this.found = new Promise((resolve) => (this.#resolveFound = resolve));
    void this.#loop();
  }

  get ended(): boolean {
    return this.latest?.end === true;
  }

  subscribe(viewer: (update: ProgressUpdate) => void): () => void {
    this.viewers.add(viewer);
    this.idleSince = undefined;
    return () => {
      this.viewers.delete(viewer);
      if (this.viewers.size === 0) this.idleSince = Date.now();
    };
  }

  stop(): void {
    this.#abort.abort();
    this.#resolveFound(false);
  }

  async #loop(): Promise<void> {
    const { client } = this.settings;
    const signal = this.#abort.signal;
    let nextPageToken: Uint8Array | undefined;
    let first = true;
    let lastId = 0;
    let changedAt = 0;
    while (!signal.aborted) {
      let response;
      // A signal of its own per call: the SDK leaves its listener on the signal a call was given, and a watch makes
      // hundreds of calls.
      const call = new AbortController();
      const cancel = () => call.abort();
      signal.addEventListener('abort', cancel, { once: true });
      try {
        this.settings.counted('history');
        response = await client.connection.withAbortSignal(call.signal, () =>
          client.workflowService.getWorkflowExecutionHistory({
            namespace: client.options.namespace,
            execution: { workflowId: this.workflowId },
            nextPageToken,
            waitNewEvent: true,
            maximumPageSize: PAGE_SIZE,
            skipArchival: true,
          }),
        );
      } catch (err) {
        if (signal.aborted) return;
        // gRPC NOT_FOUND (5), or an ID the server refuses (INVALID_ARGUMENT, 3): no such job to watch.
        const code = (err as { code?: number }).code;
        if (first && (code === 5 || code === 3)) return this.stop();
        await sleep(RETRY_MS);
        continue;
      } finally {
        signal.removeEventListener('abort', cancel);
      }
      const events = response.history?.events ?? [];
      let changed = first;
      let closed: HistoryEvent | undefined;
      for (const event of events) {
        lastId = Number(event.eventId ?? lastId);
        changedAt = optionalTsToMs(event.eventTime) ?? changedAt;
        if (event.workflowTaskCompletedEventAttributes) changed = true;
        if (closeStatusOf(event)) closed = event;
      }
      nextPageToken = response.nextPageToken?.length ? response.nextPageToken : undefined;
      if (first) this.#resolveFound(true);
      first = false;
      if (closed) {
        if (!this.#progress) this.#progress = await this.#query();
        return this.#publish(await this.#ending(closed, lastId, changedAt));
      }
      // An open run's long poll always gives a way on; none means a server that holds no long poll (the Java test
      // server answers one with nothing): the stream needs a real one (any Temporal server, the CLI's dev server).
      if (!nextPageToken) return;
      const more = events.length >= PAGE_SIZE;
      if (changed && !more) {
        const progress = await this.#query();
        if (progress) this.#progress = progress;
        if (progress || !this.latest) this.#publish(update(lastId, this.#view('running', changedAt), false));
      }
    }
  }

  async #query(): Promise<Progress | undefined> {
    const { client, queryDeadlineMs } = this.settings;
    this.settings.counted('query');
    try {
      // Under a deadline: a run whose worker is gone answers no query, and its viewers keep what they have.
      return await client.connection.withDeadline(Date.now() + queryDeadlineMs, () =>
        client.workflow.getHandle(this.workflowId).query(progressQuery),
      );
    } catch {
      return undefined;
    }
  }

  /** The last state: the status from the close event; images and cost from the result, or the failure. */
  async #ending(closed: HistoryEvent, id: number, changedAt: number): Promise<ProgressUpdate> {
    const status = closeStatusOf(closed)!;
    let prompts: ResultPrompt[] | undefined;
    let cost: Cost | undefined;
    let failure: ProgressView['failure'];
    this.settings.counted('result');
    try {
      const result = (await this.settings.client.workflow.getHandle(this.workflowId).result()) as
        | { prompts?: ResultPrompt[]; cost?: Cost }
        | undefined;
      prompts = Array.isArray(result?.prompts) ? result.prompts : undefined;
      cost = result?.cost;
    } catch (err) {
      const cause = err instanceof WorkflowFailedError ? err.cause : (err as Error);
      failure = { type: (cause as { type?: string })?.type ?? cause?.name, message: cause?.message ?? String(err) };
    }
    const view = this.#view(status, changedAt);
    if (prompts) {
      view.images = prompts.flatMap((p) =>
        (p.images ?? []).map((url, index) =>
          this.#image({ promptId: p.id, index, url, stored: p.stored_images?.[index]?.location }),
        ),
      );
      const failed = prompts.filter((p) => p.user_error).length;
      view.prompts = { total: prompts.length, settled: prompts.length, failed };
    }
    if (cost) view.cost = cost;
    if (failure) view.failure = failure;
    const phase: Partial<Record<RunStatus, Phase>> = {
      completed: 'completed',
      failed: 'failed',
      cancelled: 'cancelled',
    };
    const last = phase[status];
    if (last && view.phase !== last) {
      view.phase = last;
      view.phases.push({ phase: last, since: new Date(changedAt).toISOString() });
    }
    return update(id, view, true);
  }

  #view(status: RunStatus, changedAt: number): ProgressView {
    const progress = this.#progress;
    const view: ProgressView = {
      workflowId: this.workflowId,
      status,
      phases: (progress?.phases ?? []).map(({ phase, since }) => ({ phase, since: new Date(since).toISOString() })),
      images: (progress?.images ?? []).map((image) => this.#image(image)),
      changedAt,
    };
    if (!progress) return view;
    view.phase = progress.phase;
    view.prompts = { ...progress.prompts };
    view.cost = progress.cost;
    if (status === 'running') view.waitingFor = waitingFor(progress);
    return view;
  }

  #image(image: { promptId: number; index: number; url: string; stored?: string }): ViewedImage {
    const mapped = image.stored ? this.settings.storedImageUrl?.(image.stored, image) : undefined;
    return {
      promptId: image.promptId,
      index: image.index,
      src: mapped ?? image.url,
      url: image.url,
      stored: !!image.stored,
    };
  }

  #publish(made: ProgressUpdate): void {
    this.latest = made;
    for (const viewer of this.viewers) viewer(made);
  }
}

function update(id: number, view: ProgressView, end: boolean): ProgressUpdate {
  const text = `id: ${id}\nevent: ${end ? 'end' : 'progress'}\ndata: ${JSON.stringify(view)}\n\n`;
  return { id, view, end, text };
}

function closeStatusOf(event: HistoryEvent): RunStatus | undefined {
  if (event.workflowExecutionCompletedEventAttributes) return 'completed';
  if (event.workflowExecutionFailedEventAttributes) return 'failed';
  if (event.workflowExecutionCanceledEventAttributes) return 'cancelled';
  if (event.workflowExecutionTerminatedEventAttributes) return 'terminated';
  if (event.workflowExecutionTimedOutEventAttributes) return 'timed-out';
  if (event.workflowExecutionContinuedAsNewEventAttributes) return 'continued';
  return undefined;
}
