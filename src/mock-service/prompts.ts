/**
 * Prompt routes (spec 4.5-4.8) and likes (service notes). Prompts on the public base tune belong to the caller;
 * a Flux LoRA tune takes no prompts itself: its LoRA is loaded into the base tune with `<lora:TUNE_ID:STRENGTH>`.
 */
import { LIMITS, PromptCreateInput, PromptListParams } from '../api/schemas';
import {
  checkOffset,
  notFound,
  unprocessable,
  type Reply,
  type RequestContext,
  type RouteDefinition,
  type ServiceParts,
} from './requests';
import type { Account, Store, TuneRecord } from './store';
import { renderPrompt } from './render';

const PLACEHOLDER = /\{\{\s*(\w+)\s*\}\}/g;

/**
 * Substitutes `{{key}}` placeholders with the tune's characteristics. Pack templates drop the placeholders they
 * have no value for; a caller's own text keeps them.
 * @example substitute('ohwx man, {{eye_color}}', { eye_color: 'blue eyes' }, true) // 'ohwx man, blue eyes'
 */
export function substitute(
  text: string,
  characteristics: Record<string, string | number | boolean> | null,
  dropUnknown: boolean,
): string {
  if (!characteristics && !dropUnknown) return text;
  const out = text.replace(PLACEHOLDER, (whole, key: string) =>
    characteristics && Object.hasOwn(characteristics, key) ? String(characteristics[key]) : dropUnknown ? '' : whole,
  );
  return dropUnknown
    ? out
        .replace(/\s*,(\s*,)+/g, ',')
        .replace(/,\s*$/, '')
        .replace(/\s{2,}/g, ' ')
        .trim()
    : out;
}

/**
 * The attributes a prompt keeps: as validated, with the tune's characteristics substituted into the text and
 * uploaded files replaced by the URLs they are served at.
 * @example const attributes = await promptAttributes(store, input, tune.characteristics);
 */
export async function promptAttributes(
  store: Store,
  input: Record<string, unknown>,
  characteristics: TuneRecord['characteristics'],
  /** Where the attributes are in the request, for error fields. */
  field = 'prompt',
): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(input)) {
    if (value === undefined) continue;
    if (value instanceof Blob) out[key] = await store.addFile(value);
    else if (key === 'input_image' || key === 'mask_image')
      // A path means something only on the caller's machine.
      throw unprocessable(
        `${field}.${key}`,
        `must be uploaded as a file in a multipart body; send a URL as ${key}_url`,
      );
    else out[key] = value;
  }
  out.text = substitute(String(input.text), characteristics, false);
  return out;
}

const REFERENCE = /<(lora|faceid):([^:>]*):([^>]*)>/g;

/**
 * Each `<lora:TUNE_ID:STRENGTH>` must name a trained LoRA tune of the caller, each `<faceid:TUNE_ID:STRENGTH>` a
 * FaceID tune of the caller (service notes); else 422.
 * @example checkReferences(store, account, '<lora:123:1> ohwx woman');
 */
export function checkReferences(store: Store, account: Account, text: string, field = 'prompt.text'): void {
  for (const [whole, kind, rawId, strength] of text.matchAll(REFERENCE)) {
    if (!/^[1-9]\d*$/.test(rawId) || !Number.isFinite(Number(strength)) || strength.trim() === '')
      throw unprocessable(field, `${whole} must be written <${kind}:TUNE_ID:STRENGTH> with numbers`);
    const tune = store.ownTune(account, Number(rawId));
    if (kind === 'lora' && (!tune || tune.model_type !== 'lora' || !tune.trained_at))
      throw unprocessable(field, `${whole} must name a trained LoRA tune (model_type lora) of this account`);
    if (kind === 'faceid' && (!tune || tune.model_type !== 'faceid'))
      throw unprocessable(field, `${whole} must name a FaceID tune (model_type faceid) of this account`);
  }
}

function ownPromptOn(parts: ServiceParts, ctx: RequestContext) {
  const tuneId = ctx.id(0, 'Tune');
  const prompt = parts.store.ownPrompt(ctx.account, ctx.id(1, 'Prompt'));
  if (!prompt || prompt.tune_id !== tuneId) throw notFound('Prompt');
  return prompt;
}

function ownPrompt(parts: ServiceParts, ctx: RequestContext) {
  const prompt = parts.store.ownPrompt(ctx.account, ctx.id(0, 'Prompt'));
  if (!prompt) throw notFound('Prompt');
  return prompt;
}

/**
 * `POST /tunes/:id/prompts` (spec 4.5): a prompt on a tune the account may use; on a LoRA, as production clients see
 * it (or 422, as the service notes say, by the mock's settings); with idempotency, the prompt already made from the
 * same attributes.
 */
