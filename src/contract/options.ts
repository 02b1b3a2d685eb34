/**
 * The workflows' options: defaults that suit the real service, checked once at workflow start. A bad value fails the
 * workflow at once with an `InvalidOptions` failure that names the option, instead of surfacing hours later.
 */
import { ApplicationFailure } from '@temporalio/workflow';
import { durationToMs } from '../duration';
import { FailureType } from './failures';
import type { TuneflowOptions } from './inputs';
import { inspectIssue, type InspectionFlag } from './inspection';
import { pollsWithin } from './poll-schedule';

/**
 * Defaults. Training takes tens of minutes and prompts about a minute on the real service, and callbacks normally
 * end each wait: polls are the safety net, so they start minutes apart and slow to one every ten minutes.
 */
export const DEFAULT_OPTIONS = {
  pollInterval: '2 minutes',
  maxPollInterval: '10 minutes',
  trainingTimeout: '6 hours',
  promptTimeout: '1 hour',
  promptConcurrency: 4,
  cleanupOnCancel: false,
} as const satisfies Required<Omit<TuneflowOptions, 'maxCostMc' | 'tuneCostMc' | 'inspect' | 'storeImages'>>;

/** The most prompt creates at once (the same bound the starters in client.ts check). */
export const MAX_PROMPT_CONCURRENCY = 32;

/**
 * The most polls one wait may make when no callback comes. Each poll adds about ten events (and a prompt list) to
 * the history; this bound keeps a run far below Temporal's history limits without continue-as-new. With the
 * defaults a training wait polls at most 38 times, a prompt wait 8 times.
 */
export const MAX_POLLS_PER_WAIT = 100;

/** Options with every default applied and every duration in milliseconds. */
export interface ResolvedOptions {
  pollIntervalMs: number;
  maxPollIntervalMs: number;
  trainingTimeoutMs: number;
  promptTimeoutMs: number;
  promptConcurrency: number;
  cleanupOnCancel: boolean;
  /** Undefined: no limit. */
  maxCostMc: number | undefined;
  /** The price the caller states for a training, which maxCostMc is held with; undefined when not stated. */
  tuneCostMc: number | undefined;
  /** Inspect the training images before the tune is created, refusing these flags; undefined: no inspection. */
  inspect: { refuse: InspectionFlag[] } | undefined;
  /** Copy the images to storage: true, false, or undefined (where the worker has storage). */
  storeImages: boolean | undefined;
}

type DurationOption = 'pollInterval' | 'maxPollInterval' | 'trainingTimeout' | 'promptTimeout';
/**
 * maxCostMc, tuneCostMc and inspect have no default: no limit, no price, no inspection, unless given; storeImages's
 * is the worker's (its storage).
 */
const KNOWN_OPTIONS: readonly string[] = [
  ...Object.keys(DEFAULT_OPTIONS),
  'maxCostMc',
  'tuneCostMc',
  'inspect',
  'storeImages',
];

/**
 * Applies defaults and checks every option; throws a non-retryable ApplicationFailure of type `InvalidOptions` that
 * names the option and the rule.
 *
 * @example
 * resolveOptions({ pollInterval: '30 seconds' }).pollIntervalMs; // 30000
 * resolveOptions({ pollInterval: 'soon' }); // throws InvalidOptions: "pollInterval: must be a duration ..."
 */
