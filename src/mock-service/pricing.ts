/**
 * What the mock charges, like the service (spec 1, service notes): money in millicents (`cost_mc`, 100,000 = 1 USD),
 * charged when an object is created, on the object's `cost_mc`, against the account. `branch: fast` is free, and so
 * are prompts on such a tune. A tune made from a pack costs the pack's price for its class (`cost_mc_hash`), which
 * covers the pack's prompts; pack prompts added to an existing tune (`tune_ids`) cost per image. The service
 * publishes no price list for the rest: the mock's prices below are its own, round and plausible.
 */
import type { PackRecord, TuneRecord } from './store';

/** Training a tune (checkpoint, LoRA, PTI): $1.50. */
export const TUNE_TRAINING_MC = 150_000;
/** One generated image: $0.02. */
export const IMAGE_MC = 2_000;

/** One charge of an account's ledger. */
export interface Charge {
  object: 'tune' | 'prompt';
  id: number;
  mc: number;
}

/**
 * What creating a tune costs: a pack's price for the class, else training (nothing for FaceID, ready at creation,
 * nor for `branch: fast`).
 * @example tuneCost({ branch: 'sd15', model_type: null, name: 'dog' }, undefined) // 150000
 */
export function tuneCost(
  tune: Pick<TuneRecord, 'branch' | 'model_type' | 'name'>,
  pack: Pick<PackRecord, 'cost_mc_hash'> | undefined,
): number {
  if (tune.branch === 'fast') return 0;
  if (pack) return pack.cost_mc_hash[tune.name ?? ''] ?? 0;
  return tune.model_type === 'faceid' ? 0 : TUNE_TRAINING_MC;
}

/**
 * What a prompt costs: per image, unless its tune is a free `fast` one or the prompt came with its tune's pack.
 * @example promptCost(tune, { num_images: 2 }, false) // 4000
 */
export function promptCost(
  tune: Pick<TuneRecord, 'branch'>,
  attributes: Record<string, unknown>,
  includedInPack: boolean,
): number {
  if (tune.branch === 'fast' || includedInPack) return 0;
  const images = Number(attributes.num_images ?? 1);
  return IMAGE_MC * (Number.isFinite(images) && images > 0 ? images : 1);
}
