/**
 * The floor's service for bench/run-memory.ts: the mock's timing without its HTTP, in the measuring process, so that
 * one heap holds the floor's runs and nothing else (the soak's floor talks to a real mock: ./worker.ts). The floor's
 * activities call it in process and get their answer at once: a tune trains for
 * `trainingMs`, a prompt settles `inferenceMs` after it was made (or after its tune trained), a pack tune makes its
 * class's prompts. Each event sends the `callback` signal tuneflow's receiver would, in the mock's order: the tune's,
 * then each prompt's, then a pack's `pack-prompts` once all of them settled.
 */
import { FLUX_BASE_TUNE, PACKS } from '../../src/mock-service';
import { CallbackKind, type CallbackWakeUp } from '../../src/contract/messages';
import type { FloorActivities, FloorObject } from './workflows';

/** One activity call from a floor worker; `seq` pairs it with its answer. */
export interface FloorRequest {
  seq: number;
  workflowId: string;
  activity: keyof FloorActivities;
  input: Record<string, unknown>;
}

export interface FloorAnswer {
  seq: number;
  result?: unknown;
  error?: string;
}

interface Tune {
  id: number;
  createdAt: number;
  eta: number;
  trainedAt: number | null;
  /** Prompts made before it trained: they start when it does. */
  waiting: Prompt[];
}

interface Prompt {
  id: number;
  tuneId: number;
  settledAt: number | null;
}

/** Ids as long as the mock's, so payloads weigh the same, and clear of the gallery's tunes. */
const FIRST_ID = 2_000_000;

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export class FloorService {
  private readonly tunes = new Map<number, Tune>();
  private readonly prompts = new Map<number, Prompt>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private nextId = FIRST_ID;
  /** Every callback sent, with when: the reaction times are measured from here, as from the mock's journal. */
  readonly callbacks: Array<{ ids: number[]; sentAt: number }> = [];

  constructor(
    private readonly timing: { trainingMs: number; inferenceMs: number },
    /** Sends the `callback` signal (tuneflow's receiver's part). */
    private readonly signal: (workflowId: string, wakeUp: CallbackWakeUp) => void,
  ) {
    const base = Date.parse(FLUX_BASE_TUNE.created_at);
    this.tunes.set(FLUX_BASE_TUNE.id, {
      id: FLUX_BASE_TUNE.id,
      createdAt: base,
      eta: base,
      trainedAt: base,
      waiting: [],
    });
  }

  /**
   * The answer to one activity call.
   *
   * @example
   * service.answer({ seq: 1, workflowId: 'soak-x-0', activity: 'createTune', input: { tune } }); // { seq: 1, result }
   */
  answer(request: FloorRequest): FloorAnswer {
    const { seq, workflowId, activity, input } = request;
    try {
      switch (activity) {
        case 'createTune':
          return { seq, result: this.render(this.createTune(workflowId, 0)) };
        case 'createPackTune': {
          const pack = PACKS.find((p) => p.id === input.packId);
          const name = (input.tune as { name?: string } | undefined)?.name ?? '';
          const count = pack?.prompts_per_class[name]?.length ?? 0;
          return { seq, result: this.render(this.createTune(workflowId, count)) };
        }
        case 'retrieveTune':
          return { seq, result: this.render(this.tune(input.tuneId)) };
        case 'createPrompt':
          return { seq, result: this.renderPrompt(this.createPrompt(workflowId, this.tune(input.tuneId))) };
        case 'listPrompts': {
          const ids = Array.isArray(input.promptIds) ? new Set(input.promptIds as number[]) : undefined;
          const minId = typeof input.minId === 'number' ? input.minId : 0;
          const listed = [...this.prompts.values()].filter(
            (p) => p.tuneId === input.tuneId && (ids ? ids.has(p.id) : p.id >= minId),
          );
          return { seq, result: listed.map((p) => this.renderPrompt(p)) };
        }
        default:
          return { seq, error: `the floor has no activity ${String(activity)}` };
      }
    } catch (err) {
      return { seq, error: (err as Error).message };
    }
  }

  /** Clears every timer: no callback after the run. */
  close(): void {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
  }

  private createTune(workflowId: string, packPrompts: number): Tune {
    const now = Date.now();
    const tune: Tune = {
      id: this.nextId++,
      createdAt: now,
      eta: now + this.timing.trainingMs,
      trainedAt: null,
      waiting: [],
    };
    this.tunes.set(tune.id, tune);
    const pack = Array.from({ length: packPrompts }, () => this.createPrompt(workflowId, tune));
    this.after(this.timing.trainingMs, () => {
      tune.trainedAt = Date.now();
      this.send(workflowId, CallbackKind.tune, [tune.id]);
      const waiting = tune.waiting.splice(0);
      this.after(this.timing.inferenceMs, () => {
        for (const prompt of waiting) this.settle(workflowId, prompt);
        if (pack.length)
          this.send(
            workflowId,
            CallbackKind.packPrompts,
            pack.map((p) => p.id),
          );
      });
    });
    return tune;
  }

  private createPrompt(workflowId: string, tune: Tune): Prompt {
    const prompt: Prompt = { id: this.nextId++, tuneId: tune.id, settledAt: null };
    this.prompts.set(prompt.id, prompt);
    if (tune.trainedAt === null) tune.waiting.push(prompt);
    else this.after(this.timing.inferenceMs, () => this.settle(workflowId, prompt));
    return prompt;
  }

  private settle(workflowId: string, prompt: Prompt): void {
    prompt.settledAt = Date.now();
    this.send(workflowId, CallbackKind.prompt, [prompt.id]);
  }

  private send(workflowId: string, kind: CallbackKind, ids: number[]): void {
    this.callbacks.push({ ids, sentAt: Date.now() });
    this.signal(workflowId, { kind, ids });
  }

  private after(ms: number, fn: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      fn();
    }, ms);
    this.timers.add(timer);
  }

  private tune(id: unknown): Tune {
    const tune = this.tunes.get(id as number);
    if (!tune) throw new Error(`no tune ${String(id)}`);
    return tune;
  }

  private render(tune: Tune): FloorObject {
    return { id: tune.id, created_at: iso(tune.createdAt), eta: iso(tune.eta), trained_at: iso(tune.trainedAt) };
  }

  private renderPrompt(prompt: Prompt): FloorObject {
    return { id: prompt.id, trained_at: iso(prompt.settledAt) };
  }
}
