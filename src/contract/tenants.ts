/**
 * Tenants: a team is who the operator's configuration says a request comes from (the Nexus endpoint it came through, a
 * starter's setting), never a header, a link or a field the caller writes. A job's tenant is written into its workflow
 * ID, and from there into everything the job makes: its claim and its tune's title. Sandbox-safe: the workflows read
 * their tenant from their own ID.
 */
import { RESERVED_KEY_PREFIX } from './keys';

/**
 * The tenant of a single team, and of every job started without one: its jobs run under their bare keys
 * (`order-1234`), as tuneflow's starters always ran them.
 */
export const DEFAULT_TENANT = 'default';

/** The most bytes a tenant's name may hold: a task queue fairness key's limit. */
export const MAX_TENANT_BYTES = 64;

/** The prefix of a named tenant's workflow IDs (`tuneflow:nexus:<tenant>:<key>`, as Nexus callers' keys always ran). */
const TENANT_PREFIX = `${RESERVED_KEY_PREFIX}nexus:`;

/** What a tenant's name may hold: no `:` (it ends the tenant in a workflow ID), nothing a shell or a URL must quote. */
const TENANT_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** Temporal's default limit on a workflow ID's length (the server's `limit.maxIDLength`). */
export const MAX_WORKFLOW_ID_LENGTH = 1000;

/**
 * The most bytes (UTF-8) a business key may hold: what the longest ID made from it leaves (the claim of a named
 * tenant's job, `tuneflow:claim:tuneflow:nexus:<64-byte tenant>:<key>`), so every key a starter takes fits the server.
 */
export const MAX_KEY_LENGTH =
  MAX_WORKFLOW_ID_LENGTH - `${RESERVED_KEY_PREFIX}claim:${TENANT_PREFIX}${'t'.repeat(MAX_TENANT_BYTES)}:`.length;

/** A string's length in bytes as UTF-8: what Temporal's limits on IDs count. */
export function utf8Bytes(text: string): number {
  return new TextEncoder().encode(text).length;
}

/**
 * Why a tenant's name is refused, in words; undefined for a good one.
 *
 * @example
 * tenantNameProblem('shop'); // undefined
 */
export function tenantNameProblem(tenant: unknown): string | undefined {
  if (typeof tenant !== 'string' || tenant === '') return 'must be a non-empty string';
  if (utf8Bytes(tenant) > MAX_TENANT_BYTES) return `must be at most ${MAX_TENANT_BYTES} bytes`;
  if (!TENANT_NAME.test(tenant))
    return 'must hold only letters, digits, ".", "_" and "-", and start with a letter or a digit';
  return undefined;
}

/**
 * The workflow ID of a tenant's key: the bare key for the default tenant, `tuneflow:nexus:<tenant>:<key>` for any
 * other, whoever starts it (the Nexus handler or a starter set to that tenant), so a key of a tenant names one job.
 *
 * @example
 * tenantWorkflowId('shop', 'order-1234'); // 'tuneflow:nexus:shop:order-1234'
 * tenantWorkflowId('default', 'order-1234'); // 'order-1234'
 */
export function tenantWorkflowId(tenant: string, key: string): string {
  return tenant === DEFAULT_TENANT ? key : `${TENANT_PREFIX}${tenant}:${key}`;
}

/**
 * The tenant and key of a job's workflow ID; undefined for an ID that is no job's (another `tuneflow:` ID, or a
 * tenant's prefix with a name no operator could configure).
 *
 * @example
 * jobOfWorkflowId('tuneflow:nexus:shop:order-1234'); // { tenant: 'shop', key: 'order-1234' }
 */
export function jobOfWorkflowId(workflowId: string): { tenant: string; key: string } | undefined {
  if (!workflowId.startsWith(RESERVED_KEY_PREFIX)) return { tenant: DEFAULT_TENANT, key: workflowId };
  if (!workflowId.startsWith(TENANT_PREFIX)) return undefined;
  const rest = workflowId.slice(TENANT_PREFIX.length);
  const end = rest.indexOf(':');
  const tenant = rest.slice(0, end);
  const key = rest.slice(end + 1);
  if (end < 0 || tenantNameProblem(tenant) || tenant === DEFAULT_TENANT || !key) return undefined;
  return { tenant, key };
}

/** The memo field a tenant's starter writes on the runs it starts: a run under a tenant's ID without it is refused. */
export const TENANT_MEMO = 'tuneflowTenant';

/**
 * Why a run may not run under its workflow ID, in words; undefined when it may. A bare key is the default tenant's;
 * a tenant's ID (`tuneflow:nexus:<tenant>:<key>`) must be started by tuneflow (the Nexus handler, a starter set to the
 * tenant), which writes the tenant in the run's memo; any other `tuneflow:` ID is tuneflow's own (claims).
 *
 * @example
 * workflowIdProblem('tuneflow:claim:order-1', {}); // 'is tuneflow's own ...'
 */
export function workflowIdProblem(workflowId: string, memo: Record<string, unknown> | undefined): string | undefined {
  const job = jobOfWorkflowId(workflowId);
  if (!job)
    return `${JSON.stringify(workflowId)} is tuneflow's own (IDs that start with "${RESERVED_KEY_PREFIX}" are made by tuneflow for its claims and tenants): start the job under its business key`;
  if (job.tenant !== DEFAULT_TENANT && memo?.[TENANT_MEMO] !== job.tenant)
    return `${JSON.stringify(workflowId)} names tenant ${JSON.stringify(job.tenant)}, and only tuneflow starts a tenant's jobs (through the tenant's Nexus endpoint, or TuneflowClient with that tenant)`;
  return undefined;
}

/**
 * The title tuneflow gives the tune a run creates: the run's workflow ID and its run ID. The service finds a create
 * that a 504 may have made by it (its idempotency), the run's retried create finds only its own tune by it, and the
 * title tells which tenant's job made the tune. A caller sets no title.
 *
 * @example
 * tuneTitle('order-1234', '0195c1e2-...'); // 'order-1234#0195c1e2-...'
 */
export function tuneTitle(workflowId: string, runId: string): string {
  return `${workflowId}#${runId}`;
}

/** A run ID, as Temporal makes them (a UUID), at the end of a title tuneflow made. */
const RUN_ID_SUFFIX = /#([0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})$/;

/**
 * The workflow ID a title tuneflow made names (the title without its run ID); any other title as it is.
 *
 * @example
 * titleWorkflowId('order-1#0195c1e2-6f0a-7c3e-9d7e-2b1f0c9a8d11'); // 'order-1'
 */
export function titleWorkflowId(title: string): string {
  const suffix = RUN_ID_SUFFIX.exec(title);
  return suffix ? title.slice(0, suffix.index) : title;
}

/**
 * The tenant that owns a tune, from its title: the tenant whose job made it (a title tuneflow made, with its run ID);
 * the default tenant, the account's own team, for a tune no tuneflow job of a tenant made (made in the service's own
 * app, a public gallery tune, or by a release before tenants under a bare key); nobody for any other title that
 * starts with `tuneflow:` (a release before tenants, whose titles a caller could set). A named tenant owns only the
 * tunes its jobs made, and those the operator gives it.
 *
 * @example
 * titleTenant('tuneflow:nexus:shop:order-1#0195c1e2-6f0a-7c3e-9d7e-2b1f0c9a8d11'); // 'shop'
 * titleTenant('My headshots'); // 'default'
 */
export function titleTenant(title: unknown): string | undefined {
  if (typeof title !== 'string') return DEFAULT_TENANT;
  const suffix = RUN_ID_SUFFIX.exec(title);
  const workflowId = suffix ? title.slice(0, suffix.index) : title;
  if (!workflowId.startsWith(RESERVED_KEY_PREFIX)) return DEFAULT_TENANT;
  return suffix ? jobOfWorkflowId(workflowId)?.tenant : undefined;
}
