/**
 * Tenants: names, the IDs and titles that carry them, what a run may run under, and the operator's settings.
 */
import { businessKey } from '../../src/contract/check';
import { claimWorkflowId } from '../../src/contract/keys';
import {
  DEFAULT_TENANT,
  jobOfWorkflowId,
  MAX_KEY_LENGTH,
  MAX_TENANT_BYTES,
  TENANT_MEMO,
  tenantNameProblem,
  tenantWorkflowId,
  titleTenant,
  tuneTitle,
  workflowIdProblem,
} from '../../src/contract/tenants';
import { ConfigError } from '../../src/config';
import { loadStarterTenant, loadTenantSettings, Tenants } from '../../src/tenants';

const RUN = '0195c1e2-6f0a-7c3e-9d7e-2b1f0c9a8d11';

describe('tenant names', () => {
  test.each([
    ['', 'non-empty'],
    ['a'.repeat(MAX_TENANT_BYTES + 1), `at most ${MAX_TENANT_BYTES} bytes`],
    ['é'.repeat(33), `at most ${MAX_TENANT_BYTES} bytes`],
    ['shop:x', 'only letters'],
    ['-shop', 'start with a letter'],
    ['sh op', 'only letters'],
  ])('%j is refused (%s)', (name, rule) => {
    expect(tenantNameProblem(name)).toContain(rule);
  });

  test.each(['shop', 'studio-2', 'a'.repeat(MAX_TENANT_BYTES), 'team.eu_1'])('%j is a name', (name) => {
    expect(tenantNameProblem(name)).toBeUndefined();
  });
});

