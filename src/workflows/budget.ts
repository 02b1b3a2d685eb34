/**
 * A job's budget (`maxCostMc`): what it has cost, the prices known before each charge, the checks that refuse a job
 * before it is charged past its limit, and the patch decisions that keep runs started before these rules as they were.
 */
import { condition } from '@temporalio/workflow';
import { patchedOrFolded } from './patches';
import { InvalidInputError } from '../api/errors';
import type { PackTuneSpec, TuneSpec } from '../contract/inputs';
import type { Prompt } from '../api/schemas';
import { costMcOf, costOf, PromptBudget, type Cost } from '../contract/cost';
import {
  invalidInput,
  jobOverBudget,
  packOverBudget,
  priceUnknown,
  tuneOverBudget,
  type UnpricedCreate,
} from '../contract/failures';
import { invalidOption, unpricedTraining, type ResolvedOptions } from '../contract/options';
import { service } from './activity-calls';
import type { PromptLedger, TuneWatch } from './state';
import type { PromptTarget } from './tune-kinds';

/**
 * Runs with this marker hold `maxCostMc` before every charge: a price known before each create (or the job refused),
 * a pack tune's price read once trained, and no completion above the limit. Runs started before it (no marker where
 * one of these would first change a command) go on as they started. Decided at each such place.
 */
export const MAX_COST_HOLDS = 'max-cost-holds';

/**
 * Runs with this marker create the prompts of a tune on branch fast without holding them to `maxCostMc`: the service
 * never charges them (spec 1), so their price, 0, is known beforehand. Runs started before it learned that price from
 * the first create, and created none once the cost had reached the limit (so `maxCostMc: 0` stopped every prompt).
 */
export const FAST_PROMPTS_FREE = 'fast-prompts-free';

/**
 * Runs with this marker read a prompt whose create answered without `cost_mc` once, before any other create starts,
 * and stop creating (failing PriceUnknown at the end) when the read does not say its price either. Runs started before
 * it went on creating with the price unknown. Decided at the first such answer: priced runs never record it.
 */
export const UNKNOWN_PRICE_STOPS = 'unknown-price-stops';

/** True for runs that hold maxCostMc; false when replaying a run started before (see MAX_COST_HOLDS). */
const maxCostHolds = (): boolean => patchedOrFolded(MAX_COST_HOLDS);

/** What the budget reads of its job. */
export interface BudgetOf {
  options(): ResolvedOptions;
  readonly tune: TuneWatch;
  readonly prompts: PromptLedger;
  /** The tune the run created, the only tune whose charge is the job's. */
  createdTuneId(): number | undefined;
  /** Counts a call to the service once it answered. */
  counted<T>(call: Promise<T>): Promise<T>;
}

/** The budget of one run. */
export class Budget {
  /** The tune's price as known before its create (maxCostMc): counted while no copy of the tune shows `cost_mc`. */
  private tunePriceMc: number | undefined;
  /** Prices of prompts whose create answered without one, as a read of the prompt said them. */
  private readonly pricesRead = new Map<number, number>();
  /** Prompts whose price neither the create's answer nor a read said: creates stopped at the first. */
  private readonly unpriced: UnpricedCreate[] = [];

  constructor(private readonly job: BudgetOf) {}

  /**
   * With `maxCostMc`, a training's price must be known before the tune is created: nothing on `branch: fast` (spec 1),
   * else the caller's `tuneCostMc` (the service publishes no price). Refused without it (InvalidOptions), and above
   * the limit (OverBudget), having created nothing.
   *
   * @example
   * job.budget.checkTunePrice(input.tune, input.prompts.length);
   */
  checkTunePrice(tune: TuneSpec, prompts: number): void {
    const options = this.job.options();
    const { maxCostMc, tuneCostMc } = options;
    if (maxCostMc === undefined) return;
    this.tunePriceMc = tune.branch === 'fast' ? 0 : tuneCostMc;
    // The rule a start is refused by too (tuneflow start, TuneflowClient): one check, in the contract.
    const unpriced = unpricedTraining(tune, options);
    if (unpriced !== undefined) {
      if (maxCostHolds()) throw invalidOption('tuneCostMc', unpriced);
      return;
    }
    if (tune.branch === 'fast' || tuneCostMc === undefined) return;
    if (tuneCostMc > maxCostMc) throw tuneOverBudget(tuneCostMc, maxCostMc, prompts);
  }