export function resolveOptions(options: TuneflowOptions | undefined | null): ResolvedOptions {
  if (options === undefined || options === null) options = {};
  if (typeof options !== 'object' || Array.isArray(options)) throw invalid('options', 'must be an object');
  for (const key of Object.keys(options))
    if (!KNOWN_OPTIONS.includes(key)) throw invalid(key, `is not an option (known: ${KNOWN_OPTIONS.join(', ')})`);

  const durationOf = (key: DurationOption) => positiveDuration(key, options[key] ?? DEFAULT_OPTIONS[key]);
  const pollIntervalMs = durationOf('pollInterval');
  // A slow first interval given alone raises the default ceiling rather than contradicting it.
  const maxPollIntervalMs =
    options.maxPollInterval === undefined
      ? Math.max(pollIntervalMs, durationOf('maxPollInterval'))
      : durationOf('maxPollInterval');
  if (maxPollIntervalMs < pollIntervalMs) throw invalid('maxPollInterval', 'must be at least pollInterval');

  const promptConcurrency = options.promptConcurrency ?? DEFAULT_OPTIONS.promptConcurrency;
  if (!Number.isInteger(promptConcurrency) || promptConcurrency < 1 || promptConcurrency > MAX_PROMPT_CONCURRENCY)
    throw invalid('promptConcurrency', `must be an integer from 1 to ${MAX_PROMPT_CONCURRENCY}`);
  const cleanupOnCancel = options.cleanupOnCancel ?? DEFAULT_OPTIONS.cleanupOnCancel;
  if (typeof cleanupOnCancel !== 'boolean') throw invalid('cleanupOnCancel', 'must be true or false');
  const maxCostMc = millicents('maxCostMc', options.maxCostMc);
  const tuneCostMc = millicents('tuneCostMc', options.tuneCostMc);
  const inspectRule = inspectIssue(options.inspect);
  if (inspectRule) throw invalid(inspectRule.option, inspectRule.rule);
  const inspect = options.inspect == null ? undefined : { refuse: [...(options.inspect.refuse ?? [])] };
  const storeImages = options.storeImages ?? undefined;
  if (storeImages !== undefined && typeof storeImages !== 'boolean')
    throw invalid('storeImages', 'must be true or false');

  const schedule = { pollIntervalMs, maxPollIntervalMs };
  const timeouts = { trainingTimeout: durationOf('trainingTimeout'), promptTimeout: durationOf('promptTimeout') };
  for (const [option, timeoutMs] of Object.entries(timeouts)) {
    const polls = pollsWithin(timeoutMs, schedule);
    if (polls > MAX_POLLS_PER_WAIT)
      throw invalid(
        option,
        `could take ${polls} polls at the poll intervals given, more than the ${MAX_POLLS_PER_WAIT} that keep the ` +
          `workflow history small: raise maxPollInterval or shorten ${option}`,
      );
  }

  return {
    pollIntervalMs,
    maxPollIntervalMs,
    trainingTimeoutMs: timeouts.trainingTimeout,
    promptTimeoutMs: timeouts.promptTimeout,
    promptConcurrency,
    cleanupOnCancel,
    maxCostMc,
    tuneCostMc,
    inspect,
    storeImages,
  };
}

/**
 * InvalidOptions for a rule the workflow checks once it knows more than the options (the job's input, a price).
 *
 * @example
 * throw invalidOption('tuneCostMc', 'is needed with maxCostMc ...');
 */
export const invalidOption = (option: string, rule: string): ApplicationFailure => invalid(option, rule);

/**
 * The rule a training breaks when `maxCostMc` is held and its price cannot be known before the tune is created: on a
 * paid branch (any but `fast`, which is free), the service publishes no price and charges at the create, so the
 * caller states it (`tuneCostMc`). Undefined when the training meets it. The one check of it: the workflow refuses
 * such a run (src/workflows/budget.ts), and the starters refuse the start (src/contract/jobs.ts).
 *
 * @example
 * unpricedTraining({ branch: 'sd15' }, { maxCostMc: 100_000, tuneCostMc: undefined }); // 'is needed with maxCostMc ...'
 */
export function unpricedTraining(
  tune: { branch?: unknown },
  { maxCostMc, tuneCostMc }: Pick<ResolvedOptions, 'maxCostMc' | 'tuneCostMc'>,
): string | undefined {
  if (maxCostMc === undefined || tune.branch === 'fast' || tuneCostMc !== undefined) return undefined;
  return (
    'is needed with maxCostMc to train a tune not on branch fast: the service publishes no price for a tune ' +
    "and charges it when the tune is created; state your account's price (the tune's cost_mc) or leave " +
    'maxCostMc out'
  );
}

function millicents(key: 'maxCostMc' | 'tuneCostMc', value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0)
    throw invalid(key, `must be a whole number of millicents, 0 or more (got ${show(value)})`);
  return value;
}

function positiveDuration(key: DurationOption, value: unknown): number {
  let ms: number;
  try {
    if (typeof value !== 'string' && typeof value !== 'number') throw new TypeError('not a string or number');
    ms = durationToMs(value, key);
  } catch {
    throw invalid(key, `must be a duration such as '90 seconds' or a number of milliseconds (got ${show(value)})`);
  }
  if (ms <= 0) throw invalid(key, `must be longer than zero (got ${show(value)})`);
  return ms;
}

function invalid(option: string, rule: string): ApplicationFailure {
  return ApplicationFailure.nonRetryable(`Invalid option ${option}: ${rule}`, FailureType.invalidOptions, {
    option,
    rule,
  });
}

function show(value: unknown): string {
  return JSON.stringify(value) ?? String(value);
}
