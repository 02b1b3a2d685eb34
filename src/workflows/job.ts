/**
 * What every tuneflow workflow does the same way: take callbacks as signals, answer `progress`, call the service
 * through activities, wait (callbacks first, polls as the safety net, a deadline at the end), create prompts a few
 * at a time, and on cancellation delete what it created when asked.
 */
import { CancellationScope, condition, isCancellation, setHandler, workflowInfo } from '@temporalio/workflow';
import { foldEarlierPatches, patchedOrFolded } from './patches';
import { ValueError } from '@temporalio/common';
import { ErrorKind } from '../api/error-kinds';
import { DEFAULT_TENANT, jobOfWorkflowId } from '../contract/tenants';
import { polls, service } from './activity-calls';
import type { CheckedInput, CheckOptions } from '../contract/check';
import type { PackTuneSpec, PromptSpec, TuneSpec } from '../contract/inputs';
import type { Prompt, Tune } from '../api/schemas';
import {
  imagesNotStored,
  inspectionRefused,
  promptsNeverSettled,
  tuneNeverTrained,
  unconvertiblePayload,
} from '../contract/failures';
import { Delivery } from './delivery';
import { resultPrompt, type ResultPrompt } from '../contract/results';
import { refusedFlags, trainingImagesOf, type ImageInspection } from '../contract/inspection';
import { Phase, progressQuery, type PhaseEntry } from '../contract/messages';
import { checkedOptions, checkUploads, claimKey, claimsKey, refusedInput, requireOwnWorkflowId } from './admission';
import { Budget } from './budget';
import { TenantSpend } from './tenant-spend';
import { costMcOf } from '../contract/cost';
import { invalidOption } from '../contract/options';
import { runBounded } from './concurrency';
import { Findable, failureTypeOf, type Findings } from './findable';
import type { ResolvedOptions } from '../contract/options';
import { PromptLedger, TuneWatch, progressOf, type Counts } from './state';
import { promptsOutlivingTune, type PromptTarget } from './tune-kinds';
import { createToCleanUp, deleteCreated } from './cleanup';
import { inspectEach, inspectsFirst } from './inspect-images';
import { now, pollSafely, waitFor } from './waits';
import { recordJobEnd, recordPhase } from './job-metrics';
import { answeredChargeMc } from '../contract/job-metrics';
import { JobOutcome } from '../contract/job-metrics';
import { WakeUps } from './wake-ups';

// Creates and reads ask for brief answers (the activities' briefTune and briefPrompt): a copy not done yet carries
// only what the run reads, and only done copies reach the result. No patch: replay matches an activity by type and
// order, not by its arguments, and an activity worker of an earlier release ignores `brief` and answers whole, which
// the run reads alike.

/**
 * Runs with this marker read the prompts a poll's list page did not reach by id, an activity each: every activity on
 * the rate-limited queue is one request, so the queue's limit is the service's (before, a poll's one activity made up
 * to 1 + N requests, and the service saw more than the queue let through). Polls recorded before it read them inside
 * the poll's activity, and replay as they were; a run's first poll after the upgrade whose page misses one of its
 * prompts records the marker. Every poll by id asks for the page only (`onePage`: an argument, no command).
 */
export const PROMPTS_READ_ONE_REQUEST_EACH = 'prompts-read-one-request-each';
/** Reads by id in flight at once, as the poll's activity made them before. */
const READ_BY_ID_AT_ONCE = 4;

/** One run of a tuneflow workflow: its state, its handlers, and the steps the workflows are made of. */
export class Job {
  /** Every phase so far with when it began (workflow time): the last is the run's phase; the progress query tells all. */
  private readonly phases: PhaseEntry[];
  readonly tune = new TuneWatch();
  readonly prompts: PromptLedger;
  private readonly counts: Counts = { apiCalls: 0, polls: 0, callbacks: 0 };
  private settings: ResolvedOptions | undefined;
  /** The tune this run created, deleted on cancellation when asked; never a tune it only uses. */
  private createdTuneId: number | undefined;
  /** The service's callbacks, kept for a read while the run may wait for what they name. */
  private readonly wakeUps: WakeUps;
  /** Whether the service was asked to call back, from the latest create's answer (its `callback`). */
  private callbacksAsked: boolean | undefined;
  /** The run's search attributes, kept current where the namespace has them. */
  private readonly findable = new Findable();
  /** The charges the creates' answers named (`cost_mc`), as the activities counted them. */
  private answeredMc = 0;
  /** What inspection found in each training image (runs with `options.inspect` whose tune has images). */
  inspection: ImageInspection[] | undefined;
  /** What the job has cost, and the checks that hold it to `maxCostMc`. */
  readonly budget: Budget;
  /** The job's reservations on its tenant's spend ceiling (tenants with a budget only). */
  readonly spend = new TenantSpend();
  /** The highest price per image a prompt of this run was charged: the next prompts' reservations. */
  private promptPerImageMc: number | undefined;
  /** A prompt create in flight whose price could not be reserved (none known yet): the others wait for its answer. */
  private unpricedPromptInFlight = false;
  /** The copies of the images to the owner's storage; undefined where the worker has none or the job opted out. */
  private delivery: Delivery | undefined;