async function createPrompt(parts: ServiceParts, ctx: RequestContext): Promise<Reply> {
  const { store, simulation } = parts;
  const account = ctx.account;
  let tune = store.visibleTune(account, ctx.id(0, 'Tune'));
  if (!tune) throw notFound('Tune');
  const { input } = await ctx.bodyInput(PromptCreateInput, 'prompt');
  if (tune.model_type === 'lora') {
    // Production clients post to the LoRA and get a prompt on its base tune; the service notes say 422.
    const base = tune.base_tune_id === null ? undefined : store.visibleTune(account, tune.base_tune_id);
    if (parts.settings.loraPrompts === 'refuse' || !base) {
      const named = tune.base_tune_id === null ? 'the base tune' : `the base tune ${tune.base_tune_id}`;
      throw unprocessable(
        'prompt.tune_id',
        `model_type=lora is not supported: post the prompt to ${named} with <lora:${tune.id}:1> in its text`,
      );
    }
    if (!input.text.includes(`<lora:${tune.id}:`)) input.text = `<lora:${tune.id}:1> ${input.text}`;
    tune = base;
  }
  checkReferences(store, account, input.text);
  const attributes = await promptAttributes(store, input, tune.characteristics);
  if (account.idempotency) {
    const existing = store.promptByConsidered(account, tune.id, attributes);
    if (existing) return { status: 200, body: renderPrompt(store.baseUrl, existing) };
  }
  return { status: 201, body: renderPrompt(store.baseUrl, simulation.createPrompt(account, tune, attributes)) };
}

/** The prompt routes of the mock. */
export function promptRoutes(parts: ServiceParts): RouteDefinition[] {
  const { store, simulation } = parts;
  return [
    {
      method: 'POST',
      pattern: '/tunes/:id/prompts',
      kind: 'api',
      handle: (ctx) => createPrompt(parts, ctx),
    },
    {
      method: 'GET',
      pattern: '/tunes/:tune_id/prompts/:id',
      kind: 'api',
      handle: (ctx) => ({ status: 200, body: renderPrompt(store.baseUrl, ownPromptOn(parts, ctx)) }),
    },
    {
      // Un-nested, as the official client and several integrations poll it.
      method: 'GET',
      pattern: '/prompts/:id',
      kind: 'api',
      handle: (ctx) => ({ status: 200, body: renderPrompt(store.baseUrl, ownPrompt(parts, ctx)) }),
    },
    {
      method: 'GET',
      pattern: '/tunes/:id/prompts',
      kind: 'api',
      handle(ctx) {
        const account = ctx.account;
        const tune = store.visibleTune(account, ctx.id(0, 'Tune'));
        if (!tune) throw notFound('Tune');
        checkOffset(ctx, LIMITS.promptOffsetMax, 'prompt');
        const window = ctx.queryInput(PromptListParams);
        const page = store.page(tune.promptIds, window, (id) => store.ownPrompt(account, id));
        return { status: 200, body: page.map((p) => renderPrompt(store.baseUrl, p)) };
      },
    },
    {
      method: 'GET',
      pattern: '/prompts',
      kind: 'api',
      handle(ctx) {
        const account = ctx.account;
        checkOffset(ctx, LIMITS.promptOffsetMax, 'prompt');
        const window = ctx.queryInput(PromptListParams);
        const page = store.page(account.promptIds, window, (id) => store.prompts.get(id));
        return { status: 200, body: page.map((p) => renderPrompt(store.baseUrl, p)) };
      },
    },
    {
      method: 'DELETE',
      pattern: '/tunes/:tune_id/prompts/:id',
      kind: 'api',
      handle(ctx) {
        const prompt = ownPromptOn(parts, ctx);
        simulation.deletePrompt(prompt);
        return { status: 200, body: { message: `Prompt ${prompt.id} deleted` } };
      },
    },
    {
      method: 'DELETE',
      pattern: '/prompts/:id',
      kind: 'api',
      handle(ctx) {
        const prompt = ownPrompt(parts, ctx);
        simulation.deletePrompt(prompt);
        return { status: 200, body: { message: `Prompt ${prompt.id} deleted` } };
      },
    },
    {
      method: 'POST',
      pattern: '/prompts/:id/likes',
      kind: 'api',
      handle(ctx) {
        const prompt = ownPrompt(parts, ctx);
        ctx.account.likes.add(prompt.id);
        return { status: 201 };
      },
    },
    {
      method: 'DELETE',
      pattern: '/prompts/:id/likes',
      kind: 'api',
      handle(ctx) {
        const prompt = ownPrompt(parts, ctx);
        ctx.account.likes.delete(prompt.id);
        return { status: 200, body: { message: `Like of prompt ${prompt.id} removed` } };
      },
    },
  ];
}
