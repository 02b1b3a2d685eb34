/**
 * How tuneflow's workflow code is bundled, wherever it is bundled: the prebuilt bundle (scripts/build-workflow-bundle.js),
 * a user's worker through TuneflowPlugin, the tests. The input contract (zod and the spec's schemas) is preloaded: a
 * worker evaluates it once, into the V8 context its runs share (deep-frozen by the SDK), instead of once per run and
 * again on every replay after an eviction. test/workflows/frozen-contract.test.ts proves it right frozen.
 */

/** Modules evaluated once per worker instead of once per run. */
export const PRELOADED_MODULES: readonly string[] = [require.resolve('./contract/check')];

/**
 * Bundler options with tuneflow's preloaded modules added to any the caller has.
 *
 * @example
 * await bundleWorkflowCode(withPreloadedContract({ workflowsPath: require.resolve('./workflows') }));
 */
export function withPreloadedContract<T extends object>(
  options: T & { preloadModules?: string[] },
): T & { preloadModules: string[] } {
  return { ...options, preloadModules: [...new Set([...(options.preloadModules ?? []), ...PRELOADED_MODULES])] };
}
