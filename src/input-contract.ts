/**
 * The job's input contract, in one place: the tune, prompts, pack and options of each workflow, checked with the
 * service's own rules (src/api/schemas.ts) and the workflows' option rules. The starters (src/client.ts) and the
 * command line check it before they start anything; each workflow checks its whole input again before its first call
 * to the service, so a run started by anything else (a raw Temporal client, the CLI or UI, another language's SDK)
 * fails with `InvalidInput`, naming the path and the rule, having created nothing.
 *
 * It is bundled into the workflows, so it holds to their rules and runs inside the workflow sandbox: zod without its JIT (zod 4 compiles object parsers with `new Function`
 * unless told `jitless`, here per parse), no clock, no I/O; the same input always gets the same verdict, so replays
 * agree.
 */
import { ApplicationFailure } from '@temporalio/workflow';
import { z } from 'zod';
import { InvalidInputError } from './api/errors';
import { PackTuneCreateInput, PromptCreateInput, ResourceId, TuneCreateInput } from './api/schemas';
import { FailureType, MAX_PROMPTS_PER_RUN } from './workflows/failures';
import type { GenerateInput, PackTuneInput, TrainThenGenerateInput, TuneflowOptions } from './workflows/inputs';
import { resolveOptions } from './workflows/options';

/**
 * Parses without zod's JIT, per call: the same rules, no generated code in the sandbox, and no global setting that
 * would also slow the worker's own parsing of the service's answers.
 */
function parseInput<S extends z.ZodType>(schema: S, subject: string, value: unknown): z.output<S> {
  const result = schema.safeParse(value, { jitless: true });
  if (!result.success) throw InvalidInputError.fromZod(subject, result.error);
  return result.data;
}

/** Paths and URLs only: image bytes never enter a workflow's history. */
const pathsOnly = z.array(z.string({ error: 'must be a path the worker can read (bytes never enter history)' }));

/**
 * @example
 * checkTrainThenGenerate('order-1234', input); // throws InvalidInputError('input', [{ field: 'prompts[1].w', ... }])
 */
export function checkTrainThenGenerate(workflowId: string, input: TrainThenGenerateInput): void {
  requireObject(input, 'input');
  requireObject(input.tune, 'tune');
  parseInput(TuneCreateInput, 'tune', {
    title: workflowId,
    ...input.tune,
    images: paths(input.tune.images, 'tune.images'),
  });
  checkPrompts(input.prompts, true);
  checkOptions(input.options);
}

export function checkGenerate(input: GenerateInput): void {
  requireObject(input, 'input');
  parseInput(ResourceId, 'tuneId', input.tuneId);
  checkPrompts(input.prompts, false);
  checkOptions(input.options);
}

export function checkPackTune(workflowId: string, input: PackTuneInput): void {
  requireObject(input, 'input');
  parseInput(ResourceId, 'packId', input.packId);
  requireObject(input.tune, 'tune');
  const tune = input.tune;
  const withTitle = tune.tune_ids === undefined ? { title: workflowId, ...tune } : tune;
  parseInput(PackTuneCreateInput, 'tune', { ...withTitle, images: paths(tune.images, 'tune.images') });
  checkOptions(input.options);
}

/** The workflows' own option rules (defaults, durations, the poll bound), as an InvalidInputError. */
export function checkOptions(options: TuneflowOptions | undefined): void {
  try {
    resolveOptions(options);
  } catch (err) {
    const details = (err as ApplicationFailure).details?.[0] as { option?: string; rule?: string } | undefined;
    if (!details?.option) throw err;
    throw new InvalidInputError('input', [{ field: `options.${details.option}`, rule: details.rule ?? 'is invalid' }]);
  }
}

/**
 * Inside a workflow: the contract's verdict as the workflow's failure, `InvalidInput`, non-retryable, with the
 * issues (path and rule each) in its details.
 *
 * @example
 * checkedInWorkflow(() => checkGenerate(input));
 */
export function checkedInWorkflow(check: () => void): void {
  try {
    check();
  } catch (err) {
    if (!(err instanceof InvalidInputError)) throw err;
    throw ApplicationFailure.nonRetryable(err.message, FailureType.invalidInput, { issues: err.issues });
  }
}

function checkPrompts(prompts: unknown, allowEmpty: boolean): void {
  if (!Array.isArray(prompts) || (!allowEmpty && prompts.length === 0))
    throw new InvalidInputError('input', [
      { field: 'prompts', rule: `must be a${allowEmpty ? 'n' : ' non-empty'} array of prompts` },
    ]);
  if (prompts.length > MAX_PROMPTS_PER_RUN)
    throw new InvalidInputError('input', [
      { field: 'prompts', rule: `must hold at most ${MAX_PROMPTS_PER_RUN} prompts (one list page); start more runs` },
    ]);
  prompts.forEach((prompt, i) => parseInput(PromptCreateInput, `prompts[${i}]`, prompt));
}

function paths(images: unknown, field: string): string[] | undefined {
  return images === undefined ? undefined : parseInput(pathsOnly, field, images);
}

function requireObject(value: unknown, field: string): void {
  if (!value || typeof value !== 'object' || Array.isArray(value))
    throw new InvalidInputError('input', [{ field, rule: 'must be an object' }]);
}
