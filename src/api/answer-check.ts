/**
 * The answer check: a test compiled once per zod schema that accepts a JSON value only where zod would return it
 * unchanged. Answers that fit (nearly all) skip the zod parse, which costs about as much CPU as the whole HTTP
 * exchange; zod itself judges everything else, so its verdict and its messages stand wherever the two could differ.
 * test/api/answer-check.test.ts holds the two in agreement on every answer schema.
 */
import type { z } from 'zod';

/** A test that accepts a JSON value only where `schema` would return it unchanged. */
type Check = (value: unknown) => boolean;

const compiledChecks = new WeakMap<z.ZodType, Check | null>();

/**
 * True when `value` (parsed JSON) fits `schema` and zod would return it as it is; false means "ask zod". A zod parse
 * of a tune costs about 6 us of CPU, a fifth of the client's whole share of a request; this check, compiled once per
 * schema, well under 0.1 us. The callback receiver uses it too. Exported for its agreement tests.
 *
 * @example
 * acceptsAsIs(Tune, JSON.parse(text)) ? (value as Tune) : Tune.parse(value);
 */
export function acceptsAsIs(schema: z.ZodType, value: unknown): boolean {
  let check = compiledChecks.get(schema);
  if (check === undefined) {
    check = compileCheck(schema) ?? null;
    compiledChecks.set(schema, check);
  }
  return check !== null && check(value);
}

