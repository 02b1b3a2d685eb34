/**
 * Business keys: one key names one job. The same input under a key gets that key's job; other input under it is
 * refused, naming the key and the fields that differ. Keys of different tenants never meet: a tenant's key runs under
 * an ID that names the tenant (./tenants.ts, tenantWorkflowId).
 * Sandbox-safe: the workflows use it too.
 */
import { InvalidInputError } from '../api/errors';

/** Workflow IDs that tuneflow makes itself start with this; a caller's key may not. */
export const RESERVED_KEY_PREFIX = 'tuneflow:';

/**
 * The workflow ID of the claim a run makes on its workflow ID before it creates anything: a child that ends at once,
 * started with "reject duplicate", so a later run under the same ID (a raw start with "allow duplicate" after the job
 * closed, a terminate-and-restart, a workflow retry) learns that the key has had its job.
 */
export function claimWorkflowId(workflowId: string): string {
  return `${RESERVED_KEY_PREFIX}claim:${workflowId}`;
}

/**
 * How a start differs from the job that holds its key: undefined when it is that job (the same workflow and input),
 * else the holder's workflow and the fields that differ (none when the workflow itself is another).
 *
 * @example
 * const other = otherJob('trainThenGenerate', input, holder); // undefined: attach
 */
export function otherJob(
  workflow: string,
  input: unknown,
  holder: { workflow: string; input: unknown },
): { workflow: string; fields: string[] } | undefined {
  const fields = holder.workflow === workflow ? differingFields(input, holder.input) : [];
  return holder.workflow === workflow && !fields.length ? undefined : { workflow: holder.workflow, fields };
}

/** The most differing fields a refusal names. */
const FIELDS_NAMED = 20;

/**
 * The fields where two inputs under one key differ, compared as the JSON Temporal carries them (an absent attribute
 * and `undefined` are the same; absent, `null` and `{}` options are the same); empty for the same job.
 *
 * @example
 * differingFields({ tune: { name: 'dog' }, prompts: [] }, { tune: { name: 'cat' }, prompts: [] }); // ['tune.name']
 */
export function differingFields(ours: unknown, theirs: unknown): string[] {
  const out: string[] = [];
  compare(normalized(ours), normalized(theirs), 'input', out);
  return out;
}

function normalized(input: unknown): unknown {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return input;
  const { options, ...rest } = input as Record<string, unknown>;
  const noOptions = options === undefined || options === null || (isObject(options) && !Object.keys(options).length);
  return noOptions ? rest : { ...rest, options };
}

function compare(a: unknown, b: unknown, field: string, out: string[]): void {
  if (out.length >= FIELDS_NAMED || a === b) return;
  if (Array.isArray(a) && Array.isArray(b)) {
    if (a.length !== b.length) out.push(`${field} (${a.length} against ${b.length} items)`);
    else a.forEach((item, i) => compare(item, b[i], `${field}[${i}]`, out));
    return;
  }
  if (isObject(a) && isObject(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const key of keys)
      if (a[key] !== undefined || b[key] !== undefined) compare(a[key], b[key], `${field}.${key}`, out);
    return;
  }
  out.push(field);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * A start refused because its key names another job: other input, or another kind of job. Nothing was created. An
 * InvalidInputError on `key`, so every starter reports it as bad input (the command line with exit 2, Nexus as a bad
 * request); a run refuses with an ApplicationFailure of type `KeyInUse` and the same details.
 */
export class KeyInUseError extends InvalidInputError {
  constructor(
    readonly key: string,
    /** The job that holds the key: its workflow and run. */
    readonly holder: { workflow: string; runId?: string },
    /** The fields that differ (empty when the job is of another kind). */
    readonly fields: readonly string[],
  ) {
    super('input', [{ field: 'key', rule: keyInUseRule(key, holder.workflow, fields) }]);
    this.name = 'KeyInUseError';
  }
}

/** The details of a KeyInUse failure. */
export interface KeyInUseDetails {
  key: string;
  workflow: string;
  runId?: string;
  fields: string[];
}

/** Why a key is refused, in words. */
export function keyInUseRule(key: string, workflow: string, fields: readonly string[]): string {
  const what = fields.length
    ? `names a ${workflow} job with other input (${fields.join(', ')} differ)`
    : `names a ${workflow} job`;
  return `${JSON.stringify(key)} ${what}: a key names one job, and a job runs once; use a new key for a new job`;
}
