import { WakeUpGate } from '../../src/callbacks/wake-up-gate';

const run = (workflowId: string, runId = 'r1') => ({ workflowId, runId });
const prompt = (...ids: number[]) => ({ kind: 'prompt' as const, ids });

describe('WakeUpGate', () => {
  test('the same callback within the window is coalesced; after it, or with another body, it goes through', () => {
    const gate = new WakeUpGate({ coalesceMs: 10_000 });
    expect(gate.admit(run('a'), prompt(1), 'body-1', 0)).toEqual({ signal: prompt(1) });
    expect(gate.admit(run('a'), prompt(1), 'body-1', 9_999)).toEqual({ skip: 'coalesced' });
    expect(gate.admit(run('a'), prompt(1), 'body-2', 9_999)).toEqual({ signal: prompt(1) });
    expect(gate.admit(run('a'), prompt(1), 'body-1', 10_000)).toEqual({ signal: prompt(1) });
    // Only the ids not just signalled with this body are signalled again.
    expect(gate.admit(run('a'), prompt(1, 2), 'body-2', 10_001)).toEqual({ signal: prompt(2) });
    // Another run, or another kind, is another key.
    expect(gate.admit(run('a', 'r2'), prompt(1), 'body-1', 10_002)).toEqual({ signal: prompt(1) });
    expect(gate.admit(run('a'), { kind: 'pack-prompts', ids: [1] }, 'body-1', 10_003)).toEqual({
      signal: { kind: 'pack-prompts', ids: [1] },
    });
  });

  test('a run has a budget of signals: burst at once, then perMinute a minute', () => {
    const gate = new WakeUpGate({ burst: 3, perMinute: 2 });
    const decisions = [1, 2, 3, 4].map((id) => gate.admit(run('a'), prompt(id), 'b', 0));
    expect(decisions.map((d) => 'signal' in d)).toEqual([true, true, true, false]);
    expect(decisions[3]).toEqual({ skip: 'over-budget' });
    // Half a minute gives one more.
    expect('signal' in gate.admit(run('a'), prompt(5), 'b', 30_000)).toBe(true);
    expect(gate.admit(run('a'), prompt(6), 'b', 30_001)).toEqual({ skip: 'over-budget' });
    expect('signal' in gate.admit(run('b'), prompt(1), 'b', 30_001)).toBe(true);
  });

  test('a released callback may go through again at once; a closed run takes nothing for ten minutes', () => {
    const gate = new WakeUpGate();
    gate.admit(run('a'), prompt(1), 'b', 0);
    gate.release(run('a'), prompt(1), 'b');
    expect(gate.admit(run('a'), prompt(1), 'b', 1)).toEqual({ signal: prompt(1) });
    gate.closed(run('a'), 2);
    expect(gate.admit(run('a'), prompt(2), 'b', 3)).toEqual({ skip: 'run-closed' });
    expect(gate.admit(run('a'), prompt(2), 'b', 600_002)).toEqual({ signal: prompt(2) });
  });

  test('memory is bounded: the least recently used runs are forgotten past maxRuns', () => {
    const gate = new WakeUpGate({ maxRuns: 2, burst: 1, perMinute: 0 });
    gate.admit(run('a'), prompt(1), 'b', 0);
    gate.admit(run('b'), prompt(1), 'b', 0);
    gate.admit(run('c'), prompt(1), 'b', 0);
    // 'a' was forgotten: a fresh budget.
    expect('signal' in gate.admit(run('a'), prompt(2), 'b', 0)).toBe(true);
    // 'c' is remembered: its budget is spent.
    expect(gate.admit(run('c'), prompt(2), 'b', 0)).toEqual({ skip: 'over-budget' });
  });
});
