/**
 * What every tuneflow workflow does the same way: take callbacks as signals, answer `progress`, call the service
 * through activities, wait (callbacks first, polls as the safety net, a deadline at the end), create prompts a few
 * at a time, and on cancellation delete what it created when asked.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  isCancellation,
  log,
  patched,
  proxyActivities,
  setHandler,
  sleep,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { TuneflowActivities } from '../activities';
import { InvalidInputError, type InputIssue } from '../api/errors';
import type { CheckedInput, CheckOptions } from '../contract/check';
import { uploadPathsOf } from '../contract/bounds';
import { claimWorkflowId } from '../contract/keys';
import type { PackTuneSpec, PromptSpec, TuneSpec } from '../contract/inputs';
import type { Prompt, Tune } from '../api/schemas';
import { costMcOf, costOf, PromptBudget, type Cost } from '../contract/cost';
import {
  FailureType,
  inspectionRefused,
  invalidInput,
  jobEnded,
  jobOverBudget,
  keyInUse,
  packOverBudget,
  promptsNeverSettled,
  requireValidInput,
  tuneOverBudget,
  tuneNeverTrained,
  type WaitRecord,
} from '../contract/failures';
import { CallbackReads, idsOf, readWakeUp, type Waiting } from './callback-reads';
import { refusedFlags, trainingImagesOf, type ImageInspection } from '../contract/inspection';
import {
  callbackSignal,
  CallbackKind,
  packPromptsSettledSignal,
  Phase,
  progressQuery,
  promptSettledSignal,
  tuneTrainedSignal,
} from '../contract/messages';
import { runBounded } from './concurrency';
import { Findable, failureTypeOf, type Findings } from './findable';
import { invalidOption, type ResolvedOptions } from '../contract/options';
import {
  isTransientFailure,
  pollActivityOptions,
  serviceActivityOptions,
  temporalReadOptions,
  uploadCheckOptions,
} from './policies';
import { pollDelay } from '../contract/poll-schedule';
import { PromptLedger, TuneWatch, progressOf, type Counts } from './state';
import { promptsOutlivingTune, type PromptTarget } from './tune-kinds';

/** Creates, deletes and the reads a workflow cannot go on without: the service's full retry policy. */
const service = proxyActivities<TuneflowActivities>(serviceActivityOptions);
/** Polls: a few attempts; a poll that still fails is counted and the wait goes on. */
const polls = proxyActivities<TuneflowActivities>(pollActivityOptions);
/** Reads of Temporal (the earlier run of a claimed key). */
const temporal = proxyActivities<TuneflowActivities>(temporalReadOptions);
/** The upload directory's check, before anything is created (runs whose input names files). */
const uploads = proxyActivities<TuneflowActivities>(uploadCheckOptions);
// Creates and reads ask for brief answers (the activities' briefTune and briefPrompt): a copy not done yet carries
// only what the run reads, and only done copies reach the result. No patch: replay matches an activity by type and
// order, not by its arguments, and an activity worker of an earlier release ignores `brief` and answers whole, which
// the run reads alike.

/**
 * Runs with this marker take callbacks as wake-ups and read what they say from the service; runs started before it
 * (histories without the marker) keep taking a callback's body as the object, as they did when they started.
 */
export const CALLBACKS_ARE_WAKE_UPS = 'callbacks-are-wake-ups';

/**
 * Runs with this marker hold `maxCostMc` before every charge: a price known before each create (or the job refused),
 * a pack tune's price read once trained, and no completion above the limit. Runs started before it (no marker where
 * one of these would first change a command) go on as they started. Decided at each such place.
 */
export const MAX_COST_HOLDS = 'max-cost-holds';

/**
 * Runs with this marker create the prompts of a tune on branch fast without holding them to `maxCostMc`: the service
 * never charges them (spec 1), so their price, 0, is known beforehand. Runs started before it learned that price from
 * the first create, and created none once the cost had reached the limit (so `maxCostMc: 0` stopped every prompt).
 */
export const FAST_PROMPTS_FREE = 'fast-prompts-free';

/**
 * Runs with this marker are held to the input bounds (src/contract/bounds.ts: lengths and counts, file paths inside
 * the upload directory, refused attributes). Decided only where a bound refuses an input the first releases took: a
 * run started before with such an input goes on as it started.
 */
export const INPUT_BOUNDED = 'input-bounded';

/**
 * Runs with this marker claim their workflow ID (a `keyClaim` child, "reject duplicate") before they create anything;
 * a run that finds it claimed creates nothing and ends with the earlier job's outcome. Runs started before it created
 * at once.
 */
export const KEY_CLAIMED = 'key-claimed';

/**
 * Runs with this marker check the file paths of their input against the worker's upload directory (an activity) before
 * anything is created; only runs whose input names files. Runs started before it read them when they sent them.
 */
export const UPLOADS_CHECKED = 'uploads-checked';

