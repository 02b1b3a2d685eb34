/**
 * The job's input contract: every rule a tuneflow workflow's input must meet (tune, prompts, pack, options), checked
 * whole before anything is sent. One module for the starters (client.ts, the command line) and the workflows
 * themselves, so a run started by name from a raw client, the Temporal CLI or another SDK is held to the same rules.
 *
 * It runs inside the workflow sandbox: pure code over the spec's zod schemas, parsed `jitless` so zod never compiles
 * a parser with `new Function` there (one interpreted code path, the same in every isolate and on every replay).
 */
import { z } from 'zod';
import { InvalidInputError, type InputIssue } from '../api/errors';
import { PackTuneCreateInput, PromptCreateInput, ResourceId, TuneCreateInput } from '../api/schemas';
import { boundIssues, inputShape, sizeIssue, withoutPrototypeNames, type AttributeKinds } from './bounds';
import { MAX_PROMPTS_PER_RUN } from './failures';
import { RESERVED_KEY_PREFIX } from './keys';
import { MAX_KEY_LENGTH, utf8Bytes } from './tenants';
import type { GenerateInput, PackTuneInput, TrainThenGenerateInput } from './inputs';
import { resolveOptions, type ResolvedOptions } from './options';

/** A business key's rule: the workflow ID of the job it names. */
export const businessKey = z
  .string({ error: 'must be a string' })
  .min(1, { error: 'must be a non-empty business key' })
  // Temporal counts an ID's bytes (UTF-8), not its characters: the schema's maxLength, then the bytes.
  .max(MAX_KEY_LENGTH, { error: `must be at most ${MAX_KEY_LENGTH} bytes as UTF-8` })
  .refine((key) => utf8Bytes(key) <= MAX_KEY_LENGTH, {
    error: `must be at most ${MAX_KEY_LENGTH} bytes as UTF-8 (what the longest workflow ID made from it leaves of Temporal's 1,000)`,
  })
  .refine((key) => !key.startsWith(RESERVED_KEY_PREFIX), {
    error: `must not start with "${RESERVED_KEY_PREFIX}" (the workflow IDs tuneflow makes itself start so)`,
  });

/**
 * An input that met the contract, and its options resolved (defaults applied, durations in milliseconds): what a
 * boundary passes on, so nothing after it checks or resolves again.
 */
export interface CheckedInput<I> {
  input: I;
  options: ResolvedOptions;
}

/**
 * Checks a `trainThenGenerate` input; throws InvalidInputError naming every field that breaks a rule.
 *
 * @example
 * checkTrainThenGenerate('order-1234', { tune: { name: 'woman', image_urls: [url] }, prompts: [{ text: 'ohwx' }] });
 */
export function checkTrainThenGenerate(
  workflowId: string,
  input: unknown,
  { bounds = true }: CheckOptions = {},
): CheckedInput<TrainThenGenerateInput> {
  const issues: InputIssue[] = [];
  const checked = new Checked(issues, bounds);
  if (requireObject(issues, input, 'input') && checked.shaped(input)) {
    const tune = input.tune;
    if (requireObject(issues, tune, 'tune')) {
      // A refused attribute is named once, as refused, not again for what it holds.
      const { prompts_attributes: refused, ...held } = tune;
      const checkedTune = bounds ? held : { ...held, prompts_attributes: refused };
      check(issues, TuneCreateInput, 'tune', {
        title: workflowId,
        ...checkedTune,
        ...paths(issues, tune.images),
        ...characteristicsRead(tune, bounds),
      });
      if (bounds) issues.push(...boundIssues('tune', tune, TUNE_KINDS, 'tune'));
    }
    checkPrompts(issues, input.prompts, true, bounds);
    checked.options(input.options);
  }
  return checked.result(input as TrainThenGenerateInput);
}

