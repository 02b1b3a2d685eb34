/**
 * The typed failures the workflows end with, besides the activities' own: a deadline passed (which object, how long
 * it waited, why it gave up: what the last copy showed, whether callbacks or polls came), or an input or option the
 * workflow cannot run with.
 */
import { ApplicationFailure } from '@temporalio/workflow';
import ms from 'ms';
import { InvalidInputError } from '../api/errors';
import type { Prompt, Tune } from '../api/schemas';
import { costOf, type Cost } from './cost';
import type { StoredImage } from './storage';
import { refusedFlags, type ImageInspection, type InspectionFlag } from './inspection';
import { keyInUseRule, type KeyInUseDetails } from './keys';

/** The `type` of every ApplicationFailure a workflow throws itself. */
export const FailureType = {
  tuneNeverTrained: 'TuneNeverTrained',
  promptsNeverSettled: 'PromptsNeverSettled',
  /** An input that breaks the job's input contract (contract.ts), found before anything was sent. */
  invalidInput: 'InvalidInput',
  /** An option that is not a positive Duration, or that would let the history grow too large. */
  invalidOptions: 'InvalidOptions',
  /** A Flux LoRA without a base tune: its prompts have nowhere to run. */
  missingBaseTune: 'MissingBaseTune',
  /** The job would cost more than `maxCostMc`: a pack whose class price is above it, or prompts left uncreated. */
  overBudget: 'OverBudget',
  /**
   * Under `maxCostMc`, the service said neither in a create's answer nor in one read after it what the create cost:
   * creates stopped there, within the limit as far as the prices known go.
   */
  priceUnknown: 'PriceUnknown',
  /** The key names another job (other input, or another kind of job): refused, nothing created. */
  keyInUse: 'KeyInUse',
  /** The key's job ran before and ended without a result (cancelled, terminated, timed out): a key runs once. */
  jobEnded: 'JobEnded',
  /** The key's claim is held by a run that is no job of the key (a raw start squatting it): nothing created. */
  claimHeld: 'ClaimHeld',
  /** A training image raised a flag `options.inspect.refuse` names: refused before anything was created. */
  inspectionRefused: 'InspectionRefused',
  /**
   * A value the run had to send (an activity's arguments, its result) that no payload can carry: the run ends instead
   * of failing its workflow task on every attempt.
   */
  unconvertiblePayload: 'UnconvertiblePayload',
  /**
   * Images the job paid for could not be copied to the owner's storage (storage refusing past its retries, an image
   * over the size bound or not an image, one the service no longer has): the details say what was paid and copied.
   */
  imagesNotStored: 'ImagesNotStored',
} as const;
export type FailureType = (typeof FailureType)[keyof typeof FailureType];

/** What a wait saw before its deadline. */
export interface WaitRecord {
  /** The deadline, in milliseconds from the start of the wait. */
  timeoutMs: number;
  /** Polls made during the wait. */
  polls: number;
  /** Polls that failed after their retries, and the last such failure's message (or a callback read's). */
  failedPolls: number;
  lastPollError?: string;
  /** Reads that callbacks asked for (runs whose callbacks are wake-ups). */
  callbackReads?: number;
}

/** The details attached to a TuneNeverTrained failure. */
export interface TuneNeverTrainedDetails extends WaitRecord {
  tuneId: number;
  startedTrainingAt: string | null;
  eta: string | null;
}

/** The details attached to a PromptsNeverSettled failure. */
export interface PromptsNeverSettledDetails extends WaitRecord {
  tuneId: number;
  /** The prompts that never got images or a user_error. */
  promptIds: number[];
  /** How many prompts the workflow waited for, and how many of them exist. */
  expected: number;
  known: number;
}

/**
 * The tune was not trained by its deadline.
 *
 * @example
 * throw tuneNeverTrained(tune, { timeoutMs: 21_600_000, polls: 40, failedPolls: 0 });
 */