interface SchemaDef {
  type: string;
  checks?: { _zod: { def: { check?: string; format?: string } } }[];
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

/**
 * The check for the schema shapes answers use (loose objects, arrays, records, unions, nullish scalars, numbers), or
 * undefined for anything else (refinements, transforms, formats, stripping objects): zod alone judges those. A union
 * is checked on its options up to the first one zod alone judges.
 * It is compiled to one function, as zod compiles its own objects: fields are read by name (a tree of closures reading
 * `v[key]` in a loop cost 1.3 us per tune, profiled in the client bench). Only
 * the schema's own keys (as JSON string literals) and bounds (numbers) go into the source. Where code cannot be
 * generated (`--disallow-code-generation-from-strings`), zod judges every answer.
 */
function compileCheck(schema: z.ZodType): Check | undefined {
  const functions: string[] = [];
  const test = checkSource(schema, 'v', functions);
  if (test === undefined) return undefined;
  try {
    return new Function(`${functions.join('\n')}\nreturn (v) => ${test};`)() as Check;
  } catch {
    return undefined;
  }
}

/**
 * A JS expression that is true when the value in variable `v` fits `schema`; objects, arrays and records become
 * functions appended to `functions` (named `c0`, `c1`, ...), called from the expression.
 */
function checkSource(schema: z.ZodType, v: string, functions: string[]): string | undefined {
  const def = defOf(schema);
  const checks = def.checks ?? [];
  // z.url(), z.int() and the like are strings and numbers that are checks themselves; coercion changes values.
  if (def.check !== undefined || def.format !== undefined || def.coerce) return undefined;
  if (def.type === 'number') return numberSource(checks, v);
  if (checks.length > 0) return undefined;
  const call = (body: string): string => {
    functions.push(`function c${functions.length}(v) {\n${body}\n}`);
    return `c${functions.length - 1}(${v})`;
  };
  switch (def.type) {
    case 'unknown':
    case 'any':
      return 'true';
    case 'string':
      return `typeof ${v} === 'string'`;
    case 'boolean':
      return `typeof ${v} === 'boolean'`;
    case 'optional': {
      const inner = checkSource(def.innerType!, v, functions);
      return inner && `(${v} === undefined || ${inner})`;
    }
    case 'nullable': {
      const inner = checkSource(def.innerType!, v, functions);
      return inner && `(${v} === null || ${inner})`;
    }
    case 'union': {
      // zod returns the first option that accepts: the options before the first one left to zod (a numeric string
      // read as a number, an array unwrapped) can answer "as is"; a value only a later one takes goes to zod.
      // A later option is tried only where the earlier ones' "no" is zod's "no" too (not "yes, changed").
      const options: string[] = [];
      for (const option of def.options!) {
        const test = checkSource(option, v, functions);
        if (test === undefined) break;
        options.push(test);
        if (!refusesAsZod(option)) break;
      }
      return options.length > 0 ? `(${options.join(' || ')})` : undefined;
    }
    case 'array': {
      const element = checkSource(def.element!, 'e', functions);
      return (
        element &&
        call(
          `if (!Array.isArray(v)) return false;\n` +
            `for (let i = 0; i < v.length; i++) { const e = v[i]; if (!(${element})) return false; }\nreturn true;`,
        )
      );
    }
    case 'record': {
      // zod's records take only plain objects, which is what JSON.parse makes of `{...}`.
      const key = defOf(def.keyType!);
      const element = checkSource(def.valueType!, 'e', functions);
      if (key.type !== 'string' || key.checks?.length || !element) return undefined;
      return call(
        `${OBJECT_TEST}\n` +
          // zod's plain-object test, for a JSON object with a "constructor" key of its own.
          `const c = v.constructor;\nif (c !== undefined) { const p = c.prototype; if (typeof p !== 'object' || ` +
          `p === null || Array.isArray(p) || !Object.hasOwn(p, 'isPrototypeOf')) return false; }\n` +
          `for (const e of Object.values(v)) if (!(${element})) return false;\nreturn true;`,
      );
    }
    case 'object': {
      // Only loose objects: zod returns them with every field, as they came.
      if (!def.catchall || defOf(def.catchall).type !== 'unknown') return undefined;
      const fields: string[] = [];
      for (const [key, field] of Object.entries(def.shape!)) {
        const test = checkSource(field, 'x', functions);
        if (test === undefined) return undefined;
        fields.push(`x = v[${JSON.stringify(key)}];\nif (!(${test})) return false;`);
      }
      return call(`${OBJECT_TEST}\nlet x;\n${fields.join('\n')}\nreturn true;`);
    }
    default:
      return undefined;
  }
}

/**
 * True when the compiled check of `schema` says "no" only where zod refuses the value too, never where zod would
 * accept it changed: scalars and arrays of them, not objects (zod drops a `__proto__` key) nor partial unions.
 */
function refusesAsZod(schema: z.ZodType): boolean {
  const def = defOf(schema);
  switch (def.type) {
    case 'number':
    case 'string':
    case 'boolean':
    case 'unknown':
    case 'any':
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

/** Source that returns false unless `v` is an object zod would copy whole: it drops a `__proto__` key of JSON's. */
const OBJECT_TEST = `if (typeof v !== 'object' || v === null || Array.isArray(v) || Object.hasOwn(v, '__proto__')) return false;`;

/** z.number() with `.int()` (zod's safeint format: exactly Number.isSafeInteger), `.min()` and `.max()` only. */
function numberSource(checks: NonNullable<SchemaDef['checks']>, v: string): string | undefined {
  const tests = [`typeof ${v} === 'number'`, `Number.isFinite(${v})`];
  let min: string | undefined;
  let max: string | undefined;
  for (const { _zod } of checks) {
    const c = _zod.def as { check?: string; format?: string; value?: unknown; inclusive?: boolean };
    if (c.check === 'number_format' && c.format === 'safeint') tests[1] = `Number.isSafeInteger(${v})`;
    else if (c.check === 'greater_than' && typeof c.value === 'number' && min === undefined)
      min = `${v} ${c.inclusive === true ? '>=' : '>'} ${String(c.value)}`;
    else if (c.check === 'less_than' && typeof c.value === 'number' && max === undefined)
      max = `${v} ${c.inclusive === true ? '<=' : '<'} ${String(c.value)}`;
    else return undefined;
  }
  return `(${[...tests, min, max].filter((t) => t !== undefined).join(' && ')})`;
}
