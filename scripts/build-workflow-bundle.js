/**
 * The last step of `npm run build`: bundles the compiled workflows (lib/workflows) into lib/workflow-bundle.js, which
 * the worker loads when present instead of bundling at start-up (src/worker.ts, workflowSource).
 */
const fs = require('node:fs');
const path = require('node:path');
const { bundleWorkflowCode, DefaultLogger } = require('@temporalio/worker');

const OUT = path.join(__dirname, '..', 'lib', 'workflow-bundle.js');

async function run() {
  const started = Date.now();
  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve('../lib/workflows'),
    // webpack's module-by-module report is noise in a build log; warnings and errors still show.
    logger: new DefaultLogger('WARN'),
  });
  fs.writeFileSync(OUT, code);
  const kib = Math.round(Buffer.byteLength(code) / 1024);
  process.stdout.write(
    `workflow bundle: ${path.relative(process.cwd(), OUT)} (${kib} KiB, ${Date.now() - started} ms)\n`,
  );
}

run().catch((err) => {
  process.stderr.write(`build-workflow-bundle: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
