/**
 * Inputs and results of the tuneflow workflows: the public contract other services start them with.
 * Everything here is plain JSON: no API key, no image bytes (training images travel as URLs or as paths the
 * worker can read).
 */
import type {
  OtherAttributes,
  PackTuneCreateAttributes,
  PromptCreateAttributes,
  TuneCreateAttributes,
} from '../api/schemas';
import type { Cost } from './cost';
import type { ImageInspection, InspectOption } from './inspection';
import type { ResultPrompt, ResultTune } from './results';

export type { Cost } from './cost';
export type { ImageInspection, InspectionFlag, InspectOption } from './inspection';
export type { ResultPrompt, ResultTune } from './results';

/**
 * Spec 4.1 attributes. `title` is tuneflow's (the workflow ID and the run ID: a retried create finds only the run's
 * own tune by it, and it tells whose job made the tune): a starter's is refused. `images` are paths the worker can read; `callback` is set by tuneflow. Attributes the spec does not list go to the
 * service as they are.
 */
export type TuneSpec = Omit<TuneCreateAttributes, 'title' | 'images' | 'callback' | 'prompts_attributes'> & {
  images?: string[];
} & OtherAttributes;

/** Spec 4.5 attributes. `input_image`/`mask_image` are paths the worker can read; `callback` is set by tuneflow. */
export type PromptSpec = Omit<PromptCreateAttributes, 'callback' | 'input_image' | 'mask_image' | 'lora_scale'> & {
  input_image?: string;
  mask_image?: string;
} & OtherAttributes;

/** Spec 4.9 attributes; callbacks and a new tune's title are set by tuneflow. */
export type PackTuneSpec = Omit<
  PackTuneCreateAttributes,
  'title' | 'images' | 'callback' | 'prompt_attributes' | 'prompts_callback'
> & {
  images?: string[];
} & OtherAttributes;

/** Options shared by every workflow. Durations are strings like '90 seconds' or numbers of milliseconds. */
export interface TuneflowOptions {
  /**
   * First poll after the tune's `eta` (or a prompt's start) when no callback came; later polls grow from here.
   * @default '2 minutes'
   */
  pollInterval?: string | number;
  /**
   * The slow ceiling of the poll interval.
   * @default '10 minutes'
   */
  maxPollInterval?: string | number;
  /**
   * How long a tune may take to train before the workflow fails with TuneNeverTrained.
   * @default '6 hours'
   */
  trainingTimeout?: string | number;
  /**
   * How long the prompts may take, from their creation, before the workflow fails with PromptsNeverSettled.
   * @default '1 hour'
   */
  promptTimeout?: string | number;
  /**
   * How many prompt creates run at once.
   * @default 4
   */
  promptConcurrency?: number;
  /**
   * When the workflow is cancelled, delete the tune (or the prompts) it created.
   * @default false
   */
  cleanupOnCancel?: boolean;
  /**
   * The most the job may cost, in millicents (100,000 = 1 USD), as the service charges (`cost_mc`): the tune it
   * creates and every prompt it makes, a pack's included. Each charge is weighed before the create that makes it, at
   * a price known beforehand: a pack's for the class (`cost_mc_hash`), `tuneCostMc` for a training, nothing on
   * `branch: fast`; a job whose price cannot be known beforehand is refused (`InvalidOptions`), one whose price is
   * above the limit fails `OverBudget` before anything is created. Prompts stop before the cost would pass it (priced
   * per image as the first one was); a run never completes above it: it fails `OverBudget` once what it made settled.
   * A prompt create answered without `cost_mc` is read once before any other create; when the read does not say the
   * price either, no prompt is created after it, and the run fails `PriceUnknown` once what it made settled.
   * @default no limit
   */
  maxCostMc?: number;
  /**
   * What training the tune costs your account, in millicents (the tune's `cost_mc`): the service publishes no price
   * list and charges a tune when it is created, so `maxCostMc` needs this to train a tune not on `branch: fast`.
   * Used by `trainThenGenerate` only; what the service charges is what counts afterwards.
   * @default not stated
   */
  tuneCostMc?: number;
  /**
   * Inspect every training image (`POST /images/inspect`, a few at a time) before the tune is created; an image that
   * raises a flag in `refuse` fails the job with InspectionRefused, naming each such image and its flags, having
   * created nothing. What inspection found is in the result (`inspection`). Used by `trainThenGenerate` and
   * `packTune` (a pack on existing tunes sends no image: nothing is inspected). The service states no price for an
   * inspection: it is not in `cost`, nor held to `maxCostMc`.
   * @default no inspection
   */
  inspect?: InspectOption;
  /**
   * Copy each settled prompt's images to the owner's storage (the worker's TUNEFLOW_STORAGE, or the plugin's
   * `storage`): where they are, their SHA-256 and size are in the result (`stored_images`). `false`: this job's are
   * not copied. `true`: the job needs them copied, and fails InvalidOptions, having created nothing, on a worker
   * without storage. Where they are copied is the operator's to say, never the job's.
   * @default copied where the worker has storage
   */
  storeImages?: boolean;
}

export interface TrainThenGenerateInput {
  tune: TuneSpec;
  prompts: PromptSpec[];
  options?: TuneflowOptions;
}
export interface TrainThenGenerateResult {
  /** The trained tune: the fields of the service's object a caller reads (src/contract/results.ts). */
  tune: ResultTune;
  /** The prompts, in the input's order, each settled: its `images`, or its `user_error`. */
  prompts: ResultPrompt[];
  /** What the job cost: the tune it trained and its prompts, as the service charged them. */
  cost: Cost;
  /** What inspection found in each training image, in the input's order (with `options.inspect`). */
  inspection?: ImageInspection[];
}

export interface GenerateInput {
  tuneId: number;
  prompts: PromptSpec[];
  options?: TuneflowOptions;
}
export interface GenerateResult {
  /** The prompts, in the input's order, each settled: its `images`, or its `user_error`. */
  prompts: ResultPrompt[];
  /** What the job cost: its prompts, as the service charged them. */
  cost: Cost;
}

export interface PackTuneInput {
  packId: number;
  tune: PackTuneSpec;
  options?: TuneflowOptions;
}
export interface PackTuneResult {
  tune: ResultTune;
  /** The pack's prompts the service ran on the tune, each settled. */
  prompts: ResultPrompt[];
  /**
   * What the job cost: the pack's tune (its price covers the pack's prompts, read from the tune once trained), or the
   * prompts added to the reused one.
   */
  cost: Cost;
  /** What inspection found in each training image, in the input's order (with `options.inspect` on a new tune). */
  inspection?: ImageInspection[];
}
