/**
 * A tenant's spend ceiling: the operator's budgets (TUNEFLOW_TENANT_BUDGETS, the plugin's `tenants.budgets`), the
 * windows they are counted over, the ledger's IDs and its arithmetic.
 */
import { ConfigError } from '../../src/config';
import {
  ledgerOfWorkflowId,
  ledgerWorkflowId,
  SpendLedger,
  spendWindow,
  windowEndMs,
  type Spend,
} from '../../src/contract/spend';
import { jobOfWorkflowId } from '../../src/contract/tenants';
import { loadTenantSettings, Tenants } from '../../src/tenants';
import { LEDGER_UPDATES_IN_FLIGHT, LedgerLanes } from '../../src/activities/spend';

describe('budgets from the operator', () => {
  test('TUNEFLOW_TENANT_BUDGETS: tenant=millicents/day or /month, each tenant once', () => {
    const settings = loadTenantSettings({ TUNEFLOW_TENANT_BUDGETS: 'shop=5000000/day, studio=200000000/month' });
    expect(settings.budgets).toEqual({
      shop: { ceilingMc: 5_000_000, period: 'day' },
      studio: { ceilingMc: 200_000_000, period: 'month' },
    });
    const tenants = new Tenants(settings);
    expect(tenants.budgetOf('shop')).toEqual({ ceilingMc: 5_000_000, period: 'day' });
    expect(tenants.budgetOf('other')).toBeUndefined();
    expect(loadTenantSettings({}).budgets).toBeUndefined();
  });

  test.each([
    ['shop=5000000', /TUNEFLOW_TENANT_BUDGETS: "5000000" is not a ceiling in millicents per day or month/],
    ['shop=5000000/week', /"5000000\/week" is not a ceiling/],
    ['shop=0/day', /"0\/day" is not a ceiling/],
    ['shop=-5/day', /"-5\/day" is not a ceiling/],
    ['shop=1.5/day', /"1.5\/day" is not a ceiling/],
    ['shop=1e6/day', /"1e6\/day" is not a ceiling/],
    ['shop=1234567890123456/day', /is not a ceiling/],
    ['a:b=5/day', /TUNEFLOW_TENANT_BUDGETS: tenant "a:b" must hold only/],
    ['shop=5/day,shop=6/month', /TUNEFLOW_TENANT_BUDGETS: "shop" is named twice/],
    ['shop', /TUNEFLOW_TENANT_BUDGETS: "shop" is not name=value/],
  ])('%s is refused, naming the variable and the rule', (value, rule) => {
    expect(() => loadTenantSettings({ TUNEFLOW_TENANT_BUDGETS: value })).toThrow(ConfigError);
    expect(() => loadTenantSettings({ TUNEFLOW_TENANT_BUDGETS: value })).toThrow(rule);
  });

  test("the plugin's budgets are checked alike", () => {
    expect(() => new Tenants({ budgets: { shop: { ceilingMc: 0, period: 'day' } } })).toThrow(
      /budgets: tenant shop's ceilingMc 0 is not a positive whole number/,
    );
    expect(() => new Tenants({ budgets: { shop: { ceilingMc: 5, period: 'week' as 'day' } } })).toThrow(
      /budgets: tenant shop's period "week" is not day or month/,
    );
    expect(() => new Tenants({ budgets: { 'a b': { ceilingMc: 5, period: 'day' } } })).toThrow(/budgets: tenant "a b"/);
    // The default tenant (a single team's) may have one too.
    expect(new Tenants({ budgets: { default: { ceilingMc: 5, period: 'day' } } }).budgetOf('default')).toBeDefined();
  });
});

