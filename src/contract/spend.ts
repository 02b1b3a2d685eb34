/**
 * A tenant's spend over a window (a UTC day or month): the ceiling the operator sets (TUNEFLOW_TENANT_BUDGETS), the
 * ledger that holds it (one `spendLedger` workflow per tenant and window), and its arithmetic. A job reserves each
 * create's price before the create, commits what the service charged once it answered, and releases what it did not
 * spend. Sandbox-safe: the ledger workflow and the jobs read it; pure arithmetic, no clock but the one passed in.
 */
import { ApplicationFailure, defineQuery, defineUpdate } from '@temporalio/workflow';
import { RESERVED_KEY_PREFIX } from './keys';
import { FailureType } from './failures';

/** The windows a budget is counted over, in UTC. */
export const SpendPeriod = { day: 'day', month: 'month' } as const;
export type SpendPeriod = (typeof SpendPeriod)[keyof typeof SpendPeriod];

/** A tenant's ceiling: at most `ceilingMc` millicents committed and reserved within each window of `period`. */
export interface TenantBudget {
  ceilingMc: number;
  period: SpendPeriod;
}

/**
 * The window of `period` that holds `atMs` (UTC): `2026-11-27` for a day, `2026-11` for a month.
 *
 * @example
 * spendWindow('month', Date.UTC(2026, 10, 27)); // '2026-11'
 */
export function spendWindow(period: SpendPeriod, atMs: number): string {
  const day = new Date(atMs).toISOString().slice(0, 10);
  return period === SpendPeriod.day ? day : day.slice(0, 7);
}

/**
 * When a window ends (its next window's first millisecond, UTC); undefined for a string that is no window.
 *
 * @example
 * windowEndMs('2026-11'); // Date.UTC(2026, 11, 1)
 */
export function windowEndMs(window: string): number | undefined {
  const match = /^(\d{4})-(\d{2})(?:-(\d{2}))?$/.exec(window);
  if (!match) return undefined;
  const [year, month, day] = [Number(match[1]), Number(match[2]) - 1, match[3] && Number(match[3])];
  const end = day ? Date.UTC(year, month, day + 1) : Date.UTC(year, month + 1, 1);
  return Number.isNaN(end) || spendWindow(day ? 'day' : 'month', end - 1) !== window ? undefined : end;
}

/**
 * The period of a window: a day (`2026-11-27`) or a month (`2026-11`).
 *
 * @example
 * spendPeriodOf('2026-11'); // 'month'
 */
export const spendPeriodOf = (window: string): SpendPeriod => (window.length > 7 ? SpendPeriod.day : SpendPeriod.month);

const LEDGER_PREFIX = `${RESERVED_KEY_PREFIX}ledger:`;

/**
 * The ledger's workflow ID for a tenant's window. A job's ID never starts so (jobOfWorkflowId refuses it).
 *
 * @example
 * ledgerWorkflowId('shop', '2026-11-27'); // 'tuneflow:ledger:shop:2026-11-27'
 */
export function ledgerWorkflowId(tenant: string, window: string): string {
  return `${LEDGER_PREFIX}${tenant}:${window}`;
}

/** The tenant and window of a ledger's workflow ID; undefined for any other ID. */
export function ledgerOfWorkflowId(workflowId: string): { tenant: string; window: string } | undefined {
  if (!workflowId.startsWith(LEDGER_PREFIX)) return undefined;
  const rest = workflowId.slice(LEDGER_PREFIX.length);
  const at = rest.lastIndexOf(':');
  const [tenant, window] = [rest.slice(0, at), rest.slice(at + 1)];
  return at > 0 && windowEndMs(window) !== undefined ? { tenant, window } : undefined;
}

/** What a ledger holds; carried whole across continue-as-new. */
export interface LedgerState {
  tenant: string;
  window: string;
  /** The ceiling the latest reservation was made under (the operator's, as the reserving worker reads it). */
  ceilingMc: number;
  /** Every reservation ever accepted, summed (each once, however often it was asked). */
  reservedMc: number;
  /** What the service charged, as the jobs confirmed it. */
  committedMc: number;
  /** What reservations held and the jobs did not spend (a create that cost less, or was never made). */
  releasedMc: number;
  /** What commits charged beyond their reservation (the service charged more than the price known before). */
  overMc: number;
  /** Open reservations by reservation ID (a digest of the job's run and the create it covers). */
  open: Record<string, number>;
  /** Reservations accepted, over the ledger's whole life. */
  reservations: number;
}

/** What the ledger answers a query or an update with: its sums, and what is open. */
export interface Spend {
  tenant: string;
  window: string;
  ceilingMc: number;
  committedMc: number;
  /** Held now by open reservations. */
  reservedMc: number;
  releasedMc: number;
  /** Every reservation accepted, summed: reservedTotalMc + overMc = committedMc + releasedMc + reservedMc. */
  reservedTotalMc: number;
  overMc: number;
  openReservations: number;
  reservations: number;
}