/** Checks a `generate` input; throws InvalidInputError naming every field that breaks a rule. */
export function checkGenerate(input: unknown, { bounds = true }: CheckOptions = {}): CheckedInput<GenerateInput> {
  const issues: InputIssue[] = [];
  const checked = new Checked(issues, bounds);
  if (requireObject(issues, input, 'input') && checked.shaped(input)) {
    check(issues, ResourceId, 'tuneId', input.tuneId);
    checkPrompts(issues, input.prompts, false, bounds);
    checked.options(input.options);
  }
  return checked.result(input as GenerateInput);
}

/** Checks a `packTune` input; throws InvalidInputError naming every field that breaks a rule. */
export function checkPackTune(
  workflowId: string,
  input: unknown,
  { bounds = true }: CheckOptions = {},
): CheckedInput<PackTuneInput> {
  const issues: InputIssue[] = [];
  const checked = new Checked(issues, bounds);
  if (requireObject(issues, input, 'input') && checked.shaped(input)) {
    check(issues, ResourceId, 'packId', input.packId);
    const tune = input.tune ?? {};
    if (requireObject(issues, tune, 'tune')) {
      // Existing tunes keep their titles; a new tune's is tuneflow's (checked here as the workflow ID stands in).
      const withTitle = tune.tune_ids === undefined ? { title: workflowId, ...tune } : tune;
      check(issues, PackTuneCreateInput, 'tune', {
        ...withTitle,
        ...paths(issues, tune.images),
        ...characteristicsRead(tune, bounds),
      });
      if (bounds) issues.push(...boundIssues('tune', tune, PACK_TUNE_KINDS, 'packTune'));
    }
    checked.options(input.options);
  }
  return checked.result(input as PackTuneInput);
}

function checkPrompts(issues: InputIssue[], prompts: unknown, allowEmpty: boolean, bounds: boolean): void {
  if (!Array.isArray(prompts) || (!allowEmpty && prompts.length === 0)) {
    issues.push({ field: 'prompts', rule: `must be a${allowEmpty ? 'n' : ' non-empty'} array of prompts` });
    return;
  }
  if (prompts.length > MAX_PROMPTS_PER_RUN) {
    issues.push({
      field: 'prompts',
      rule: `must hold at most ${MAX_PROMPTS_PER_RUN} prompts (one list page); start more runs`,
    });
    return;
  }
  prompts.forEach((prompt, i) => {
    check(issues, PromptCreateInput, `prompts[${i}]`, prompt);
    if (bounds && typeof prompt === 'object' && prompt !== null && !Array.isArray(prompt))
      issues.push(...boundIssues(`prompts[${i}]`, prompt as Record<string, unknown>, PROMPT_KINDS));
  });
}

/**
 * `bounds: false` leaves out the rules added since the first releases (INPUT_BOUNDS, the whole input's depth and size,
 * upload paths, refused attributes and names): a workflow replaying a run started before them, or before the one that
 * refuses its input (src/workflows/admission.ts, INPUT_BOUNDED), checks so.
 */
export interface CheckOptions {
  /** @default true */
  bounds?: boolean;
}

/** The characteristics the spec's schema reads: with every bound, without the names the bounds refuse in words. */
function characteristicsRead(tune: Record<string, unknown>, bounds: boolean): { characteristics?: unknown } {
  if (bounds !== true || tune.characteristics === undefined) return {};
  const read = withoutPrototypeNames(tune.characteristics);
  return read === tune.characteristics ? {} : { characteristics: read };
}

