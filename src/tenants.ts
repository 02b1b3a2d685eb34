/**
 * Where a tenant is decided and what it owns, on the worker: the operator maps each Nexus endpoint to a tenant (who
 * may call an endpoint is the cluster's access control), and may give tenants tunes their jobs did not make (a base
 * tune every tenant generates on, a tune made before tenants). Nothing a caller writes (a header, a link, an input
 * field) changes either. The rules every side shares (names, IDs, titles) are in src/contract/tenants.ts.
 */
import { ConfigError } from './config';
import { DEFAULT_TENANT, tenantNameProblem, titleTenant } from './contract/tenants';
import { SpendPeriod, type TenantBudget } from './contract/spend';

export { DEFAULT_TENANT } from './contract/tenants';

/**
 * A run's priority at its start: its tenant as its fairness key, weight 1 (the server's overrides per tenant win), the
 * same key its activities carry (src/workflows/activity-calls.ts). The run's workflow tasks are matched by it, so a
 * flood's workflow tasks wait their turn beside another tenant's; its children inherit it.
 *
 * @example
 * await client.workflow.start('generate', { ...options, priority: startPriority('shop') });
 */
export const startPriority = (tenant: string): { fairnessKey: string; fairnessWeight: number } => ({
  fairnessKey: tenant,
  fairnessWeight: 1,
});
export { loadStarterTenant, loadTenantSettings } from './config';

/** What the operator says of tenants. */
export interface TenantSettings {
  /**
   * The tenant of each Nexus endpoint, by the endpoint's name (`temporal operator nexus endpoint create --name`). A
   * request through an endpoint not named here is refused: a new team is set up by the operator, not by its request.
   * @default TUNEFLOW_TENANT_ENDPOINTS (`endpoint=tenant,...`); unset: none, every Nexus request is refused
   */
  endpoints?: Readonly<Record<string, string>>;
  /**
   * The tenant of a Nexus request whose endpoint the server does not say: servers before 1.30 (such as a 1.29 cluster)
   * leave it empty. Only right where this worker's task queue is the target of that one tenant's endpoint alone.
   * @default TUNEFLOW_TENANT_FALLBACK; unset: such requests are refused
   */
  fallback?: string;
  /**
   * Tunes the operator gives tenants besides those their jobs made, by tenant; `*` gives them to every tenant (a
   * shared base tune).
   * @default TUNEFLOW_TENANT_TUNES (`tenant=id+id;*=id`); unset: none
   */
  tunes?: Readonly<Record<string, readonly number[]>>;
  /**
   * Each tenant's ceiling on spend over a UTC day or month, in millicents: a job's creates are reserved against it
   * before they are made, and a job that would pass it fails OverBudget having paid nothing more. Tenants without one
   * spend without a ceiling (each job still within its own `maxCostMc`), and their runs make no ledger calls.
   * @default TUNEFLOW_TENANT_BUDGETS (`tenant=5000000/day,tenant=200000000/month`); unset: none
   */
  budgets?: Readonly<Record<string, TenantBudget>>;
}

/** A refusal of the operator's tenant settings, naming the setting and the rule. */
function refuse(setting: string, rule: string): never {
  throw new ConfigError(setting, rule);
}

/**
 * The operator's tenant settings, checked: every tenant's name within its rule, every tune id a positive integer.
 *
 * @example
 * const tenants = new Tenants({ endpoints: { 'tuneflow-shop': 'shop' }, tunes: { '*': [1504944] } });
 * tenants.ofEndpoint('tuneflow-shop'); // 'shop'
 */
export class Tenants {
  readonly #endpoints: ReadonlyMap<string, string>;
  readonly #fallback: string | undefined;
  readonly #tunes: ReadonlyMap<string, ReadonlySet<number>>;
  readonly #budgets: ReadonlyMap<string, TenantBudget>;

  constructor(settings: TenantSettings = {}) {
    const name = (tenant: unknown, setting: string): string => {
      const problem = tenantNameProblem(tenant);
      if (problem) refuse(setting, `tenant ${JSON.stringify(tenant)} ${problem}`);
      return tenant as string;
    };
    // The default tenant is the operator's own team, with its bare keys and the account's own tunes: no Nexus team's.
    const team = (tenant: unknown, setting: string): string => {
      if (name(tenant, setting) === DEFAULT_TENANT)
        refuse(
          setting,
          `"${DEFAULT_TENANT}" is the operator's own tenant (bare keys, the account's tunes): name the team`,
        );
      return tenant as string;
    };
    this.#endpoints = new Map(
      Object.entries(settings.endpoints ?? {}).map(([endpoint, tenant]) => [endpoint, team(tenant, 'endpoints')]),
    );
    this.#fallback = settings.fallback === undefined ? undefined : team(settings.fallback, 'fallback');
    this.#tunes = new Map(
      Object.entries(settings.tunes ?? {}).map(([tenant, ids]) => {
        if (tenant !== '*') name(tenant, 'tunes');
        for (const id of ids)
          if (!Number.isSafeInteger(id) || id < 1) refuse('tunes', `tune id ${JSON.stringify(id)} is no tune id`);
        return [tenant, new Set(ids)];
      }),
    );
    this.#budgets = new Map(
      Object.entries(settings.budgets ?? {}).map(([tenant, budget]) => {
        name(tenant, 'budgets');
        const { ceilingMc, period } = budget ?? {};
        if (!Number.isSafeInteger(ceilingMc) || (ceilingMc as number) < 1)
          refuse(
            'budgets',
            `tenant ${tenant}'s ceilingMc ${JSON.stringify(ceilingMc)} is not a positive whole number of millicents`,
          );
        if (!Object.values(SpendPeriod).includes(period))
          refuse(
            'budgets',
            `tenant ${tenant}'s period ${JSON.stringify(period)} is not ${Object.values(SpendPeriod).join(' or ')}`,
          );
        return [tenant, { ceilingMc, period }];
      }),
    );
  }

  /**
   * The operator's ceiling on `tenant`'s spend; undefined for a tenant without one.
   *
   * @example
   * new Tenants({ budgets: { shop: { ceilingMc: 5_000_000, period: 'day' } } }).budgetOf('shop'); // { ceilingMc: 5000000, period: 'day' }
   */
  budgetOf(tenant: string): TenantBudget | undefined {
    return this.#budgets.get(tenant);
  }

  /** The tenants a request through `endpoint` runs as; undefined for an endpoint the operator mapped to none. */
  ofEndpoint(endpoint: string): string | undefined {
    return endpoint ? this.#endpoints.get(endpoint) : this.#fallback;
  }

  /**
   * Whether `tenant` may read, generate on or delete `tune`: one its jobs made (the title tuneflow gave it says so), or
   * one the operator gave it.
   *
   * @example
   * tenants.owns('shop', { id: 123, title: 'tuneflow:nexus:shop:order-1#0195...' }); // true
   */
  owns(tenant: string, tune: { id: number; title?: unknown }): boolean {
    return (
      titleTenant(tune.title) === tenant ||
      (this.#tunes.get(tenant)?.has(tune.id) ?? false) ||
      (this.#tunes.get('*')?.has(tune.id) ?? false)
    );
  }
}
