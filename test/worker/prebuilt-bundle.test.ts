import { execFileSync } from 'node:child_process';
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

/** The source indexes a source map's mappings point into (each segment's second base64 VLQ field, a running delta). */
function mappedSources(mappings: string): Set<number> {
  const DIGITS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  const used = new Set<number>();
  let source = 0;
  for (const line of mappings.split(';'))
    for (const segment of line.split(',')) {
      if (segment === '') continue;
      const fields: number[] = [];
      let value = 0;
      let shift = 0;
      for (const c of segment) {
        const digit = DIGITS.indexOf(c);
        value += (digit & 31) << shift;
        shift += 5;
        if (digit & 32) continue;
        fields.push(value & 1 ? -(value >>> 1) : value >>> 1);
        value = 0;
        shift = 0;
      }
      if (fields.length >= 4) used.add((source += fields[1]));
    }
  return used;
}

describe.each(['workflow-bundle.js', 'workflow-bundle-traced.js'])('the source map of the prebuilt %s', (file) => {
  const map = () => {
    const code = fs.readFileSync(path.join(LIB, file), 'utf8');
    const at = code.lastIndexOf('base64,');
    return JSON.parse(Buffer.from(code.slice(at + 'base64,'.length), 'base64').toString('utf8')) as {
      sources: string[];
      sourcesContent: (string | null)[];
      mappings: string;
    };
  };

  it("maps every module with code, and carries the text of tuneflow's own sources only", () => {
    const { sources, sourcesContent, mappings } = map();
    const own = sources.filter((s) => !s.includes('node_modules'));
    const packages = sources.filter((s) => s.includes('node_modules'));
    expect(own).toEqual(expect.arrayContaining([expect.stringMatching(/src\/workflows\/job\.ts$/)]));
    expect(packages).toEqual(expect.arrayContaining([expect.stringMatching(/node_modules\/zod\//)]));
    expect(sourcesContent).toHaveLength(sources.length);
    sources.forEach((source, i) => {
      if (source.includes('node_modules')) expect(sourcesContent[i]).toBeNull();
      else expect(sourcesContent[i]).toEqual(expect.any(String));
    });
    // Stack traces keep naming the original file and line: every source is mapped to but a few of Temporal's
    // type-only modules, which compile to no code.
    const mapped = mappedSources(mappings);
    const unmapped = sources.filter((_, i) => !mapped.has(i));
    expect(unmapped.length).toBeLessThanOrEqual(3);
    for (const source of unmapped) expect(source).toMatch(/node_modules\/@temporalio\/common\//);
  });
});

describe("the worker's main thread", () => {
  /** What a fresh process has loaded once it made TuneflowPlugin's worker options (`tracing`: with a span processor). */
  const loadedBy = (tracing: boolean) => {
    const script = `
      const { TuneflowPlugin } = require(${JSON.stringify(LIB)});
      require(${JSON.stringify(path.join(LIB, 'cli', 'worker.js'))});
      const tracing = ${tracing}
        ? { spanProcessor: { onStart() {}, onEnd() {}, forceFlush: async () => {}, shutdown: async () => {} }, resource: { attributes: {} } }
        : undefined;
      const plugin = new TuneflowPlugin({ api: { apiKey: 'k-0123456789abcdef', baseUrl: 'http://127.0.0.1:1' }, tracing });
      const options = plugin.configureWorker({ taskQueue: 'q' });
      if (typeof options.activities?.createTune !== 'function') throw new Error('no activities');
      const loaded = Object.keys(require.cache);
      const has = (re) => loaded.some((f) => re.test(f));
      console.log(JSON.stringify({
        undiciIndex: has(/node_modules\\/undici\\/index\\.js$/),
        undiciGlobal: has(/node_modules\\/undici\\/lib\\/global\\.js$/),
        undiciPool: has(/node_modules\\/undici\\/lib\\/dispatcher\\/pool\\.js$/),
        undiciErrors: has(/node_modules\\/undici\\/lib\\/core\\/errors\\.js$/),
        interceptors: has(/interceptors-opentelemetry/),
      }));`;
    return JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' }));
  };

  it("loads undici's pool and errors but not its index, and no OpenTelemetry interceptors without tracing", () => {
    expect(loadedBy(false)).toEqual({
      undiciIndex: false,
      undiciGlobal: false,
      undiciPool: true,
      undiciErrors: true,
      interceptors: false,
    });
  });

  it("loads OpenTelemetry's interceptors once tracing is asked for", () => {
    expect(loadedBy(true)).toMatchObject({ undiciIndex: false, interceptors: true });
  });
});
