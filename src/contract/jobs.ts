/**
 * Every job tuneflow runs, in one table: its workflow's type name (what other services start it by), the check of
 * its input, and its input's JSON Schema. The client, the Nexus handler, the schema writer and the command line read
 * it; adding a job is a row here, its workflow function and its Nexus operation.
 */
import { InvalidInputError } from '../api/errors';
import { checkGenerate, checkPackTune, checkTrainThenGenerate, type CheckedInput, type CheckOptions } from './check';
import type { TrainThenGenerateInput } from './inputs';
import { unpricedTraining } from './options';

/** A JSON Schema, as a plain object. */
export type JsonSchema = { [keyword: string]: unknown };

/** The parts a job's input schema is made of (src/contract/input-schema.ts makes them). */
export interface SchemaParts {
  /** A reference to a shared definition: `tuneAttributes`, `packTuneAttributes`, `promptAttributes`, `options`. */
  ref(definition: string): JsonSchema;
  /** A list of prompts, at least `minItems` and at most a run's bound. */
  prompts(minItems: number): JsonSchema;
  /** A tune's, pack's or prompt's id. */
  id: JsonSchema;
}

/** One job: its input check and its input schema. */
export interface JobKind {
  /** Checks a start's input against the contract and contacts nothing (the workflow checks it again when it runs). */
  check(workflowId: string, input: unknown, options?: CheckOptions): CheckedInput<unknown>;
  /** Its input's JSON Schema, from shared parts. */
  schema(parts: SchemaParts): JsonSchema;
}

export const JOBS = {
  trainThenGenerate: {
    check: (workflowId: string, input: unknown, options?: CheckOptions) =>
      withKnownTunePrice(checkTrainThenGenerate(workflowId, input, options)),
    schema: ({ ref, prompts }) => ({
      type: 'object',
      required: ['tune', 'prompts'],
      properties: { tune: ref('tuneAttributes'), prompts: prompts(0), options: ref('options') },
    }),
  },
  generate: {
    check: (_workflowId: string, input: unknown, options?: CheckOptions) => checkGenerate(input, options),
    schema: ({ ref, prompts, id }) => ({
      type: 'object',
      required: ['tuneId', 'prompts'],
      properties: { tuneId: id, prompts: prompts(1), options: ref('options') },
    }),
  },
  packTune: {
    check: checkPackTune,
    schema: ({ ref, id }) => ({
      type: 'object',
      required: ['packId', 'tune'],
      properties: { packId: id, tune: ref('packTuneAttributes'), options: ref('options') },
    }),
  },
} as const satisfies Record<string, JobKind>;

/**
 * A start the run would refuse at once for its price is refused before it starts: the workflow checks this when it
 * prices the tune (src/workflows/budget.ts), after its input check, so the input check alone lets it through.
 */
function withKnownTunePrice(checked: CheckedInput<TrainThenGenerateInput>): CheckedInput<TrainThenGenerateInput> {
  const rule = unpricedTraining(checked.input.tune, checked.options);
  if (rule !== undefined) throw new InvalidInputError('input', [{ field: 'options.tuneCostMc', rule }]);
  return checked;
}

/** The workflow type names: the public contract. */
export type WorkflowName = keyof typeof JOBS;
/** The workflow type names, in the table's order. */
export const WORKFLOW_NAMES = Object.keys(JOBS) as WorkflowName[];
/** The workflow type names by name: `WorkflowName.packTune` is `'packTune'`. */
export const WorkflowName = Object.fromEntries(WORKFLOW_NAMES.map((name) => [name, name])) as {
  readonly [K in WorkflowName]: K;
};
