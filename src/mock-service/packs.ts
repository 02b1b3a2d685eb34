/**
 * Pack routes (spec 4.9, service notes): list, detail, and creating a tune from a pack, which trains a tune with
 * the pack's base tune, model type and preset and gives it the pack's prompts for its class, with the tune's
 * characteristics substituted into `{{key}}` placeholders.
 */
import { PackListParams, PackTuneCreateInput, readCharacteristics } from '../api/schemas';
import { FLUX_BASE_TUNE } from './fixtures';
import { substitute } from './prompts';
import {
  notFound,
  unprocessable,
  type Reply,
  type RequestContext,
  type RouteDefinition,
  type ServiceParts,
} from './requests';
import type { Simulation } from './simulation';
import type { Account, PackPrompt, PackRecord, PromptGroup, TuneRecord } from './store';
import { trainingImages } from './tunes';
import { renderPack, renderPackDetail, renderPackTune } from './render';

/** The classes a pack supports: the keys of its `cost_mc_hash` / `prompts_per_class` (service notes). */
function classesOf(pack: PackRecord): string[] {
  return Object.keys(pack.prompts_per_class);
}

/** The pack's prompts for the tune's class (a subset when `prompt_ids` is given), or a 422. */
function templatesFor(pack: PackRecord, name: string, promptIds: number[] | undefined, field: string): PackPrompt[] {
  const templates = pack.prompts_per_class[name];
  if (!templates) throw unprocessable(field, `must be a class the pack supports: ${classesOf(pack).join(', ')}`);
  if (!promptIds) return templates;
  const known = new Set(templates.map((t) => t.id));
  const unknown = promptIds.filter((id) => !known.has(id));
  if (unknown.length)
    throw unprocessable('tune.prompt_ids', `${unknown.join(', ')} are not prompts of the pack for class ${name}`);
  const chosen = templates.filter((t) => promptIds.includes(t.id));
  if (!chosen.length) throw unprocessable('tune.prompt_ids', 'must name at least one prompt of the pack');
  return chosen;
}

/** Makes `templates` prompts of `tune`, as the pack request made them: one group for the pack's prompts_callback. */
function addPackPrompts(
  simulation: Simulation,
  account: Account,
  pack: PackRecord,
  tune: TuneRecord,
  templates: PackPrompt[],
  callbacks: { prompt?: string; prompts?: string },
  requestTitle: string | null,
): void {
  const group: PromptGroup = {
    callback: callbacks.prompts ?? null,
    requestTitle,
    promptIds: [],
    pending: templates.length,
  };
  for (const t of templates) {
    const attributes: Record<string, unknown> = {
      text: substitute(t.text, tune.characteristics, true),
      num_images: t.num_images,
      w: t.w,
      h: t.h,
    };
    if (t.negative_prompt !== undefined) attributes.negative_prompt = t.negative_prompt;
    if (t.cfg_scale !== undefined) attributes.cfg_scale = t.cfg_scale;
    if (t.steps !== undefined) attributes.steps = t.steps;
    if (callbacks.prompt) attributes.callback = callbacks.prompt;
    simulation.createPrompt(account, tune, attributes, { pack_id: pack.id, orig_prompt_id: t.id, group });
  }
}

/**
 * `POST /p/:pack_id/tunes` (spec 4.9): a tune trained from the pack with the pack's prompts for its class, or, with
 * `tune_ids`, the pack's prompts on existing tunes (each checked before any is made); with idempotency, the tune
 * already made under the title.
 */
async function createPackTune(parts: ServiceParts, ctx: RequestContext): Promise<Reply> {
  const { store, simulation } = parts;
  const account = ctx.account;
  const pack = store.packs.get(ctx.id(0, 'Pack'));
  if (!pack) throw notFound('Pack');
  const { input } = await ctx.bodyInput(PackTuneCreateInput, 'tune');
  const callbacks = { prompt: input.prompt_attributes?.callback, prompts: input.prompts_callback };

  if (input.tune_ids) {
    // Existing tunes: only the pack's prompts are created, for each tune's class. Checked before any is made.
    const plan = input.tune_ids.map((id) => {
      const tune = store.ownTune(account, id);
      if (!tune) throw unprocessable('tune.tune_ids', `${id} is not a tune of this account`);
      return { tune, templates: templatesFor(pack, tune.name ?? '', input.prompt_ids, 'tune.tune_ids') };
    });
    const requestTitle = typeof input.title === 'string' ? input.title : null;
    for (const { tune, templates } of plan)
      addPackPrompts(simulation, account, pack, tune, templates, callbacks, requestTitle);
    // The answer is one tune object (as documented); with several tune_ids it is the first.
    return { status: 201, body: renderPackTune(store.baseUrl, plan[0].tune) };
  }

  const name = input.name as string;
  const title = input.title as string;
  const templates = templatesFor(pack, name, input.prompt_ids, 'tune.name');
  if (account.idempotency) {
    const existing = store.tuneByTitle(account, title);
    if (existing) return { status: 200, body: renderPackTune(store.baseUrl, existing) };
  }
  const base = pack.base_tune_id === null ? undefined : store.tunes.get(pack.base_tune_id);
  const tune = simulation.createTune(account, {
    title,
    name,
    token: pack.token,
    base_tune_id: pack.base_tune_id,
    steps: null,
    face_crop: null,
    training_face_correct: false,
    // The service's own example app makes pack tunes in `fast` (free mock) mode.
    branch: input.branch ?? base?.branch ?? (pack.base_tune_id === FLUX_BASE_TUNE.id ? 'flux1' : 'sd15'),
    model_type: pack.model_type,
    preset: input.preset ?? pack.preset,
    auto_extend: false,
    callback: input.callback ?? null,
    characteristics: readCharacteristics(input.characteristics) ?? null,
    orig_images: await trainingImages(store, input, 'tune'),
    pack_id: pack.id,
  });
  addPackPrompts(simulation, account, pack, tune, templates, callbacks, title);
  return { status: 201, body: renderPackTune(store.baseUrl, tune) };
}

/** The pack routes of the mock. */
export function packRoutes(parts: ServiceParts): RouteDefinition[] {
  const { store } = parts;
  const listPacks: RouteDefinition['handle'] = (ctx) => {
    ctx.queryInput(PackListParams); // every fixture pack is public and listed
    return { status: 200, body: [...store.packs.values()].map((p) => renderPack(p)) };
  };

  return [
    { method: 'GET', pattern: '/packs', kind: 'api', handle: listPacks },
    { method: 'GET', pattern: '/gallery/packs', kind: 'api', handle: listPacks },
    {
      method: 'GET',
      pattern: '/p/:id',
      kind: 'api',
      handle(ctx) {
        const pack = store.packs.get(ctx.id(0, 'Pack'));
        if (!pack) throw notFound('Pack');
        return { status: 200, body: renderPackDetail(store.baseUrl, pack) };
      },
    },
    {
      method: 'POST',
      pattern: '/p/:pack_id/tunes',
      kind: 'api',
      handle: (ctx) => createPackTune(parts, ctx),
    },
  ];
}
