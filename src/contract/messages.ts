/**
 * Signals and queries of the tuneflow workflows. Shared by the workflows, the callback receiver (which turns the
 * service's callbacks into the `callback` signal) and the starters in client.ts.
 */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { Prompt, Tune } from '../api/schemas';
import type { Cost } from './cost';

/**
 * The service called back about these objects: a wake-up, never the truth. The run reads the objects it waits for
 * from the service (one read for a tune, one list call for its prompts, coalesced when callbacks come together) and
 * ignores ids that are not its own. What the receiver sends for every callback.
 */
export const callbackSignal = defineSignal<[CallbackWakeUp]>('callback');

/** What a callback tells a run: which kind of object, and which ones (a pack's `prompts_callback` names several). */
export interface CallbackWakeUp {
  kind: CallbackKind;
  ids: number[];
}

/**
 * Signals of the first releases, whose payload was the object itself. Runs started before callbacks became wake-ups
 * (no `callbacks-are-wake-ups` marker in their history) still take the payload as the object; later runs take only its
 * id, as a wake-up.
 */
export const tuneTrainedSignal = defineSignal<[Tune]>('tuneTrained');
export const promptSettledSignal = defineSignal<[Prompt]>('promptSettled');
export const packPromptsSettledSignal = defineSignal<[Prompt[]]>('packPromptsSettled');

export const Phase = {
  /** Inspecting the training images before the tune is created (`options.inspect`). */
  inspecting: 'inspecting',
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
  /**
   * Every phase the run has been in, in order, each with when it began (workflow time, ms since the epoch): the last is
   * `phase`. Runs of workers before 0.2 answer without it.
   */
  phases?: PhaseEntry[];
  /** The images of the prompts settled so far, in the prompts' order: runs of workers before 0.2 answer without it. */
  images?: ProgressImage[];
}

/** A phase of a run and when it began. */
export interface PhaseEntry {
  phase: Phase;
  /** Workflow time, ms since the epoch. */
  since: number;
}

/** One image of a settled prompt, as the progress query tells it. */
export interface ProgressImage {
  promptId: number;
  /** Its position in the prompt's `images`. */
  index: number;
  /** The service's URL. */
  url: string;
  /** The worker's copy in the owner's storage (`s3://...`, `file:///...`), once it is stored and checked. */
  stored?: string;
}

export const progressQuery = defineQuery<Progress>('progress');

/** Callback kinds, as they appear in callback URLs: `<base>/callbacks/<kind>`. */
export const CallbackKind = { tune: 'tune', prompt: 'prompt', packPrompts: 'pack-prompts' } as const;
export type CallbackKind = (typeof CallbackKind)[keyof typeof CallbackKind];

/** The path a callback of `kind` is posted to, under the receiver's base URL: `/callbacks/tune`. */
export const callbackPath = (kind: CallbackKind): string => `/callbacks/${kind}`;
