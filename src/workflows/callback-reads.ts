/**
 * Callbacks wake a run; they never write its result. The service does not sign its callbacks, and a signed URL can
 * leak (the service echoes it in every object), so a callback only says "look at these objects now": the run reads
 * them from the service, and what it returns comes from those reads. Workflow code: pure, deterministic.
 *
 * Reads that callbacks ask for are coalesced, so a flood of callbacks (genuine duplicates, or forgeries with a valid
 * URL) costs at most one read per wait every `CALLBACK_READ_SPACING_MS`:
 * - a callback about an object the run does not wait for (someone else's, or one already done) is dropped, not kept;
 * - when every object the wait waits for has called back, the read is due at once (the usual end of a wait);
 * - otherwise the read waits up to `CALLBACK_READ_SPACING_MS` for the others' callbacks, so prompts that settle
 *   together cost one list call;
 * - and no read comes sooner than `CALLBACK_READ_SPACING_MS` after the wait's previous one.
 *
 * With `backOff` (runs started since the receiver's bounds), a run's reads are bounded by what it waits for, whatever
 * arrives: an object whose read came after its callback, and found it not done, is read for a callback again only
 * `CALLBACK_REREAD_FIRST_MS` later, then twice that, up to `CALLBACK_REREAD_MAX_MS`. The service calls back once per
 * object, so its genuine callback costs one read, and is never dropped: one that comes during a back-off is read when
 * the back-off ends. A URL holder's flood costs the run a few reads, not one per forgery.
 */
import { CallbackKind, type CallbackWakeUp } from '../contract/messages';

/** The shortest time between two reads one wait makes for callbacks, and the longest a callback waits for others. */
export const CALLBACK_READ_SPACING_MS = 2_000;

/** After a read for an object's callback found it not done: the least time before a callback reads it again. */
export const CALLBACK_REREAD_FIRST_MS = 30_000;
/** The longest that time grows to. */
export const CALLBACK_REREAD_MAX_MS = 10 * 60_000;

/** Ids kept from callbacks not yet read for: bounded, whatever a flood sends. */
export const MAX_PENDING_WAKE_UPS = 256;

/** What a wait waits for right now. */
export interface Waiting {
  /** Objects the wait waits for (its tune untrained, its prompts unsettled). */
  ids: readonly number[];
  /** Whether objects the run does not know yet may still be its own (a create in flight, a pack's prompts). */
  unknown: boolean;
}

/**
 * One wait's callbacks: which objects called back since the last read, and when that read is due.
 *
 * @example
 * const reads = new CallbackReads();
 * reads.wake([123], now, { ids: [123], unknown: false });
 * reads.dueAt(now, { ids: [123], unknown: false }); // now: everything the wait waits for called back
 */
export class CallbackReads {
  /** Ids that called back since the last read, with when each first did. */
  private readonly pending = new Map<number, number>();
  /** Ids read for a callback (with backOff): when a callback may read each again, and the gap that set it. */
  private readonly rereads = new Map<number, { at: number; gap: number }>();
  private lastReadAt: number | undefined;
  private added = 0;
  /** Whether reads for the same object back off (see above); decided by the run at its first wait. */
  backOff = false;
  /** Objects a poll found done (a callback for one of them comes late): at most the run's own objects. */
  readonly doneByPoll = new Set<number>();

  /** Counts the ids kept so far: a wait whose count changed has a new due time to take into account. */
  get changes(): number {
    return this.added;
  }

  /** Takes a callback's ids: those the wait may be waiting for are kept until a read; the rest are dropped. */
  wake(ids: readonly number[], nowMs: number, waiting: Waiting): void {
    const waited = new Set(waiting.ids);
    for (const id of ids) {
      if (this.pending.has(id) || !(waited.has(id) || waiting.unknown)) continue;
      if (this.pending.size >= MAX_PENDING_WAKE_UPS) return;
      this.pending.set(id, nowMs);
      this.added++;
    }
  }

  /**
   * When the next read for callbacks is due (milliseconds, the workflow's clock), or undefined when no callback asks
   * for one. Drops ids the wait no longer waits for (done meanwhile, or known now not to be the run's).
   */
  dueAt(waiting: Waiting): number | undefined {
    const waited = new Set(waiting.ids);
    let first = Infinity;
    for (const [id, at] of this.pending) {
      if (!waited.has(id) && !waiting.unknown) this.pending.delete(id);
      else first = Math.min(first, Math.max(at, this.rereads.get(id)?.at ?? -Infinity));
    }
    if (this.pending.size === 0) return undefined;
    const everyone = !waiting.unknown && waiting.ids.every((id) => this.pending.has(id));
    const gathered = everyone ? first : first + CALLBACK_READ_SPACING_MS;
    return Math.max(gathered, (this.lastReadAt ?? -Infinity) + CALLBACK_READ_SPACING_MS);
  }

  /** A read that started at `startedAtMs` covered every callback that came before it. */
  read(startedAtMs: number): void {
    this.lastReadAt = startedAtMs;
    for (const [id, at] of this.pending) {
      if (at > startedAtMs) continue;
      this.pending.delete(id);
      if (!this.backOff) continue;
      const previous = this.rereads.get(id);
      const gap = previous ? Math.min(previous.gap * 2, CALLBACK_REREAD_MAX_MS) : CALLBACK_REREAD_FIRST_MS;
      this.rereads.set(id, { at: startedAtMs + gap, gap });
    }
  }
}

const KINDS: ReadonlySet<unknown> = new Set(Object.values(CallbackKind));

/**
 * The wake-up a `callback` signal carries, or undefined when it is not one. Signals come from outside the run:
 * anything else is ignored, and at most `MAX_PENDING_WAKE_UPS` ids are taken.
 *
 * @example
 * readWakeUp({ kind: 'prompt', ids: [7] }); // { kind: 'prompt', ids: [7] }
 * readWakeUp({ kind: 'video', ids: [7] }); // undefined
 */
export function readWakeUp(payload: unknown): CallbackWakeUp | undefined {
  if (typeof payload !== 'object' || payload === null) return undefined;
  const { kind, ids } = payload as { kind?: unknown; ids?: unknown };
  if (!KINDS.has(kind) || !Array.isArray(ids)) return undefined;
  return { kind: kind as CallbackKind, ids: idsOf(ids.slice(0, MAX_PENDING_WAKE_UPS)) };
}

/**
 * The ids of objects as a signal of the first releases carried them (an object, or a list of them): the rest of the
 * payload is not read.
 *
 * @example
 * idsOf([{ id: 1, images: ['forged.png'] }, { id: 'x' }]); // [1]
 */
export function idsOf(objects: unknown): number[] {
  const list = Array.isArray(objects) ? objects.slice(0, MAX_PENDING_WAKE_UPS) : [objects];
  const ids: number[] = [];
  for (const object of list) {
    const id = typeof object === 'number' ? object : (object as { id?: unknown } | null)?.id;
    if (Number.isSafeInteger(id) && (id as number) > 0) ids.push(id as number);
  }
  return ids;
}