export function tuneNeverTrained(tune: Tune, wait: WaitRecord): ApplicationFailure {
  const details: TuneNeverTrainedDetails = {
    tuneId: tune.id,
    startedTrainingAt: tune.started_training_at ?? null,
    eta: tune.eta ?? null,
    ...wait,
  };
  const state = tune.started_training_at
    ? `it started training at ${tune.started_training_at}${tune.eta ? ` (eta ${tune.eta})` : ''} and never got trained_at`
    : 'it never started training';
  return ApplicationFailure.nonRetryable(
    `Tune ${tune.id} was not trained within ${ms(wait.timeoutMs, { long: true })} (trainingTimeout): ${state}; ` +
      `no callback said otherwise and ${describePolls(wait, 'it')}`,
    FailureType.tuneNeverTrained,
    details,
  );
}

/**
 * Prompts were not all settled by their deadline; names every prompt still waiting and what it showed.
 *
 * @example
 * throw promptsNeverSettled(tuneId, ledger.unsettled(), { expected: 3, known: 3 }, wait);
 */
export function promptsNeverSettled(
  tuneId: number,
  unsettled: readonly Prompt[],
  count: { expected: number; known: number },
  wait: WaitRecord,
): ApplicationFailure {
  const details: PromptsNeverSettledDetails = {
    tuneId,
    promptIds: unsettled.map((p) => p.id),
    ...count,
    ...wait,
  };
  const reasons = unsettled.map(
    (p) =>
      `prompt ${p.id} ${p.started_training_at ? `started at ${p.started_training_at} and` : 'never started and'} ` +
      'has no images and no user_error',
  );
  if (count.known < count.expected) reasons.push(`${count.expected - count.known} expected prompts never appeared`);
  if (count.expected === 0 && count.known === 0) reasons.push('the tune never listed any prompt');
  return ApplicationFailure.nonRetryable(
    `Prompts of tune ${tuneId} did not settle within ${ms(wait.timeoutMs, { long: true })} (promptTimeout): ` +
      `${reasons.join('; ')}; ${describePolls(wait, 'them')}`,
    FailureType.promptsNeverSettled,
    details,
  );
}

/** What an ImagesNotStored failure carries: the job's cost, what was copied, and what was not, with why. */
export interface ImagesNotStoredDetails {
  cost: Cost;
  /** The prompts whose images were copied: their service URLs (`images`) and their copies, in the same order. */
  stored: { promptId: number; images: string[]; stored: StoredImage[] }[];
  notStored: { promptId: number; images: string[]; failure: string }[];
}

/**
 * The failure of a job whose images were paid for and not all copied: the prompts' service URLs stay in the details,
 * to copy again while the service has them (`tuneflow images check --copy`).
 *
 * @example
 * throw imagesNotStored({ cost, stored: [], notStored: [{ promptId: 7, images: ['https://...'], failure: '...' }] });
 */
export function imagesNotStored(details: ImagesNotStoredDetails): ApplicationFailure {
  const first = details.notStored[0];
  const stored = details.stored.reduce((n, p) => n + p.stored.length, 0);
  return ApplicationFailure.nonRetryable(
    `The images of ${details.notStored.length} prompt${details.notStored.length === 1 ? '' : 's'} were paid for and ` +
      `not copied to storage (${stored} image${stored === 1 ? '' : 's'} of other prompts were); prompt ` +
      `${first?.promptId}: ${first?.failure}`,
    FailureType.imagesNotStored,
    details,
  );
}

function describePolls(wait: WaitRecord, what: 'it' | 'them'): string {
  const polls = `${wait.polls} poll${wait.polls === 1 ? '' : 's'} found ${what} unfinished`;
  if (!wait.failedPolls) return polls;
  return `${polls} (${wait.failedPolls} failed, the last with: ${wait.lastPollError ?? 'unknown error'})`;
}

/**
 * Runs an input check of the contract (check.ts) and turns its InvalidInputError into a non-retryable InvalidInput
 * failure naming every field and rule: a bad input fails the run at once, having created nothing.
 *
 * @example
 * const { options } = requireValidInput(() => checkGenerate(input));
 */