  /**
   * Sets the signal and query handlers, before anything can wait, so no callback is missed.
   *
   * @example
   * const job = new Job(Phase.creatingTune, input.prompts.length);
   */
  constructor(phase: Phase, expectedPrompts?: number) {
    // First of all: every patch below is answered by it in a run that starts now.
    foldEarlierPatches();
    this.phases = [{ phase, since: now() }];
    this.prompts = new PromptLedger(expectedPrompts);
    this.budget = new Budget({
      options: () => this.options,
      tune: this.tune,
      prompts: this.prompts,
      createdTuneId: () => this.createdTuneId,
      counted: this.counted,
    });
    this.wakeUps = new WakeUps(this, this.counts);
    setHandler(progressQuery, () =>
      progressOf(this.phases, this.tune.id, this.prompts, this.counts, this.budget.cost(), this.delivery?.stored),
    );
  }

  /** The run's phase now. */
  get phase(): Phase {
    return this.phases[this.phases.length - 1]!.phase;
  }

  /** The run's phase from now on, with its search attributes (when it keeps them). */
  private enter(phase: Phase, failure?: string): void {
    const current = this.phases[this.phases.length - 1]!;
    if (phase !== current.phase) {
      recordPhase(current.phase, current.since);
      this.phases.push({ phase, since: now() });
    }
    this.findable.keep(this.findings(failure));
  }

  /**
   * What the job's cost holds beyond the charges its creates' answers named (the activities counted those): a pack's
   * tune and prompts, a price a later read told. For the tenant the activities count it under.
   */
  private unansweredCharge(): { tenant: string; unansweredMc: number } {
    const tenant = jobOfWorkflowId(workflowInfo().workflowId)?.tenant || 'unknown';
    return { tenant, unansweredMc: Math.max(0, this.budget.cost().mc - this.answeredMc) };
  }