describe('windows and ledger IDs', () => {
  test('a window is the UTC day or month that holds the time', () => {
    const at = Date.UTC(2026, 10, 27, 23, 59, 59, 999);
    expect(spendWindow('day', at)).toBe('2026-11-27');
    expect(spendWindow('month', at)).toBe('2026-11');
    expect(spendWindow('day', at + 1)).toBe('2026-11-28');
    expect(spendWindow('month', Date.UTC(2026, 11, 31, 23, 59))).toBe('2026-12');
    expect(windowEndMs('2026-11-27')).toBe(Date.UTC(2026, 10, 28));
    expect(windowEndMs('2026-11')).toBe(Date.UTC(2026, 11, 1));
    expect(windowEndMs('2026-12')).toBe(Date.UTC(2027, 0, 1));
    expect(windowEndMs('2026-02-30')).toBeUndefined();
    expect(windowEndMs('2026-13')).toBeUndefined();
    expect(windowEndMs('yesterday')).toBeUndefined();
  });

  test("a ledger's ID names its tenant and window, and is no job's", () => {
    const id = ledgerWorkflowId('shop', '2026-11-27');
    expect(id).toBe('tuneflow:ledger:shop:2026-11-27');
    expect(ledgerOfWorkflowId(id)).toEqual({ tenant: 'shop', window: '2026-11-27' });
    expect(ledgerOfWorkflowId('tuneflow:ledger:shop:someday')).toBeUndefined();
    expect(ledgerOfWorkflowId('order-1')).toBeUndefined();
    expect(jobOfWorkflowId(id)).toBeUndefined();
  });
});

describe("the ledger's arithmetic", () => {
  const addsUp = (spend: Spend) =>
    expect(spend.reservedTotalMc + spend.overMc).toBe(spend.committedMc + spend.releasedMc + spend.reservedMc);

  test('reservations fit the ceiling with what is committed and held; exactly those that fit are accepted', () => {
    const ledger = SpendLedger.empty('shop', '2026-11');
    let accepted = 0;
    for (let i = 0; i < 500; i++) {
      if (ledger.refusal(`r${i}`, 150_000, 1_050_000)) continue;
      ledger.reserve(`r${i}`, 150_000, 1_050_000);
      accepted++;
    }
    expect(accepted).toBe(7);
    const refusal = ledger.refusal('r500', 1, 1_050_000);
    expect(refusal?.type).toBe('OverBudget');
    expect(refusal?.message).toBe(
      "Tenant shop's budget for 2026-11 is 1050000 mc: 0 mc spent and 1050000 mc reserved leave no room for 1 mc; " +
        'nothing was created for it',
    );
    expect(refusal?.details?.[0]).toEqual({
      tenant: 'shop',
      window: '2026-11',
      ceilingMc: 1_050_000,
      committedMc: 0,
      reservedMc: 1_050_000,
      priceMc: 1,
    });
    addsUp(ledger.spend());
  });

  test('a retried reservation counts once, and is answered as the first even once the ledger is full', () => {
    const ledger = SpendLedger.empty('shop', '2026-11');
    ledger.reserve('a', 100, 100);
    expect(ledger.refusal('a', 100, 100)).toBeUndefined();
    expect(ledger.reserve('a', 100, 100)).toMatchObject({ reservedMc: 100, reservedTotalMc: 100, reservations: 1 });
  });

  test('commit settles: less than reserved releases the rest, more counts as over; release frees all; repeats change nothing', () => {
    const ledger = SpendLedger.empty('shop', '2026-11-27');
    ledger.reserve('cheap', 200, 1_000);
    ledger.reserve('dear', 100, 1_000);
    ledger.reserve('never', 300, 1_000);
    ledger.commit('cheap', 150);
    ledger.commit('dear', 130);
    ledger.release('never');
    const spend = ledger.commit('cheap', 150);
    ledger.release('dear');
    expect(ledger.spend()).toEqual(spend);
    expect(spend).toEqual({
      tenant: 'shop',
      window: '2026-11-27',
      ceilingMc: 1_000,
      committedMc: 280,
      reservedMc: 0,
      releasedMc: 350,
      reservedTotalMc: 600,
      overMc: 30,
      openReservations: 0,
      reservations: 3,
    });
    addsUp(spend);
    // What is committed stays counted against the ceiling: 280 spent, 720 left.
    expect(ledger.refusal('next', 720, 1_000)).toBeUndefined();
    expect(ledger.refusal('next', 721, 1_000)).toBeDefined();
  });

  test('the state carried across continue-as-new is the whole ledger', () => {
    const ledger = SpendLedger.empty('shop', '2026-11');
    ledger.reserve('a', 100, 1_000);
    ledger.commit('a', 90);
    ledger.reserve('b', 50, 1_000);
    const carried = new SpendLedger(JSON.parse(JSON.stringify(ledger.state)));
    expect(carried.spend()).toEqual(ledger.spend());
    expect(carried.commit('b', 50)).toMatchObject({ committedMc: 140, reservedMc: 0 });
  });
});

