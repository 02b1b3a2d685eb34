/**
 * What a workflow knows of its tune and prompts, merged from create answers, callbacks and polls in any order.
 * Merging is idempotent: a duplicate changes nothing, a trained tune or a settled prompt never goes back, and an
 * older copy never overwrites a newer one. Callbacks may arrive before the create that made their object has
 * answered (the service is fast), so objects not yet known as the workflow's own are kept by id until they are.
 */
import type { Prompt, Tune } from '../api/schemas';
import type { Cost } from '../contract/cost';
import type { PhaseEntry, Progress, ProgressImage } from '../contract/messages';
import type { StoredImage } from '../contract/storage';
import { isTuneTrained } from './tune-kinds';

/**
 * Settled: the prompt has images or a user_error, both terminal (service notes). The same rule as
 * `isPromptSettled` of src/api/schemas.ts, which workflow code may not import.
 *
 * @example
 * isPromptSettled({ images: [], user_error: 'NSFW' }); // true
 */
export function isPromptSettled(prompt: Pick<Prompt, 'images' | 'user_error'>): boolean {
  return (prompt.images?.length ?? 0) > 0 || !!prompt.user_error;
}

/** True when `b` was updated strictly later than `a` (copies without a readable `updated_at` are never newer). */
function isNewer(b: { updated_at?: string | null }, a: { updated_at?: string | null }): boolean {
  const tb = b.updated_at ? Date.parse(b.updated_at) : NaN;
  const ta = a.updated_at ? Date.parse(a.updated_at) : NaN;
  if (Number.isNaN(tb)) return false;
  return Number.isNaN(ta) || tb > ta;
}

/**
 * The copy to keep of one object: the one further along (`done`), else the strictly newer one, else the current one.
 * Ties keep what is held, so a duplicate is a no-op.
 */
function mergeCopies<T extends { id: number; updated_at?: string | null }>(
  current: T | undefined,
  incoming: T,
  done: (o: T) => boolean,
): T {
  if (!current) return incoming;
  if (current.id !== incoming.id) return current;
  const currentDone = done(current);
  if (currentDone !== done(incoming)) return currentDone ? current : incoming;
  return isNewer(incoming, current) ? incoming : current;
}

/**
 * The tune to keep: a trained copy beats an untrained one, then the newer `updated_at` wins.
 *
 * @example
 * mergeTune(trained, staleUntrained) === trained; // true
 */
export function mergeTune(current: Tune | undefined, incoming: Tune): Tune {
  return mergeCopies(current, incoming, isTuneTrained);
}

/**
 * The prompt to keep: a settled copy beats an unsettled one, then the newer `updated_at` wins.
 *
 * @example
 * mergePrompt(settled, lateUnsettledPoll) === settled; // true
 */
export function mergePrompt(current: Prompt | undefined, incoming: Prompt): Prompt {
  return mergeCopies(current, incoming, isPromptSettled);
}

/** A signal's payload comes from outside: anything without a numeric id is not an object of the service. */
function hasId(value: unknown): value is { id: number } {
  return typeof value === 'object' && value !== null && Number.isInteger((value as { id?: unknown }).id);
}

/** The workflow's one tune. */
export class TuneWatch {
  private current: Tune | undefined;
  /** Tune callbacks that came before the workflow knew its tune's id, by id. */
  private readonly early = new Map<number, Tune>();

  /** The tune's id, once known. */
  get id(): number | undefined {
    return this.current?.id;
  }

  /** The best copy so far. */
  get latest(): Tune | undefined {
    return this.current;
  }

  get trained(): boolean {
    return this.current !== undefined && isTuneTrained(this.current);
  }

  /**
   * Takes a copy known to be the workflow's tune (a create or retrieve answer, a poll), with any earlier callback.
   *
   * @example
   * watch.adopt(await createTune(...));
   */
  adopt(tune: Tune): void {
    let merged = mergeTune(this.current?.id === tune.id ? this.current : undefined, tune);
    const early = this.early.get(tune.id);
    if (early) merged = mergeTune(merged, early);
    this.current = merged;
    this.early.clear();
  }

  /**
   * Takes a full read over a copy of the same version with fewer fields (the pack form a pack's create answers with,
   * which a tie in `adopt` would keep); a copy further along is still kept.
   *
   * @example
   * watch.adoptFull(await retrieveTune({ tuneId }));
   */
  adoptFull(tune: Tune): void {
    this.adopt(tune);
    if (this.current !== tune && mergeTune(tune, this.current as Tune) === tune) this.current = tune;
  }

