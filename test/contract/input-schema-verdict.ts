/**
 * A JSON document's verdict under the published input schema (src/contract/input-schema.ts), from a pinned JSON Schema
 * validator (ajv, draft 2020-12), as fields named the way the workflows' contract names them (`prompts[0].num_images`).
 * Shared by test/contract/input-schema.test.ts and the dev-server test that starts runs with the Temporal CLI.
 */
import Ajv2020, { type ErrorObject } from 'ajv/dist/2020';
import { inputSchema } from '../../src/contract/input-schema';
import { WORKFLOW_NAMES, type WorkflowName } from '../../src/contract/jobs';

// Strict: an unknown keyword or a type mistake in the schema fails; `required` inside an if/then names properties
// declared beside it, not in the same subschema.
const ajv = new Ajv2020({ allErrors: true, strict: true, strictRequired: false });
const validators = Object.fromEntries(WORKFLOW_NAMES.map((w) => [w, ajv.compile(inputSchema(w))]));
const nexusValidators = Object.fromEntries(
  WORKFLOW_NAMES.map((w) => [w, ajv.compile(inputSchema(w, { nexus: true }))]),
);

/** A field as the contract names it: `prompts[0].num_images`. */
function fieldOf(error: ErrorObject): string | undefined {
  const parts = error.instancePath.split('/').slice(1);
  if (error.keyword === 'required') parts.push((error.params as { missingProperty: string }).missingProperty);
  if (error.keyword === 'additionalProperties')
    parts.push((error.params as { additionalProperty: string }).additionalProperty);
  // A name refused by `propertyNames`: the attribute of that name, as the contract names it.
  const name = error.propertyName ?? (error.params as { propertyName?: string }).propertyName;
  if (name !== undefined) parts.push(name);
  // "must match the then schema", at the object: what the `then` said at the field is the news.
  if (error.keyword === 'if') return undefined;
  return parts.reduce((out, part) => (/^\d+$/.test(part) ? `${out}[${part}]` : out ? `${out}.${part}` : part), '');
}

/**
 * `ok`, or the fields the schema refuses, sorted.
 *
 * @example
 * schemaVerdict('generate', { tuneId: 7, prompts: [{ text: 'x', num_images: 9 }] }); // ['prompts[0].num_images']
 */
export function schemaVerdict(workflow: WorkflowName, input: unknown, { nexus = false } = {}): 'ok' | string[] {
  const validate = (nexus ? nexusValidators : validators)[workflow];
  if (validate(input)) return 'ok';
  const fields = [...new Set((validate.errors ?? []).flatMap((e) => fieldOf(e) ?? []))];
  // A union (anyOf) fails at the value and in the option it took; the contract names the option's field, as here.
  const inside = (outer: string) => fields.some((f) => f.startsWith(`${outer}.`) || f.startsWith(`${outer}[`));
  return fields.filter((field) => !inside(field)).sort();
}
