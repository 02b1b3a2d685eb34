/**
 * A run's callbacks: the service's, signalled by the receiver, wake the run (see ./callback-reads.ts for why they
 * never write its result). Each is kept for a read while the run may wait for what it names, and dropped otherwise.
 * Workflow code: pure, deterministic.
 */
import { setHandler } from '@temporalio/workflow';
import { patchedOrFolded } from './patches';
import {
  callbackSignal,
  CallbackKind,
  packPromptsSettledSignal,
  Phase,
  promptSettledSignal,
  tuneTrainedSignal,
} from '../contract/messages';
import { CallbackReads, idsOf, readWakeUp, type Waiting } from './callback-reads';
import { recordLateCallback } from './job-metrics';
import type { Counts, PromptLedger, TuneWatch } from './state';
import { now } from './waits';

/**
 * Runs with this marker take callbacks as wake-ups and read what they say from the service; runs started before it
 * (histories without the marker) keep taking a callback's body as the object, as they did when they started.
 */
export const CALLBACKS_ARE_WAKE_UPS = 'callbacks-are-wake-ups';

/** What the run knows of its objects: what a callback is checked against. */
interface WakeUpTarget {
  readonly phase: Phase;
  readonly tune: TuneWatch;
  readonly prompts: PromptLedger;
}

/**
 * The run's callback handlers and the callbacks they keep. Set up in the run's constructor, before anything can wait,
 * so no callback is missed.
 *
 * @example
 * const wakeUps = new WakeUps(job, counts); // then waitFor({ reads: wakeUps.tuneReads, waiting: () => wakeUps.tuneWaiting(), ... })
 */
export class WakeUps {
  /** Callbacks about the tune, and about prompts, waiting for a read. */
  readonly tuneReads = new CallbackReads();
  readonly promptReads = new CallbackReads();
  /** Prompts not known yet may be the run's: creates in flight, or a pack's prompts before they are listed. */
  expectingPrompts = false;

  constructor(
    private readonly run: WakeUpTarget,
    counts: Counts,
  ) {
    setHandler(callbackSignal, (wakeUp) => {
      counts.callbacks++;
      const read = readWakeUp(wakeUp);
      if (read) this.wake(read.kind, read.ids);
    });
    // Decided once, at the start: a run keeps the rule it started with for its whole life.
    const wakeUps = patchedOrFolded(CALLBACKS_ARE_WAKE_UPS);
    setHandler(tuneTrainedSignal, (tune) => {
      counts.callbacks++;
      if (wakeUps) this.wake(CallbackKind.tune, idsOf(tune));
      else run.tune.offer(tune);
    });
    setHandler(promptSettledSignal, (prompt) => {
      counts.callbacks++;
      if (wakeUps) this.wake(CallbackKind.prompt, idsOf(prompt));
      else run.prompts.offer(prompt);
    });
    setHandler(packPromptsSettledSignal, (prompts) => {
      counts.callbacks++;
      if (wakeUps) this.wake(CallbackKind.packPrompts, idsOf(prompts));
      else if (Array.isArray(prompts)) run.prompts.offerPack(prompts);
    });
  }

  /** What the tune's wait waits for: the tune until trained, or a tune still being created. */
  tuneWaiting(): Waiting {
    const id = this.run.tune.id;
    if (id === undefined) return { ids: [], unknown: this.run.phase === Phase.creatingTune };
    return { ids: this.run.tune.trained ? [] : [id], unknown: false };
  }

  /** What the prompts' wait waits for: the prompts unsettled, and those not known yet while they may come. */
  promptsWaiting(): Waiting {
    const prompts = this.run.prompts;
    return { ids: prompts.unsettled().map((p) => p.id), unknown: this.expectingPrompts && !prompts.complete };
  }

  /** A callback about objects of `kind`: kept for a read when the run may wait for them, dropped otherwise. */
  private wake(kind: CallbackKind, ids: number[]): void {
    if (this.alreadyDone(kind, ids)) recordLateCallback(kind);
    if (kind === CallbackKind.tune) this.tuneReads.wake(ids, now(), this.tuneWaiting());
    else this.promptReads.wake(ids, now(), this.promptsWaiting());
  }

  /** Every object the callback names is the run's and a poll found it done first. */
  private alreadyDone(kind: CallbackKind, ids: number[]): boolean {
    const { doneByPoll } = kind === CallbackKind.tune ? this.tuneReads : this.promptReads;
    return ids.length > 0 && ids.every((id) => doneByPoll.has(id));
  }

  /** The tune, once trained. */
  tuneDone(): number[] {
    const { id, trained } = this.run.tune;
    return id !== undefined && trained ? [id] : [];
  }

  /** The prompts settled. */
  promptsDone(): number[] {
    return this.run.prompts.settledIds();
  }
}
