/**
 * A job's side of its tenant's spend ceiling: reserve a create's price on the tenant's ledger before the create, commit
 * what the service charged, release what was not spent. Each is one update-with-start of the ledger workflow, whose
 * update ID is a digest of the job's workflow ID, its run ID and the create it covers: a retried activity (a worker
 * killed, a lost answer) asks again under the same ID, and the ledger counts it once.
 *
 * The server holds at most 10 updates of one workflow in flight (`history.maxInFlightUpdates`) and answers the rest
 * ResourceExhausted, which the client retries for up to 10 s before the activity retries too: a flood of a tenant's
 * jobs (500 at once) would keep the ledger's updates that fit from ever being handled. So a worker sends at most
 * `LEDGER_UPDATES_IN_FLIGHT` updates to one ledger at a time and queues the rest in order, in process.
 */
import { createHash } from 'node:crypto';
import { activityInfo, Context, getClient } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { WithStartWorkflowOperation, WorkflowUpdateFailedError } from '@temporalio/client';
import {
  commitSpendUpdate,
  ledgerWorkflowId,
  releaseSpendUpdate,
  reserveSpendUpdate,
  spendPeriodOf,
  spendWindow,
  windowEndMs,
  type Spend,
} from '../contract/spend';
import { DEFAULT_TENANT, jobOfWorkflowId } from '../contract/tenants';
import { jobQueueOf } from '../contract/task-queues';
import { startPriority, type Tenants } from '../tenants';

/**
 * Updates one worker (its plugin's activities) has in flight to one ledger: two workers stay under the server's 10, and
 * each of the ledger's workflow tasks still carries several.
 */
export const LEDGER_UPDATES_IN_FLIGHT = 4;

/**
 * Runs calls keyed by ledger, at most `LEDGER_UPDATES_IN_FLIGHT` of a key at once, the rest in the order they came. A
 * call whose `signal` aborts while it waits (its activity cancelled, or past its timeout) leaves the queue, rejected
 * with the signal's reason: its retry would otherwise wait behind it.
 */
export class LedgerLanes {
  readonly #lanes = new Map<string, { running: number; waiting: (() => void)[] }>();

  async run<T>(key: string, call: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    signal?.throwIfAborted();
    let lane = this.#lanes.get(key);
    if (!lane) this.#lanes.set(key, (lane = { running: 0, waiting: [] }));
    const queue = lane.waiting;
    if (lane.running < LEDGER_UPDATES_IN_FLIGHT) lane.running++;
    else
      await new Promise<void>((resolve, reject) => {
        const leave = () => {
          queue.splice(queue.indexOf(take), 1);
          reject(signal?.reason);
        };
        const take = () => {
          signal?.removeEventListener('abort', leave);
          resolve();
        };
        queue.push(take);
        signal?.addEventListener('abort', leave, { once: true });
      });
    try {
      return await call();
    } finally {
      // A call that ends hands its place to the next one waiting; the last one out drops the lane.
      const next = lane.waiting.shift();
      if (next) next();
      else if (--lane.running === 0) this.#lanes.delete(key);
    }
  }

  /** Ledgers with calls running or waiting (for tests). */
  get size(): number {
    return this.#lanes.size;
  }
}

/** The create a reservation covers, in its run: `tune`, `pack`, `prompt-3`. */
export interface SpendOf {
  create: string;
}

/** Where a reservation was made: the ledger's window, or null for a tenant without a budget. */
export interface Reserved {
  window: string | null;
  spend?: Spend;
}

/** What the job's activities call for its tenant's spend. */
export interface SpendActivities {
  /**
   * Reserves `priceMc` for one create on the run's tenant's ledger for the window that holds `atMs` (the run's time
   * when it asked): OverBudget (non-retryable) when it does not fit; `window: null` when the tenant has no budget.
   */
  reserveSpend(input: SpendOf & { priceMc: number; atMs: number }): Promise<Reserved>;
  /** Commits what the service charged for a create reserved in `window`; the rest of the reservation is released. */
  commitSpend(input: SpendOf & { window: string; costMc: number }): Promise<Spend>;
  /** Releases a create's reservation whole: it was not made, or the job ended before it. */
  releaseSpend(input: SpendOf & { window: string }): Promise<Spend>;
  /**
   * The ceiling the operator set for `tenant` over `window` (an activity of the ledger workflow); retried where this
   * worker holds no budget of that tenant and period, so that one which does answers.
   */
  ledgerCeiling(input: { tenant: string; window: string }): Promise<number>;
}

