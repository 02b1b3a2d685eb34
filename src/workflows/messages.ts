/**
 * Signals and queries of the tuneflow workflows. Shared by the workflows, the callback receiver (which turns the
 * service's callbacks into these signals) and the starters in client.ts. Payloads are the service's own objects.
 */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { Prompt, Tune } from '../api/schemas';
import type { Cost } from './cost';

/** The service's "tune finished training" callback: the tune object. */
export const tuneTrainedSignal = defineSignal<[Tune]>('tuneTrained');

/** The service's "prompt finished processing" callback: the prompt object. */
export const promptSettledSignal = defineSignal<[Prompt]>('promptSettled');

/** The service's `prompts_callback` for a pack tune: every prompt of the pack. */
export const packPromptsSettledSignal = defineSignal<[Prompt[]]>('packPromptsSettled');

export const Phase = {
  creatingTune: 'creating-tune',
  training: 'training',
  creatingPrompts: 'creating-prompts',
  generating: 'generating',
  cleaningUp: 'cleaning-up',
  completed: 'completed',
  failed: 'failed',
  cancelled: 'cancelled',
} as const;
export type Phase = (typeof Phase)[keyof typeof Phase];

/** What the `progress` query returns. */
export interface Progress {
  phase: Phase;
  /** Set once the tune exists. */
  tuneId: number | null;
  prompts: {
    total: number;
    /** Prompts with images or a user_error. */
    settled: number;
    /** Prompts that settled with a user_error. */
    failed: number;
  };
  /** What the job has cost so far, as the service charged it (`cost_mc` of its tune and prompts). */
  cost: Cost;
  /** Activity calls that reached the service, and callbacks taken in. */
  counts: {
    apiCalls: number;
    polls: number;
    callbacks: number;
  };
}

export const progressQuery = defineQuery<Progress>('progress');

/** Callback kinds, as they appear in callback URLs: `<base>/callbacks/<kind>`. */
export const CallbackKind = { tune: 'tune', prompt: 'prompt', packPrompts: 'pack-prompts' } as const;
export type CallbackKind = (typeof CallbackKind)[keyof typeof CallbackKind];