/** The details of a reservation refused: the tenant, its window and where the ledger stood. */
export interface TenantOverBudgetDetails {
  tenant: string;
  window: string;
  ceilingMc: number;
  committedMc: number;
  reservedMc: number;
  /** The price the refused create would have reserved. */
  priceMc: number;
}

/** A reservation refused: OverBudget naming the tenant and its window, non-retryable. */
export function tenantOverBudget(details: TenantOverBudgetDetails): ApplicationFailure {
  const { tenant, window, ceilingMc, committedMc, reservedMc, priceMc } = details;
  return ApplicationFailure.create({
    type: FailureType.overBudget,
    nonRetryable: true,
    message:
      `Tenant ${tenant}'s budget for ${window} is ${ceilingMc} mc: ${committedMc} mc spent and ${reservedMc} mc ` +
      `reserved leave no room for ${priceMc} mc; nothing was created for it`,
    details: [details],
  });
}

/** The ledger's arithmetic over its state (the workflow keeps the state; this decides). */
export class SpendLedger {
  constructor(readonly state: LedgerState) {}

  /** An empty ledger for a tenant's window. */
  static empty(tenant: string, window: string): SpendLedger {
    const state: LedgerState = {
      tenant,
      window,
      ceilingMc: 0,
      reservedMc: 0,
      committedMc: 0,
      releasedMc: 0,
      overMc: 0,
      open: {},
      reservations: 0,
    };
    return new SpendLedger(state);
  }

  /** Held now by open reservations. */
  get heldMc(): number {
    return Object.values(this.state.open).reduce((sum, mc) => sum + mc, 0);
  }

  /**
   * Why reservation `id` of `priceMc` is refused under `ceilingMc`; undefined when it fits (or is open already: a
   * retried reservation is answered as the first was).
   */
  refusal(id: string, priceMc: number, ceilingMc: number): ApplicationFailure | undefined {
    if (id in this.state.open) return undefined;
    const { tenant, window, committedMc } = this.state;
    const reservedMc = this.heldMc;
    if (committedMc + reservedMc + priceMc <= ceilingMc) return undefined;
    return tenantOverBudget({ tenant, window, ceilingMc, committedMc, reservedMc, priceMc });
  }

  /** Reserves `priceMc` under `id` (once: a retried reservation changes nothing). Check `refusal` first. */
  reserve(id: string, priceMc: number, ceilingMc: number): Spend {
    this.state.ceilingMc = ceilingMc;
    if (!(id in this.state.open)) {
      this.state.open[id] = priceMc;
      this.state.reservedMc += priceMc;
      this.state.reservations++;
    }
    return this.spend();
  }

  /**
   * Settles reservation `id` with what the service charged: committed, and the rest of the reservation released (a
   * charge above it is committed whole, the excess counted as `overMc`). Unknown IDs (settled before) change nothing.
   */
  commit(id: string, costMc: number): Spend {
    const heldMc = this.state.open[id];
    if (heldMc === undefined) return this.spend();
    delete this.state.open[id];
    this.state.committedMc += costMc;
    if (costMc <= heldMc) this.state.releasedMc += heldMc - costMc;
    else this.state.overMc += costMc - heldMc;
    return this.spend();
  }

  /** Releases reservation `id` whole (the create was never made, or made nothing to pay). */
  release(id: string): Spend {
    const heldMc = this.state.open[id];
    if (heldMc === undefined) return this.spend();
    delete this.state.open[id];
    this.state.releasedMc += heldMc;
    return this.spend();
  }

  spend(): Spend {
    const { tenant, window, ceilingMc, committedMc, releasedMc, overMc, reservations } = this.state;
    const reservedMc = this.heldMc;
    return {
      tenant,
      window,
      ceilingMc,
      committedMc,
      reservedMc,
      releasedMc,
      reservedTotalMc: this.state.reservedMc,
      overMc,
      openReservations: Object.keys(this.state.open).length,
      reservations,
    };
  }
}

/** A reservation: `id` (the activity's digest of the job's run and its create), the create's price, the ceiling. */
export interface ReserveSpend {
  id: string;
  priceMc: number;
  ceilingMc: number;
}

/** Reserves a create's price, or refuses it (OverBudget, by the validator: a refusal leaves no history). */
export const reserveSpendUpdate = defineUpdate<Spend, [ReserveSpend]>('reserveSpend');
/** Settles a reservation with what the service charged. */
export const commitSpendUpdate = defineUpdate<Spend, [{ id: string; costMc: number }]>('commitSpend');
/** Releases a reservation whole. */
export const releaseSpendUpdate = defineUpdate<Spend, [{ id: string }]>('releaseSpend');
/** The ledger's sums and what is open. */
export const spendQuery = defineQuery<Spend>('spend');
