/**
 * The search attributes a run keeps current (src/contract/search-attributes.ts): its phase, its tune, its cost so far
 * and its failure type, so an operator finds jobs with `temporal workflow list --query` and the Web UI. Upserted on
 * each change of phase, with whatever else changed since; only where the namespace has them registered (an upsert of
 * an unknown attribute fails the workflow task over and over), which a local activity tells once, once the input is
 * checked. Runs refused by their input checks (InvalidInput, InvalidOptions) are not listed: nothing was started.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  ChildWorkflowFailure,
  isCancellation,
  proxyLocalActivities,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import { patchedOrFolded } from './patches';
import type { SearchAttributeUpdatePair } from '@temporalio/common';
import type { TuneflowActivities } from '../activities';
import type { Phase } from '../contract/messages';
import { SearchAttribute } from '../contract/search-attributes';
import { searchAttributesCheckOptions } from './policies';

/**
 * Runs with this marker ask, once their input is checked, whether the namespace has tuneflow's search attributes, and keep them
 * current when it does. Runs started before it (no marker) make neither the local activity nor an upsert.
 */
export const SEARCH_ATTRIBUTES_KEPT = 'search-attributes-kept';

const local = proxyLocalActivities<TuneflowActivities>(searchAttributesCheckOptions);

/** What a run shows an operator. */
export interface Findings {
  /** The tenant the run runs as (from its workflow ID): set once, with the first upsert. */
  tenant: string;
  phase: Phase;
  tuneId: number | undefined;
  costMc: number;
  /** The failure type, once failed. */
  failure?: string;
}

/** One run's search attributes: off until `start` finds them registered; then each change is upserted. */
export class Findable {
  #kept = false;
  #last: Partial<Findings> = {};

  /**
   * Decides, once, whether this run keeps its search attributes, and sets them. A check that fails leaves them off: a
   * run never fails for want of them. Answers whether the run's tenant has a spend ceiling (undefined: unknown), and
   * whether the worker copies images to storage (undefined: unknown; false in answers recorded before storage).
   */
  async start(now: Findings): Promise<{ budget: boolean | undefined; storage: boolean | undefined }> {
    if (!patchedOrFolded(SEARCH_ATTRIBUTES_KEPT)) return { budget: false, storage: false };
    // The same local activity says whether the run's tenant has a spend ceiling: no command more for any run. Unknown
    // when it failed: each reservation then asks (money fails closed).
    let budget: boolean | undefined;
    let storage: boolean | undefined;
    try {
      const answer = await local.searchAttributesRegistered({ budget: true });
      // A history recorded before budgets holds the bare answer; no argument is compared on replay.
      if (typeof answer === 'boolean') [this.#kept, budget, storage] = [answer, false, false];
      else [this.#kept, budget, storage] = [answer.registered, answer.budget, answer.storage === true];
    } catch (err) {
      if (isCancellation(err)) throw err;
    }
    this.keep(now);
    return { budget, storage };
  }

  /** Upserts what changed since the last upsert; nothing when nothing did, or the run keeps none. */
  keep(now: Findings): void {
    if (!this.#kept) return;
    const last = this.#last;
    const pairs: SearchAttributeUpdatePair[] = [];
    if (now.tenant !== last.tenant) pairs.push({ key: SearchAttribute.tenant, value: now.tenant });
    if (now.phase !== last.phase) pairs.push({ key: SearchAttribute.phase, value: now.phase });
    if (now.tuneId !== undefined && now.tuneId !== last.tuneId)
      pairs.push({ key: SearchAttribute.tuneId, value: now.tuneId });
    if (now.costMc !== last.costMc) pairs.push({ key: SearchAttribute.costMc, value: now.costMc });
    if (now.failure !== undefined && now.failure !== last.failure)
      pairs.push({ key: SearchAttribute.failure, value: now.failure });
    if (pairs.length) upsertSearchAttributes(pairs);
    this.#last = { ...now };
  }
}

/**
 * The type an operator searches a failed run by: the ApplicationFailure's type (OverBudget, InspectionRefused, ...),
 * that of the activity's or child's cause, else the error's name.
 *
 * @example
 * failureTypeOf(jobOverBudget(...)); // 'OverBudget'
 */
export function failureTypeOf(err: unknown): string {
  const failure = err instanceof ActivityFailure || err instanceof ChildWorkflowFailure ? err.cause : err;
  if (failure instanceof ApplicationFailure && failure.type) return failure.type;
  return failure instanceof Error ? failure.name : 'Error';
}