describe("a worker's updates to a ledger, in lanes", () => {
  /** A call that starts when the lane lets it and ends when the test says. */
  function held(lanes: LedgerLanes, key: string, started: string[], name: string) {
    let end!: () => void;
    const ended = new Promise<void>((resolve) => (end = resolve));
    const done = lanes.run(key, async () => {
      started.push(name);
      await ended;
      return name;
    });
    return { end, done };
  }
  const turn = () => new Promise((resolve) => setImmediate(resolve));

  test(`at most ${LEDGER_UPDATES_IN_FLIGHT} of one ledger at once, the rest in the order they came; other ledgers apart`, async () => {
    const lanes = new LedgerLanes();
    const started: string[] = [];
    const calls = Array.from({ length: LEDGER_UPDATES_IN_FLIGHT + 3 }, (_, i) => held(lanes, 'shop', started, `s${i}`));
    const other = held(lanes, 'studio', started, 'other');
    await turn();
    expect(started).toEqual([...calls.slice(0, LEDGER_UPDATES_IN_FLIGHT).map((_, i) => `s${i}`), 'other']);
    // One ends: the first waiting takes its place, and only it.
    calls[1].end();
    await expect(calls[1].done).resolves.toBe('s1');
    await turn();
    expect(started.slice(-1)).toEqual([`s${LEDGER_UPDATES_IN_FLIGHT}`]);
    expect(started).toHaveLength(LEDGER_UPDATES_IN_FLIGHT + 2);
    for (const call of calls) call.end();
    other.end();
    await Promise.all(calls.map((c) => c.done));
    expect(started).toHaveLength(LEDGER_UPDATES_IN_FLIGHT + 4);
    expect(lanes.size).toBe(0);
  });

  test('a call whose activity is cancelled while it waits leaves the queue, rejected with the reason', async () => {
    const lanes = new LedgerLanes();
    const started: string[] = [];
    const running = Array.from({ length: LEDGER_UPDATES_IN_FLIGHT }, (_, i) => held(lanes, 'shop', started, `s${i}`));
    const cancelled = new AbortController();
    const gone = lanes.run('shop', async () => started.push('cancelled'), cancelled.signal);
    const next = held(lanes, 'shop', started, 'next');
    cancelled.abort(new Error('timed out while waiting'));
    await expect(gone).rejects.toThrow('timed out while waiting');
    running[0].end();
    await turn();
    expect(started.slice(LEDGER_UPDATES_IN_FLIGHT)).toEqual(['next']);
    await expect(lanes.run('shop', async () => 'never', cancelled.signal)).rejects.toThrow('timed out while waiting');
    for (const call of [...running, next]) call.end();
    await Promise.all([...running, next].map((c) => c.done));
    expect(lanes.size).toBe(0);
  });

  test('a call that fails gives its place up and its error to its caller alone', async () => {
    const lanes = new LedgerLanes();
    const failing = Array.from({ length: LEDGER_UPDATES_IN_FLIGHT + 2 }, (_, i) =>
      lanes.run('shop', async () => {
        throw new Error(`refused ${i}`);
      }),
    );
    const results = await Promise.allSettled([...failing, lanes.run('shop', async () => 'made')]);
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).message))).toEqual([
      ...failing.map((_, i) => `refused ${i}`),
      'made',
    ]);
    expect(lanes.size).toBe(0);
  });
});
