/**
 * Form bodies as the service reads them: bracket-notation keys (`tune[prompts_attributes][0][text]`,
 * `tune[images][]`, `tune[characteristics][eye_color]`) unfolded into nested objects and arrays, and string leaves
 * coerced to the numbers and booleans the zod schema expects at that place (never blindly: a characteristic of
 * "30" stays a string).
 */
import { z } from 'zod';

type Container = Record<string, unknown> | unknown[];

/** Splits `a[b][0][]` into `['a', 'b', '0', '']`; undefined when the key is not bracket notation. */
function splitKey(key: string): string[] | undefined {
  const open = key.indexOf('[');
  if (open === -1) return [key];
  if (open === 0) return undefined;
  const parts = [key.slice(0, open)];
  const rest = /\[([^[\]]*)\]/y;
  rest.lastIndex = open;
  let m: RegExpExecArray | null;
  while ((m = rest.exec(key)) !== null) {
    parts.push(m[1]);
    if (rest.lastIndex === key.length) return parts;
  }
  return undefined;
}

function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  // defineProperty: a `__proto__` key becomes a plain own field (and a schema error), never a prototype change.
  Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
}

/**
 * Unfolds form entries with bracket-notation keys into one nested object. Files stay Blobs.
 * @example unfoldForm([['tune[images][]', blob], ['tune[title]', 'a']]) // { tune: { images: [blob], title: 'a' } }
 */
export function unfoldForm(entries: Iterable<[string, unknown]>): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  for (const [key, value] of entries) {
    const parts = splitKey(key);
    if (!parts) {
      setOwn(root, key, value);
      continue;
    }
    let node: Container = root;
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i];
      const last = i === parts.length - 1;
      const next = parts[i + 1];
      const makeChild = (): Container => (next === '' || /^\d+$/.test(next) ? [] : {});
      if (Array.isArray(node)) {
        if (part === '') {
          if (last) {
            node.push(value);
            break;
          }
          // Rails style `a[][k]`: a new element when the previous one already has this key.
          const prev = node[node.length - 1];
          if (prev && typeof prev === 'object' && !Array.isArray(prev) && !Object.hasOwn(prev, next))
            node = prev as Container;
          else {
            const child = makeChild();
            node.push(child);
            node = child;
          }
          continue;
        }
        const index = /^\d+$/.test(part) ? Number(part) : NaN;
        if (!Number.isSafeInteger(index) || index > 10_000) break; // not an index: drop the entry
        if (last) {
          node[index] = value;
          break;
        }
        const existing = node[index];
        if (existing !== null && typeof existing === 'object' && !(existing instanceof Blob))
          node = existing as Container;
        else {
          const child = makeChild();
          node[index] = child;
          node = child;
        }
      } else {
        if (last) {
          setOwn(node, part, value);
          break;
        }
        const existing = Object.hasOwn(node, part) ? node[part] : undefined;
        if (existing !== null && typeof existing === 'object' && !(existing instanceof Blob))
          node = existing as Container;
        else {
          const child = makeChild();
          setOwn(node, part, child);
          node = child;
        }
      }
    }
  }
  return root;
}

const NUMBER = /^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/;

/**
 * Coerces form strings to the types `schema` expects at each place: numbers, booleans, and '' to null where null
 * is allowed. Anything else is left for the schema to judge.
 * @example coerceToSchema(TuneListParams, { limit: '5' }) // { limit: 5 }
 */
export function coerceToSchema(schema: z.ZodType, value: unknown): unknown {
  let s: z.ZodType = schema;
  for (;;) {
    if (s instanceof z.ZodOptional || s instanceof z.ZodDefault) s = s.unwrap() as z.ZodType;
    else if (s instanceof z.ZodNullable) {
      if (value === '') return null;
      s = s.unwrap() as z.ZodType;
    } else break;
  }
  if (typeof value === 'string') {
    if (s instanceof z.ZodNumber) return NUMBER.test(value.trim()) ? Number(value) : value;
    if (s instanceof z.ZodBoolean) {
      if (value === 'true' || value === '1') return true;
      if (value === 'false' || value === '0') return false;
    }
    return value;
  }
  if (Array.isArray(value) && s instanceof z.ZodArray)
    return value.map((v) => coerceToSchema(s.element as z.ZodType, v));
  if (value !== null && typeof value === 'object' && !(value instanceof Blob) && s instanceof z.ZodObject) {
    const shape = s.shape as Record<string, z.ZodType>;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value))
      setOwn(out, k, Object.hasOwn(shape, k) ? coerceToSchema(shape[k], v) : v);
    return out;
  }
  return value;
}
