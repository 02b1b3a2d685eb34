/**
 * `spendLedger`: one tenant's spend over one window (src/contract/spend.ts), under `tuneflow:ledger:<tenant>:<window>`.
 */
import {
  allHandlersFinished,
  ApplicationFailure,
  condition,
  continueAsNew,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
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

/**
 * Updates handled by one run before it continues as new, well under the server's 2,000 per run (and its history
 * limits): each accepted update adds two events.
 */
export const LEDGER_UPDATES_PER_RUN = 500;

/** How long a ledger outlives its window once nothing is reserved: late commits and releases still find it. */
const LINGER_MS = 24 * 60 * 60 * 1000;

/**
 * Holds a tenant's spend for its window: reservations (refused over the ceiling by the update's validator, so a refusal
 * leaves no history), commits and releases, each answered with the sums. Updates run one at a time in the run's order,
 * so of many concurrent reservations exactly those that fit are accepted. Reached by update-with-start from the jobs'
 * activities; continues as new carrying its state when the server suggests it or after `LEDGER_UPDATES_PER_RUN`
 * updates; ends a day after its window closed with nothing reserved.
 *
 * @example
 * await client.workflow.getHandle('tuneflow:ledger:shop:2026-11-27').query(spendQuery);
 */
export async function spendLedger(carried?: LedgerState): Promise<Spend> {
  const { workflowId } = workflowInfo();
  const own = ledgerOfWorkflowId(workflowId);
  if (!own || (carried && (carried.tenant !== own.tenant || carried.window !== own.window)))
    throw ApplicationFailure.create({
      type: FailureType.invalidInput,
      nonRetryable: true,
      message: `${JSON.stringify(workflowId)} is no ledger's ID (tuneflow:ledger:<tenant>:<window>, with the ledger's own state)`,
    });
  const ledger = carried ? new SpendLedger(carried) : SpendLedger.empty(own.tenant, own.window);
  let handled = 0;
  setHandler(spendQuery, () => ledger.spend());
  setHandler(
    reserveSpendUpdate,
    ({ id, priceMc, ceilingMc }) => {
      handled++;
      return ledger.reserve(id, priceMc, ceilingMc);
    },
    {
      validator: ({ id, priceMc, ceilingMc }) => {
        if (typeof id !== 'string' || !id || !Number.isSafeInteger(priceMc) || priceMc < 0)
          throw new TypeError('a reservation needs an id and a price in whole millicents');
        const refusal = ledger.refusal(id, priceMc, ceilingMc);
        if (refusal) throw refusal;
      },
    },
  );
  setHandler(commitSpendUpdate, ({ id, costMc }) => {
    handled++;
    return ledger.commit(id, costMc);
  });
  setHandler(releaseSpendUpdate, ({ id }) => {
    handled++;
    return ledger.release(id);
  });
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