/** True for runs that hold maxCostMc; false when replaying a run started before (see MAX_COST_HOLDS). */
const maxCostHolds = (): boolean => patched(MAX_COST_HOLDS);

/**
 * Runs with this marker poll quickly where no callback was asked for (POLL_ONLY_FIRST_MS after the expected end, then
 * doubling): polls are all such a run has. Runs started before it poll on the callback schedule (minutes apart).
 * Decided at each wait that polls only.
 */
export const POLL_ONLY_SCHEDULE = 'poll-only-schedule';

/**
 * Runs with this marker read an object again for its callbacks only after a back-off (callback-reads.ts): a run's
 * reads are bounded by what it waits for, not by what arrives. Runs started before it read for every callback, two
 * seconds apart.
 */
export const CALLBACK_READS_BACK_OFF = 'callback-reads-back-off';

/**
 * Training images inspected at once: a few, as prompts are created, so a job of 100 images neither floods the service
 * nor waits for each in turn. One activity per image: a retry asks again for that image alone, and what was found is
 * in history as soon as it is.
 */
const INSPECTIONS_AT_ONCE = 4;

/** The workflow's clock: the time of the activation being processed, the same on every replay. */
const now = (): number => Date.now();

/** One wait: what ends it, when it gives up, when its first poll is due, and how it reads. */
interface Wait {
  /** What the wait is for, in timer and activity summaries (the Web UI shows them). */
  subject: 'training' | 'prompts';
  done: () => boolean;
  timeoutMs: number;
  untilExpectedMs: number;
  /** No callback is on its way (none was asked for, or the object is another run's): polls are all there is. */
  pollOnly: boolean;
  /** Reads what the wait waits for from the service: a poll, or a read a callback asked for (`summary` says which). */
  read: (summary: string) => Promise<void>;
  reads: CallbackReads;
  waiting: () => Waiting;
}

/** A duration for a summary, e.g. `2m 1s`. */
function spell(msValue: number): string {
  const seconds = Math.round(msValue / 1000);
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const parts = [h && `${h}h`, m && `${m}m`, (seconds % 60 || (!h && !m)) && `${seconds % 60}s`];
  return parts.filter(Boolean).join(' ');
}

/** One run of a tuneflow workflow: its state, its handlers, and the steps the workflows are made of. */
export class Job {
  phase: Phase;
  readonly tune = new TuneWatch();
  readonly prompts: PromptLedger;
  private readonly counts: Counts = { apiCalls: 0, polls: 0, callbacks: 0 };
  private settings: ResolvedOptions | undefined;
  /** The tune this run created, deleted on cancellation when asked; never a tune it only uses. */
  private createdTuneId: number | undefined;
  /** The tune's price as known before its create (maxCostMc): counted while no copy of the tune shows `cost_mc`. */
  private tunePriceMc: number | undefined;
  /** Callbacks about the tune, and about prompts, waiting for a read. */
  private readonly tuneReads = new CallbackReads();
  private readonly promptReads = new CallbackReads();
  /** Prompts not known yet may be the run's: creates in flight, or a pack's prompts before they are listed. */
  private expectingPrompts = false;
  /** Whether the service was asked to call back, from the latest create's answer (its `callback`). */
  private callbacksAsked: boolean | undefined;
  /** The run's search attributes, kept current where the namespace has them. */
  private readonly findable = new Findable();
  /** What inspection found in each training image (runs with `options.inspect` whose tune has images). */
  inspection: ImageInspection[] | undefined;

  /**
   * Sets the signal and query handlers, before anything can wait, so no callback is missed.
   *
   * @example
   * const job = new Job(Phase.creatingTune, input.prompts.length);
   */
  constructor(phase: Phase, expectedPrompts?: number) {
    this.phase = phase;
    this.prompts = new PromptLedger(expectedPrompts);
    setHandler(callbackSignal, (wakeUp) => {
      this.counts.callbacks++;
      const read = readWakeUp(wakeUp);
      if (read) this.wake(read.kind, read.ids);
    });
    // Decided once, at the start: a run keeps the rule it started with for its whole life.
    const wakeUps = patched(CALLBACKS_ARE_WAKE_UPS);
    setHandler(tuneTrainedSignal, (tune) => {
      this.counts.callbacks++;
      if (wakeUps) this.wake(CallbackKind.tune, idsOf(tune));
      else this.tune.offer(tune);
    });
    setHandler(promptSettledSignal, (prompt) => {
      this.counts.callbacks++;
      if (wakeUps) this.wake(CallbackKind.prompt, idsOf(prompt));
      else this.prompts.offer(prompt);
    });
    setHandler(packPromptsSettledSignal, (prompts) => {
      this.counts.callbacks++;
      if (wakeUps) this.wake(CallbackKind.packPrompts, idsOf(prompts));
      else if (Array.isArray(prompts)) this.prompts.offerPack(prompts);
    });
    setHandler(progressQuery, () => progressOf(this.phase, this.tune.id, this.prompts, this.counts, this.cost()));
  }