  /**
   * Takes a callback's copy; returns true when it was about this tune (or kept for when its id is known).
   *
   * @example
   * watch.offer(signalPayload);
   */
  offer(tune: unknown): boolean {
    if (!hasId(tune)) return false;
    const t = tune as Tune;
    if (this.current === undefined) {
      this.early.set(t.id, mergeTune(this.early.get(t.id), t));
      return true;
    }
    if (t.id !== this.current.id) return false;
    this.current = mergeTune(this.current, t);
    return true;
  }
}

/**
 * The prompts of a tune that a pack request made: every prompt of a new pack tune; on a reused tune (`tune_ids`),
 * those newer than the request (`minId`) that belong to the pack (`packId`, when the service says).
 */
export interface PackClaim {
  tuneId: number;
  /** @default 0: every prompt of the tune */
  minId?: number;
  /** Prompts that carry another `pack_id` are not the request's. */
  packId?: number;
}

/** The workflow's prompts: created by it, or (for a pack tune) those the pack request made. */
export class PromptLedger {
  private readonly ours = new Map<number, Prompt>();
  /** Input position of each prompt, so results come back in the caller's order. */
  private readonly slots = new Map<number, number>();
  /** Copies of prompts not (yet) known as ours, by id: callbacks that beat their create's answer. */
  private readonly early = new Map<number, Prompt>();
  private claim: PackClaim | undefined;
  private expected: number | undefined;

  /** @param expected how many prompts the workflow waits for; undefined while unknown (a pack before its list). */
  constructor(expected?: number) {
    this.expected = expected;
  }

  /**
   * Takes a prompt known to be ours (a create answer), with any callback that came before it; `slot` is its position
   * in the caller's input.
   *
   * @example
   * ledger.adopt(await createPrompt(...), 0);
   */
  adopt(prompt: Prompt, slot?: number): void {
    let merged = mergePrompt(this.ours.get(prompt.id), prompt);
    const early = this.early.get(prompt.id);
    if (early) {
      merged = mergePrompt(merged, early);
      this.early.delete(prompt.id);
    }
    this.ours.set(prompt.id, merged);
    if (slot !== undefined) this.slots.set(prompt.id, slot);
    if (this.expected !== undefined && this.ours.size > this.expected) this.expected = this.ours.size;
  }

  /**
   * Takes a copy from a callback or a poll: merged when the prompt is ours, kept aside otherwise. Returns true when
   * the prompt is ours.
   *
   * @example
   * ledger.offer(signalPayload);
   */
  offer(prompt: unknown): boolean {
    if (!hasId(prompt)) return false;
    const p = prompt as Prompt;
    if (this.isOurs(p)) {
      this.adopt(p);
      return true;
    }
    this.early.set(p.id, mergePrompt(this.early.get(p.id), p));
    return false;
  }

  /**
   * The prompts a pack request made on a tune are ours from now on, including copies already kept aside.
   *
   * @example
   * ledger.claimPack({ tuneId: packTune.id });
   */
  claimPack(claim: PackClaim): void {
    this.claim = claim;
    for (const prompt of [...this.early.values()]) if (this.isOurs(prompt)) this.adopt(prompt);
  }

  private isOurs(p: Prompt): boolean {
    if (this.ours.has(p.id)) return true;
    const claim = this.claim;
    if (!claim || p.tune_id !== claim.tuneId || p.id < (claim.minId ?? 0)) return false;
    const packId = (p as { pack_id?: unknown }).pack_id;
    return claim.packId === undefined || packId === undefined || packId === claim.packId;
  }

  /**
   * A poll's listing: takes the prompts that are ours (created by the run, or claimed for a pack) and passes over the
   * rest. For a pack, from the first non-empty listing on, the run waits for as many prompts as are known.
   *
   * @example
   * ledger.learn(await listPrompts({ tuneId: packTune.id }));
   */
  learn(prompts: readonly Prompt[]): void {
    for (const prompt of prompts) if (hasId(prompt) && this.isOurs(prompt)) this.adopt(prompt);
    if (this.ours.size > 0 && (this.expected === undefined || this.expected < this.ours.size))
      this.expected = this.ours.size;
  }