  private findings(failure?: string): Findings {
    const tenant = jobOfWorkflowId(workflowInfo().workflowId)?.tenant ?? DEFAULT_TENANT;
    return { tenant, phase: this.phase, tuneId: this.tune.id, costMc: this.budget.cost().mc, failure };
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
      requireOwnWorkflowId();
      this.settings = checkedOptions(checkInput);
      // Decided before the search attributes' local activity: the SDK loses a patch asked for in the activation
      // that resolves a local activity, and the replay then fails (key-claimed's marker with no command).
      const claiming = claimsKey();
      if (inspectsFirst(this.settings, (input as { tune?: unknown })?.tune)) this.phases[0]!.phase = Phase.inspecting;
      const settings = await this.findable.start(this.findings());
      this.spend.held = settings.budget;
      this.delivery = this.deliveryFor(settings.storage);
      const prior = claiming ? await claimKey(input) : undefined;
      const result = prior ? (prior.result as T) : await checkUploads(input).then(body);
      requireConvertible(result);
      this.enter(Phase.completed);
      recordJobEnd(JobOutcome.completed, this.counts.polls, this.unansweredCharge());
      return result;
    } catch (thrown) {
      // An activity's arguments no payload can carry: the SDK throws where the command is made, before it is sent.
      const err = thrown instanceof ValueError ? unconvertiblePayload('A value the run sends', thrown) : thrown;
      // What is still reserved was not paid for: the tenant's ceiling gets it back (no command when nothing is).
      if (this.spend.holding) await CancellationScope.nonCancellable(() => this.spend.releaseAll());
      if (isCancellation(err)) {
        if (this.settings?.cleanupOnCancel) await CancellationScope.nonCancellable(() => this.cleanUp());
        this.enter(Phase.cancelled);
        recordJobEnd(JobOutcome.cancelled, this.counts.polls, this.unansweredCharge());
      } else {
        const failureType = failureTypeOf(err);
        this.enter(Phase.failed, failureType);
        recordJobEnd(JobOutcome.failed, this.counts.polls, this.unansweredCharge(), failureType);
      }
      throw err;
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
    const found = await inspectEach(tune.name as string, images, this.counted);
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
    // Under a tenant's ceiling a training's price must be known before it is made, as under maxCostMc.
    const priceMc = tune.branch === 'fast' ? 0 : this.options.tuneCostMc;
    const unpriced = () =>
      invalidOption(
        'tuneCostMc',
        "is required for a paid training where the tenant's spend has a ceiling (TUNEFLOW_TENANT_BUDGETS): the " +
          'service publishes no price, and the training is reserved before it is made',
      );
    const price = priceMc ?? (() => Promise.reject(unpriced()));
    const created = await this.spend.around('tune', price, costMcOf, () =>
      this.create(() => service.createTune.executeWithOptions({ summary: 'create the tune' }, [{ tune, brief: true }])),
    );
    this.callbacksAsked = !!created.callback;
    this.createdTuneId = created.id;
    this.answeredMc += answeredChargeMc(created.cost_mc);
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
    // Under a tenant's ceiling the pack's price for the class is reserved first; a pack on existing tunes has none.
    const price = async (): Promise<number> => {
      if (reused || tune.name === undefined) throw this.packUnpriced(packId, 'it adds prompts to existing tunes');
      if (tune.branch === 'fast') return 0;
      const name = tune.name;
      const priceMc = await this.counted(
        service.packPrice.executeWithOptions({ summary: `read pack ${packId}'s price for ${name}` }, [
          { packId, name },
        ]),
      );
      if (priceMc === null) throw this.packUnpriced(packId, `it names no price for class ${name}`);
      return priceMc;
    };
    // The pack's answer has no cost_mc: its price is what the pack said (the tune's full copy, read later, tells).
    const created = await this.spend.around(
      'pack',
      price,
      () => undefined,
      () =>
        this.create(() =>
          service.createPackTune.executeWithOptions({ summary: `create the tune from pack ${packId}` }, [
            { packId, tune, brief: true },
          ]),
        ),
    );
    this.callbacksAsked = !!created.callback;
    if (!reused) this.createdTuneId = created.id;
    // As the activity counts it: a retry's look-up finds a new tune with its price (a reused one is no charge).
    if (!reused) this.answeredMc += answeredChargeMc(created.cost_mc);
    this.tune.adopt(created);
    this.prompts.claimPack(reused ? { tuneId: created.id, minId, packId } : { tuneId: created.id });
    this.wakeUps.expectingPrompts = true;
    return created;
  }

  /**
   * The id after the newest prompt of a tune: prompts made from now on have this id or a higher one.
   *
   * @example
   * const minId = await job.nextPromptId(input.tune.tune_ids[0], 'tune.tune_ids[0]');
   */
  async nextPromptId(tuneId: number, field: string): Promise<number> {
    // Newest first: one prompt tells, however many the reused tune has (history stays small). The activity reads the
    // tune first and refuses one that is not the tenant's, naming `field`.
    const prompts = await this.counted(
      service.listPrompts.executeWithOptions({ summary: `note the newest prompt of tune ${tuneId}` }, [
        { tuneId, limit: 1, brief: true, owned: field },
      ]),
    ).catch((err: unknown) => Promise.reject(refusedInput(err)));
    return prompts.reduce((max, p) => Math.max(max, p.id), 0) + 1;
  }