/** Each attribute the spec lists for an object, by the bound its value has (scalars other than strings: none). */
function kindsOf(shape: Record<string, unknown>, kinds: AttributeKinds): AttributeKinds {
  return { ...Object.fromEntries(Object.keys(shape).map((key) => [key, 'string' as const])), ...kinds };
}
export const TUNE_KINDS = kindsOf(TuneCreateInput.shape, {
  images: 'images',
  image_urls: 'urls',
  callback: 'url',
  characteristics: 'other',
});
export const PROMPT_KINDS = kindsOf(PromptCreateInput.shape, {
  text: 'text',
  callback: 'url',
  input_image: 'path',
  mask_image: 'path',
  input_image_url: 'url',
  mask_image_url: 'url',
});
export const PACK_TUNE_KINDS = kindsOf(PackTuneCreateInput.shape, {
  images: 'images',
  image_urls: 'urls',
  callback: 'url',
  prompts_callback: 'url',
  characteristics: 'other',
  tune_ids: 'ids',
  prompt_ids: 'ids',
  prompt_attributes: 'attributes',
});

/** One check's verdict: the issues found, and the options resolved once (or the InvalidOptions failure). */
class Checked {
  private resolved: ResolvedOptions | undefined;
  private optionsFailure: unknown;

  /** Whether the whole input may be larger than its bound: weighed last, once no field was refused. */
  private mayBeTooLarge = false;

  constructor(
    private readonly issues: InputIssue[],
    private readonly bounds: boolean,
  ) {}

  /**
   * The whole input within its depth (with every bound): one too deep is refused for that alone, and nothing else in
   * it is read. Its size is weighed in `result`, once no field was refused: a field too long is named as that.
   */
  shaped(input: unknown): boolean {
    if (this.bounds !== true) return true;
    const { tooDeep, mayBeTooLarge } = inputShape(input);
    if (tooDeep) this.issues.push(tooDeep);
    this.mayBeTooLarge = mayBeTooLarge;
    return !tooDeep;
  }

  /** The workflows' own option rules (defaults, durations, the poll bound). */
  options(options: unknown): void {
    try {
      this.resolved = resolveOptions(options as Parameters<typeof resolveOptions>[0]);
    } catch (err) {
      const details = (err as { details?: unknown[] }).details?.[0] as { option?: string; rule?: string } | undefined;
      if (!details?.option) throw err;
      const field = details.option === 'options' ? 'options' : `options.${details.option}`;
      this.issues.push({ field, rule: details.rule ?? 'is invalid' });
      this.optionsFailure = err;
    }
  }

  /**
   * The checked input, or InvalidInputError naming every issue; its `cause` is the InvalidOptions failure when an
   * option broke a rule (a workflow fails with that one, as documented).
   */
  result<I>(input: I): CheckedInput<I> {
    // The whole input's size, once every field is within its own bounds (each bounded, their sum may not be).
    const size = this.issues.length || !this.mayBeTooLarge ? undefined : sizeIssue(input);
    if (size) this.issues.push(size);
    if (this.issues.length || !this.resolved) {
      const err = new InvalidInputError('input', this.issues);
      throw this.optionsFailure === undefined ? err : Object.assign(err, { cause: this.optionsFailure });
    }
    return { input, options: this.resolved };
  }
}

/** Paths and URLs only: image bytes never enter a workflow's history (bad ones reported here, not again). */
function paths(issues: InputIssue[], images: unknown): { images?: string[] } {
  if (images === undefined) return {};
  const rule = 'must be a path the worker can read (bytes never enter history)';
  if (!Array.isArray(images)) {
    issues.push({ field: 'tune.images', rule: 'must be an array of paths' });
    return { images: undefined };
  }
  images.forEach((image, i) => typeof image !== 'string' && issues.push({ field: `tune.images[${i}]`, rule }));
  return { images: images.filter((image) => typeof image === 'string') };
}

function check(issues: InputIssue[], schema: z.ZodType, subject: string, value: unknown): void {
  const result = schema.safeParse(value, { jitless: true });
  if (!result.success) issues.push(...InvalidInputError.fromZod(subject, result.error).issues);
}

function requireObject(issues: InputIssue[], value: unknown, field: string): value is Record<string, unknown> {
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) return true;
  issues.push({ field, rule: 'must be an object' });
  return false;
}
