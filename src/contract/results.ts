/**
 * The tune and prompts a job's result gives: the service's objects cut to the fields a user of the result reads. Each
 * copy a run returns was already in its history once (the activity that read it answered it); a whole object there
 * and again in the result stored every field twice for the namespace's retention, most of them fields no caller reads
 * (`orig_images`, `ckpt_urls`, `args`, the callback URL). The service's whole object is one `GET` away
 * (`GET /tunes/:id`, `GET /tunes/:tune_id/prompts/:id`; `TunesApi`). Workflow-safe: no I/O, no zod.
 */
import type { Prompt, Tune } from '../api/schemas';
import type { StoredImage } from './storage';

/** A tune as a job's result gives it: the job that made it, `token` for the prompts' text, its kind, when it trained, its price. */
export interface ResultTune {
  id: number;
  /** tuneflow's: the job that made the tune (src/contract/tenants.ts). */
  title?: string | null;
  name?: string | null;
  /** The word the prompts name the subject by (`ohwx`, `sks`), as the service answered it. */
  token?: string | null;
  branch?: string | null;
  model_type?: string | null;
  base_tune_id?: number | null;
  trained_at?: string | null;
  expires_at?: string | null;
  created_at?: string | null;
  cost_mc?: number | null;
  /** The pack the tune was made from (`packTune`), as the service answered it. */
  pack_id?: number | null;
}

/** A prompt as a job's result gives it: its images (or why there are none), what it asked for, its price. */
export interface ResultPrompt {
  id: number;
  tune_id: number;
  text: string;
  num_images?: number | null;
  images?: string[] | null;
  user_error?: string | null;
  trained_at?: string | null;
  created_at?: string | null;
  cost_mc?: number | null;
  /** The pack that put the prompt on the tune (`packTune`), as the service answered it. */
  pack_id?: number | null;
  /**
   * tuneflow's: the copy of each image (`images`, same position) in the owner's storage, with its SHA-256 and size;
   * present when the worker has storage and the job did not opt out (`options.storeImages`).
   */
  stored_images?: StoredImage[];
}

/** The fields of each, in the order the result gives them. */
export const RESULT_TUNE_FIELDS = [
  'id',
  'title',
  'name',
  'token',
  'branch',
  'model_type',
  'base_tune_id',
  'trained_at',
  'expires_at',
  'created_at',
  'cost_mc',
  'pack_id',
] as const satisfies readonly (keyof ResultTune)[];
export const RESULT_PROMPT_FIELDS = [
  'id',
  'tune_id',
  'text',
  'num_images',
  'images',
  'user_error',
  'trained_at',
  'created_at',
  'cost_mc',
  'pack_id',
] as const satisfies readonly (keyof ResultPrompt)[];

/**
 * The tune as the result gives it; a field the service did not answer stays out.
 *
 * @example
 * resultTune({ id: 1, token: 'ohwx', orig_images: ['https://...'], trained_at: '2026-01-01T00:00:00Z' });
 * // { id: 1, token: 'ohwx', trained_at: '2026-01-01T00:00:00Z' }
 */
export function resultTune(tune: Tune): ResultTune {
  return pickFields(tune, RESULT_TUNE_FIELDS) as unknown as ResultTune;
}

/**
 * The prompt as the result gives it.
 *
 * @example
 * resultPrompt({ id: 2, tune_id: 1, text: 'ohwx woman', images: ['https://...'], seed: 7 });
 * // { id: 2, tune_id: 1, text: 'ohwx woman', images: ['https://...'] }
 */
export function resultPrompt(prompt: Prompt, stored?: StoredImage[]): ResultPrompt {
  const result = pickFields(prompt, RESULT_PROMPT_FIELDS) as unknown as ResultPrompt;
  return stored ? { ...result, stored_images: stored } : result;
}

/**
 * `object`'s `fields`, in their order; one it lacks (or holds as undefined, which no payload keeps) stays out.
 *
 * @example pickFields({ id: 1, seed: 7 }, ['id', 'text']); // { id: 1 }
 */
export function pickFields(object: Record<string, unknown>, fields: readonly string[]): Record<string, unknown> {
  const kept: Record<string, unknown> = {};
  for (const field of fields) if (object[field] !== undefined) kept[field] = object[field];
  return kept;
}
