/**
 * Tune routes (spec 4.1-4.4). Training images come as uploaded files (stored and served back as `orig_images`)
 * or as `image_urls` (recorded as given, never downloaded).
 */
import { LIMITS, readCharacteristics, TuneCreateInput, TuneListParams } from '../api/schemas';
import { GALLERY_TUNES } from './fixtures';
import { checkReferences, promptAttributes } from './prompts';
import { checkOffset, notFound, unprocessable, type RouteDefinition, type ServiceParts } from './requests';
import type { Store } from './store';
import { renderTune } from './render';

/**
 * The URLs of a tune's training images: uploaded files are kept and served by the mock; URLs are kept as given.
 * @example const orig_images = await trainingImages(store, input, 'tune');
 */
export async function trainingImages(
  store: Store,
  input: { images?: unknown[]; image_urls?: string[] },
  field: string,
): Promise<string[]> {
  if (input.image_urls) return [...input.image_urls];
  const urls: string[] = [];
  for (const image of input.images ?? []) {
    // A path or bytes in JSON mean nothing to the service: files travel in multipart bodies.
    if (!(image instanceof Blob))
      throw unprocessable(`${field}.images`, 'must be files uploaded in a multipart body; send URLs as image_urls');
    urls.push(await store.addFile(image));
  }
  return urls;
}

/** The tune routes of the mock. */
export function tuneRoutes(parts: ServiceParts): RouteDefinition[] {
  const { store, simulation } = parts;
  return [
    {
      method: 'POST',
      pattern: '/tunes',
      kind: 'api',
      async handle(ctx) {
        const account = ctx.account;
        const { input } = await ctx.bodyInput(TuneCreateInput, 'tune');
        if (account.idempotency) {
          const existing = store.tuneByTitle(account, input.title);
          if (existing) return { status: 200, body: renderTune(store.baseUrl, existing) };
        }
        const base = input.base_tune_id === undefined ? undefined : store.visibleTune(account, input.base_tune_id);
        if (input.base_tune_id !== undefined && !base)
          throw unprocessable(
            'tune.base_tune_id',
            `must be a tune of this account or a gallery base tune (${GALLERY_TUNES.map((t) => t.id).join(', ')})`,
          );
        const branch = input.branch ?? base?.branch ?? 'sd15';
        // Everything that can be refused is checked before the tune exists.
        const characteristics = readCharacteristics(input.characteristics) ?? null;
        const prompts: Record<string, unknown>[] = [];
        for (const [i, p] of (input.prompts_attributes ?? []).entries()) {
          checkReferences(store, account, p.text, `tune.prompts_attributes[${i}].text`);
          prompts.push(await promptAttributes(store, p, characteristics, `tune.prompts_attributes[${i}]`));
        }
        const orig_images = await trainingImages(store, input, 'tune');
        const tune = simulation.createTune(account, {
          title: input.title,
          name: input.name,
          // Spec 4.1: `ohwx` for SDXL (and Flux), `sks` for SD15.
          token: input.token ?? (branch === 'sd15' || branch === 'fast' ? 'sks' : 'ohwx'),
          base_tune_id: input.base_tune_id ?? null,
          steps: input.steps ?? null,
          face_crop: input.face_crop ?? null,
          training_face_correct: input.training_face_correct ?? false,
          branch,
          // Spec 4.1: for sdxl1 the value is ignored and pti is used.
          model_type: branch === 'sdxl1' ? 'pti' : (input.model_type ?? null),
          preset: input.preset ?? null,
          auto_extend: input.auto_extend ?? false,
          callback: input.callback ?? null,
          characteristics,
          orig_images,
          pack_id: null,
        });
        for (const attributes of prompts) simulation.createPrompt(account, tune, attributes);
        return { status: 201, body: renderTune(store.baseUrl, tune) };
      },
    },
    {
      method: 'GET',
      pattern: '/tunes/:id',
      kind: 'api',
      handle(ctx) {
        const tune = store.visibleTune(ctx.account, ctx.id(0, 'Tune'));
        if (!tune) throw notFound('Tune');
        return { status: 200, body: renderTune(store.baseUrl, tune) };
      },
    },
    {
      method: 'GET',
      pattern: '/tunes',
      kind: 'api',
      handle(ctx) {
        checkOffset(ctx, LIMITS.tuneOffsetMax, 'tune');
        const { title, ...window } = ctx.queryInput(TuneListParams);
        // `?title=` filters by exact title, as the service's MCP server uses it to find a tune.
        const ids = title === undefined ? ctx.account.tuneIds : store.tuneIdsTitled(ctx.account, title);
        const page = store.page(ids, window, (id) => store.tunes.get(id));
        return { status: 200, body: page.map((t) => renderTune(store.baseUrl, t)) };
      },
    },
    {
      method: 'DELETE',
      pattern: '/tunes/:id',
      kind: 'api',
      handle(ctx) {
        const tune = store.ownTune(ctx.account, ctx.id(0, 'Tune'));
        if (!tune) throw notFound('Tune');
        simulation.deleteTune(tune);
        return { status: 200, body: { message: `Tune ${tune.id} deleted` } };
      },
    },
  ];
}
