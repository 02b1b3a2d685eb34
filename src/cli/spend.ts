/**
 * `tuneflow spend`: a tenant's spend over its budget's window, as its ledger holds it (committed, reserved now,
 * released, the ceiling), read with a query of the ledger workflow.
 */
import { loadStarterTenant, loadTenantSettings } from '../config';
import { tenantNameProblem } from '../contract/tenants';
import { ledgerWorkflowId, spendQuery, spendWindow, windowEndMs, type Spend } from '../contract/spend';
import { Tenants } from '../tenants';
import {
  connectTemporal,
  ExitCode,
  parseFlags,
  processIO,
  runCommand,
  UsageError,
  type CommandIO,
} from './command-line';

export const SPEND_USAGE = `Usage: tuneflow spend [--tenant T] [--window W] [--json]

Shows a tenant's spend in a window of its budget (TUNEFLOW_TENANT_BUDGETS): the ceiling, what the service charged
(committed), what running jobs hold (reserved) before their creates are confirmed, and what was released. Read from the
tenant's ledger workflow (tuneflow:ledger:<tenant>:<window>), which a worker answers.

Options:
  --tenant T    (default: TUNEFLOW_TENANT, else default)
  --window W    a UTC day (2026-11-27) or month (2026-11) (default: the current one of the tenant's budget in
                TUNEFLOW_TENANT_BUDGETS, else this month)
  --json        the ledger's sums as one JSON object
  -h, --help    show this help

Environment: TEMPORAL_ADDRESS (default localhost:7233), TEMPORAL_NAMESPACE (default default), TEMPORAL_TLS*,
TEMPORAL_API_KEY, TEMPORAL_PROFILE; TUNEFLOW_TENANT, TUNEFLOW_TENANT_BUDGETS. Exit 2: a bad flag; 3: Temporal
unreachable; 1: no ledger for that window (nothing reserved in it yet).
`;

const usd = (mc: number) => `${mc} mc ($${(mc / 100_000).toFixed(2)})`;

export async function spendCommand(argv: string[], io: CommandIO = processIO()): Promise<ExitCode> {
  return runCommand('spend', io, async () => {
    const { values } = parseFlags({
      args: argv,
      options: {
        tenant: { type: 'string' },
        window: { type: 'string' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    if (values.help) {
      io.stdout.write(SPEND_USAGE);
      return ExitCode.ok;
    }
    const tenant = values.tenant ?? loadStarterTenant(io.env);
    const problem = tenantNameProblem(tenant);
    if (problem) throw new UsageError(`--tenant: ${JSON.stringify(tenant)} ${problem}`);
    const window = values.window ?? spendWindow(budgetPeriod(tenant, io.env), Date.now());
    if (windowEndMs(window) === undefined)
      throw new UsageError(
        `--window: must be a UTC day (2026-11-27) or month (2026-11), got ${JSON.stringify(window)}`,
      );
    const { client, close } = await connectTemporal(io.env);
    try {
      let spend: Spend;
      try {
        spend = await client.workflow.getHandle(ledgerWorkflowId(tenant, window)).query(spendQuery);
      } catch (err) {
        if ((err as Error)?.name !== 'WorkflowNotFoundError') throw err;
        io.stderr.write(`tuneflow spend: tenant ${tenant} has no ledger for ${window}: no job reserved in it yet\n`);
        return ExitCode.failed;
      }
      if (values.json) io.stdout.write(`${JSON.stringify(spend)}\n`);
      else
        io.stdout.write(
          `tenant ${spend.tenant}, ${spend.window}: ceiling ${usd(spend.ceilingMc)}\n` +
            `  committed ${usd(spend.committedMc)}\n` +
            `  reserved  ${usd(spend.reservedMc)} (${spend.openReservations} creates not confirmed yet)\n` +
            `  left      ${usd(Math.max(0, spend.ceilingMc - spend.committedMc - spend.reservedMc))}\n` +
            `  released  ${usd(spend.releasedMc)} of ${spend.reservations} reservations\n`,
        );
      return ExitCode.ok;
    } finally {
      await close();
    }
  });
}

/** The tenant's budget period in the operator's settings here; a month where none is set. */
function budgetPeriod(tenant: string, env: NodeJS.ProcessEnv): 'day' | 'month' {
  return new Tenants(loadTenantSettings(env)).budgetOf(tenant)?.period ?? 'month';
}
