/**
 * What the receiver lets through to Temporal, per run. A signed URL can leak, and the service echoes it in every object:
 * whoever holds one can send validly signed callbacks as fast as they like. Each signal grows the run's history, and
 * Temporal ends a run whose history grows too large, so the receiver bounds what one run is sent:
 * - a callback that repeats one that woke the run within `coalesceMs` (the same objects, the same body) is answered
 *   without a signal: the service's duplicates, and floods of one forged body. A different body about the same
 *   object still goes through: a forgery sent first must not swallow the genuine callback that follows it;
 * - each run has a budget of signals: `burst` at once (a real run gets one callback per object: a tune, up to 120
 *   prompts and a pack's list), then `perMinute` more each minute;
 * - a run found closed takes no more signals for a while (no call to Temporal for each late callback).
 *
 * Memory is bounded too: at most `maxRuns` runs are remembered (the least recently used are forgotten), each with at
 * most `MAX_OBJECTS_PER_RUN` objects.
 */
import type { CallbackWakeUp } from '../contract/messages';
import type { CallbackRun } from './signing';

export interface WakeUpGateOptions {
  /** @default 10_000 */
  coalesceMs?: number;
  /** @default 256 */
  burst?: number;
  /** @default 2 */
  perMinute?: number;
  /** @default 10_000 */
  maxRuns?: number;
}

/** What to do with a callback: signal these ids, or answer without a signal (and why). */
export type GateDecision = { signal: CallbackWakeUp } | { skip: 'coalesced' | 'over-budget' | 'run-closed' };

const MAX_OBJECTS_PER_RUN = 512;
/** How long a run found closed is remembered as closed. */
const CLOSED_FOR_MS = 10 * 60_000;

interface RunEntry {
  tokens: number;
  refilledAt: number;
  /** `kind:id:body` → when it last woke the run. */
  woke: Map<string, number>;
  closedAt?: number;
}

/**
 * @example
 * const gate = new WakeUpGate();
 * const decision = gate.admit(run, { kind: 'prompt', ids: [7] }, digestOf(body), Date.now());
 * if ('signal' in decision) await signaler.signal(run, decision.signal);
 */
export class WakeUpGate {
  private readonly runs = new Map<string, RunEntry>();
  private readonly coalesceMs: number;
  private readonly burst: number;
  private readonly perMinute: number;
  private readonly maxRuns: number;

  constructor(options: WakeUpGateOptions = {}) {
    this.coalesceMs = options.coalesceMs ?? 10_000;
    this.burst = options.burst ?? 256;
    this.perMinute = options.perMinute ?? 2;
    this.maxRuns = options.maxRuns ?? 10_000;
  }

  /**
   * Decides one callback (`body`: a digest of its body); a decision to signal takes one signal of the run's budget and
   * marks its objects awake.
   */
  admit(run: CallbackRun, wakeUp: CallbackWakeUp, body: string, nowMs: number): GateDecision {
    const entry = this.entry(run, nowMs);
    if (entry.closedAt !== undefined && nowMs - entry.closedAt < CLOSED_FOR_MS) return { skip: 'run-closed' };
    const keyOf = (id: number) => `${wakeUp.kind}:${id}:${body}`;
    const fresh = wakeUp.ids.filter((id) => {
      const at = entry.woke.get(keyOf(id));
      return at === undefined || nowMs - at >= this.coalesceMs;
    });
    // Keys carry the kind: a pack's list is not coalesced away by the callbacks of its prompts one by one.
    if (fresh.length === 0) return { skip: 'coalesced' };
    entry.tokens = Math.min(this.burst, entry.tokens + ((nowMs - entry.refilledAt) / 60_000) * this.perMinute);
    entry.refilledAt = nowMs;
    if (entry.tokens < 1) return { skip: 'over-budget' };
    entry.tokens -= 1;
    for (const id of fresh) {
      const key = keyOf(id);
      entry.woke.delete(key);
      entry.woke.set(key, nowMs);
      if (entry.woke.size > MAX_OBJECTS_PER_RUN) entry.woke.delete(entry.woke.keys().next().value as string);
    }
    return { signal: { kind: wakeUp.kind, ids: fresh } };
  }

  /** The signal did not go through: the same callback may wake the run again at once (the token stays spent). */
  release(run: CallbackRun, wakeUp: CallbackWakeUp, body: string): void {
    const entry = this.runs.get(runKeyOf(run));
    for (const id of wakeUp.ids) entry?.woke.delete(`${wakeUp.kind}:${id}:${body}`);
  }

  /** The run is closed (or never was): later callbacks for it are answered without a call to Temporal. */
  closed(run: CallbackRun, nowMs: number): void {
    this.entry(run, nowMs).closedAt = nowMs;
  }

  private entry(run: CallbackRun, nowMs: number): RunEntry {
    const key = runKeyOf(run);
    let entry = this.runs.get(key);
    if (entry) this.runs.delete(key);
    else {
      entry = { tokens: this.burst, refilledAt: nowMs, woke: new Map() };
      if (this.runs.size >= this.maxRuns) this.runs.delete(this.runs.keys().next().value as string);
    }
    // Most recently used last: the first key is the one to forget.
    this.runs.set(key, entry);
    return entry;
  }
}

function runKeyOf(run: CallbackRun): string {
  return `${run.runId}\n${run.workflowId}`;
}
