#!/usr/bin/env node
const path = require('node:path');

let cli;
try {
  cli = require('../lib/cli/index.js');
} catch (err) {
  if (err.code !== 'MODULE_NOT_FOUND' || !String(err.message).includes(path.join('lib', 'cli', 'index.js'))) throw err;
  // A clone whose build did not run (npm ci runs it through `prepare`; `--ignore-scripts` skips it).
  process.stderr.write(`tuneflow is not built: run 'npm run build' in ${path.resolve(__dirname, '..')}\n`);
  process.exit(1);
}
cli.run();