export function requireValidInput<T>(check: () => T): T {
  try {
    return check();
  } catch (err) {
    if (!(err instanceof InvalidInputError)) throw err;
    throw invalidInput(err);
  }
}

/**
 * The InvalidInput failure for an input the workflow refuses, naming every field and rule.
 *
 * @example
 * throw invalidInput(new InvalidInputError('input', [{ field: 'tune.tune_ids', rule: 'must name one tune' }]));
 */
export function invalidInput(err: InvalidInputError): ApplicationFailure {
  const [first] = err.issues;
  return ApplicationFailure.nonRetryable(err.message, FailureType.invalidInput, {
    field: first?.field,
    rule: first?.rule,
    issues: err.issues,
  });
}

/**
 * The most prompts one run creates: one list page (spec 4.7), so one call polls them all, and a history that stays
 * small. More prompts: more `generate` runs.
 */
export const MAX_PROMPTS_PER_RUN = 120;

/** The details attached to an OverBudget failure. */
export interface OverBudgetDetails {
  maxCostMc: number;
  /** What the job had cost when it stopped (nothing, when refused before anything was created). */
  cost: Cost;
  /** A pack's price for the class, when that is what was refused. */
  packPriceMc?: number;
  /** The price stated for the tune (`tuneCostMc`), when that is what was refused. */
  tuneCostMc?: number;
  /** The tune the job created, when it created one: it stays, and trains on (use it with `generate`). */
  tuneId?: number;
  /** Prompts not created because they would have passed the limit, by their position in the input. */
  notCreated: number[];
  /** The prompts the job did create (settled, or as last seen), with their images. */
  prompts: Pick<Prompt, 'id' | 'tune_id' | 'images' | 'user_error'>[];
}

/**
 * A pack's price for the class is above `maxCostMc`: refused before anything is created.
 *
 * @example
 * throw packOverBudget(260, 'woman', 150_000, 100_000);
 */
export function packOverBudget(packId: number, name: string, priceMc: number, maxCostMc: number): ApplicationFailure {
  const details: OverBudgetDetails = { maxCostMc, cost: costOf(0), packPriceMc: priceMc, notCreated: [], prompts: [] };
  return overBudget(
    `Pack ${packId} costs ${priceMc} mc for class ${name}, above maxCostMc ${maxCostMc}: nothing was created`,
    details,
  );
}

/**
 * The tune's stated price (`tuneCostMc`) is above `maxCostMc`: refused before anything is created.
 *
 * @example
 * throw tuneOverBudget(150_000, 100_000, 2);
 */
export function tuneOverBudget(tuneCostMc: number, maxCostMc: number, prompts: number): ApplicationFailure {
  const notCreated = Array.from({ length: prompts }, (_, i) => i);
  const details: OverBudgetDetails = { maxCostMc, cost: costOf(0), tuneCostMc, notCreated, prompts: [] };
  return overBudget(
    `The tune costs ${tuneCostMc} mc (tuneCostMc), above maxCostMc ${maxCostMc}: nothing was created`,
    details,
  );
}

/**
 * The job stopped creating before its cost would pass `maxCostMc`, or a charge passed it (the service charged more
 * than the price expected: a tune above `tuneCostMc`, a first prompt above what was left); what it made has settled,
 * or, for a tune, goes on training.
 *
 * @example
 * throw jobOverBudget(100_000, costOf(96_000), { notCreated: [3, 4], prompts, tuneId: 7 });
 */
