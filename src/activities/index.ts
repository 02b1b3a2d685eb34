/**
 * Activities: thin adapters from the service client to Temporal. `createActivities(deps)` returns them all.
 * (Contract first; the implementation follows.)
 */
import type { Prompt, Tune } from '../api/schemas';
import type { PackTuneSpec, PromptSpec, TuneSpec } from '../workflows/inputs';

/** What the workflows call. Every argument and result is JSON that may enter history. */
export interface TuneflowActivities {
  /**
   * POST /tunes with the signed tune callback (and `title` as given; the workflow defaults it to its ID).
   * On a retry it first looks for a tune with the same title and returns that instead of creating twice.
   */
  createTune(input: { tune: TuneSpec & { title: string } }): Promise<Tune>;
  retrieveTune(input: { tuneId: number }): Promise<Tune>;
  deleteTune(input: { tuneId: number }): Promise<void>;
  /**
   * POST /tunes/:tuneId/prompts with the signed prompt callback (`key` distinguishes prompts of one job in the
   * callback URL). On a retry it first looks among the tune's prompts for one with the same considered
   * attributes (spec 4.11) and returns it.
   */
  createPrompt(input: { tuneId: number; prompt: PromptSpec; key: string }): Promise<Prompt>;
  retrievePrompt(input: { tuneId: number; promptId: number }): Promise<Prompt>;
  /** The tune's prompts with id >= minId, newest first: one list call unless there are more than a page. */
  listPrompts(input: { tuneId: number; minId?: number }): Promise<Prompt[]>;
  deletePrompt(input: { tuneId: number; promptId: number }): Promise<void>;
  /** POST /p/:packId/tunes with the signed tune, prompt and prompts callbacks; looks up by title on a retry. */
  createPackTune(input: { packId: number; tune: PackTuneSpec & { title: string } }): Promise<Tune>;
}
