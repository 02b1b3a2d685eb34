import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * The bundles `npm run build` writes (scripts/build-workflow-bundle.js), which `tuneflow worker` and TuneflowPlugin load:
 * V8 keeps a bundle's source in the worker's main thread and in every workflow thread, as one byte a character only
 * when no character is above U+00FF.
 */
const LIB = path.join(__dirname, '..', '..', 'lib');

describe.each(['workflow-bundle.js', 'workflow-bundle-traced.js'])('the prebuilt %s', (file) => {
  const read = () => {
    const at = path.join(LIB, file);
    if (!fs.existsSync(at)) throw new Error(`${at} is missing: run npm run build first (npm test does)`);
    return fs.readFileSync(at, 'utf8');
  };

  it('is Latin-1 throughout, so V8 holds its source one byte a character', () => {
    const code = read();
    const wide = [...code].filter((c) => c.charCodeAt(0) > 0xff);
    expect(wide).toEqual([]);
    // What was escaped still reads the same: zod's prettified errors mark each issue with U+2716.
    expect(code).toContain('\\u2716 ${issue.message}');
  });

  it("carries zod's English messages and none of its other locales", () => {
    const code = read();
    expect(code).toContain('zod/v4/locales/en.cjs');
    const locales = new Set([...code.matchAll(/zod\/v4\/locales\/([\w-]+)\.cjs/g)].map((m) => m[1]));
    expect([...locales].sort()).toEqual(['en', 'index']);
  });
});
