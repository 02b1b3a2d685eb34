/**
 * The as-is check: a test compiled once per zod schema that accepts a value only where zod would return it unchanged.
 * Answers that fit (nearly all) skip the zod parse, which costs about as much CPU as the whole HTTP exchange; the
 * client's inputs (a prompt or tune to create, list parameters) skip it the same way (src/api/parse-input.ts). zod
 * itself judges everything else, so its verdict and its messages stand wherever the two could differ.
 * test/api/answer-check.test.ts holds the two in agreement on every answer and input schema.
 */
import { types } from 'node:util';
import type { z } from 'zod';

/** A test that accepts a value only where `schema` would return it unchanged. */
type Check = (value: unknown) => boolean;

/** What the compiled checks take: JSON (an answer, a callback body) or a caller's values (an input to send). */
type Values = 'json' | 'caller';

const compiledChecks: Record<Values, WeakMap<z.ZodType, Check | null>> = { json: new WeakMap(), caller: new WeakMap() };

/**
 * True when `value`, parsed JSON, fits `schema` and zod would return it as it is; false means "ask zod". A zod parse
 * of a tune costs about 6 us of CPU, a fifth of the client's whole share of a request; this check, compiled once per
 * schema, well under 0.1 us. The callback receiver uses it too. Exported for its agreement tests.
 *
 * @example
 * acceptsAsIs(Tune, JSON.parse(text)) ? (value as Tune) : Tune.parse(value);
 */
export function acceptsAsIs(schema: z.ZodType, value: unknown): boolean {
  return compiled(schema, 'json')(value);
}

/**
 * acceptsAsIs for a value a caller built (an input to send), which need not be JSON: it also asks zod about objects
 * and arrays that are not plain data (getters, proxies, symbol or hidden keys), which zod reads once and copies while
 * the check would read the caller's object again. A prompt to create: 4 us in a fresh process against zod's 16 (most
 * of it the callback URL's refinement); in a busy worker's 1,000-job soak, 37 us of wall time against 120.
 *
 * @example
 * acceptsInputAsIs(PromptCreateInput, input) ? input : PromptCreateInput.parse(input);
 */
export function acceptsInputAsIs(schema: z.ZodType, value: unknown): boolean {
  return compiled(schema, 'caller')(value);
}

function compiled(schema: z.ZodType, values: Values): Check {
  let check = compiledChecks[values].get(schema);
  if (check === undefined) {
    check = compileCheck(schema, values) ?? null;
    compiledChecks[values].set(schema, check);
  }
  return check ?? refuse;
}

const refuse: Check = () => false;

interface SchemaDef {
  type: string;
  checks?: ZodCheck[];
  /** Set when the schema is itself a check, such as z.url() or z.int(). */
  check?: string;
  format?: string;
  coerce?: boolean;
  innerType?: z.ZodType;
  element?: z.ZodType;
  options?: z.ZodType[];
  shape?: Record<string, z.ZodType>;
  catchall?: z.ZodType;
  keyType?: z.ZodType;
  valueType?: z.ZodType;
}

const defOf = (schema: z.ZodType): SchemaDef => (schema as unknown as { _zod: { def: SchemaDef } })._zod.def;

/** One of zod's checks (a length, a trim, a refinement): its definition, and the function zod runs it with. */
interface ZodCheck {
  _zod: {
    def: { check?: string; format?: string };
    check: (payload: { value: unknown; issues: unknown[] }) => unknown;
  };
}

/** What a compilation collects: the functions its expression calls, and the values it refers to (`k[i]`). */
interface Compilation {
  functions: string[];
  constants: unknown[];
  values: Values;
}

/**
 * The check for the schema shapes answers and inputs use (loose and strict objects, arrays, records, unions, enums,
 * literals, nullish scalars, numbers, refinements and zod's other checks), or undefined for anything else
 * (transforms, pipes, coercion, formats, stripping objects): zod alone judges those. A union is checked on its options
 * up to the first one zod alone judges.
 * It is compiled to one function, as zod compiles its own objects: fields are read by name (a tree of closures reading
 * `v[key]` in a loop cost 1.3 us per tune, profiled in the client bench). Only the schema's own keys (as JSON string
 * literals) and bounds (numbers) go into the source; zod's checks, enum values and key sets are passed in as values.
 * Where code cannot be generated (`--disallow-code-generation-from-strings`), zod judges every value.
 */
function compileCheck(schema: z.ZodType, values: Values): Check | undefined {
  // A caller's values are also tested for plain data: k[0] is util.types.isProxy, and `plain` is defined.
  const caller = values === 'caller';
  const compilation: Compilation = { functions: [], constants: caller ? [types.isProxy] : [], values };
  const test = checkSource(schema, 'v', compilation);
  if (test === undefined) return undefined;
  try {
    const helpers = caller ? [RUN_CHECK, PLAIN_DATA] : [RUN_CHECK];
    const source = `${[...helpers, ...compilation.functions].join('\n')}\nreturn (v) => ${test};`;
    return new Function('k', source)(compilation.constants) as Check;
  } catch {
    return undefined;
  }
}

