/**
 * What kind of tune a workflow holds decides how it waits and where its prompts go (service notes, "Flux and LoRA"):
 * a FaceID tune is ready at creation; a (Flux) LoRA cannot take prompts itself, they go to its base tune with the
 * LoRA named in the text.
 */
import { ApplicationFailure } from '@temporalio/workflow';
import type { Prompt, Tune } from '../api/schemas';
import { FailureType } from '../contract/failures';

/** The strength a Flux LoRA is loaded with in a prompt's text. */
export const LORA_STRENGTH = 1;

/**
 * A FaceID tune: `trained_at` is set at creation; it needs no wait and sends no callback.
 *
 * @example
 * isFaceIdTune({ model_type: 'faceid' }); // true
 */
export function isFaceIdTune(tune: Pick<Tune, 'model_type'>): boolean {
  return tune.model_type === 'faceid';
}

/**
 * A LoRA trained on a Flux base: its prompts are posted to the base tune, not to it.
 *
 * @example
 * isFluxLoraTune({ model_type: 'lora', branch: 'flux1' }); // true
 */
export function isFluxLoraTune(tune: Pick<Tune, 'model_type' | 'branch'>): boolean {
  return tune.model_type === 'lora' && tune.branch === 'flux1';
}

/**
 * Trained: `trained_at` is set (no field marks a failed tune); a FaceID tune counts as trained from the start.
 *
 * @example
 * isTuneTrained({ trained_at: null, model_type: null }); // false
 */
export function isTuneTrained(tune: Pick<Tune, 'trained_at' | 'model_type'>): boolean {
  return !!tune.trained_at || isFaceIdTune(tune);
}

/**
 * A prompt text that loads the LoRA `<lora:TUNE_ID:STRENGTH>` ahead of the caller's text; a text that already loads
 * this LoRA is left as it is, so applying it twice changes nothing.
 *
 * @example
 * loraPromptText(123, 'ohwx woman, studio portrait'); // '<lora:123:1> ohwx woman, studio portrait'
 */
export function loraPromptText(tuneId: number, text: string, strength = LORA_STRENGTH): string {
  if (text.includes(`<lora:${tuneId}:`)) return text;
  return `<lora:${tuneId}:${strength}> ${text}`;
}

/** Where a tune's prompts are created and polled, and the text they are created with. */
export interface PromptTarget {
  /** The tune the prompts are posted to and listed from. */
  tuneId: number;
  /** The text sent for a prompt the caller wrote as `text`. */
  textFor(text: string): string;
  /** Its prompts are never charged: a tune on branch fast (spec 1: mock mode). */
  free: boolean;
}

/**
 * The prompt target of a tune: itself, or for a LoRA on a base tune (a Flux LoRA above all) the base, with the LoRA
 * prepended to every text: the service refuses prompts posted to a LoRA itself. A Flux LoRA without a base tune
 * cannot generate: that fails at once with type `MissingBaseTune`.
 *
 * @example
 * promptTarget({ id: 7, model_type: 'lora', branch: 'flux1', base_tune_id: 1504944 }).tuneId; // 1504944
 */
export function promptTarget(tune: Pick<Tune, 'id' | 'model_type' | 'branch' | 'base_tune_id'>): PromptTarget {
  const base = tune.base_tune_id;
  if (tune.model_type === 'lora' && typeof base === 'number')
    // Posted to the base, whose branch is not known here: priced as any other.
    return { tuneId: base, textFor: (text) => loraPromptText(tune.id, text), free: false };
  if (isFluxLoraTune(tune))
    throw ApplicationFailure.nonRetryable(
      `Tune ${tune.id} is a Flux LoRA without a base_tune_id: its prompts have no tune to run on`,
      FailureType.missingBaseTune,
      { tuneId: tune.id },
    );
  return { tuneId: tune.id, textFor: (text) => text, free: tune.branch === 'fast' };
}

/**
 * The prompts a deletion of `deletedTuneId` leaves behind: deleting a checkpoint tune deletes its prompts (spec 4.4);
 * any other prompt (on another tune, such as a Flux base, or of a LoRA or a tune of unknown type) must be deleted on
 * its own.
 *
 * @example
 * promptsOutlivingTune(prompts, 7, { id: 7, model_type: null }); // the prompts not on tune 7
 */
export function promptsOutlivingTune<P extends Pick<Prompt, 'tune_id'>>(
  prompts: readonly P[],
  deletedTuneId: number | undefined,
  tune: Pick<Tune, 'id' | 'model_type'> | undefined,
): P[] {
  const checkpoint = deletedTuneId !== undefined && tune?.id === deletedTuneId && tune.model_type === null;
  return prompts.filter((p) => !(checkpoint && p.tune_id === deletedTuneId));
}
