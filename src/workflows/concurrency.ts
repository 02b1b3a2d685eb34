/**
 * Bounded concurrency for workflow code: prompt creates (and cleanup deletes) run a few at a time, so one job never
 * floods the service (polling and bursts get 429s). Deterministic: items start in order as lanes free up.
 */

/**
 * Runs `work(0)` … `work(count - 1)`, at most `limit` at a time. After a failure no new item starts, and every started
 * one is let finish before the first failure is thrown, so the caller knows everything they created.
 *
 * @example
 * await runBounded(prompts.length, 4, async (i) => ledger.adopt(await createPrompt(prompts[i]), i));
 */
export async function runBounded(count: number, limit: number, work: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  let failure: { error: unknown } | undefined;
  const lane = async () => {
    while (!failure && next < count) {
      const i = next++;
      try {
        await work(i);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(0, Math.min(limit, count)) }, lane));
  if (failure) throw failure.error;
}