/**
 * Runs one of zod's own checks on `v` as zod runs it, and is true when it reports no issue and leaves the value as it
 * was (a trim that would change it is a "no": zod returns the trimmed copy). A check that answers with a promise is a
 * "no": zod then refuses it in a synchronous parse. A check that throws throws here as it would in zod.
 */
const RUN_CHECK = `function run(check, v) {
  const payload = { value: v, issues: [] };
  const result = check._zod.check(payload);
  return !(result instanceof Promise) && payload.issues.length === 0 && payload.value === v;
}`;

/**
 * For a caller's values: true when every own key of object or array `v` (no proxy: see `proxyTest`) is a string naming
 * an enumerable data property (an array's own \`length\` aside). zod reads each field once and copies it; a getter or
 * a hidden key could give the check one value and the request another.
 */
const PLAIN_DATA = `function plain(v, array) {
  const keys = Reflect.ownKeys(v);
  if (array && keys.length !== v.length + 1) return false;
  for (const key of keys) {
    if (typeof key !== 'string') return false;
    const d = Object.getOwnPropertyDescriptor(v, key);
    if (!('value' in d) || (!d.enumerable && !(array && key === 'length'))) return false;
  }
  return true;
}`;

/** The expression `k[i]` for a value the compiled function refers to. */
function constant(compilation: Compilation, value: unknown): string {
  compilation.constants.push(value);
  return `k[${compilation.constants.length - 1}]`;
}

/** Zod runs these on a value after its type's own test: each one must pass, the value unchanged. */
function checksSource(checks: readonly ZodCheck[], v: string, compilation: Compilation): string[] {
  return checks.map((check) => `run(${constant(compilation, check)}, ${v})`);
}

/**
 * A JS expression that is true when the value in variable `v` fits `schema`; objects, arrays and records become
 * functions appended to `compilation.functions` (named `c0`, `c1`, ...), called from the expression.
 */
function checkSource(schema: z.ZodType, v: string, compilation: Compilation): string | undefined {
  const def = defOf(schema);
  const checks = def.checks ?? [];
  // A custom schema (z.custom, z.instanceof) is a check itself, and returns the value as it is.
  if (def.type === 'custom')
    return all([`run(${constant(compilation, schema)}, ${v})`, ...checksSource(checks, v, compilation)]);
  // z.url(), z.int() and the like are strings and numbers that are checks themselves; coercion changes values.
  if (def.check !== undefined || def.format !== undefined || def.coerce) return undefined;
  if (def.type === 'number') return numberSource(checks, v, compilation);
  const test = typeSource(schema, def, v, compilation);
  return test && all([test, ...checksSource(checks, v, compilation)]);
}

const all = (tests: string[]): string => (tests.length === 1 ? tests[0] : `(${tests.join(' && ')})`);

