/**
 * `spendLedger`: one tenant's spend over one window (src/contract/spend.ts), under `tuneflow:ledger:<tenant>:<window>`.
 */
import {
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  condition,
  continueAsNew,
  patched,
  proxyActivities,
  setHandler,
  setWorkflowOptions,
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
 * and again, at most once a minute, when a worker reserves under a higher one), take carried state only from their
 * own continue-as-new (not a cron run's or a retry's), and refuse to run on a schedule or as a retry. Ledgers before it
 * took the ceiling each reservation carried.
 */
export const LEDGER_CEILING_FROM_OPERATOR = 'ledger-ceiling-from-operator';

/**
 * The operator's ceiling, read on the ledger's own queue (the jobs'), not the bookkeeping queue: the reservations that
 * wait on this read hold the bookkeeping queue's activity slots, so the read takes a slot of another pool. One read a
 * ledger run, and at most one a minute after: a share of the service's rate too small to count.
 */
const operator = proxyActivities<SpendActivities>(ledgerCeilingOptions);

/**
 * Updates handled by one run before it continues as new, well under the server's 2,000 per run (and its history
 * limits): each accepted update adds two events.
 */
export const LEDGER_UPDATES_PER_RUN = 500;

/**
 * Open reservations a ledger holds at most: made-up reservations (at no price, under IDs of anyone's making) cannot
 * grow the state each continue-as-new carries past the server's payload limit.
 */
export const LEDGER_OPEN_MAX = 10_000;

/** How often a reservation under a higher ceiling than the operator's may have the ledger read it again. */
const CEILING_REREAD_MS = 60 * 1000;

/** How long a ledger outlives its window once nothing is reserved: late commits and releases still find it. */
const LINGER_MS = 24 * 60 * 60 * 1000;

/**
 * Holds a tenant's spend for its window: reservations (refused over the operator's ceiling by the update's validator,
 * so a refusal leaves no history, but by the handler while the ceiling is being read), commits and releases, each
 * answered with the sums. Each reservation is decided and made in one step, after any read of the ceiling it waits
 * for, so of many concurrent reservations exactly those that fit are accepted. Reached by update-with-start from the jobs'
 * activities; continues as new carrying its state when the server suggests it or after `LEDGER_UPDATES_PER_RUN`
 * updates; ends a day after its window closed with nothing reserved.
 *
 * @example
 * await client.workflow.getHandle('tuneflow:ledger:shop:2026-11-27').query(spendQuery);
 */
export async function spendLedger(carried?: LedgerState): Promise<Spend> {
  const { workflowId, continuedFromExecutionRunId, attempt, cronSchedule } = workflowInfo();
  const own = ledgerOfWorkflowId(workflowId);
  const fromOperator = patched(LEDGER_CEILING_FROM_OPERATOR);
  // Sums only the ledger's own continue-as-new carries: a raw start with a state is anyone's claim of what was spent,
  // and a cron run or a retry is handed its first run's input again (with continuedFromExecutionRunId set).
  const startedOwn = !fromOperator || (attempt === 1 && !cronSchedule);
  const carriedOwn = !carried || !fromOperator || continuedFromExecutionRunId !== undefined;
  if (
    !own ||
    !startedOwn ||
    !carriedOwn ||
    (carried && (carried.tenant !== own.tenant || carried.window !== own.window))
  )
    throw ApplicationFailure.create({
      type: FailureType.invalidInput,
      nonRetryable: true,
      message: `${JSON.stringify(workflowId)} is no ledger's ID (tuneflow:ledger:<tenant>:<window>, with the ledger's own state)`,
    });
  const ledger = carried ? new SpendLedger(carried) : SpendLedger.empty(own.tenant, own.window);
  let handled = 0;

  // The operator's ceiling, once read; re-read (one read at a time, at most once a minute) when a reservation comes
  // under a higher one, the sign of a ceiling raised since. An update's own ceiling only ever lowers it. Not
  // cancellable, as nothing of the ledger is: a cancelled ledger would leave its tenant's next job an empty one.
  let operatorMc: number | undefined;
  let readAtMs = -Infinity;
  let reading: Promise<number> | undefined;
  const readCeiling = (): Promise<number> =>
    (reading ??= CancellationScope.nonCancellable(() =>
      operator.ledgerCeiling({ tenant: own.tenant, window: own.window }),
    ).then((mc) => {
      reading = undefined;
      operatorMc = mc;
      readAtMs = Date.now();
      ledger.state.ceilingMc = mc;
      return mc;
    }));
  // A reservation the stored ceiling cannot decide: none read yet, or one under a higher ceiling, once a minute.
  const undecided = (ceilingMc: number) =>
    operatorMc === undefined || (ceilingMc > operatorMc && Date.now() - readAtMs >= CEILING_REREAD_MS);
  if (fromOperator) void readCeiling();

  setHandler(spendQuery, () => ledger.spend());
  setHandler(
    reserveSpendUpdate,
    async ({ id, priceMc, ceilingMc }) => {
      handled++;
      if (!fromOperator) return ledger.reserve(id, priceMc, ceilingMc);
      const ceiling = undecided(ceilingMc) ? await readCeiling() : (operatorMc as number);
      const refusal = ledger.refusal(id, priceMc, Math.min(ceiling, ceilingMc));
      if (refusal) throw refusal;
      return ledger.reserve(id, priceMc, ceiling);
    },
    {
      validator: ({ id, priceMc, ceilingMc }) => {
        if (typeof id !== 'string' || !id || !Number.isSafeInteger(priceMc) || priceMc < 0)
          throw new TypeError('a reservation needs an id and a price in whole millicents');
        if (fromOperator && typeof ceilingMc !== 'number') throw new TypeError('a reservation needs a ceiling');
        if (fromOperator && !(id in ledger.state.open) && Object.keys(ledger.state.open).length >= LEDGER_OPEN_MAX)
          throw new RangeError(`a ledger holds at most ${LEDGER_OPEN_MAX} open reservations`);
        // Refused here, no history; undecided (the operator's not read yet, or maybe raised since), the handler decides.
        if (fromOperator && undecided(ceilingMc)) return;
        const refusal = ledger.refusal(
          id,
          priceMc,
          fromOperator ? Math.min(operatorMc as number, ceilingMc) : ceilingMc,
        );
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
  const ended = await CancellationScope.nonCancellable(async () => {
    for (;;) {
      const left = endMs - Date.now();
      await condition(() => full() || done(), left > 0 ? left : '1 hour');
      if (full()) break;
      if (done()) {
        await condition(allHandlersFinished);
        return true;
      }
    }
    await condition(allHandlersFinished);
    return false;
  });
  if (ended) return ledger.spend();
  return continueAsNew<typeof spendLedger>(ledger.state);
}

/**
 * On a versioned worker the ledger moves to the current build (auto-upgrade): it lives a whole budget window, and jobs
 * of every build reserve on it, so pinned it would hold its build's workers up and the new build's jobs waiting. Its
 * changes are patched, as every workflow's are. A worker without a deployment (whose task may not name a behaviour at
 * all) runs it unversioned. No command comes of it: histories replay as before.
 */
setWorkflowOptions(
  () => (workflowInfo().currentDeploymentVersion?.deploymentName ? { versioningBehavior: 'AUTO_UPGRADE' } : {}),
  spendLedger,
);
