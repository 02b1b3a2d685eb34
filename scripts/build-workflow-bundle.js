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
      }),
    );
    fs.writeFileSync(out, code);
    const kib = Math.round(Buffer.byteLength(code) / 1024);
    process.stdout.write(
      `workflow bundle: ${path.relative(process.cwd(), out)} (${kib} KiB, ${Date.now() - started} ms)\n`,
    );
  }
}

run().catch((err) => {
  process.stderr.write(`build-workflow-bundle: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