describe('workflow IDs', () => {
  test("the default tenant's jobs run under their bare keys, another's under its prefix, and back", () => {
    expect(tenantWorkflowId(DEFAULT_TENANT, 'order-1')).toBe('order-1');
    expect(tenantWorkflowId('shop', 'order-1')).toBe('tuneflow:nexus:shop:order-1');
    expect(jobOfWorkflowId('order-1')).toEqual({ tenant: DEFAULT_TENANT, key: 'order-1' });
    expect(jobOfWorkflowId('tuneflow:nexus:shop:order:1')).toEqual({ tenant: 'shop', key: 'order:1' });
  });

  test.each(['tuneflow:claim:order-1', 'tuneflow:nexus:shop', 'tuneflow:nexus::k', 'tuneflow:nexus:default:k'])(
    '%j is no job',
    (id) => expect(jobOfWorkflowId(id)).toBeUndefined(),
  );

  test("the longest key of the longest tenant's name, claimed, is Temporal's limit of 1000 exactly", () => {
    const key = 'k'.repeat(MAX_KEY_LENGTH);
    expect(businessKey.safeParse(key).success).toBe(true);
    expect(businessKey.safeParse(`${key}k`).success).toBe(false);
    expect(claimWorkflowId(tenantWorkflowId('t'.repeat(MAX_TENANT_BYTES), key))).toHaveLength(1000);
    expect(MAX_KEY_LENGTH).toBe(905);
  });

  test('a run refuses an ID no tuneflow starter made, and takes its own', () => {
    expect(workflowIdProblem('order-1', {})).toBeUndefined();
    expect(workflowIdProblem('tuneflow:nexus:shop:order-1', { [TENANT_MEMO]: 'shop' })).toBeUndefined();
    expect(workflowIdProblem('tuneflow:nexus:shop:order-1', {})).toMatch(/only tuneflow starts a tenant's jobs/);
    expect(workflowIdProblem('tuneflow:nexus:shop:order-1', { [TENANT_MEMO]: 'studio' })).toMatch(
      /names tenant "shop"/,
    );
    expect(workflowIdProblem('tuneflow:claim:order-1', {})).toMatch(/is tuneflow's own/);
  });
});

describe('titles', () => {
  test('a title tuneflow made names the tenant of the job that made the tune', () => {
    expect(titleTenant(tuneTitle('order-1', RUN))).toBe(DEFAULT_TENANT);
    expect(titleTenant(tuneTitle('tuneflow:nexus:shop:order-1', RUN))).toBe('shop');
    expect(titleTenant(tuneTitle('tuneflow:nexus:shop:a#b', RUN))).toBe('shop');
  });

  test.each([
    ['a bare workflow ID (a release before tenants)', 'order-1', 'default'],
    ["a title of the service's own app, or a gallery tune", 'SD 1.5 base', 'default'],
    ['no title', undefined, 'default'],
    [
      "a tenant's workflow ID without a run ID (a release before tenants, or a caller)",
      'tuneflow:nexus:shop:o',
      undefined,
    ],
    ['a reserved title with a run ID that names no job', `tuneflow:claim:x#${RUN}`, undefined],
  ])('%s: owned by %j', (_, title, owner) => expect(titleTenant(title)).toBe(owner));
});

describe("the operator's settings", () => {
  test('endpoints map to tenants; an unmapped endpoint, and an empty one without a fallback, to none', () => {
    const tenants = new Tenants({ endpoints: { 'tuneflow-shop': 'shop' } });
    expect(tenants.ofEndpoint('tuneflow-shop')).toBe('shop');
    expect(tenants.ofEndpoint('tuneflow-studio')).toBeUndefined();
    expect(tenants.ofEndpoint('')).toBeUndefined();
    expect(new Tenants({ fallback: 'shop' }).ofEndpoint('')).toBe('shop');
    expect(new Tenants({ fallback: 'shop' }).ofEndpoint('other')).toBeUndefined();
  });

  test('a tenant owns the tunes its jobs titled and those the operator gave it or everyone', () => {
    const tenants = new Tenants({ tunes: { shop: [7], '*': [1504944] } });
    expect(tenants.owns('shop', { id: 1, title: tuneTitle('tuneflow:nexus:shop:o', RUN) })).toBe(true);
    expect(tenants.owns('studio', { id: 1, title: tuneTitle('tuneflow:nexus:shop:o', RUN) })).toBe(false);
    expect(tenants.owns('shop', { id: 7, title: 'anything' })).toBe(true);
    expect(tenants.owns('studio', { id: 7, title: 'anything' })).toBe(false);
    expect(tenants.owns('studio', { id: 1504944 })).toBe(true);
    expect(tenants.owns(DEFAULT_TENANT, { id: 2, title: tuneTitle('order-1', RUN) })).toBe(true);
    expect(tenants.owns(DEFAULT_TENANT, { id: 2, title: 'order-1' })).toBe(true);
    expect(tenants.owns('shop', { id: 2, title: 'order-1' })).toBe(false);
    expect(tenants.owns(DEFAULT_TENANT, { id: 3, title: tuneTitle('tuneflow:nexus:shop:o', RUN) })).toBe(false);
  });

  test('bad settings are refused naming the setting and the rule', () => {
    expect(() => new Tenants({ endpoints: { e: 'a:b' } })).toThrow(/endpoints: tenant "a:b" must hold only/);
    expect(() => new Tenants({ tunes: { shop: [0] } })).toThrow(/tunes: tune id 0 is no tune id/);
  });

  test('from the environment', () => {
    expect(
      loadTenantSettings({
        TUNEFLOW_TENANT_ENDPOINTS: 'tuneflow-shop=shop, tuneflow-studio=studio',
        TUNEFLOW_TENANT_FALLBACK: 'shop',
        TUNEFLOW_TENANT_TUNES: '*=1504944;shop=7+8',
      }),
    ).toEqual({
      endpoints: { 'tuneflow-shop': 'shop', 'tuneflow-studio': 'studio' },
      fallback: 'shop',
      tunes: { '*': [1504944], shop: [7, 8] },
    });
    expect(loadTenantSettings({})).toEqual({});
    expect(() => loadTenantSettings({ TUNEFLOW_TENANT_ENDPOINTS: 'shop' })).toThrow(ConfigError);
    expect(() => loadTenantSettings({ TUNEFLOW_TENANT_ENDPOINTS: 'e=a:b' })).toThrow(/TUNEFLOW_TENANT_ENDPOINTS/);
    expect(() => loadTenantSettings({ TUNEFLOW_TENANT_TUNES: 'shop=x' })).toThrow(/TUNEFLOW_TENANT_TUNES/);
    expect(loadStarterTenant({})).toBe(DEFAULT_TENANT);
    expect(loadStarterTenant({ TUNEFLOW_TENANT: 'shop' })).toBe('shop');
    expect(() => loadStarterTenant({ TUNEFLOW_TENANT: 'a b' })).toThrow(/TUNEFLOW_TENANT/);
  });
});

test('a key is bounded in bytes, as Temporal bounds IDs: 905 ASCII characters pass, 302 three-byte ones do not', () => {
  expect(businessKey.safeParse('k'.repeat(MAX_KEY_LENGTH)).success).toBe(true);
  expect(businessKey.safeParse('中'.repeat(301)).success).toBe(true); // 903 bytes
  const refused = businessKey.safeParse('中'.repeat(302)); // 906 bytes
  expect(refused.success).toBe(false);
  expect(refused.error?.issues[0].message).toMatch(/at most 905 bytes as UTF-8/);
});

test("the default tenant is the operator's own: no endpoint or fallback maps to it; a setting named twice is refused", () => {
  expect(() => new Tenants({ endpoints: { e: DEFAULT_TENANT } })).toThrow(/endpoints: "default" is the operator's/);
  expect(() => new Tenants({ fallback: DEFAULT_TENANT })).toThrow(/fallback: "default"/);
  expect(() => loadTenantSettings({ TUNEFLOW_TENANT_ENDPOINTS: 'e=shop,e=studio' })).toThrow(/"e" is named twice/);
  expect(() => loadTenantSettings({ TUNEFLOW_TENANT_TUNES: 'shop=0x10' })).toThrow(/TUNEFLOW_TENANT_TUNES/);
});