export function jobOverBudget(
  maxCostMc: number,
  cost: Cost,
  made: { notCreated: number[]; prompts: readonly Prompt[]; tuneId?: number; tuneCostMc?: number },
): ApplicationFailure {
  const { notCreated, prompts, tuneId, tuneCostMc } = made;
  const details: OverBudgetDetails = {
    maxCostMc,
    cost,
    ...(tuneCostMc !== undefined && { tuneCostMc }),
    ...(tuneId !== undefined && { tuneId }),
    notCreated,
    prompts: prompts.map((p) => ({ id: p.id, tune_id: p.tune_id, images: p.images, user_error: p.user_error })),
  };
  const spent = `the job cost ${cost.mc} mc ($${cost.usd})`;
  const head =
    cost.mc > maxCostMc
      ? `Passed maxCostMc ${maxCostMc}: the service charged more than the price expected, and ${spent}`
      : `Stopped before passing maxCostMc ${maxCostMc}: ${spent}`;
  const left = notCreated.length
    ? `; ${notCreated.length} of ${notCreated.length + prompts.length} prompts not created (input positions ` +
      `${notCreated.join(', ')})`
    : '';
  const tune = tuneId === undefined ? '' : `; tune ${tuneId} is kept`;
  return overBudget(`${head}${left}${tune}`, details);
}

/** A create under `maxCostMc` whose price neither its answer nor one read of the object said. */
export interface UnpricedCreate {
  object: 'prompt';
  id: number;
  /** Its position in the input. */
  position: number;
}

/** The details attached to a PriceUnknown failure: what was made and what is known of its cost. */
export interface PriceUnknownDetails extends OverBudgetDetails {
  /** The creates whose price stayed unknown; they count nothing in `cost`, which is the least the job cost. */
  unpriced: UnpricedCreate[];
}

/**
 * Under `maxCostMc`, a create's price stayed unknown (its answer, then one read of what it made, said no `cost_mc`):
 * the job created nothing after it; what it made has settled, or, for a tune, goes on training.
 *
 * @example
 * throw priceUnknown(160_000, costOf(152_000), { unpriced, notCreated: [1, 2], prompts, tuneId: 7 });
 */
export function priceUnknown(
  maxCostMc: number,
  cost: Cost,
  made: {
    unpriced: UnpricedCreate[];
    notCreated: number[];
    prompts: readonly Prompt[];
    tuneId?: number;
    tuneCostMc?: number;
  },
): ApplicationFailure {
  const { unpriced, notCreated, prompts, tuneId, tuneCostMc } = made;
  const details: PriceUnknownDetails = {
    maxCostMc,
    cost,
    ...(tuneCostMc !== undefined && { tuneCostMc }),
    ...(tuneId !== undefined && { tuneId }),
    unpriced,
    notCreated,
    prompts: prompts.map((p) => ({ id: p.id, tune_id: p.tune_id, images: p.images, user_error: p.user_error })),
  };
  const which = unpriced.map((c) => `${c.object} ${c.id} (input position ${c.position})`).join(', ');
  const left = notCreated.length
    ? `; ${notCreated.length} of ${notCreated.length + prompts.length} prompts not created (input positions ` +
      `${notCreated.join(', ')})`
    : '';
  const tune = tuneId === undefined ? '' : `; tune ${tuneId} is kept`;
  const message =
    `Stopped creating under maxCostMc ${maxCostMc}: the service did not say what ${which} cost, in the create's ` +
    `answer or in a read of it${left}; the job cost at least ${cost.mc} mc ($${cost.usd}), the prices known${tune}`;
  return ApplicationFailure.create({ type: FailureType.priceUnknown, nonRetryable: true, message, details: [details] });
}

function overBudget(message: string, details: OverBudgetDetails): ApplicationFailure {
  return ApplicationFailure.create({ type: FailureType.overBudget, nonRetryable: true, message, details: [details] });
}

/**
 * A run under a key whose job ran before with other input (or was another kind of job): refused, nothing created.
 *
 * @example
 * throw keyInUse({ key: 'order-1234', workflow: 'trainThenGenerate', runId, fields: ['tune.name'] });
 */
export function keyInUse(details: KeyInUseDetails): ApplicationFailure {
  const message = `Invalid input: key: ${keyInUseRule(details.key, details.workflow, details.fields)}`;
  return ApplicationFailure.create({ type: FailureType.keyInUse, nonRetryable: true, message, details: [details] });
}