  /**
   * Reads an existing tune.
   *
   * @example
   * const tune = await job.retrieveTune(input.tuneId, 'tuneId');
   */
  async retrieveTune(tuneId: number, field: string): Promise<Tune> {
    const summary = { summary: `read tune ${tuneId}` };
    // The activity refuses a tune that is not the tenant's, naming `field`: the run fails InvalidInput.
    const read = service.retrieveTune.executeWithOptions(summary, [{ tuneId, brief: true, owned: field }]);
    this.tune.adopt(await this.counted(read).catch((err: unknown) => Promise.reject(refusedInput(err))));
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
    const wait = await waitFor(
      {
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
        reads: this.wakeUps.tuneReads,
        waiting: () => this.wakeUps.tuneWaiting(),
        doneIds: () => this.wakeUps.tuneDone(),
      },
      this.options,
      this.counts,
    );
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
    this.wakeUps.expectingPrompts = true;
    const budget = this.budget.forPrompts(target);
    const notCreated: number[] = [];
    // `.then`, not `async`/`await`, where a step only passes an answer on: the SDK records a stack trace for every
    // promise a run makes, and each async function and await is one more (see `counted`).
    const createOne = (i: number): Promise<Prompt> => {
      const prompt = { ...specs[i], text: target.textFor(specs[i].text) };
      const make = () =>
        this.create(() =>
          service.createPrompt.executeWithOptions({ summary: `create prompt ${i + 1} of ${specs.length}` }, [
            { tuneId: target.tuneId, prompt, key: String(i), brief: true },
          ]),
        );
      return this.promptReserved(i, specs[i].num_images ?? 1, target.free, make).then((created) => {
        this.callbacksAsked = !!created.callback;
        this.answeredMc += answeredChargeMc(created.cost_mc);
        this.prompts.adopt(created, i);
        return created;
      });
    };
    const images = (i: number) => specs[i].num_images ?? 1;
    await runBounded(
      specs.length,
      this.options.promptConcurrency,
      budget ? (i) => this.budget.createWithin(budget, i, images(i), () => createOne(i), notCreated) : createOne,
    );
    if (notCreated.length) this.prompts.expectOnly(specs.length - notCreated.length);
    return notCreated.sort((a, b) => a - b);
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
      await pollSafely(
        () =>
          this.counted(
            polls.listPrompts.executeWithOptions({ summary: `list the prompts the pack made on tune ${tuneId}` }, [
              { tuneId, minId: this.prompts.pollMinId(), brief: true },
            ]),
          ).then((prompts) => this.prompts.learn(prompts)),
        this.counts,
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
    const delivery = this.delivery;
    if (!delivery) return this.waitForPrompts(tuneId);
    // Each prompt's images are copied as it settles, while the wait goes on for the others.
    let waited = false;
    const copies = delivery.follow(
      () => this.prompts.all(),
      () => waited,
    );
    const prompts = await this.waitForPrompts(tuneId).catch(async (err: unknown) => {
      // What settled was paid for: its copies finish before the wait's failure ends the run (a cancellation's are
      // cancelled with it). `copies` never rejects.
      waited = true;
      await copies;
      throw err;
    });
    waited = true;
    await copies;
    if (delivery.cancelled) throw delivery.cancelled;
    if (delivery.notStored.length) throw this.imagesNotStored(delivery);
    return prompts;
  }

  /**
   * The prompts as the result gives them, in the caller's order, each with its stored copies where they were made.
   *
   * @example
   * return { prompts: job.resultPrompts(prompts), cost: job.budget.cost() };
   */
  resultPrompts(prompts: readonly Prompt[]): ResultPrompt[] {
    return prompts.map((p) => resultPrompt(p, this.delivery?.stored.get(p.id)));
  }

  /** The copies this run makes, from the worker's answer (`storage`) and the job's `storeImages`. */
  private deliveryFor(storage: boolean | undefined): Delivery | undefined {
    const wanted = this.options.storeImages;
    if (wanted === false) return undefined;
    if (wanted === true && storage === false)
      throw invalidOption(
        'storeImages',
        "is true, but the worker copies no images: it has no storage (TUNEFLOW_STORAGE, the plugin's `storage`)",
      );
    // Unknown (the worker's answer failed): copied when the job asked; the activity says if no worker can.
    return storage || (storage === undefined && wanted === true) ? new Delivery() : undefined;
  }

  private imagesNotStored(delivery: Delivery) {
    const stored = [...delivery.stored].map(([promptId, copies]) => ({
      promptId,
      images: delivery.urls.get(promptId) ?? [],
      stored: copies,
    }));
    return imagesNotStored({ cost: this.budget.cost(), stored, notStored: delivery.notStored });
  }

  private async waitForPrompts(tuneId: number): Promise<Prompt[]> {
    const wait = await waitFor(
      {
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
            ? { tuneId, promptIds, onePage: true, brief: true }
            : { tuneId, minId: this.prompts.pollMinId(), brief: true };
          return this.counted(polls.listPrompts.executeWithOptions({ summary }, [query])).then((prompts) => {
            this.prompts.learn(prompts);
            const reached = new Set(prompts.map((p) => p.id));
            const missed = promptIds?.filter((id) => !reached.has(id)) ?? [];
            // Before the marker the page's activity read these itself (recorded in its result): nothing to do.
            if (missed.length && patchedOrFolded(PROMPTS_READ_ONE_REQUEST_EACH))
              return this.readEachById(tuneId, missed, summary);
          });
        },
        reads: this.wakeUps.promptReads,
        waiting: () => this.wakeUps.promptsWaiting(),
        doneIds: () => this.wakeUps.promptsDone(),
      },
      this.options,
      this.counts,
    );
    if (!wait.done) {
      const count = { expected: this.prompts.total, known: this.prompts.all().length };
      throw promptsNeverSettled(tuneId, this.prompts.unsettled(), count, wait.record);
    }
    return this.prompts.all();
  }