  /**
   * A pack's `prompts_callback`: every prompt of the pack, settled. Prompts not yet claimed are kept aside
   * like any callback's.
   *
   * @example
   * ledger.offerPack(signalPayload);
   */
  offerPack(prompts: readonly unknown[]): void {
    for (const prompt of prompts) this.offer(prompt);
    this.learn([]);
  }

  /**
   * The workflow waits for `count` prompts after all (it created fewer than asked: OverBudget).
   *
   * @example
   * ledger.expectOnly(2);
   */
  expectOnly(count: number): void {
    this.expected = Math.max(count, this.ours.size);
  }

  /** Every prompt the workflow waits for is known (settled or not). */
  get complete(): boolean {
    return this.expected !== undefined && this.ours.size >= this.expected;
  }

  /** Whether the prompts the workflow waits for are known. */
  get known(): boolean {
    return this.expected !== undefined;
  }

  /** How many prompts the workflow waits for (those known so far while the count is unknown). */
  get total(): number {
    return this.expected ?? this.ours.size;
  }

  get settled(): number {
    return [...this.ours.values()].filter(isPromptSettled).length;
  }

  /** Settled with a user_error: the service could not generate them. */
  get failed(): number {
    return [...this.ours.values()].filter((p) => !!p.user_error).length;
  }

  /** Every prompt the workflow waits for exists and is settled. */
  allSettled(): boolean {
    return this.expected !== undefined && this.ours.size >= this.expected && this.unsettled().length === 0;
  }

  /** The ids of our prompts that are settled. */
  settledIds(): number[] {
    return [...this.ours.values()].filter(isPromptSettled).map((p) => p.id);
  }

  /** Our prompts without images or a user_error yet. */
  unsettled(): Prompt[] {
    return [...this.ours.values()].filter((p) => !isPromptSettled(p));
  }

  /**
   * The lowest prompt id a poll must list: the oldest unsettled prompt (nothing older can change the outcome), or
   * while none is known, the start of a pack's claim.
   */
  pollMinId(): number | undefined {
    const ids = this.unsettled().map((p) => p.id);
    return ids.length ? Math.min(...ids) : this.claim?.minId;
  }

  /**
   * The ids a poll asks for, once every prompt the workflow waits for is known: its unsettled ones. Undefined while
   * some are not known yet (a pack before its listing): the poll then lists from `pollMinId`.
   */
  pollIds(): number[] | undefined {
    if (this.expected === undefined || this.ours.size < this.expected) return undefined;
    return this.unsettled()
      .map((p) => p.id)
      .sort((a, b) => a - b);
  }

  /**
   * Our prompts, in the caller's order (then by id).
   *
   * @example
   * return { prompts: ledger.all() };
   */
  all(): Prompt[] {
    const slotOf = (p: Prompt) => this.slots.get(p.id) ?? Number.MAX_SAFE_INTEGER;
    return [...this.ours.values()].sort((a, b) => slotOf(a) - slotOf(b) || a.id - b.id);
  }
}

/** What the workflow has counted, for the `progress` query. */
export interface Counts {
  /** Activity calls that returned (each one reached the service). */
  apiCalls: number;
  /** Of those, the ones that polled. */
  polls: number;
  /** Callback signals taken in, duplicates included. */
  callbacks: number;
}

/**
 * The `progress` query's answer.
 *
 * @example
 * setHandler(progressQuery, () => progressOf([{ phase, since: now() }], tune.id, ledger, counts, costOf(0)));
 */
export function progressOf(
  phases: readonly PhaseEntry[],
  tuneId: number | undefined,
  ledger: PromptLedger,
  counts: Counts,
  cost: Cost,
  stored?: ReadonlyMap<number, readonly StoredImage[]>,
): Progress {
  const images: ProgressImage[] = [];
  for (const prompt of ledger.all())
    if (isPromptSettled(prompt))
      for (const [index, url] of (prompt.images ?? []).entries()) {
        const copy = stored?.get(prompt.id)?.[index]?.location;
        images.push(copy ? { promptId: prompt.id, index, url, stored: copy } : { promptId: prompt.id, index, url });
      }
  return {
    phase: phases[phases.length - 1]!.phase,
    tuneId: tuneId ?? null,
    prompts: { total: ledger.total, settled: ledger.settled, failed: ledger.failed },
    cost,
    counts: { ...counts },
    phases: phases.map((entry) => ({ ...entry })),
    images,
  };
}
