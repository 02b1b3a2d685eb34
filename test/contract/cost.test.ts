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
});
