import { runBounded } from '../../src/workflows/concurrency';

/** A unit of work the test finishes by hand, so the order of events is the test's, not the clock's. */
function gate() {
  let open!: () => void;
  let fail!: (err: Error) => void;
  const promise = new Promise<void>((resolve, reject) => {
    open = resolve;
    fail = reject;
  });
  return { promise, open, fail };
}

const flush = () => new Promise((resolve) => setImmediate(resolve));

describe('runBounded', () => {
  test('runs at most `limit` at a time, starting items in order as lanes free up', async () => {
    const gates = Array.from({ length: 5 }, gate);
    const started: number[] = [];
    let running = 0;
    let peak = 0;
    const all = runBounded(5, 2, async (i) => {
      started.push(i);
      peak = Math.max(peak, ++running);
      await gates[i].promise;
      running--;
    });
    await flush();
    expect(started).toEqual([0, 1]);
    gates[1].open();
    await flush();
    expect(started).toEqual([0, 1, 2]);
    gates[0].open();
    gates[2].open();
    await flush();
    expect(started).toEqual([0, 1, 2, 3, 4]);
    gates[3].open();
    gates[4].open();
    await all;
    expect(peak).toBe(2);
  });

  test('no items, or a limit above the count: fine', async () => {
    const seen: number[] = [];
    await runBounded(0, 4, async (i) => void seen.push(i));
    await runBounded(2, 10, async (i) => void seen.push(i));
    expect(seen).toEqual([0, 1]);
  });

  test('after a failure no new item starts, started ones finish, then the first failure is thrown', async () => {
    const gates = Array.from({ length: 4 }, gate);
    const started: number[] = [];
    const finished: number[] = [];
    let settled = false;
    const all = runBounded(4, 2, async (i) => {
      started.push(i);
      await gates[i].promise;
      finished.push(i);
    }).finally(() => (settled = true));
    await flush();
    gates[0].fail(new Error('422 on prompt 0'));
    await flush();
    expect(started).toEqual([0, 1]);
    expect(settled).toBe(false); // item 1 is still running: its result must be known
    gates[1].fail(new Error('second failure'));
    await expect(all).rejects.toThrow('422 on prompt 0');
    expect(started).toEqual([0, 1]);
    expect(finished).toEqual([]);
  });
});