/** The test of the schema's type alone, before its checks. */
function typeSource(schema: z.ZodType, def: SchemaDef, v: string, compilation: Compilation): string | undefined {
  const { functions } = compilation;
  const call = (body: string): string => {
    functions.push(`function c${functions.length}(v) {\n${body}\n}`);
    return `c${functions.length - 1}(${v})`;
  };
  switch (def.type) {
    case 'unknown':
    case 'any':
      return 'true';
    case 'never':
      return 'false';
    case 'null':
      return `${v} === null`;
    case 'undefined':
      return `${v} === undefined`;
    case 'string':
      return `typeof ${v} === 'string'`;
    case 'boolean':
      return `typeof ${v} === 'boolean'`;
    case 'enum':
    case 'literal':
      // zod's own set of the allowed values, which its parse tests.
      return `${constant(compilation, (schema as unknown as { _zod: { values: Set<unknown> } })._zod.values)}.has(${v})`;
    case 'optional': {
      const inner = checkSource(def.innerType!, v, compilation);
      return inner && `(${v} === undefined || ${inner})`;
    }
    case 'nullable': {
      const inner = checkSource(def.innerType!, v, compilation);
      return inner && `(${v} === null || ${inner})`;
    }
    case 'union': {
      // zod returns the first option that accepts: the options before the first one left to zod (a numeric string
      // read as a number, an array unwrapped) can answer "as is"; a value only a later one takes goes to zod.
      // A later option is tried only where the earlier ones' "no" is zod's "no" too (not "yes, changed").
      const options: string[] = [];
      for (const option of def.options!) {
        const test = checkSource(option, v, compilation);
        if (test === undefined) break;
        options.push(test);
        if (!refusesAsZod(option)) break;
      }
      return options.length > 0 ? `(${options.join(' || ')})` : undefined;
    }
    case 'array': {
      const element = checkSource(def.element!, 'e', compilation);
      return (
        element &&
        call(
          `if (!Array.isArray(v) || ${proxyTest(compilation)}Object.getPrototypeOf(v) !== Array.prototype) return false;\n` +
            (compilation.values === 'caller' ? `if (!plain(v, true)) return false;\n` : '') +
            `for (let i = 0; i < v.length; i++) { const e = v[i]; if (!(${element})) return false; }\nreturn true;`,
        )
      );
    }
    case 'record': {
      // zod's records take only plain objects, which is what JSON.parse makes of `{...}`.
      const key = defOf(def.keyType!);
      const element = checkSource(def.valueType!, 'e', compilation);
      if (key.type !== 'string' || key.checks?.length || !element) return undefined;
      return call(
        `${objectTest(compilation)}\n` +
          // zod's plain-object test, for a JSON object with a "constructor" key of its own.
          `const c = v.constructor;\nif (c !== undefined) { const p = c.prototype; if (typeof p !== 'object' || ` +
          `p === null || Array.isArray(p) || !Object.hasOwn(p, 'isPrototypeOf')) return false; }\n` +
          `for (const e of Object.values(v)) if (!(${element})) return false;\nreturn true;`,
      );
    }
    case 'object': {
      // Loose objects, which zod returns with every field as it came, and strict ones, which refuse any other key.
      const catchall = def.catchall && defOf(def.catchall).type;
      if (catchall !== 'unknown' && catchall !== 'never') return undefined;
      const fields: string[] = [];
      for (const [key, field] of Object.entries(def.shape!)) {
        const test = checkSource(field, 'x', compilation);
        if (test === undefined) return undefined;
        fields.push(`x = v[${JSON.stringify(key)}];\nif (!(${test})) return false;`);
      }
      const strict =
        catchall === 'never'
          ? `for (const key of Object.keys(v)) if (!${constant(compilation, new Set(Object.keys(def.shape!)))}.has(key)) return false;\n`
          : '';
      return call(`${objectTest(compilation)}\n${strict}let x;\n${fields.join('\n')}\nreturn true;`);
    }
    default:
      return undefined;
  }
}

/**
 * True when the compiled check of `schema` says "no" only where zod refuses the value too, never where zod would
 * accept it changed: scalars (untrimmed) and arrays of them, not objects (zod drops a `__proto__` key) nor partial
 * unions.
 */
function refusesAsZod(schema: z.ZodType): boolean {
  const def = defOf(schema);
  switch (def.type) {
    case 'number':
    case 'string':
      return !(def.checks ?? []).some((check) => check._zod.def.check === 'overwrite');
    case 'boolean':
    case 'unknown':
    case 'any':
    case 'never':
    case 'null':
    case 'undefined':
    case 'enum':
    case 'literal':
    case 'custom':
      return true;
    case 'optional':
    case 'nullable':
      return refusesAsZod(def.innerType!);
    case 'array':
      return refusesAsZod(def.element!);
    case 'union':
      return def.options!.every(refusesAsZod);
    default:
      return false;
  }
}

/** For a caller's values, source that is true for a proxy (k[0] is util.types.isProxy), before any trap runs. */
const proxyTest = (compilation: Compilation): string => (compilation.values === 'caller' ? 'k[0](v) || ' : '');

/**
 * Source that returns false unless `v` is an object zod would give back whole: a plain one (zod copies any other into
 * a plain object), without a `__proto__` key of JSON's (zod drops it); for a caller's values, plain data too.
 */
const objectTest = (compilation: Compilation): string =>
  `if (typeof v !== 'object' || v === null || ${proxyTest(compilation)}Object.getPrototypeOf(v) !== Object.prototype || ` +
  `Object.hasOwn(v, '__proto__')) return false;` +
  (compilation.values === 'caller' ? `\nif (!plain(v, false)) return false;` : '');

/**
 * z.number() with `.int()` (zod's safeint format: exactly Number.isSafeInteger), `.min()` and `.max()` inline; any
 * other check run as zod runs it.
 */
function numberSource(checks: readonly ZodCheck[], v: string, compilation: Compilation): string {
  const tests = [`typeof ${v} === 'number'`, `Number.isFinite(${v})`];
  let min: string | undefined;
  let max: string | undefined;
  const others: ZodCheck[] = [];
  for (const check of checks) {
    const c = check._zod.def as { check?: string; format?: string; value?: unknown; inclusive?: boolean };
    if (c.check === 'number_format' && c.format === 'safeint') tests[1] = `Number.isSafeInteger(${v})`;
    else if (c.check === 'greater_than' && typeof c.value === 'number' && min === undefined)
      min = `${v} ${c.inclusive === true ? '>=' : '>'} ${String(c.value)}`;
    else if (c.check === 'less_than' && typeof c.value === 'number' && max === undefined)
      max = `${v} ${c.inclusive === true ? '<=' : '<'} ${String(c.value)}`;
    else others.push(check);
  }
  return all([...tests, min, max].filter((t) => t !== undefined).concat(checksSource(others, v, compilation)));
}
