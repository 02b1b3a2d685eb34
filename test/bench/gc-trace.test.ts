/**
 * The soak's reading of V8's GC trace (`--trace-gc`): each heap's peaks, the main thread's first.
 */
import { heapPeaks } from '../../bench/soak/gc-trace';

/** Lines as node 20 prints them for a worker process: its main thread's heap, then the workflow thread's. */
const TRACE = `{"level":"INFO","message":"tuneflow worker started"}
[26239:0x1a435c00]       40 ms: Scavenge 4.1 (4.2) -> 3.5 (5.2) MB, 1.09 / 0.00 ms  (average mu = 1.000, current mu = 1.000) allocation failure;
[26239:0x1a435c00]      301 ms: Mark-Compact 16.7 (31.7) -> 11.5 (31.6) MB, 3.24 / 0.00 ms  (+ 0.6 ms in 6 steps since start of marking, biggest step 0.2 ms, walltime since start of marking 16 ms) (average mu = 1.000, current mu = 1.000) finalize incremental marking via stack guard; GC in old space requested
[26239:0x7f9f00000f00]       26 ms: Scavenge 3.2 (3.2) -> 2.8 (4.2) MB, 1.76 / 0.00 ms  (average mu = 1.000, current mu = 1.000) allocation failure
[26239:0x1a435c00]     2791 ms: Mark-Compact 45.1 (77.1) -> 39.5 (77.8) MB, 16.10 / 0.01 ms  (average mu = 0.982, current mu = 0.982) finalize incremental marking via task; GC in old space requested
[26239:0x1a435c00]     9000 ms: Scavenge 139.3 (162.6) -> 120.0 (162.6) MB, 5.00 / 0.00 ms  (average mu = 0.9, current mu = 0.9) allocation failure;
[26239:0x7f9f00000f00]     9100 ms: Mark-Compact (reduce) 30.0 (40.0) -> 20.0 (35.0) MB, 8.00 / 0.00 ms  (average mu = 0.9, current mu = 0.9) low memory notification; GC in old space requested
not a GC line: [26239:0x1a435c00] 1 ms: Scavenge
`;

test('each heap: the most committed, the most in use before a collection, the most live after a full one', () => {
  expect(heapPeaks(TRACE)).toEqual([
    { heap: 'main', committedMiB: 162.6, usedMiB: 139.3, liveMiB: 39.5 },
    // A reducing full collection is a full collection too; its kind is only Mark-Compact's with a note.
    { heap: 'thread 2', committedMiB: 40, usedMiB: 30, liveMiB: 20 },
  ]);
});

test('a trace with no collection, or no trace at all, shows no heap', () => {
  expect(heapPeaks('')).toEqual([]);
  expect(heapPeaks('{"message":"tuneflow worker started"}\n')).toEqual([]);
});

test('a heap that never had a full collection has no live figure', () => {
  expect(heapPeaks(TRACE.split('\n').slice(3, 4).join('\n'))).toEqual([
    { heap: 'main', committedMiB: 4.2, usedMiB: 3.2, liveMiB: null },
  ]);
});
