import {
  CALLBACK_READ_SPACING_MS as SPACING,
  CALLBACK_REREAD_FIRST_MS as FIRST,
  CallbackReads,
  idsOf,
  MAX_PENDING_WAKE_UPS,
  readWakeUp,
} from '../../src/workflows/callback-reads';

const waitingFor = (...ids: number[]) => ({ ids, unknown: false });

describe('CallbackReads', () => {
  test('nothing woke: no read is due', () => {
    expect(new CallbackReads().dueAt(waitingFor(1))).toBeUndefined();
  });

  test('everything the wait waits for called back: the read is due at once', () => {
    const reads = new CallbackReads();
    reads.wake([1], 1_000, waitingFor(1, 2));
    reads.wake([2], 1_200, waitingFor(1, 2));
    expect(reads.dueAt(waitingFor(1, 2))).toBe(1_000);
  });

  test('some called back: the read waits up to the spacing for the others', () => {
    const reads = new CallbackReads();
    reads.wake([1], 1_000, waitingFor(1, 2));
    expect(reads.dueAt(waitingFor(1, 2))).toBe(1_000 + SPACING);
    // The other one settled by a poll meanwhile: everything left has called back.
    expect(reads.dueAt(waitingFor(1))).toBe(1_000);
  });

  test('reads of one wait come at least the spacing apart, and a read covers the callbacks before it', () => {
    const reads = new CallbackReads();
    reads.wake([1], 0, waitingFor(1));
    reads.read(0);
    expect(reads.dueAt(waitingFor(1))).toBeUndefined();
    reads.wake([1], 100, waitingFor(1));
    expect(reads.dueAt(waitingFor(1))).toBe(SPACING);
    // A flood of the same wake-up changes nothing.
    for (let t = 101; t < 200; t++) reads.wake([1], t, waitingFor(1));
    expect(reads.dueAt(waitingFor(1))).toBe(SPACING);
  });

  test('a callback about an object the run does not wait for is dropped, not kept', () => {
    const reads = new CallbackReads();
    const before = reads.changes;
    reads.wake([99], 0, waitingFor(1));
    expect(reads.changes).toBe(before);
    expect(reads.dueAt(waitingFor(1))).toBeUndefined();
    // While objects not known yet may be the run's (a create in flight), ids are kept, then dropped once known.
    reads.wake([99], 0, { ids: [], unknown: true });
    expect(reads.dueAt({ ids: [], unknown: true })).toBe(SPACING);
    expect(reads.dueAt(waitingFor(1))).toBeUndefined();
  });

  test('kept ids are bounded, whatever a flood sends', () => {
    const reads = new CallbackReads();
    const flood = Array.from({ length: 10_000 }, (_, i) => i + 1);
    reads.wake(flood, 0, { ids: [], unknown: true });
    expect(reads.changes).toBe(MAX_PENDING_WAKE_UPS);
  });
});

describe('reads back off per object (runs since the receiver bounds)', () => {
  /** A wait for tune 1, trained at `trainedAt`, woken every `everyMs` by a URL holder and once by the service. */
  function readsOfFlood(backOff: boolean, everyMs: number, trainedAt: number): number[] {
    const reads = Object.assign(new CallbackReads(), { backOff });
    const made: number[] = [];
    for (let now = 0; now <= trainedAt; now += 100) {
      if (now % everyMs === 0 || now === trainedAt) reads.wake([1], now, waitingFor(1));
      const due = reads.dueAt(waitingFor(1));
      if (due !== undefined && due <= now) {
        reads.read(now);
        made.push(now);
      }
    }
    return made;
  }

  test('a paced flood through a 90 s training: 3 reads (the first, 30 s on, the genuine at 90 s), not one per forgery', () => {
    expect(readsOfFlood(true, 2_100, 90_000)).toEqual([0, FIRST, 90_000]);
    expect(readsOfFlood(false, 2_100, 90_000).length).toBeGreaterThan(40);
  });

  test('the genuine callback is never dropped: one during a back-off is read when it ends', () => {
    const reads = Object.assign(new CallbackReads(), { backOff: true });
    reads.wake([1], 0, waitingFor(1));
    reads.read(0);
    reads.wake([1], 5_000, waitingFor(1));
    expect(reads.dueAt(waitingFor(1))).toBe(FIRST);
  });

  test("each object backs off on its own: another prompt's first callback is read at once", () => {
    const reads = Object.assign(new CallbackReads(), { backOff: true });
    reads.wake([1], 0, waitingFor(1, 2));
    reads.read(SPACING);
    reads.wake([1, 2], 5_000, waitingFor(1, 2));
    expect(reads.dueAt(waitingFor(2))).toBe(5_000);
    reads.read(5_000);
    reads.wake([1], 6_000, waitingFor(1));
    expect(reads.dueAt(waitingFor(1))).toBe(SPACING + FIRST);
  });
});

describe('what a callback signal may carry', () => {
  test('readWakeUp takes a kind and integer ids, bounded; anything else is not a wake-up', () => {
    expect(readWakeUp({ kind: 'tune', ids: [7] })).toEqual({ kind: 'tune', ids: [7] });
    expect(readWakeUp({ kind: 'prompt', ids: [1, 'x', -2, 2.5, 3] })).toEqual({ kind: 'prompt', ids: [1, 3] });
    expect(readWakeUp({ kind: 'video', ids: [7] })).toBeUndefined();
    expect(readWakeUp({ kind: 'tune' })).toBeUndefined();
    expect(readWakeUp('tune')).toBeUndefined();
    expect(readWakeUp({ kind: 'pack-prompts', ids: Array(5_000).fill(1) })?.ids).toHaveLength(MAX_PENDING_WAKE_UPS);
  });

  test('idsOf reads only the ids of objects signalled the old way', () => {
    expect(idsOf({ id: 5, images: ['https://attacker.example/x.jpg'], cost_mc: 0 })).toEqual([5]);
    expect(idsOf([{ id: 1 }, { id: '2' }, null, { id: 3 }])).toEqual([1, 3]);
    expect(idsOf(undefined)).toEqual([]);
  });
});