/** The run's tenant and the reservation ID of its create: a digest, so IDs stay short whatever the key's length. */
function reservationOf(create: string): { tenant: string; id: string } {
  // Every tuneflow activity runs in a workflow: a standalone one has no run to reserve for.
  const { workflowId, runId } = activityInfo().workflowExecution ?? { workflowId: '', runId: '' };
  const tenant = jobOfWorkflowId(workflowId)?.tenant ?? DEFAULT_TENANT;
  const id = createHash('sha256').update(`${workflowId}\n${runId}\n${create}`).digest('base64url').slice(0, 32);
  return { tenant, id };
}

/** One update of the tenant's ledger, starting it if need be, in its lane. */
function updateLedger<Args extends unknown[]>(
  lanes: LedgerLanes,
  tenant: string,
  window: string,
  update: Parameters<ReturnType<typeof getClient>['workflow']['executeUpdateWithStart']>[0],
  updateId: string,
  args: Args,
): Promise<Spend> {
  // The jobs' queue, where the ledger's workflow tasks run, whether this activity came from it or from its bookkeeping
  // queue.
  const taskQueue = jobQueueOf(activityInfo().taskQueue);
  const workflowId = ledgerWorkflowId(tenant, window);
  const client = getClient();
  return lanes.run(
    workflowId,
    () =>
      client.workflow.executeUpdateWithStart(update as typeof reserveSpendUpdate, {
        updateId,
        args: args as never,
        startWorkflowOperation: new WithStartWorkflowOperation('spendLedger', {
          workflowId,
          taskQueue,
          args: [],
          workflowIdConflictPolicy: 'USE_EXISTING',
          // Its workflow tasks share the queue by tenant, as the tenant's jobs' do.
          priority: startPriority(tenant),
          staticSummary: `tenant ${tenant}'s spend for ${window}`,
        }),
      }),
    Context.current().cancellationSignal,
  );
}

/**
 * The spend activities over the operator's budgets.
 *
 * @example
 * const activities = { ...spendActivities(tenants) };
 */
export function spendActivities(tenants: Tenants): SpendActivities {
  const lanes = new LedgerLanes();
  return {
    async reserveSpend({ create, priceMc, atMs }) {
      const { tenant, id } = reservationOf(create);
      const budget = tenants.budgetOf(tenant);
      if (!budget) return { window: null };
      const window = spendWindow(budget.period, atMs);
      try {
        const spend = await updateLedger(lanes, tenant, window, reserveSpendUpdate, `reserve:${id}`, [
          { id, priceMc, ceilingMc: budget.ceilingMc },
        ]);
        return { window, spend };
      } catch (err) {
        // The validator's refusal: OverBudget naming the tenant's window, which no retry changes.
        if (err instanceof WorkflowUpdateFailedError && err.cause instanceof ApplicationFailure) {
          const { message, type, details } = err.cause;
          throw ApplicationFailure.create({
            message,
            type: type ?? undefined,
            details: details as unknown[],
            nonRetryable: true,
          });
        }
        throw err;
      }
    },

    async commitSpend({ create, window, costMc }) {
      const { tenant, id } = reservationOf(create);
      // The ledger counts whole millicents; a charge the service gave in fractions is rounded up, never lost.
      const charged = Math.max(0, Math.ceil(costMc));
      return updateLedger(lanes, tenant, window, commitSpendUpdate, `commit:${id}`, [{ id, costMc: charged }]);
    },

    async releaseSpend({ create, window }) {
      const { tenant, id } = reservationOf(create);
      return updateLedger(lanes, tenant, window, releaseSpendUpdate, `release:${id}`, [{ id }]);
    },

    async ledgerCeiling({ tenant, window }) {
      const budget = tenants.budgetOf(tenant);
      if (budget && windowEndMs(window) !== undefined && spendPeriodOf(window) === budget.period)
        return budget.ceilingMc;
      // Retried, not 0: workers that disagree (a rolling change of TUNEFLOW_TENANT_BUDGETS) leave the answer to one
      // that holds the budget, rather than refusing the tenant's every job.
      throw ApplicationFailure.retryable(
        `this worker holds no ${spendPeriodOf(window)} budget of tenant ${tenant} (TUNEFLOW_TENANT_BUDGETS)`,
        'NoBudgetHere',
      );
    },
  };
}