  /** The run's phase from now on, with its search attributes (when it keeps them). */
  private enter(phase: Phase, failure?: string): void {
    this.phase = phase;
    this.findable.keep(this.findings(failure));
  }

  private findings(failure?: string): Findings {
    return { phase: this.phase, tuneId: this.tune.id, costMc: this.cost().mc, failure };
  }

  /** A callback about objects of `kind`: kept for a read when the run may wait for them, dropped otherwise. */
  private wake(kind: CallbackKind, ids: number[]): void {
    if (kind === CallbackKind.tune) this.tuneReads.wake(ids, now(), this.tuneWaiting());
    else this.promptReads.wake(ids, now(), this.promptsWaiting());
  }

  private tuneWaiting(): Waiting {
    const id = this.tune.id;
    if (id === undefined) return { ids: [], unknown: this.phase === Phase.creatingTune };
    return { ids: this.tune.trained ? [] : [id], unknown: false };
  }

  private promptsWaiting(): Waiting {
    return {
      ids: this.prompts.unsettled().map((p) => p.id),
      unknown: this.expectingPrompts && !this.prompts.complete,
    };
  }

  /** The resolved options; set by `run` before the body starts. */
  get options(): ResolvedOptions {
    if (!this.settings) throw new TypeError('Job.options read before Job.run resolved them');
    return this.settings;
  }

  /**
   * Checks the whole input with the contract, its options resolved once (a bad option fails InvalidOptions, as
   * documented; the rest InvalidInput), before any call to the service; runs `body`, and keeps the phase true to the
   * outcome. On cancellation, with `cleanupOnCancel`, it deletes what the run created before the cancellation ends
   * the workflow.
   *
   * @example
   * return job.run(() => checkGenerate(input), async () => { ... });
   */
  async run<T>(
    input: unknown,
    checkInput: (options: CheckOptions) => CheckedInput<unknown>,
    body: () => Promise<T>,
  ): Promise<T> {
    try {
      this.settings = requireValidInput(() => optionsFirst(() => bounded(checkInput))).options;
      // Decided before the search attributes' local activity: the SDK loses a patch asked for in the activation
      // that resolves a local activity, and the replay then fails (key-claimed's marker with no command).
      const claimsKey = patched(KEY_CLAIMED);
      await this.findable.start(this.findings());
      const prior = claimsKey ? await this.claimKey(input) : undefined;
      const result = prior ? (prior.result as T) : await this.checkUploads(input).then(body);
      this.enter(Phase.completed);
      return result;
    } catch (err) {
      if (isCancellation(err)) {
        if (this.settings?.cleanupOnCancel) await CancellationScope.nonCancellable(() => this.cleanUp());
        this.enter(Phase.cancelled);
      } else {
        this.enter(Phase.failed, failureTypeOf(err));
      }
      throw err;
    }
  }

