/**
 * A webpack loader for tuneflow's prebuilt workflow bundles (scripts/build-workflow-bundle.js): zod's locale index
 * with English alone, the messages zod uses by default, in place of all of its 40-odd locales. Their text is most of
 * what is not Latin-1 in the bundle; without it the bundle's source is a one-byte string in V8 (half the memory, in the
 * worker's main thread and in every workflow thread) and a sixth smaller. No workflow code of tuneflow's reads
 * `z.locales`.
 */
module.exports = function zodEnglishOnly() {
  return [
    '"use strict";',
    'Object.defineProperty(exports, "__esModule", { value: true });',
    'exports.en = require("./en.cjs").default;',
    '',
  ].join('\n');
};
