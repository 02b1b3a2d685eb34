/**
 * V8's GC trace (`node --trace-gc`, which `npm run soak -- --trace-gc` gives each worker) read back into each heap's
 * peaks. A worker process has two heaps: its main thread's, where activities run, and the SDK's workflow thread's, where
 * the runs live. An RSS gap between tuneflow and the floor is split between them this way.
 */

/** One V8 heap's peaks over a run, in MiB (V8 prints MB of 2^20 bytes). */
export interface HeapPeak {
  /** `main` for the first heap the trace shows (the main thread starts before any other), then `thread 2`, ... */
  heap: string;
  /** The most the heap held from the OS. */
  committedMiB: number;
  /** The most in use when a collection started: live objects and garbage. */
  usedMiB: number;
  /** The most left in use after a full collection (mark-compact): what is live. Null when no full collection ran. */
  liveMiB: number | null;
}

/** `[pid:isolate]  1234 ms: Scavenge 4.1 (4.2) -> 3.5 (5.2) MB, ...`; `Mark-Compact` for a full collection. */
const GC_LINE =
  /^\[\d+:(0x[0-9a-f]+)\]\s+[\d.]+ ms: ([A-Za-z -]+?)(?: \([a-z ]+\))? ([\d.]+) \(([\d.]+)\) -> ([\d.]+) \(([\d.]+)\) MB/;

/**
 * The peaks of every heap a GC trace shows, in order of first appearance; other lines are passed over.
 *
 * @example
 * heapPeaks('[7:0x1a4]  40 ms: Scavenge 4.1 (4.2) -> 3.5 (5.2) MB, 1.09 / 0.00 ms'); // [{ heap: 'main', committedMiB: 5.2, usedMiB: 4.1, liveMiB: null }]
 */
export function heapPeaks(trace: string): HeapPeak[] {
  const heaps = new Map<string, HeapPeak>();
  for (const line of trace.split('\n')) {
    const m = GC_LINE.exec(line);
    if (!m) continue;
    const [, isolate, kind, usedBefore, committedBefore, usedAfter, committedAfter] = m;
    let peak = heaps.get(isolate);
    if (!peak) {
      peak = {
        heap: heaps.size === 0 ? 'main' : `thread ${heaps.size + 1}`,
        committedMiB: 0,
        usedMiB: 0,
        liveMiB: null,
      };
      heaps.set(isolate, peak);
    }
    peak.committedMiB = Math.max(peak.committedMiB, Number(committedBefore), Number(committedAfter));
    peak.usedMiB = Math.max(peak.usedMiB, Number(usedBefore));
    if (kind === 'Mark-Compact') peak.liveMiB = Math.max(peak.liveMiB ?? 0, Number(usedAfter));
  }
  return [...heaps.values()];
}
