/**
 * Whether a namespace has tuneflow's search attributes (src/contract/search-attributes.ts), and registering them.
 * Worker- and client-side: the worker's check at start, the runs' local activity, `tuneflow search-attributes`.
 */
import type { ConnectionLike } from '@temporalio/client';
import { SEARCH_ATTRIBUTES } from './contract/search-attributes';

type Operator = Pick<ConnectionLike['operatorService'], 'listSearchAttributes' | 'addSearchAttributes'>;

/** temporal.api.enums.v1.IndexedValueType: the two types tuneflow registers. */
const INDEXED_VALUE_TYPE = { Keyword: 2, Int: 3 } as const;

/**
 * The names of tuneflow's attributes `namespace` lacks (none: every run keeps them current).
 *
 * @example
 * await missingSearchAttributes(connection.operatorService, 'default'); // ['TuneflowPhase', ...] on a bare namespace
 */
export async function missingSearchAttributes(operator: Operator, namespace: string): Promise<string[]> {
  const { customAttributes } = await operator.listSearchAttributes({ namespace });
  return SEARCH_ATTRIBUTES.filter(({ name }) => !customAttributes || !(name in customAttributes)).map((a) => a.name);
}

/**
 * Registers the attributes `namespace` lacks; answers the names it added. Registered ones are left alone, so it can
 * run again.
 *
 * @example
 * await registerSearchAttributes(connection.operatorService, 'default'); // ['TuneflowPhase', ...], then []
 */
export async function registerSearchAttributes(operator: Operator, namespace: string): Promise<string[]> {
  const missing = await missingSearchAttributes(operator, namespace);
  if (!missing.length) return [];
  const searchAttributes = Object.fromEntries(
    SEARCH_ATTRIBUTES.filter(({ name }) => missing.includes(name)).map(({ name, type }) => [
      name,
      INDEXED_VALUE_TYPE[type],
    ]),
  );
  await operator.addSearchAttributes({ namespace, searchAttributes });
  return missing;
}

/** While a namespace lacks them, asked again after this: registering them reaches running workers without a restart. */
const RECHECK_MS = 10_000;

/**
 * Answers, per namespace, whether every attribute is registered, asking the server at most once every 10 s until they
 * are, then never again (attributes are not unregistered under live runs). A server that cannot tell (the
 * time-skipping test server has no operator service) counts as without them.
 */
export class SearchAttributesCheck {
  readonly #known = new Map<string, { registered: boolean; atMs: number }>();

  async registered(operator: Operator, namespace: string, nowMs = Date.now()): Promise<boolean> {
    const known = this.#known.get(namespace);
    if (known && (known.registered || nowMs - known.atMs < RECHECK_MS)) return known.registered;
    const registered = await missingSearchAttributes(operator, namespace).then(
      (missing) => missing.length === 0,
      () => false,
    );
    this.#known.set(namespace, { registered, atMs: nowMs });
    return registered;
  }
}
