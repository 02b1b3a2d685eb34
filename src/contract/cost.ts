/**
 * A job's cost, as the service charged it: the `cost_mc` (millicents, 100,000 = 1 USD) of the tune the run created
 * and of its prompts. Workflow code: pure arithmetic over the objects the run already holds.
 */

/** Money: millicents as the service counts them, and the same in US dollars. */
export interface Cost {
  mc: number;
  usd: number;
}

/** Millicents in one US dollar (service notes). */
export const MC_PER_USD = 100_000;

/**
 * @example
 * costOf(154_000); // { mc: 154000, usd: 1.54 }
 */
export function costOf(mc: number): Cost {
  return { mc, usd: mc / MC_PER_USD };
}

/**
 * An object's `cost_mc`: a number, or a numeric string (a copy signalled by hand may carry the service's rendering);
 * undefined when it has none.
 *
 * @example
 * costMcOf({ cost_mc: '2000.0' }); // 2000
 */
export function costMcOf(object: { cost_mc?: unknown } | undefined): number | undefined {
  const value = object?.cost_mc;
  const mc = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
  return typeof mc === 'number' && Number.isFinite(mc) && mc >= 0 ? mc : undefined;
}

/**
 * Decides, prompt by prompt, whether creating one more keeps the job within `maxCostMc`. The service publishes no
 * price list: a prompt's price per image is learned from the first create's answer (until then creates go one at a
 * time), and each further prompt is priced at the highest per-image price seen, in-flight ones included.
 *
 * A price is never assumed: a create answered without one is read once (`awaitPrice`, then `settle`), and no create
 * starts meanwhile; when the read does not say it either, no create starts again. So a create starts only when no
 * earlier one's price is unknown (none in flight before the first price, none answered without one), and the cost so
 * far, the estimates in flight and its own fit the limit: if each prompt costs at most the highest per-image price
 * seen times its images, the job stays within `maxCostMc`. Only a price learned from its own answer can pass it (the
 * first prompt's, or one dearer per image than any before), and the run then fails instead of completing.
 */
export class PromptBudget {
  /** Highest price per image seen, once a create has answered. */
  private perImageMc: number | undefined;
  /** Estimates of the creates in flight. */
  private reservedMc = 0;
  /** Creates in flight whose price could not be estimated (before the first answer). */
  private unpriced = 0;
  /** Creates answered without their price, whose read has not answered. */
  private priceReads = 0;
  private exhausted = false;

  constructor(private readonly maxMc: number) {}

  /**
   * True when a create may start now without waiting for a price: one at a time until one is known, none while a
   * create answered without its price is being read.
   */
  get ready(): boolean {
    return (this.perImageMc !== undefined || this.unpriced === 0) && this.priceReads === 0;
  }

  /**
   * A ticket for a prompt of `images` images when it fits, given what the job has spent (its estimate reserved);
   * undefined when it does not. Once one does not fit, or a price stayed unknown, none after it does: the job stops
   * creating prompts.
   */
  reserve(spentMc: number, images: number): BudgetTicket | undefined {
    const priced = this.perImageMc !== undefined;
    const estimateMc = (this.perImageMc ?? 0) * images;
    if (this.exhausted || spentMc >= this.maxMc || spentMc + this.reservedMc + estimateMc > this.maxMc) {
      this.exhausted = true;
      return undefined;
    }
    this.reservedMc += estimateMc;
    if (!priced) this.unpriced++;
    return { estimateMc, priced, images };
  }

  /** The create of `ticket` answered without its price: no create starts until `settle` says what it cost. */
  awaitPrice(ticket: BudgetTicket): void {
    ticket.awaitingPrice = true;
    this.priceReads++;
  }

  /**
   * A create answered (`costMc`, its price) or failed (undefined): its estimate is released, its price learned. A
   * create whose price was awaited and is still unknown stops every later create.
   */
  settle(ticket: BudgetTicket, costMc: number | undefined): void {
    this.reservedMc -= ticket.estimateMc;
    if (!ticket.priced) this.unpriced--;
    if (ticket.awaitingPrice) {
      this.priceReads--;
      if (costMc === undefined) this.exhausted = true;
    }
    if (costMc !== undefined) this.perImageMc = Math.max(this.perImageMc ?? 0, costMc / Math.max(1, ticket.images));
  }
}

/** One prompt create let through by a PromptBudget. */
export interface BudgetTicket {
  estimateMc: number;
  priced: boolean;
  images: number;
  /** Its answer did not say its price: read once before any other create starts. */
  awaitingPrice?: boolean;
}