  /**
   * Claims the run's workflow ID before anything is created. A run that finds it claimed (its key's job ran before:
   * a raw start with "allow duplicate" after it closed, a terminate-and-restart, a workflow retry) creates nothing:
   * it ends with that job's outcome when it was the same job (its result, or its failure), fails KeyInUse when it
   * had other input, and JobEnded when it closed without a result.
   */
  private async claimKey(input: unknown): Promise<{ result: unknown } | undefined> {
    const { workflowId, workflowType } = workflowInfo();
    try {
      await startChild('keyClaim', {
        workflowId: claimWorkflowId(workflowId),
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
        parentClosePolicy: 'ABANDON',
        staticSummary: 'claim the key: a key runs one job',
      });
      return undefined;
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
    const prior = await temporal.priorJob.executeWithOptions({ summary: 'read the earlier job of this key' }, [
      { workflowId, workflow: workflowType, input },
    ]);
    switch (prior.verdict) {
      case 'completed':
        return { result: prior.result };
      case 'other-job':
        throw keyInUse({ key: workflowId, workflow: prior.workflow, runId: prior.runId, fields: prior.fields });
      case 'failed':
        throw ApplicationFailure.create({
          ...prior.failure,
          type: prior.failure.type ?? undefined,
          message: `The job of this key ran before (run ${prior.runId}) and failed: ${prior.failure.message}`,
        });
      case 'ended':
        throw jobEnded({ key: workflowId, runId: prior.runId, status: prior.status });
    }
  }

  /** The input's file paths against the worker's upload directory, before anything is created. */
  private async checkUploads(input: unknown): Promise<void> {
    const paths = uploadPathsOf(input);
    if (!paths.length || !patched(UPLOADS_CHECKED)) return;
    try {
      await uploads.checkUploads.executeWithOptions({ summary: 'check the file paths against the upload directory' }, [
        { paths },
      ]);
    } catch (err) {
      // The refusal itself, as for any input the contract refuses (its details name the first field, and every one).
      const cause = err instanceof ActivityFailure ? err.cause : err;
      if (!(cause instanceof ApplicationFailure) || cause.type !== FailureType.invalidInput) throw err;
      const { issues } = (cause.details?.[0] ?? {}) as { issues?: InputIssue[] };
      throw invalidInput(new InvalidInputError('input', issues ?? [{ field: 'input', rule: cause.message }]));
    }
  }

  /**
   * With `options.inspect`, inspects each training image (`inspectImage`, a few at a time, retried as any call) before
   * the tune is created, and fails InspectionRefused, having created nothing, when one raised a refused flag. Runs
   * without the option make no command here: no run started before it existed has it (unknown options were refused).
   *
   * @example
   * await job.inspectImages(input.tune);
   */
  async inspectImages(tune: { name?: unknown; images?: unknown; image_urls?: unknown }): Promise<void> {
    const inspect = this.options.inspect;
    const images = inspect ? trainingImagesOf(tune) : [];
    if (!inspect || !images.length) return;
    this.enter(Phase.inspecting);
    const name = tune.name as string;
    const found: ImageInspection[] = [];
    await runBounded(images.length, INSPECTIONS_AT_ONCE, (i) =>
      this.counted(
        service.inspectImage.executeWithOptions({ summary: `inspect training image ${i + 1} of ${images.length}` }, [
          { name, image: images[i] },
        ]),
      ).then((inspection) => (found[i] = inspection)),
    );
    this.inspection = found;
    if (refusedFlags(found, inspect.refuse).length) throw inspectionRefused(inspect.refuse, found);
  }

  /**
   * Creates the tune (spec 4.1); callbacks that beat the answer are merged in.
   *
   * @example
   * const tune = await job.createTune({ ...input.tune, title });
   */
  async createTune(tune: TuneSpec & { title: string }): Promise<Tune> {
    this.enter(Phase.creatingTune);
    const created = await this.create(() =>
      service.createTune.executeWithOptions({ summary: 'create the tune' }, [{ tune, brief: true }]),
    );
    this.callbacksAsked = !!created.callback;
    this.createdTuneId = created.id;
    this.tune.adopt(created);
    return created;
  }

  /**
   * Creates a tune from a pack (spec 4.9). The prompts the request makes are the run's from now on: every prompt of
   * a new tune; on a reused tune (`tune_ids`, the first of which the service answers with) those from `minId` on.
   * A reused tune is never deleted on cancellation.
   *
   * @example
   * const tune = await job.createPackTune(packId, { ...input.tune, title });
   */
  async createPackTune(packId: number, tune: PackTuneSpec & { title: string }, minId?: number): Promise<Tune> {
    this.enter(Phase.creatingTune);
    const reused = tune.tune_ids !== undefined;
    const created = await this.create(() =>
      service.createPackTune.executeWithOptions({ summary: `create the tune from pack ${packId}` }, [
        { packId, tune, brief: true },
      ]),
    );
    this.callbacksAsked = !!created.callback;
    if (!reused) this.createdTuneId = created.id;
    this.tune.adopt(created);
    this.prompts.claimPack(reused ? { tuneId: created.id, minId, packId } : { tuneId: created.id });
    this.expectingPrompts = true;
    return created;
  }

  /**
   * The id after the newest prompt of a tune: prompts made from now on have this id or a higher one.
   *
   * @example
   * const minId = await job.nextPromptId(input.tune.tune_ids[0]);
   */
  async nextPromptId(tuneId: number): Promise<number> {
    // Newest first: one prompt tells, however many the reused tune has (history stays small).
    const prompts = await this.counted(
      service.listPrompts.executeWithOptions({ summary: `note the newest prompt of tune ${tuneId}` }, [
        { tuneId, limit: 1, brief: true },
      ]),
    );
    return prompts.reduce((max, p) => Math.max(max, p.id), 0) + 1;
  }

  /**
   * Reads an existing tune.
   *
   * @example
   * const tune = await job.retrieveTune(input.tuneId);
   */
  async retrieveTune(tuneId: number): Promise<Tune> {
    const summary = { summary: `read tune ${tuneId}` };
    this.tune.adopt(await this.counted(service.retrieveTune.executeWithOptions(summary, [{ tuneId, brief: true }])));
    return this.tune.latest as Tune;
  }

  /**
   * Waits until the tune is trained: for a callback, polling from `untilExpectedMs` (the eta) on; fails with
   * TuneNeverTrained at the training deadline.
   *
   * @example
   * const trained = await job.waitUntilTrained(untilEtaMs(created));
   */
  async waitUntilTrained(untilExpectedMs = 0): Promise<Tune> {
    this.enter(Phase.training);
    const tuneId = this.tune.id as number;
    const wait = await this.waitFor({
      subject: 'training',
      done: () => this.tune.trained,
      timeoutMs: this.options.trainingTimeoutMs,
      untilExpectedMs,
      // A tune the run did not create calls back whoever did.
      pollOnly: this.createdTuneId === undefined || this.callbacksAsked === false,
      read: (summary) =>
        this.counted(polls.retrieveTune.executeWithOptions({ summary }, [{ tuneId, brief: true }])).then((tune) =>
          this.tune.adopt(tune),
        ),
      reads: this.tuneReads,
      waiting: () => this.tuneWaiting(),
    });
    if (!wait.done) throw tuneNeverTrained(this.tune.latest as Tune, wait.record);
    return this.tune.latest as Tune;
  }

  /**
   * Creates the prompts on `target`, `promptConcurrency` at a time, each with its input position as key. With
   * `maxCostMc`, it stops before the job's cost would pass it; returns the input positions it did not create.
   *
   * @example
   * const notCreated = await job.createPrompts(promptTarget(tune), input.prompts);
   */
  async createPrompts(target: PromptTarget, specs: readonly PromptSpec[]): Promise<number[]> {
    this.enter(Phase.creatingPrompts);
    this.expectingPrompts = true;
    const maxCostMc = this.options.maxCostMc;
    const free = maxCostMc !== undefined && target.free && patched(FAST_PROMPTS_FREE);
    const budget = maxCostMc === undefined || free ? undefined : new PromptBudget(maxCostMc);
    const notCreated: number[] = [];
    // `.then`, not `async`/`await`, where a step only passes an answer on: the SDK records a stack trace for every
    // promise a run makes, and each async function and await is one more (see `counted`).
    const createOne = (i: number): Promise<Prompt> => {
      const prompt = { ...specs[i], text: target.textFor(specs[i].text) };
      return this.create(() =>
        service.createPrompt.executeWithOptions({ summary: `create prompt ${i + 1} of ${specs.length}` }, [
          { tuneId: target.tuneId, prompt, key: String(i), brief: true },
        ]),
      ).then((created) => {
        this.callbacksAsked = !!created.callback;
        this.prompts.adopt(created, i);
        return created;
      });
    };
    const withinBudget = async (i: number, budget: PromptBudget): Promise<void> => {
      // Lanes woken together: the first to run may take the only unpriced slot, so each checks again.
      do await condition(() => budget.ready);
      while (!budget.ready);
      const ticket = budget.reserve(this.cost().mc, specs[i].num_images ?? 1);
      if (!ticket) {
        notCreated.push(i);
        return;
      }
      let created: Prompt | undefined;
      try {
        created = await createOne(i);
      } finally {
        budget.settle(ticket, costMcOf(created));
      }
    };
    await runBounded(specs.length, this.options.promptConcurrency, budget ? (i) => withinBudget(i, budget) : createOne);
    if (notCreated.length) this.prompts.expectOnly(specs.length - notCreated.length);
    return notCreated.sort((a, b) => a - b);
  }

  /**
   * With `maxCostMc`, a training's price must be known before the tune is created: nothing on `branch: fast` (spec 1),
   * else the caller's `tuneCostMc` (the service publishes no price). Refused without it (InvalidOptions), and above
   * the limit (OverBudget), having created nothing.
   *
   * @example
   * job.checkTunePrice(input.tune, input.prompts.length);
   */
  checkTunePrice(tune: TuneSpec, prompts: number): void {
    const { maxCostMc, tuneCostMc } = this.options;
    if (maxCostMc === undefined) return;
    this.tunePriceMc = tune.branch === 'fast' ? 0 : tuneCostMc;
    if (tune.branch === 'fast') return;
    if (tuneCostMc === undefined) {
      if (maxCostHolds())
        throw invalidOption(
          'tuneCostMc',
          'is needed with maxCostMc to train a tune not on branch fast: the service publishes no price for a tune ' +
            "and charges it when the tune is created; state your account's price (the tune's cost_mc) or leave " +
            'maxCostMc out',
        );
      return;
    }
    if (tuneCostMc > maxCostMc) throw tuneOverBudget(tuneCostMc, maxCostMc, prompts);
  }

  /**
   * With `maxCostMc`, a pack's price must be known before the request: the pack's price for the class (read from the
   * pack), nothing on `branch: fast`. Refused when the pack names no price for the class or the request is on
   * existing tunes (InvalidOptions: the prompts it adds have no published price, and one request makes them all),
   * and when the price is above the limit (OverBudget), having created nothing.
   *
   * @example
   * await job.checkPackPrice(input.packId, input.tune);
   */
  async checkPackPrice(packId: number, tune: PackTuneSpec): Promise<void> {
    const maxCostMc = this.options.maxCostMc;
    if (maxCostMc === undefined) return;
    if (tune.tune_ids !== undefined) {
      if (maxCostHolds())
        throw invalidOption(
          'maxCostMc',
          'cannot be held for a pack on existing tunes (tune.tune_ids): the service publishes no price for the ' +
            'prompts it adds, and one request makes them all; leave maxCostMc out',
        );
      return;
    }
    if (tune.branch === 'fast' && maxCostHolds()) {
      this.tunePriceMc = 0;
      return;
    }
    const name = tune.name as string;
    const priceMc = await this.counted(
      service.packPrice.executeWithOptions({ summary: `read pack ${packId}'s price for ${name}` }, [{ packId, name }]),
    );
    this.tunePriceMc = priceMc ?? undefined;
    if (priceMc === null && maxCostHolds())
      throw invalidOption(
        'maxCostMc',
        `cannot be held for pack ${packId}: it names no price for class ${name} (cost_mc_hash), and the service ` +
          'charges the pack when the tune is created; leave maxCostMc out',
      );
    if (priceMc !== null && priceMc > maxCostMc) throw packOverBudget(packId, name, priceMc, maxCostMc);
  }

  /**
   * A pack request on several existing tunes makes prompts on each, but a run follows one tune: the others' prompts
   * would be neither waited for, nor cleaned up, nor in the cost. Refused (InvalidInput), having created nothing.
   *
   * @example
   * job.requireOneTune(input.tune.tune_ids);
   */
  requireOneTune(tuneIds: readonly number[] | undefined): void {
    if (tuneIds === undefined || tuneIds.length <= 1 || !maxCostHolds()) return;
    const rule = 'must name one tune: a run follows one tune (its prompts, its cost); start one packTune per tune';
    throw invalidInput(new InvalidInputError('input', [{ field: 'tune.tune_ids', rule }]));
  }

  /**
   * Right after the tune's create: fails with OverBudget when its charge alone passed `maxCostMc` (the service
   * charged more than `tuneCostMc`), before anything else is created. The tune is kept.
   *
   * @example
   * job.requireTuneWithinBudget(input.prompts.length);
   */
  requireTuneWithinBudget(prompts: number): void {
    const maxCostMc = this.options.maxCostMc;
    if (maxCostMc === undefined || this.cost().mc <= maxCostMc || !maxCostHolds()) return;
    const notCreated = Array.from({ length: prompts }, (_, i) => i);
    throw this.overBudget(maxCostMc, notCreated);
  }

  /**
   * At the end, once what was made has settled: fails with OverBudget when prompts were left uncreated for
   * `maxCostMc`, or when the job's cost passed it (a first prompt's price is only learned from its answer).
   *
   * @example
   * job.requireWithinBudget(notCreated);
   */
  requireWithinBudget(notCreated: readonly number[] = []): void {
    const maxCostMc = this.options.maxCostMc;
    if (maxCostMc === undefined) return;
    if (notCreated.length === 0 && (this.cost().mc <= maxCostMc || !maxCostHolds())) return;
    throw this.overBudget(maxCostMc, [...notCreated]);
  }

  private overBudget(maxCostMc: number, notCreated: number[]) {
    return jobOverBudget(maxCostMc, this.cost(), {
      notCreated,
      prompts: this.prompts.all(),
      tuneId: this.createdTuneId,
      tuneCostMc: this.options.tuneCostMc,
    });
  }

  /**
   * A pack's tune shows its price only in a full copy (the create's answer is the pack form, without `cost_mc`): read
   * once when none came, as for a FaceID pack, ready at creation.
   *
   * @example
   * await job.readTunePrice();
   */
  async readTunePrice(): Promise<void> {
    const tuneId = this.createdTuneId;
    if (tuneId === undefined || costMcOf(this.tune.latest) !== undefined || !maxCostHolds()) return;
    const summary = { summary: `read tune ${tuneId}'s price` };
    this.tune.adoptFull(await this.counted(service.retrieveTune.executeWithOptions(summary, [{ tuneId }])));
  }

  /**
   * What the job has cost so far: the tune it created and its prompts, as the service charged them (`cost_mc`); a
   * tune no copy of which shows its charge counts at the price known before its create.
   *
   * @example
   * return { tune, prompts, cost: job.cost() };
   */
  cost(): Cost {
    const tune = this.tune.latest;
    const created = tune !== undefined && tune.id === this.createdTuneId;
    let mc = created ? (costMcOf(tune) ?? this.tunePriceMc ?? 0) : 0;
    for (const prompt of this.prompts.all()) mc += costMcOf(prompt) ?? 0;
    return costOf(mc);
  }

  /**
   * Reads a pack tune's prompts once, to learn which prompts the run waits for (unless the pack's prompts_callback
   * already told). A read that fails is left to the wait's polls.
   *
   * @example
   * await job.learnPrompts(tune.id);
   */
  async learnPrompts(tuneId: number): Promise<void> {
    if (!this.prompts.known)
      await this.pollSafely(() =>
        this.counted(
          polls.listPrompts.executeWithOptions({ summary: `list the prompts the pack made on tune ${tuneId}` }, [
            { tuneId, minId: this.prompts.pollMinId(), brief: true },
          ]),
        ).then((prompts) => this.prompts.learn(prompts)),
      );
    // The service made the pack's prompts: their callback says whether any was asked for.
    const known = this.prompts.all();
    if (known.length) this.callbacksAsked = known.some((p) => !!p.callback);
  }

  /**
   * Waits until every prompt is settled: for callbacks, polling all of them with one list call of `tuneId` (and by id
   * those that other prompts on the tune pushed off its page); fails with PromptsNeverSettled at the prompt deadline.
   *
   * @example
   * await job.waitUntilSettled(target.tuneId);
   */
  async waitUntilSettled(tuneId: number): Promise<Prompt[]> {
    this.enter(Phase.generating);
    const wait = await this.waitFor({
      subject: 'prompts',
      done: () => this.prompts.allSettled(),
      timeoutMs: this.options.promptTimeoutMs,
      untilExpectedMs: 0,
      pollOnly: this.callbacksAsked === false,
      read: (summary) => {
        // Only this run's prompts, by id, once all are known: other jobs' prompts on a shared (Flux base) tune
        // neither cost calls nor enter history.
        const promptIds = this.prompts.pollIds();
        const query = promptIds
          ? { tuneId, promptIds, brief: true }
          : { tuneId, minId: this.prompts.pollMinId(), brief: true };
        return this.counted(polls.listPrompts.executeWithOptions({ summary }, [query])).then((prompts) =>
          this.prompts.learn(prompts),
        );
      },
      reads: this.promptReads,
      waiting: () => this.promptsWaiting(),
    });
    if (!wait.done) {
      const count = { expected: this.prompts.total, known: this.prompts.all().length };
      throw promptsNeverSettled(tuneId, this.prompts.unsettled(), count, wait.record);
    }
    return this.prompts.all();
  }

  /**
   * Callbacks first, polls as the safety net: waits for `done` until a callback asks for a read or a poll is due, reads,
   * and again, until `done` or the deadline; at the deadline it polls one last time before giving up. A read a callback
   * asked for leaves the poll schedule where it was: polls are for callbacks that never come.
   */
  private async waitFor(wait: Wait): Promise<{ done: boolean; record: WaitRecord }> {
    const { subject, done, timeoutMs, untilExpectedMs, read, reads, waiting } = wait;
    const record: WaitRecord = { timeoutMs, polls: 0, failedPolls: 0 };
    if (done()) return { done: true, record };
    const failure = subject === 'training' ? 'TuneNeverTrained' : 'PromptsNeverSettled';
    const deadline = new Deadline(timeoutMs, `${subject}: the deadline, ${failure} after ${spell(timeoutMs)}`);
    const readDue = () => (reads.dueAt(waiting()) ?? Infinity) <= now();
    // Decided at the run's first wait: runs started before the back-off read for callbacks as they did.
    reads.backOff = patched(CALLBACK_READS_BACK_OFF);
    // Decided where the schedule first differs: runs started before poll-only runs polled quickly go on as they were.
    const pollOnly = wait.pollOnly && patched(POLL_ONLY_SCHEDULE);
    try {
      let pollAt: number | undefined;
      for (;;) {
        const start = now();
        const made = record.polls + record.failedPolls;
        pollAt ??= start + pollDelay(made, this.options, untilExpectedMs, pollOnly);
        const wakeAt = Math.min(pollAt, reads.dueAt(waiting()) ?? Infinity);
        // A read already due needs no timer; a callback that comes meanwhile may bring its read forward.
        const changes = reads.changes;
        // Static words (the Web UI shows them beside the timer's own duration and time).
        const summary =
          wakeAt < pollAt
            ? `${subject}: waiting for the other callbacks, then one read`
            : `${subject}: poll ${made + 1}` +
              (made === 0 && untilExpectedMs > 0 ? ` at the eta + ${spell(pollAt - start - untilExpectedMs)}` : '') +
              (pollOnly ? ' (polling only: no callback was asked for)' : ', unless a callback comes first');
        const met =
          wakeAt <= start ||
          (await condition(() => done() || deadline.passed || readDue() || reads.changes !== changes, wakeAt - start, {
            summary,
          }));
        if (done()) return { done: true, record };
        if (readDue()) {
          const startedAt = now();
          await this.pollSafely(() => read(`${subject}: read, as a callback asked`), record, 'callback');
          reads.read(startedAt);
          if (done()) return { done: true, record };
          continue;
        }
        // Woken for a read no longer needed (its object done meanwhile): the poll stays due when it was.
        if (!deadline.passed && !(!met && wakeAt === pollAt) && now() < pollAt) continue;
        const why = deadline.passed ? 'the last poll, at the deadline' : `poll ${made + 1}`;
        await this.pollSafely(() => read(`${subject}: ${why}`), record);
        pollAt = undefined;
        if (done()) return { done: true, record };
        if (deadline.passed) return { done: false, record };
      }
    } finally {
      deadline.clear();
    }
  }

  /**
   * A poll (or a read a callback asked for) that fails after its retries is counted and the wait goes on; failures
   * that cannot heal end the run.
   */
  private pollSafely(
    pollOnce: () => Promise<void>,
    record?: WaitRecord,
    cause: 'poll' | 'callback' = 'poll',
  ): Promise<void> {
    // Reads for callbacks are counted apart: the poll schedule grows with polls only.
    if (cause === 'callback' && record) record.callbackReads = (record.callbackReads ?? 0) + 1;
    // A `.then` with both handlers, as `counted`: one promise, and the wait resumes in as many turns as with an await.
    return pollOnce().then(
      () => {
        if (cause === 'poll') {
          this.counts.polls++;
          if (record) record.polls++;
        }
      },
      (err: unknown) => {
        if (!isTransientFailure(err)) throw err;
        const error = describeFailure(err);
        if (record) {
          if (cause === 'poll') record.failedPolls++;
          record.lastPollError = error;
        }
        log.warn('poll failed; waiting on for a callback or the next poll', { error });
      },
    );
  }

  /**
   * With `cleanupOnCancel`, a create is not started after a cancellation and, once started, is let finish: cleanup
   * then knows everything that exists on the service.
   */
  private create<T>(start: () => Promise<T>): Promise<T> {
    return this.options.cleanupOnCancel ? this.createToCleanUp(start) : this.counted(start());
  }

  private async createToCleanUp<T>(start: () => Promise<T>): Promise<T> {
    const scope = CancellationScope.current();
    if (scope.consideredCancelled) await scope.cancelRequested;
    return this.counted(CancellationScope.nonCancellable(start));
  }

  /**
   * Counts a call once it answered. A `.then` rather than an async function: the SDK records a stack trace for every
   * promise a run makes (for its `__stack_trace` query), and an async function with an await makes two where this
   * makes one. Its answer reaches the caller in as many microtask turns as before, so commands keep their order.
   */
  private counted<T>(call: Promise<T>): Promise<T> {
    return call.then((result) => {
      this.counts.apiCalls++;
      return result;
    });
  }

  /** Deletes the prompts the run created (those a tune deletion leaves behind), then the tune it created. */
  private async cleanUp(): Promise<void> {
    this.enter(Phase.cleaningUp);
    const prompts = promptsOutlivingTune(this.prompts.all(), this.createdTuneId, this.tune.latest);
    await runBounded(prompts.length, this.options.promptConcurrency, (i) =>
      this.deleteQuietly(`prompt ${prompts[i].id}`, () =>
        service.deletePrompt.executeWithOptions({ summary: `cleanup: delete prompt ${prompts[i].id}` }, [
          { tuneId: prompts[i].tune_id, promptId: prompts[i].id },
        ]),
      ),
    );
    const tuneId = this.createdTuneId;
    if (tuneId !== undefined)
      await this.deleteQuietly(`tune ${tuneId}`, () =>
        service.deleteTune.executeWithOptions({ summary: `cleanup: delete tune ${tuneId}` }, [{ tuneId }]),
      );
  }

  /** A deletion that fails is logged, and the cleanup goes on: the cancellation must still end the run. */
  private async deleteQuietly(what: string, remove: () => Promise<void>): Promise<void> {
    try {
      await this.counted(remove());
    } catch (err) {
      log.error(`cleanup could not delete ${what}`, { error: describeFailure(err) });
    }
  }
}

/** A deadline as a durable timer: workflow code reads no clock, and a restarted worker keeps the same deadline. */
class Deadline {
  passed = false;
  private readonly scope = new CancellationScope();

