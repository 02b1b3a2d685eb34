/**
 * The last step of `npm run build`: bundles the compiled workflows (lib/workflows) into lib/workflow-bundle.js, and
 * again with OpenTelemetry's workflow interceptors into lib/workflow-bundle-traced.js (a bundle's interceptors are
 * fixed when it is built), which the worker loads when present instead of bundling at start-up (src/plugin.ts,
 * workflowSource).
 */
const fs = require('node:fs');
const path = require('node:path');
const { bundleWorkflowCode, DefaultLogger } = require('@temporalio/worker');
const { withPreloadedContract } = require('../lib/bundling');

const LIB = path.join(__dirname, '..', 'lib');
const BUNDLES = [
  { file: 'workflow-bundle.js', interceptors: [] },
  {
    file: 'workflow-bundle-traced.js',
    interceptors: [require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors')],
  },
];

/** zod's locale index replaced by English alone (./zod-english-only.js). */
function englishOnly(config) {
  const rule = { test: /[\\/]zod[\\/]v4[\\/]locales[\\/]index\.cjs$/, loader: require.resolve('./zod-english-only') };
  return { ...config, module: { ...config.module, rules: [...(config.module?.rules ?? []), rule] } };
}

/**
 * The code with every character above U+00FF written as a `\uXXXX` escape (a handful remain in comments and in two of zod's
 * template literals), so that V8 holds the bundle's source as a one-byte string: a single such character makes it
 * two bytes a character, in the worker's main thread and in every workflow thread. An escape means the same character
 * in a string, template, regular expression or identifier.
 */
function latin1Only(code) {
  return code.replace(/[^\x00-\xff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/**
 * The code with its inline source map carrying the text of tuneflow's own sources only. Every module keeps its
 * mappings, so workflow stack traces still name the original file and line; the text of the packages' sources (zod,
 * Temporal's, 1 MB of the 1.3 MB map) served only the stack-trace query's source view. The worker's main thread holds
 * the whole bundle while it starts, and V8 sizes that thread's heap from what it holds then.
 */
function ownSourcesOnly(code) {
  const marker = '//# sourceMappingURL=data:application/json;charset=utf-8;base64,';
  const at = code.lastIndexOf(marker);
  if (at < 0) throw new Error('the bundle has no inline source map');
  const map = JSON.parse(Buffer.from(code.slice(at + marker.length).trim(), 'base64').toString('utf8'));
  map.sourcesContent = map.sources.map((source, i) => (source.includes('node_modules') ? null : map.sourcesContent[i]));
  return code.slice(0, at) + marker + Buffer.from(JSON.stringify(map), 'utf8').toString('base64');
}

async function run() {
  for (const { file, interceptors } of BUNDLES) {
    const started = Date.now();
    const out = path.join(LIB, file);
    const { code } = await bundleWorkflowCode(
      withPreloadedContract({
        workflowsPath: require.resolve('../lib/workflows'),
        workflowInterceptorModules: interceptors,
        // webpack's module-by-module report is noise in a build log; warnings and errors still show.
        logger: new DefaultLogger('WARN'),
        webpackConfigHook: englishOnly,
      }),
    );
    const written = latin1Only(ownSourcesOnly(code));
    fs.writeFileSync(out, written);
    const kib = Math.round(Buffer.byteLength(written) / 1024);
    process.stdout.write(
      `workflow bundle: ${path.relative(process.cwd(), out)} (${kib} KiB, ${Date.now() - started} ms)\n`,
    );
  }
}

run().catch((err) => {
  process.stderr.write(`build-workflow-bundle: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