/** The details of a JobEnded failure: the earlier run of the key and how it closed. */
export interface JobEndedDetails {
  key: string;
  runId: string;
  status: string;
}

/**
 * A run under a key whose job ran before, with the same input, and closed without a result: nothing is created again.
 *
 * @example
 * throw jobEnded({ key: 'order-1234', runId, status: 'TERMINATED' });
 */
export function jobEnded(details: JobEndedDetails): ApplicationFailure {
  const message =
    `The job of key ${JSON.stringify(details.key)} ran before (run ${details.runId}) and ended ` +
    `${details.status.toLowerCase().replace(/_/g, ' ')}: a key runs once, and nothing was created again; use a new key`;
  return ApplicationFailure.create({ type: FailureType.jobEnded, nonRetryable: true, message, details: [details] });
}

/** The details of a ClaimHeld failure: the key, and the run that holds its claim. */
export interface ClaimHeldDetails {
  key: string;
  claimRunId: string;
}

/**
 * A run whose key's claim is held by a run no job of the key started (a raw `keyClaim` start): it fails at once,
 * having created nothing, rather than wait for a job that never was.
 *
 * @example
 * throw claimHeld({ key: 'order-1234', claimRunId });
 */
export function claimHeld(details: ClaimHeldDetails): ApplicationFailure {
  const message =
    `The claim of key ${JSON.stringify(details.key)} is held by a run no job of the key started (run ` +
    `${details.claimRunId}): nothing was created; an operator terminates or lets it expire, or use a new key`;
  return ApplicationFailure.create({ type: FailureType.claimHeld, nonRetryable: true, message, details: [details] });
}

/** The details of an InspectionRefused failure. */
export interface InspectionRefusedDetails {
  /** The flags the job refused (`options.inspect.refuse`). */
  refuse: InspectionFlag[];
  /** Each image that raised a refused flag, with those flags. */
  images: Array<Pick<ImageInspection, 'field' | 'image' | 'flags'>>;
  /** What inspection found in every training image, in the input's order. */
  inspection: ImageInspection[];
}

/**
 * Training images raised flags the job refuses: no tune was created, nothing was paid for training.
 *
 * @example
 * throw inspectionRefused(['blurry'], inspection);
 */
export function inspectionRefused(refuse: InspectionFlag[], inspection: ImageInspection[]): ApplicationFailure {
  const images = refusedFlags(inspection, refuse);
  const details: InspectionRefusedDetails = { refuse, images, inspection };
  // The details hold each image whole; the message stays short whatever the URLs' length.
  const shown = (image: string) => (image.length > 120 ? `${image.slice(0, 119)}…` : image);
  const named = images.map(({ field, image, flags }) => `${field} (${shown(image)}): ${flags.join(', ')}`);
  const message =
    `Inspection refused ${images.length} of ${inspection.length} training image${inspection.length === 1 ? '' : 's'}` +
    ` (options.inspect.refuse: ${refuse.join(', ')}): ${named.join('; ')}; no tune was created`;
  return ApplicationFailure.create({
    type: FailureType.inspectionRefused,
    nonRetryable: true,
    message,
    details: [details],
  });
}

/**
 * A value the run could not convert to a payload (the SDK's ValueError, "Unable to convert ... to payload": a value
 * nested deeper than JSON.stringify goes, a cycle, a BigInt). Where the SDK would fail the workflow task again on every
 * attempt, a run stuck for good, this ends it, non-retryable, naming what could not be sent.
 *
 * @example
 * throw unconvertiblePayload('the result', err);
 */
export function unconvertiblePayload(what: string, cause: Error): ApplicationFailure {
  return ApplicationFailure.create({
    type: FailureType.unconvertiblePayload,
    nonRetryable: true,
    message: `${what} cannot be converted to a payload (${cause.message}): the run ends here, and sends nothing more`,
  });
}
