/** A job's cost (cost.ts): millicents and dollars, cost_mc as numbers or numeric strings, and the prompt budget. */
import { costMcOf, costOf, PromptBudget } from '../../src/contract/cost';

test('costOf gives millicents and US dollars (100,000 mc = 1 USD)', () => {
  expect(costOf(154_000)).toEqual({ mc: 154_000, usd: 1.54 });
  expect(costOf(0)).toEqual({ mc: 0, usd: 0 });
});

test('costMcOf reads numbers and numeric strings; anything else is no cost', () => {
  expect(costMcOf({ cost_mc: 2000 })).toBe(2000);
  expect(costMcOf({ cost_mc: '150000.0' })).toBe(150_000);
  for (const cost_mc of [undefined, null, '', 'free', -1, Number.NaN, {}])
    expect(costMcOf({ cost_mc })).toBeUndefined();
  expect(costMcOf(undefined)).toBeUndefined();
});

describe('PromptBudget', () => {
  test('one create at a time until a price is known, then each prompt priced per image as seen', () => {
    const budget = new PromptBudget(10_000);
    expect(budget.ready).toBe(true);
    const first = budget.reserve(0, 2)!;
    expect(first).toEqual({ estimateMc: 0, priced: false, images: 2 });
    expect(budget.ready).toBe(false); // the next waits for the first's price
    budget.settle(first, 4_000); // 2,000 per image
    expect(budget.ready).toBe(true);
    const second = budget.reserve(4_000, 1)!; // 4,000 + 2,000 <= 10,000
    expect(second.estimateMc).toBe(2_000);
    // In flight: 4,000 spent + 2,000 reserved; 2 more images (4,000) would make 10,000: still fits.
    const third = budget.reserve(4_000, 2)!;
    expect(third.estimateMc).toBe(4_000);
    // One more image would pass 10,000: refused, and every later one too, even a cheaper one.
    expect(budget.reserve(4_000, 1)).toBeUndefined();
    budget.settle(second, 2_000);
    budget.settle(third, 4_000);
    expect(budget.reserve(0, 1)).toBeUndefined();
  });

  test('a job that has spent its limit creates nothing more; a failed create releases its estimate', () => {
    expect(new PromptBudget(150_000).reserve(150_000, 1)).toBeUndefined();
    const budget = new PromptBudget(5_000);
    const first = budget.reserve(0, 1)!;
    budget.settle(first, undefined); // the create failed: no price learned, nothing held
    expect(budget.ready).toBe(true);
    expect(budget.reserve(0, 1)).toEqual({ estimateMc: 0, priced: false, images: 1 });
  });

  test('a create answered without its price: no create starts until its read settles it; a price read goes on', () => {
    const budget = new PromptBudget(20_000);
    const first = budget.reserve(0, 1)!;
    budget.awaitPrice(first); // answered without cost_mc: read it
    expect(budget.ready).toBe(false);
    budget.settle(first, 2_000); // the read said it
    expect(budget.ready).toBe(true);
    // Priced now: creates in flight at once, each at its estimate.
    const second = budget.reserve(2_000, 1)!;
    const third = budget.reserve(2_000, 1)!;
    expect([second.estimateMc, third.estimateMc]).toEqual([2_000, 2_000]);
    expect(budget.ready).toBe(true);
    budget.awaitPrice(second); // one of them answered without its price
    expect(budget.ready).toBe(false); // no other create starts, however much is left
    budget.settle(third, 2_000); // one in flight before may still answer
    expect(budget.ready).toBe(false);
    budget.settle(second, 2_000);
    expect(budget.ready).toBe(true);
    expect(budget.reserve(6_000, 1)).toEqual({ estimateMc: 2_000, priced: true, images: 1 });
  });

  test('a price still unknown after the read stops every later create, whatever is left', () => {
    const budget = new PromptBudget(1_000_000);
    const first = budget.reserve(0, 1)!;
    budget.awaitPrice(first);
    budget.settle(first, undefined); // the read did not say it either
    expect(budget.ready).toBe(true); // lanes wake, and find nothing more to create
    expect(budget.reserve(0, 1)).toBeUndefined();
    // The same once a price per image was known: the unknown price is not assumed to be it.
    const priced = new PromptBudget(1_000_000);
    priced.settle(priced.reserve(0, 1)!, 2_000);
    const unpriced = priced.reserve(2_000, 1)!;
    priced.awaitPrice(unpriced);
    priced.settle(unpriced, undefined);
    expect(priced.reserve(2_000, 1)).toBeUndefined();
  });

  test('a create answered without its price that is not read (a run started before the read) goes on as before', () => {
    const budget = new PromptBudget(10_000);
    budget.settle(budget.reserve(0, 1)!, undefined);
    expect(budget.ready).toBe(true);
    expect(budget.reserve(0, 1)).toEqual({ estimateMc: 0, priced: false, images: 1 });
  });
});
