/**
 * Simulated time with real timers: tunes train for `trainingTime`, prompts start when their tune is trained and
 * settle after `inferenceTime`, and each event fires its callback. FaceID tunes are ready at creation.
 *
 * Test hook: a prompt whose text contains the word `__fail__` settles with a `user_error` instead of images.
 */
import type { CallbackSender } from './callbacks';
import { isoTime, type Clock } from './clock';
import type { FaultInjector } from './faults';
import { promptCost, tuneCost } from './pricing';
import type { Account, PromptGroup, PromptRecord, Store, TuneRecord } from './store';
import { renderPrompt, renderTune } from './render';

/** Spec 1: stored data expires 30 days after training ends. */
const RETENTION_MS = 30 * 24 * 3600 * 1000;
const FAIL_HOOK = /(^|[^\w])__fail__([^\w]|$)/;

/** What a new tune is made of; the rest is simulation state. */
export type NewTune = Pick<
  TuneRecord,
  | 'title'
  | 'name'
  | 'token'
  | 'base_tune_id'
  | 'steps'
  | 'face_crop'
  | 'training_face_correct'
  | 'branch'
  | 'model_type'
  | 'preset'
  | 'auto_extend'
  | 'callback'
  | 'characteristics'
  | 'orig_images'
  | 'pack_id'
>;

export interface Timing {
  trainingMs: number;
  inferenceMs: number;
}

export class Simulation {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly callbacks: CallbackSender,
    private readonly faults: FaultInjector,
    private readonly timing: Timing,
  ) {}

  /**
   * Creates a tune that starts training now (`eta` = now + trainingTime), or is ready now for FaceID.
   * @example simulation.createTune(account, { title: 'job-1', name: 'man', ... })
   */
  createTune(account: Account, spec: NewTune): TuneRecord {
    const now = this.clock.now();
    const instant = spec.model_type === 'faceid';
    const done = instant ? now : now + this.timing.trainingMs;
    const pack = spec.pack_id === null ? undefined : this.store.packs.get(spec.pack_id);
    const tune: TuneRecord = {
      ...spec,
      cost_mc: tuneCost(spec, pack),
      id: this.store.nextId(),
      account,
      eta: isoTime(done),
      created_at: isoTime(now),
      updated_at: isoTime(now),
      started_training_at: isoTime(now),
      trained_at: instant ? isoTime(now) : null,
      expires_at: isoTime(done + RETENTION_MS),
      promptIds: [],
    };
    this.store.addTune(tune);
    account.charges.push({ object: 'tune', id: tune.id, mc: tune.cost_mc });
    if (instant) {
      // Trained already; the callback goes after the create answer, as a real service's would.
      if (tune.callback) this.clock.after(0, () => this.tuneCallback(tune));
    } else if (!this.faults.neverTrains(spec.title)) {
      tune.timer = this.clock.after(this.timing.trainingMs, () => this.finishTraining(tune));
    } else {
      this.store.journal.tuneNeverTrains(tune.id);
    }
    return tune;
  }

  /**
   * Creates a prompt on `tune`; it starts at once if the tune is trained, else when it is.
   * @example simulation.createPrompt(account, tune, { text: 'ohwx man', num_images: 2 })
   */
  createPrompt(
    account: Account,
    tune: TuneRecord,
    attributes: Record<string, unknown>,
    pack: { pack_id: number; orig_prompt_id: number; group: PromptGroup } | null = null,
  ): PromptRecord {
    const now = isoTime(this.clock.now());
    const prompt: PromptRecord = {
      id: this.store.nextId(),
      account,
      tune_id: tune.id,
      attributes,
      created_at: now,
      updated_at: now,
      started_training_at: null,
      trained_at: null,
      images: [],
      user_error: null,
      pack_id: pack?.pack_id ?? null,
      orig_prompt_id: pack?.orig_prompt_id ?? null,
      group: pack?.group ?? null,
      // A pack's prompts come with the tune it made (its price covers them); added to another tune, they cost.
      cost_mc: promptCost(tune, attributes, pack !== null && tune.pack_id === pack.pack_id),
    };
    this.store.addPrompt(prompt);
    account.charges.push({ object: 'prompt', id: prompt.id, mc: prompt.cost_mc });
    pack?.group.promptIds.push(prompt.id);
    if (tune.trained_at) this.startPrompt(prompt);
    return prompt;
  }

  /**
   * Deletes a tune and stops its training; for a checkpoint (model_type null) also its prompts (spec 4.4).
   * @example simulation.deleteTune(tune);
   */
  deleteTune(tune: TuneRecord): void {
    this.clock.cancel(tune.timer);
    if (tune.model_type === null)
      for (const id of [...tune.promptIds]) {
        const prompt = this.store.prompts.get(id);
        if (prompt) this.deletePrompt(prompt);
      }
    this.store.removeTune(tune);
  }

  /**
   * Deletes a prompt and stops its inference.
   * @example simulation.deletePrompt(prompt);
   */
  deletePrompt(prompt: PromptRecord): void {
    this.clock.cancel(prompt.timer);
    this.store.removePrompt(prompt);
    const group = prompt.group;
    if (group) {
      group.promptIds.splice(group.promptIds.indexOf(prompt.id), 1);
      if (!prompt.trained_at) this.settledInGroup(group);
    }
  }

  private finishTraining(tune: TuneRecord): void {
    tune.timer = undefined;
    const now = this.clock.now();
    tune.trained_at = isoTime(now);
    tune.updated_at = tune.trained_at;
    tune.expires_at = isoTime(now + RETENTION_MS);
    this.store.journal.tuneTrained(tune.id);
    this.tuneCallback(tune);
    for (const id of tune.promptIds) {
      const prompt = this.store.prompts.get(id);
      if (prompt && !prompt.started_training_at) this.startPrompt(prompt);
    }
  }

  private tuneCallback(tune: TuneRecord): void {
    if (tune.callback && this.store.tunes.has(tune.id))
      this.callbacks.send(tune.callback, renderTune(this.store.baseUrl, tune));
  }

  private startPrompt(prompt: PromptRecord): void {
    prompt.started_training_at = isoTime(this.clock.now());
    prompt.updated_at = prompt.started_training_at;
    prompt.timer = this.clock.after(this.timing.inferenceMs, () => this.settle(prompt));
  }

  private settle(prompt: PromptRecord): void {
    prompt.timer = undefined;
    prompt.trained_at = isoTime(this.clock.now());
    prompt.updated_at = prompt.trained_at;
    const text = String(prompt.attributes.text);
    if (FAIL_HOOK.test(text)) {
      prompt.user_error = 'Generation failed: the prompt text asked for it (__fail__ test hook)';
    } else {
      const count = Number(prompt.attributes.num_images ?? 1);
      prompt.images = Array.from({ length: count }, (_, i) => `${this.store.baseUrl}/images/${prompt.id}-${i}.png`);
    }
    this.store.journal.promptSettled(prompt.id);
    const callback = prompt.attributes.callback;
    if (typeof callback === 'string') this.callbacks.send(callback, renderPrompt(this.store.baseUrl, prompt));
    if (prompt.group) this.settledInGroup(prompt.group);
  }

  private settledInGroup(group: PromptGroup): void {
    group.pending--;
    if (group.pending > 0 || !group.callback) return;
    const prompts = group.promptIds.flatMap((id) => {
      const prompt = this.store.prompts.get(id);
      return prompt ? [renderPrompt(this.store.baseUrl, prompt)] : [];
    });
    this.callbacks.send(group.callback, prompts);
  }
}