  /**
   * The prompts a poll's list page did not reach (others' prompts between the job's on a shared tune), by id, an
   * activity each: every activity on the rate-limited queue is one request. One that is gone (404) is left out: the
   * wait's deadline names it.
   */
  private readEachById(tuneId: number, promptIds: readonly number[], summary: string): Promise<void> {
    return runBounded(promptIds.length, READ_BY_ID_AT_ONCE, (i) =>
      this.counted(
        polls.retrievePrompt.executeWithOptions({ summary: `${summary}: prompt ${promptIds[i]} by id` }, [
          { tuneId, promptId: promptIds[i], brief: true },
        ]),
      ).then(
        (prompt) => this.prompts.learn([prompt]),
        (err: unknown) => {
          if (failureTypeOf(err) !== ErrorKind.notFound) throw err;
        },
      ),
    );
  }

  /**
   * A prompt create under the tenant's ceiling: reserved at the highest price per image seen (none on a free tune);
   * before any price is known one create goes alone, reserved at nothing, and the others wait for its answer.
   */
  private promptReserved(i: number, images: number, free: boolean, make: () => Promise<Prompt>): Promise<Prompt> {
    // No ledger: the create as before, not one microtask later (commands keep their order).
    return this.spend.off ? make() : this.promptReservedOnLedger(i, images, free, make);
  }

  private async promptReservedOnLedger(
    i: number,
    images: number,
    free: boolean,
    make: () => Promise<Prompt>,
  ): Promise<Prompt> {
    let unpriced = false;
    if (!free) {
      while (this.promptPerImageMc === undefined && this.unpricedPromptInFlight)
        await condition(() => this.promptPerImageMc !== undefined || !this.unpricedPromptInFlight);
      unpriced = this.promptPerImageMc === undefined;
      if (unpriced) this.unpricedPromptInFlight = true;
    }
    const priceMc = free ? 0 : (this.promptPerImageMc ?? 0) * images;
    try {
      return await this.spend.around(`prompt-${i}`, priceMc, costMcOf, make).then((created) => {
        const costMc = costMcOf(created);
        if (costMc !== undefined && !free)
          this.promptPerImageMc = Math.max(this.promptPerImageMc ?? 0, costMc / images);
        return created;
      });
    } finally {
      if (unpriced) this.unpricedPromptInFlight = false;
    }
  }

  private packUnpriced(packId: number, why: string) {
    return invalidOption(
      'packId',
      `cannot be reserved where the tenant's spend has a ceiling (TUNEFLOW_TENANT_BUDGETS): pack ${packId}'s ` +
        `price is unknown before the request (${why})`,
    );
  }

  /**
   * A create, counted; with `cleanupOnCancel`, one the cleanup will know of (./cleanup.ts). A create reserved on the
   * tenant's ledger is let finish the same way once started, so what it cost is known and committed, never released.
   */
  private create<T>(start: () => Promise<T>): Promise<T> {
    return this.options.cleanupOnCancel || this.spend.holding
      ? createToCleanUp(start, this.counted)
      : this.counted(start());
  }

  /**
   * Counts a call once it answered. A `.then` rather than an async function: the SDK records a stack trace for every
   * promise a run makes (for its `__stack_trace` query), and an async function with an await makes two where this
   * makes one. Its answer reaches the caller in as many microtask turns as before, so commands keep their order.
   */
  private readonly counted = <T>(call: Promise<T>): Promise<T> =>
    call.then((result) => {
      this.counts.apiCalls++;
      return result;
    });

  /** Deletes what the run created: on cancellation, with `cleanupOnCancel`. */
  private cleanUp(): Promise<void> {
    this.enter(Phase.cleaningUp);
    const prompts = promptsOutlivingTune(this.prompts.all(), this.createdTuneId, this.tune.latest);
    return deleteCreated(prompts, this.createdTuneId, this.options.promptConcurrency, this.counted);
  }
}

/**
 * The result as the SDK will convert it (JSON, as its default converter does): one it cannot would fail the workflow
 * task on every attempt, out of the run's reach, so it fails the run here instead.
 */
function requireConvertible(result: unknown): void {
  try {
    JSON.stringify(result);
  } catch (err) {
    throw unconvertiblePayload('The result', err as Error);
  }
}
