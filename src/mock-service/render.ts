/**
 * The mock's objects as the service answers them (spec 2, and the service notes' fields), under `baseUrl`: the base
 * of every URL in an answer.
 */
import type { PackPrompt, PackRecord, PromptRecord, TuneRecord } from './store';

/** The only fields of a tune created from a pack, in the service's order (spec 2.1). */
const PACK_FORM_FIELDS = [
  'id',
  'title',
  'name',
  'eta',
  'trained_at',
  'started_training_at',
  'expires_at',
  'created_at',
  'updated_at',
  'url',
  'orig_images',
] as const;

/** The tune object of spec 2.1. */
export function renderTune(baseUrl: string, t: TuneRecord): Record<string, unknown> {
  const ckpt = t.trained_at && t.account && t.model_type !== 'lora' ? `${baseUrl}/models/${t.id}.safetensors` : null;
  return {
    id: t.id,
    title: t.title,
    name: t.name,
    is_api: t.account !== null,
    token: t.token,
    base_tune_id: t.base_tune_id,
    args: null,
    steps: t.steps,
    face_crop: t.face_crop,
    training_face_correct: t.training_face_correct,
    ckpt_url: ckpt,
    ckpt_urls: ckpt ? [ckpt] : [],
    eta: t.eta,
    trained_at: t.trained_at,
    started_training_at: t.started_training_at,
    expires_at: t.expires_at,
    created_at: t.created_at,
    updated_at: t.updated_at,
    branch: t.branch,
    model_type: t.model_type,
    preset: t.preset,
    auto_extend: t.auto_extend,
    callback: t.callback,
    characteristics: t.characteristics,
    pack_id: t.pack_id,
    cost_mc: t.cost_mc,
    // The service's object URLs end in .json, and answer there.
    url: `${baseUrl}/tunes/${t.id}.json`,
    orig_images: t.orig_images,
  };
}

/** The pack form of a tune (spec 2.1): the answer to `POST /p/:pack_id/tunes`, a subset of the tune object. */
export function renderPackTune(baseUrl: string, t: TuneRecord): Record<string, unknown> {
  const tune = renderTune(baseUrl, t);
  return Object.fromEntries(PACK_FORM_FIELDS.map((field) => [field, tune[field]]));
}

/** The prompt object of spec 2.2 with the service notes' `images` and `user_error`. */
export function renderPrompt(baseUrl: string, p: PromptRecord): Record<string, unknown> {
  const a = p.attributes;
  return {
    id: p.id,
    ...a,
    callback: a.callback ?? null,
    text: a.text,
    negative_prompt: a.negative_prompt ?? null,
    cfg_scale: a.cfg_scale ?? null,
    steps: a.steps ?? null,
    seed: a.seed ?? null,
    num_images: a.num_images ?? 1,
    trained_at: p.trained_at,
    started_training_at: p.started_training_at,
    created_at: p.created_at,
    updated_at: p.updated_at,
    tune_id: p.tune_id,
    url: `${baseUrl}/tunes/${p.tune_id}/prompts/${p.id}.json`,
    images: p.images,
    user_error: p.user_error,
    pack_id: p.pack_id,
    orig_prompt_id: p.orig_prompt_id,
    liked: p.account.likes.has(p.id),
    cost_mc: p.cost_mc,
  };
}

/** A pack as `GET /packs` lists it (service notes). */
export function renderPack(pack: PackRecord): Record<string, unknown> {
  return {
    id: pack.id,
    base_tune_id: pack.base_tune_id,
    slug: pack.slug,
    title: pack.title,
    token: pack.token,
    multiplier: pack.multiplier,
    model_type: pack.model_type,
    preset: pack.preset,
    public_at: pack.public_at,
    created_at: pack.created_at,
    updated_at: pack.created_at,
    cost_mc_hash: pack.cost_mc_hash,
  };
}

/** A pack as `GET /p/:id` shows it: with cover, costs and prompts per class (service notes). */
export function renderPackDetail(baseUrl: string, pack: PackRecord): Record<string, unknown> {
  const costs: Record<string, { cost: number; num_images: number }> = {};
  const perClass: Record<string, Record<string, unknown>[]> = {};
  let last: PackPrompt | undefined;
  for (const [name, prompts] of Object.entries(pack.prompts_per_class)) {
    costs[name] = { cost: pack.cost_mc_hash[name], num_images: prompts.reduce((n, p) => n + p.num_images, 0) };
    perClass[name] = prompts.map((p) => ({
      id: p.id,
      text: p.text,
      negative_prompt: p.negative_prompt ?? null,
      num_images: p.num_images,
      w: p.w,
      h: p.h,
      cfg_scale: p.cfg_scale ?? null,
      steps: p.steps ?? null,
    }));
    for (const p of prompts) if (!last || p.id > last.id) last = p;
  }
  // The cover is the last prompt added to the pack (spec 1).
  const cover = last ? `${baseUrl}/images/${last.id}-0.png` : null;
  return { ...renderPack(pack), cover_url: cover, costs, prompts_per_class: perClass };
}