  /**
   * With `maxCostMc`, a pack's price must be known before the request: the pack's price for the class (read from the
   * pack), nothing on `branch: fast`. Refused when the pack names no price for the class or the request is on
   * existing tunes (InvalidOptions: the prompts it adds have no published price, and one request makes them all),
   * and when the price is above the limit (OverBudget), having created nothing.
   *
   * @example
   * await job.budget.checkPackPrice(input.packId, input.tune);
   */
  async checkPackPrice(packId: number, tune: PackTuneSpec): Promise<void> {
    const maxCostMc = this.job.options().maxCostMc;
    if (maxCostMc === undefined) return;
    if (tune.tune_ids !== undefined) {
      if (maxCostHolds())
        throw invalidOption(
          'maxCostMc',
          'cannot be held for a pack on existing tunes (tune.tune_ids): the service publishes no price for the ' +
            'prompts it adds, and one request makes them all; leave maxCostMc out',
        );
      return;
    }
    if (tune.branch === 'fast' && maxCostHolds()) {
      this.tunePriceMc = 0;
      return;
    }
    const name = tune.name as string;
    const priceMc = await this.job.counted(
      service.packPrice.executeWithOptions({ summary: `read pack ${packId}'s price for ${name}` }, [{ packId, name }]),
    );
    this.tunePriceMc = priceMc ?? undefined;
    if (priceMc === null && maxCostHolds())
      throw invalidOption(
        'maxCostMc',
        `cannot be held for pack ${packId}: it names no price for class ${name} (cost_mc_hash), and the service ` +
          'charges the pack when the tune is created; leave maxCostMc out',
      );
    if (priceMc !== null && priceMc > maxCostMc) throw packOverBudget(packId, name, priceMc, maxCostMc);
  }

  /**
   * A pack request on several existing tunes makes prompts on each, but a run follows one tune: the others' prompts
   * would be neither waited for, nor cleaned up, nor in the cost. Refused (InvalidInput), having created nothing.
   *
   * @example
   * job.budget.requireOneTune(input.tune.tune_ids);
   */
  requireOneTune(tuneIds: readonly number[] | undefined): void {
    if (tuneIds === undefined || tuneIds.length <= 1 || !maxCostHolds()) return;
    const rule = 'must name one tune: a run follows one tune (its prompts, its cost); start one packTune per tune';
    throw invalidInput(new InvalidInputError('input', [{ field: 'tune.tune_ids', rule }]));
  }

  /**
   * The prompts' budget on `target`, or none: without `maxCostMc`, and on a tune whose prompts are never charged.
   *
   * @example
   * const lanes = job.budget.forPrompts(target);
   */
  forPrompts(target: PromptTarget): PromptBudget | undefined {
    const maxCostMc = this.job.options().maxCostMc;
    const free = maxCostMc !== undefined && target.free && patchedOrFolded(FAST_PROMPTS_FREE);
    return maxCostMc === undefined || free ? undefined : new PromptBudget(maxCostMc);
  }

  /**
   * One lane of prompt creates under `lanes`: creates prompt `i` (of `images` images) once its price fits what the job
   * has spent and reserved; else adds `i` to `notCreated`. A create answered without its price is read once before
   * any other create starts (see PromptBudget).
   *
   * @example
   * await job.budget.createWithin(lanes, i, 1, () => createOne(i), notCreated);
   */
  async createWithin(
    lanes: PromptBudget,
    i: number,
    images: number,
    create: () => Promise<Prompt>,
    notCreated: number[],
  ): Promise<void> {
    // Lanes woken together: the first to run may take the only unpriced slot, so each checks again.
    do await condition(() => lanes.ready);
    while (!lanes.ready);
    const ticket = lanes.reserve(this.cost().mc, images);
    if (!ticket) {
      notCreated.push(i);
      return;
    }
    let costMc: number | undefined;
    try {
      const created = await create();
      costMc = costMcOf(created);
      if (costMc === undefined && patchedOrFolded(UNKNOWN_PRICE_STOPS)) {
        lanes.awaitPrice(ticket);
        costMc = await this.readPrice(created, i);
      }
    } finally {
      lanes.settle(ticket, costMc);
    }
  }

