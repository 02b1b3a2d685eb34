/**
 * `spendLedger`: one tenant's spend over one window (src/contract/spend.ts), under `tuneflow:ledger:<tenant>:<window>`.
 */
import {
  allHandlersFinished,
  ApplicationFailure,
  condition,
  continueAsNew,
  patched,
  proxyActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { SpendActivities } from '../activities/spend';
import {
  commitSpendUpdate,
  ledgerOfWorkflowId,
  releaseSpendUpdate,
  reserveSpendUpdate,
  spendQuery,
  SpendLedger,
  windowEndMs,
  type LedgerState,
  type Spend,
} from '../contract/spend';
import { FailureType } from '../contract/failures';
import { ledgerCeilingOptions } from './policies';

/**
 * Ledgers with this marker read their ceiling from the operator's configuration (an activity at each run's start,
 * and again when a worker reserves under a higher one), take carried state only from their own continue-as-new, and
 * refuse commits and releases of no whole millicents. Ledgers before it took the ceiling each reservation carried.
 */
export const LEDGER_CEILING_FROM_OPERATOR = 'ledger-ceiling-from-operator';

const operator = proxyActivities<SpendActivities>(ledgerCeilingOptions);

/**
 * Updates handled by one run before it continues as new, well under the server's 2,000 per run (and its history
 * limits): each accepted update adds two events.
 */
export const LEDGER_UPDATES_PER_RUN = 500;

/** How long a ledger outlives its window once nothing is reserved: late commits and releases still find it. */
const LINGER_MS = 24 * 60 * 60 * 1000;

/**
 * Holds a tenant's spend for its window: reservations (refused over the operator's ceiling by the update's validator,
 * so a refusal leaves no history, but by the handler while the ceiling is being read), commits and releases, each
 * answered with the sums. Updates run one at a time in the run's order,
 * so of many concurrent reservations exactly those that fit are accepted. Reached by update-with-start from the jobs'
 * activities; continues as new carrying its state when the server suggests it or after `LEDGER_UPDATES_PER_RUN`
 * updates; ends a day after its window closed with nothing reserved.
 *
 * @example
 * await client.workflow.getHandle('tuneflow:ledger:shop:2026-11-27').query(spendQuery);
 */
export async function spendLedger(carried?: LedgerState): Promise<Spend> {
  const { workflowId, continuedFromExecutionRunId } = workflowInfo();
  const own = ledgerOfWorkflowId(workflowId);
  const fromOperator = patched(LEDGER_CEILING_FROM_OPERATOR);
  // Sums only the ledger's own continue-as-new carries: a raw start with a state is anyone's claim of what was spent.
  const carriedOwn = !carried || (fromOperator ? continuedFromExecutionRunId !== undefined : true);
  if (!own || !carriedOwn || (carried && (carried.tenant !== own.tenant || carried.window !== own.window)))
    throw ApplicationFailure.create({
      type: FailureType.invalidInput,
      nonRetryable: true,
      message: `${JSON.stringify(workflowId)} is no ledger's ID (tuneflow:ledger:<tenant>:<window>, with the ledger's own state)`,
    });
  const ledger = carried ? new SpendLedger(carried) : SpendLedger.empty(own.tenant, own.window);
  let handled = 0;

  // The operator's ceiling, once read; re-read (one read at a time) when a reservation comes under a higher one, the
  // sign of a ceiling raised since. An update's own ceiling only ever lowers it: whoever sends one gains nothing by it.
  let operatorMc: number | undefined;
  let reading: Promise<number> | undefined;
  const readCeiling = (): Promise<number> =>
    (reading ??= operator.ledgerCeiling({ tenant: own.tenant, window: own.window }).then((mc) => {
      reading = undefined;
      operatorMc = mc;
      ledger.state.ceilingMc = mc;
      return mc;
    }));
  if (fromOperator) void readCeiling();

  setHandler(spendQuery, () => ledger.spend());
  setHandler(
    reserveSpendUpdate,
    async ({ id, priceMc, ceilingMc }) => {
      handled++;
      if (!fromOperator) return ledger.reserve(id, priceMc, ceilingMc);
      const ceiling = operatorMc === undefined || ceilingMc > operatorMc ? await readCeiling() : operatorMc;
      const refusal = ledger.refusal(id, priceMc, Math.min(ceiling, ceilingMc));
      if (refusal) throw refusal;
      return ledger.reserve(id, priceMc, ceiling);
    },
    {
      validator: ({ id, priceMc, ceilingMc }) => {
        if (typeof id !== 'string' || !id || !Number.isSafeInteger(priceMc) || priceMc < 0)
          throw new TypeError('a reservation needs an id and a price in whole millicents');
        if (fromOperator && typeof ceilingMc !== 'number') throw new TypeError('a reservation needs a ceiling');
        // Refused here, no history; unsure (the operator's not read yet, or maybe raised since), the handler decides.
        if (fromOperator && (operatorMc === undefined || ceilingMc > operatorMc)) return;
        const refusal = ledger.refusal(id, priceMc, ceilingMc);
        if (refusal) throw refusal;
      },
    },
  );
  // A commit of less than nothing would give a tenant room it never had.
  const settled = (id: unknown) => {
    if (typeof id !== 'string' || !id) throw new TypeError("a commit or release needs the reservation's id");
  };
  setHandler(
    commitSpendUpdate,
    ({ id, costMc }) => {
      handled++;
      return ledger.commit(id, costMc);
    },
    {
      validator: ({ id, costMc }) => {
        settled(id);
        if (!Number.isSafeInteger(costMc) || costMc < 0)
          throw new TypeError('a commit needs what the service charged in whole millicents, 0 or more');
      },
    },
  );
  setHandler(
    releaseSpendUpdate,
    ({ id }) => {
      handled++;
      return ledger.release(id);
    },
    { validator: ({ id }) => settled(id) },
  );
  const endMs = (windowEndMs(own.window) as number) + LINGER_MS;
  const done = () => Date.now() >= endMs && ledger.heldMc === 0;
  const full = () => handled >= LEDGER_UPDATES_PER_RUN || workflowInfo().continueAsNewSuggested;
  for (;;) {
    const left = endMs - Date.now();
    await condition(() => full() || done(), left > 0 ? left : '1 hour');
    if (full()) break;
    if (done()) {
      await condition(allHandlersFinished);
      return ledger.spend();
    }
  }
  await condition(allHandlersFinished);
  return continueAsNew<typeof spendLedger>(ledger.state);
}