  constructor(timeoutMs: number, summary: string) {
    this.scope
      .run(() => sleep(timeoutMs, { summary }))
      .then(
        () => (this.passed = true),
        () => undefined, // cleared, or the workflow was cancelled
      );
  }

  clear(): void {
    this.scope.cancel();
  }
}

function describeFailure(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
  return `${err.message}${cause}`;
}

/**
 * The contract with its bounds; an input that only a bound refuses is taken as it was by a run started before the
 * bounds (no INPUT_BOUNDED marker), so its history replays.
 */
function bounded(check: (options: CheckOptions) => CheckedInput<unknown>): CheckedInput<unknown> {
  try {
    return check({ bounds: true });
  } catch (err) {
    if (!(err instanceof InvalidInputError) || err.cause !== undefined) throw err;
    let unbounded: CheckedInput<unknown>;
    try {
      unbounded = check({ bounds: false });
    } catch {
      throw err;
    }
    if (patched(INPUT_BOUNDED)) throw err;
    return unbounded;
  }
}

/** A bad option fails the run InvalidOptions whatever else is wrong, as documented: the check's cause, thrown first. */
function optionsFirst<T>(check: () => T): T {
  try {
    return check();
  } catch (err) {
    if (err instanceof InvalidInputError && err.cause instanceof ApplicationFailure) throw err.cause;
    throw err;
  }
}