  /**
   * One read of a prompt whose create did not say its price: the price the read (or any copy the run holds by then: a
   * callback's read) says, or undefined, the prompt kept as unpriced.
   */
  private async readPrice(created: Prompt, position: number): Promise<number | undefined> {
    const summary = { summary: `read prompt ${created.id}'s price` };
    const read = await this.job.counted(
      service.retrievePrompt.executeWithOptions(summary, [
        { tuneId: created.tune_id, promptId: created.id, brief: true },
      ]),
    );
    this.job.prompts.adopt(read);
    const costMc = costMcOf(read) ?? costMcOf(this.job.prompts.all().find((p) => p.id === created.id));
    if (costMc === undefined) this.unpriced.push({ object: 'prompt', id: created.id, position });
    else this.pricesRead.set(created.id, costMc);
    return costMc;
  }

  /**
   * Right after the tune's create: fails with OverBudget when its charge alone passed `maxCostMc` (the service
   * charged more than `tuneCostMc`), before anything else is created. The tune is kept.
   *
   * @example
   * job.budget.requireTuneWithinBudget(input.prompts.length);
   */
  requireTuneWithinBudget(prompts: number): void {
    const maxCostMc = this.job.options().maxCostMc;
    if (maxCostMc === undefined || this.cost().mc <= maxCostMc || !maxCostHolds()) return;
    const notCreated = Array.from({ length: prompts }, (_, i) => i);
    throw this.overBudget(maxCostMc, notCreated);
  }

  /**
   * At the end, once what was made has settled: fails with PriceUnknown when a prompt's price stayed unknown (creates
   * stopped there), with OverBudget when prompts were left uncreated for `maxCostMc`, or when the job's cost passed
   * it (a first prompt's price is only learned from its answer).
   *
   * @example
   * job.budget.requireWithinBudget(notCreated);
   */
  requireWithinBudget(notCreated: readonly number[] = []): void {
    const maxCostMc = this.job.options().maxCostMc;
    if (maxCostMc === undefined) return;
    if (this.unpriced.length)
      throw priceUnknown(maxCostMc, this.cost(), {
        unpriced: [...this.unpriced],
        notCreated: [...notCreated],
        prompts: this.job.prompts.all(),
        tuneId: this.job.createdTuneId(),
        tuneCostMc: this.job.options().tuneCostMc,
      });
    if (notCreated.length === 0 && (this.cost().mc <= maxCostMc || !maxCostHolds())) return;
    throw this.overBudget(maxCostMc, [...notCreated]);
  }

  private overBudget(maxCostMc: number, notCreated: number[]) {
    return jobOverBudget(maxCostMc, this.cost(), {
      notCreated,
      prompts: this.job.prompts.all(),
      tuneId: this.job.createdTuneId(),
      tuneCostMc: this.job.options().tuneCostMc,
    });
  }

  /**
   * A pack's tune shows its price only in a full copy (the create's answer is the pack form, without `cost_mc`): read
   * once when none came, as for a FaceID pack, ready at creation.
   *
   * @example
   * await job.budget.readTunePrice();
   */
  async readTunePrice(): Promise<void> {
    const tuneId = this.job.createdTuneId();
    if (tuneId === undefined || costMcOf(this.job.tune.latest) !== undefined || !maxCostHolds()) return;
    const summary = { summary: `read tune ${tuneId}'s price` };
    this.job.tune.adoptFull(
      await this.job.counted(service.retrieveTune.executeWithOptions(summary, [{ tuneId, brief: true }])),
    );
  }

  /**
   * What the job has cost so far: the tune it created and its prompts, as the service charged them (`cost_mc`); a
   * tune no copy of which shows its charge counts at the price known before its create, a prompt at the price a read
   * of it said (none when no read did).
   *
   * @example
   * return { tune, prompts, cost: job.budget.cost() };
   */
  cost(): Cost {
    const tune = this.job.tune.latest;
    const created = tune !== undefined && tune.id === this.job.createdTuneId();
    let mc = created ? (costMcOf(tune) ?? this.tunePriceMc ?? 0) : 0;
    for (const prompt of this.job.prompts.all()) mc += costMcOf(prompt) ?? this.pricesRead.get(prompt.id) ?? 0;
    return costOf(mc);
  }
}
