/**
 * A job's share of its tenant's spend ceiling (src/contract/spend.ts): each paid create reserved on the tenant's ledger
 * before it is made, committed with what the service charged, released when it was not made or cost less; whatever
 * is still reserved released when the run fails or is cancelled. Only runs whose tenant has a budget (the run's first
 * local activity says so) make any of these commands.
 */
import { ActivityFailure, ApplicationFailure, CancellationScope } from '@temporalio/workflow';
import { patchedOrFolded } from './patches';
import { tenantOverBudget, type TenantOverBudgetDetails } from '../contract/spend';
import { FailureType } from '../contract/failures';
import { ledger } from './activity-calls';

/**
 * Runs with this marker reserve each paid create on their tenant's ledger (a tenant with a budget,
 * TUNEFLOW_TENANT_BUDGETS). Decided at the first reservation, long after the run's first local activity (a patch asked
 * in the activation that resolves a local activity is lost): runs of tenants without a budget never record it.
 */
export const TENANT_SPEND_HELD = 'tenant-spend-held';

/** One run's reservations: by the create they cover, the window they were made in. */
export class TenantSpend {
  /** Whether the run's tenant has a budget: undefined until the run's first local activity told (or failed to). */
  #held: boolean | undefined = false;
  readonly #open = new Map<string, string>();
  /** What each open reservation holds. */
  readonly #prices = new Map<string, number>();

  /** True where the run makes no ledger calls: its tenant has no budget, or the run started before budgets. */
  get off(): boolean {
    return this.#held === false;
  }

  /** True while a reservation is open. */
  get holding(): boolean {
    return this.#open.size > 0;
  }

  /** From the run's first local activity: true or false; undefined when it could not tell (reservations ask). */
  set held(held: boolean | undefined) {
    this.#held = held;
  }

  /**
   * Reserves `priceMc` for `create` before it is made; fails OverBudget naming the tenant's window when it does not
   * fit. Not cancellable: a reservation the ledger accepted is always known to the run, which releases it.
   *
   * @example
   * await job.spend.reserve('tune', 150_000);
   */
  async reserve(create: string, price: Price): Promise<void> {
    if (this.#held === false) return;
    if (!patchedOrFolded(TENANT_SPEND_HELD)) {
      this.#held = false;
      return;
    }
    const priceMc = typeof price === 'number' ? price : await price();
    const reserving = CancellationScope.nonCancellable(() =>
      ledger.reserveSpend.executeWithOptions({ summary: `reserve ${priceMc} mc for the ${create}` }, [
        { create, priceMc, atMs: Date.now() },
      ]),
    );
    let window: string | null;
    try {
      ({ window } = await reserving);
    } catch (err) {
      const cause = err instanceof ActivityFailure ? err.cause : err;
      if (cause instanceof ApplicationFailure && cause.type === FailureType.overBudget)
        throw tenantOverBudget(cause.details?.[0] as TenantOverBudgetDetails);
      throw err;
    }
    if (window === null) this.#held = false;
    else {
      this.#open.set(create, window);
      this.#prices.set(create, priceMc);
    }
  }

  /** Commits what the service charged for `create` (its reservation settled); nothing for a create not reserved. */
  async commit(create: string, costMc: number): Promise<void> {
    const window = this.#open.get(create);
    if (window === undefined) return;
    this.#open.delete(create);
    await CancellationScope.nonCancellable(() =>
      ledger.commitSpend.executeWithOptions({ summary: `commit ${costMc} mc for the ${create}` }, [
        { create, window, costMc },
      ]),
    );
  }

  /** Releases `create`'s reservation: it was not made. */
  async release(create: string): Promise<void> {
    const window = this.#open.get(create);
    if (window === undefined) return;
    this.#open.delete(create);
    await CancellationScope.nonCancellable(() =>
      ledger.releaseSpend.executeWithOptions({ summary: `release the ${create}'s reservation` }, [{ create, window }]),
    );
  }

  /** Releases every reservation still open: the run failed or was cancelled before those creates were paid. */
  async releaseAll(): Promise<void> {
    await Promise.all([...this.#open.keys()].map((create) => this.release(create)));
  }

  /**
   * `create`, reserved at `priceMc` first and settled with its answer's cost (`costOf`; the reservation is committed
   * whole when the answer does not say): released when the create fails.
   *
   * @example
   * const tune = await job.spend.around('tune', 150_000, costMcOf, () => createTune());
   */
  around<T>(create: string, price: Price, costOf: (made: T) => number | undefined, make: () => Promise<T>): Promise<T> {
    // No ledger: the create as before, not one microtask later (commands keep their order).
    return this.off ? make() : this.reservedAround(create, price, costOf, make);
  }

  private async reservedAround<T>(
    create: string,
    price: Price,
    costOf: (made: T) => number | undefined,
    make: () => Promise<T>,
  ): Promise<T> {
    await this.reserve(create, price);
    let made: T;
    try {
      made = await make();
    } catch (err) {
      await this.release(create);
      throw err;
    }
    const reservedMc = this.#prices.get(create) ?? 0;
    await this.commit(create, costOf(made) ?? reservedMc);
    return made;
  }
}

/** A create's price: known, or found out (a read, or a refusal) only where the run reserves it. */
export type Price = number | (() => number | Promise<number>);
