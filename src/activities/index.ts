/**
 * Activities: thin adapters from the service client to Temporal. `createActivities(deps)` returns them all.
 *
 * Each one calls the service once (or looks first, on a retried create), and turns the client's errors into
 * ApplicationFailures whose `type` the retry policies in src/workflows/policies.ts understand. Retrying is Temporal's
 * job: nothing here loops.
 */
import { activityInfo, cancellationSignal, Context, getClient, heartbeat } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { StoredImage } from '../contract/storage';
import { copyPromptImages, StoredImageDiffers, type CheckedCopy } from '../storage/copy';
import { ImageFetchError, type ImageFetcher } from '../storage/image-fetch';
import type { ImageStore } from '../storage/store';
import type { TunesApi } from '../api';
import type { Prompt, Tune } from '../api/schemas';
import { type CallbackRun, type CallbackSigner, redactCallbackSignatures } from '../callbacks/signing';
import { callbackTraceParams } from '../callbacks/trace-context';
import { CallbackKind } from '../contract/messages';
import type { PackTuneSpec, PromptSpec, TuneSpec } from '../contract/inputs';
import type { ImageInspection, TrainingImage } from '../contract/inspection';
import { briefInspection, briefPrompt, briefPrompts, briefTune } from './brief';
import { findCreatedPackPrompts, findCreatedPrompt, findCreatedTune } from './lookup';
import { listOwnPrompts } from './poll';
import { toApplicationFailure } from './failures';
import {
  checkUploadPaths,
  readUploads,
  uploadsOfPrompt,
  uploadsOfTune,
  type UploadPath,
  type UploadReadOptions,
  type WithFiles,
} from './uploads';
import { priorJob, type PriorJob } from '../job-under-key';
import { SearchAttributesCheck } from '../search-attributes';
import { Tenants } from '../tenants';
import { TuneOwnership } from './ownership';
import { spendActivities, type SpendActivities } from './spend';
import { DEFAULT_TENANT, jobOfWorkflowId } from '../contract/tenants';
import { countCharge, countInspection, countRetry, requestCounter } from '../metrics';

/** What a run's first local activity answers when asked for its budget too. */
export interface RunSettings {
  /** Whether the namespace has tuneflow's search attributes. */
  registered: boolean;
  /** Whether the run's tenant has a spend ceiling: its creates are reserved on the tenant's ledger. */
  budget: boolean;
  /**
   * Whether this worker copies images to storage: the run's settled prompts' images are copied (storeImages). Absent
   * in answers recorded before storage existed: those runs copy nothing, as they did.
   */
  storage?: boolean;
}

export { toApplicationFailure } from './failures';

/**
 * What the workflows call. Every argument and result is JSON that enters history: results carry no callback
 * signature (the service echoes callback URLs in its objects; a signed URL is a capability). With `brief: true` a tune
 * not trained yet, or a prompt not settled yet, comes back with only the fields tuneflow reads (./brief.ts); a done
 * one comes back whole. The workflows ask for it: they wait on such copies, and return only done ones.
 */
export interface TuneflowActivities extends SpendActivities {
  /**
   * POST /tunes with the signed tune callback (and `title` as given; the workflow defaults it to its ID).
   * On a retry it first looks for a tune with the same title and returns that instead of creating twice.
   */
  createTune(input: { tune: TuneSpec & { title: string }; brief?: boolean }): Promise<Tune>;
  /**
   * GET /tunes/:id. With `owned` (the input field that named the tune), a tune that is not the run's tenant's is
   * refused, InvalidInput naming that field: a job reads, generates on and deletes only its tenant's tunes.
   */
  retrieveTune(input: { tuneId: number; brief?: boolean; owned?: string }): Promise<Tune>;
  /** DELETE /tunes/:id; a tune that is already gone counts as deleted. */
  deleteTune(input: { tuneId: number }): Promise<void>;
  /**
   * POST /tunes/:tuneId/prompts with the signed prompt callback (`key` distinguishes prompts of one job in the
   * callback URL). On a retry it first looks among the tune's prompts for one with the same considered
   * attributes (spec 4.11) and returns it.
   */
  createPrompt(input: { tuneId: number; prompt: PromptSpec; key: string; brief?: boolean }): Promise<Prompt>;
  retrievePrompt(input: { tuneId: number; promptId: number; brief?: boolean }): Promise<Prompt>;
  /**
   * The tune's prompts, newest first. With `promptIds` (a job's poll of its own prompts): only those, read with one
   * list page starting at the newest of them and by id for any it did not reach, so neither the calls nor the result
   * grow with other jobs' prompts on the tune (a Flux base tune is shared); with `onePage` too, the page only (one
   * request: the workflow reads the others by id, an activity each). Without: those with id >= minId, at most
   * `limit` of them, one list call unless there are more than a page. With `owned`, the tune is read first.
   */
  listPrompts(input: {
    tuneId: number;
    minId?: number;
    limit?: number;
    promptIds?: number[];
    /** With `promptIds`: the one list page only, none read by id. */
    onePage?: boolean;
    brief?: boolean;
    /** As retrieveTune's: the tune is read first, and refused unless it is the run's tenant's. */
    owned?: string;
  }): Promise<Prompt[]>;
  /** DELETE /tunes/:tune_id/prompts/:id; a prompt that is already gone counts as deleted. */
  deletePrompt(input: { tuneId: number; promptId: number }): Promise<void>;
  /**
   * The pack's price for a class, in millicents (`cost_mc_hash`, GET /p/:id), or null when the pack names none.
   */
  packPrice(input: { packId: number; name: string }): Promise<number | null>;
  /** POST /p/:packId/tunes with the signed tune, prompt and prompts callbacks; looks up by title on a retry. */
  createPackTune(input: { packId: number; tune: PackTuneSpec & { title: string }; brief?: boolean }): Promise<Tune>;
  /**
   * POST /images/inspect for one training image of class `name`: a URL is sent as `file_url`, a file of the upload
   * directory is uploaded. Returns the flags the service raised and what else it said (bounded). Changes nothing on
   * the service: a retry simply asks again.
   */
  inspectImage(input: { name: string; image: TrainingImage }): Promise<ImageInspection>;
  /**
   * Checks a job's file paths against the upload directory before anything is created: InvalidInput
   * naming each field whose file is outside it, a link, not a regular file, too large, or when the worker has no upload
   * directory. Opens each file as the read will, and reads no byte. An early refusal only: the activity that reads a
   * file checks it again on the handle it reads.
   */
  checkUploads(input: { paths: UploadPath[] }): Promise<void>;
  /**
   * The earlier run that claimed this run's workflow ID (a raw start under a key whose job closed): whether it was
   * the same job, and how it ended. Reads Temporal, not the service.
   */
  priorJob(input: { workflowId: string; workflow: string; input: unknown }): Promise<PriorJob>;
  /**
   * Whether the run's namespace has tuneflow's search attributes: a local activity once the run's input is checked, so
   * the answer is in its history and a replay keeps it. Asked of the server at most once every 10 s per worker until
   * they are there.
   */
  searchAttributesRegistered(): Promise<boolean>;
  /**
   * With `{ budget: true }` (runs that hold their tenant's spend ceiling): also whether the run's tenant has a budget
   * (TUNEFLOW_TENANT_BUDGETS), in the same local activity, so a run of a tenant without one makes no command more.
   * The budget's ceiling and window are read again by each reservation, on the worker that makes it.
   */
  searchAttributesRegistered(input: { budget: true }): Promise<RunSettings>;
  /**
   * Copies a settled prompt's images (the service's URLs, in its order) to the worker's storage under keys that name
   * the job, the prompt and the image, each checked by its SHA-256 read back; answers where each is. Writes each
   * image once, whoever retries. Never reaches the service's API, nor sends its key (src/storage).
   */
  storeImages(input: { promptId: number; images: string[] }): Promise<StoredImage[]>;
}

export interface ActivityDeps {
  /** The service client, built by the worker from its environment (the API key never leaves the worker). */
  api: TunesApi;
  /** Signs callback URLs. Without it no callback is requested and the workflows rely on polling. */
  callbacks?: CallbackSigner;
  /**
   * How many pages (of 120) a retried create reads while it looks for what an earlier attempt created.
   * @default 5
   */
  lookupPages?: number;
  /**
   * The only directory a job's file paths may name (TUNEFLOW_UPLOAD_DIR). Each file is opened once, checked on that
   * handle (a regular file, its size, inside the directory after every link) and read from it.
   * @default none: jobs send image URLs only
   */
  uploadDir?: string;
  /**
   * The operator's tenants: which tunes each tenant owns besides those its jobs made (src/tenants.ts).
   * @default none given: a tenant owns the tunes its jobs made
   */
  tenants?: Tenants;
  /**
   * Called for each file after its handle is checked and before its bytes are read. A test seam: whatever happens to
   * the path here, what is sent is what was checked.
   */
  beforeUploadRead?: UploadReadOptions['beforeRead'];
  /**
   * Where the jobs' images are copied, and how they are read from the service's image hosts (src/storage).
   * @default none: a job's result holds the service's URLs only
   */
  storage?: { store: ImageStore; fetcher: ImageFetcher };
}

/** The list page size: the spec's maximum, so one call covers a whole job's prompts. */
const PAGE = 120;

/**
 * Builds the activities over the given dependencies.
 *
 * @example
 * const activities = createActivities({ api: new TunesApi({ apiKey }), callbacks: new CallbackSigner({ baseUrl, secret }) });
 * await Worker.create({ taskQueue: 'tuneflow', workflowsPath, activities });
 */
export function createActivities(deps: ActivityDeps): TuneflowActivities {
  const { api, callbacks, uploadDir } = deps;
  const tenants = deps.tenants ?? new Tenants();
  const ownership = new TuneOwnership(api, tenants, options);
  const reading: UploadReadOptions = { beforeRead: deps.beforeUploadRead };
  const lookupPages = deps.lookupPages ?? 5;
  const searchAttributes = new SearchAttributesCheck();
  // Each copy holds an image and its read-back in memory: a few at once per worker bound that (4 x 2 x 32 MiB).
  const copyTurns = new Turns(COPIES_AT_ONCE);

  /**
   * The URL the service should POST to, signed for this run, with the trace of the span that scheduled this activity
   * (the same for every attempt); undefined when callbacks are off.
   */
  const callbackUrl: CallbackUrl = (kind, params) =>
    callbacks?.url(kind, runOf(), { ...params, ...callbackTraceParams() });
  const creates: Creates = { api, lookupPages, callbackUrl };

  return {
    async createTune({ tune, brief }) {
      return mapped(async () => {
        // A LoRA or FaceID trains on its base: the tenant's, or one the operator gave it.
        if (typeof tune.base_tune_id === 'number') await ownership.requireOwned('tune.base_tune_id', tune.base_tune_id);
        return ownership.remember(
          charged(await createTuneOnce(creates, await uploadsOfTune(uploadDir, tune, reading))),
        );
      }, brief && briefTune);
    },

    async retrieveTune({ tuneId, brief, owned: field }) {
      return mapped(
        () => (field === undefined ? api.tunes.retrieve(tuneId, options()) : ownership.owned(tuneId, field)),
        brief && briefTune,
      );
    },

    async deleteTune({ tuneId }) {
      await mapped(() => ignoreNotFound(api.tunes.delete(tuneId, options())));
    },

    async createPrompt({ tuneId, prompt, key, brief }) {
      return mapped(async () => {
        // The LoRAs and FaceIDs its text loads are the tenant's (each tune's title read once per worker).
        await ownership.requireReferences(`prompts[${key}].text`, prompt.text);
        return charged(await createPromptOnce(creates, tuneId, await uploadsOfPrompt(uploadDir, prompt, reading), key));
      }, brief && briefPrompt);
    },

    async retrievePrompt({ tuneId, promptId, brief }) {
      return mapped(() => api.prompts.retrieve(tuneId, promptId, options()), brief && briefPrompt);
    },

    async listPrompts({ tuneId, minId, limit, promptIds, onePage, brief, owned: field }) {
      return mapped(async () => {
        // The tune first: another tenant's tune's prompts are never read.
        if (field !== undefined) await ownership.owned(tuneId, field);
        return promptIds !== undefined
          ? listOwnPrompts(api, tuneId, promptIds, options(), onePage === true)
          : listNewest(api, tuneId, { minId, limit });
      }, brief && briefPrompts);
    },

    async deletePrompt({ tuneId, promptId }) {
      await mapped(() => ignoreNotFound(api.prompts.delete(tuneId, promptId, options())));
    },

    async packPrice({ packId, name }) {
      return mapped(async () => {
        const pack = await api.packs.retrieve(packId, options());
        return pack.cost_mc_hash?.[name] ?? pack.costs?.[name]?.cost ?? null;
      });
    },

    async createPackTune({ packId, tune, brief }) {
      return mapped(async () => {
        const created = await createPackTuneOnce(creates, packId, await uploadsOfTune(uploadDir, tune, reading));
        // On existing tunes the answer is the first of them, its training paid long ago: no charge of this job's.
        return tune.tune_ids === undefined ? charged(created) : created;
      }, brief && briefTune);
    },

    async inspectImage({ name, image }) {
      return mapped(async () => {
        const source =
          image.url !== undefined
            ? { file_url: image.url }
            : { file: (await readUploads(uploadDir, [{ field: image.field, path: image.path ?? '' }], reading))[0] };
        const inspection = briefInspection(image, await api.images.inspect({ name, ...source }, options()));
        countInspection(Context.current().metricMeter, inspection.flags);
        return inspection;
      });
    },

    async checkUploads({ paths }) {
      await mapped(() => checkUploadPaths(uploadDir, paths));
    },

    async priorJob(input) {
      return priorJob(getClient(), input);
    },

    async searchAttributesRegistered(input?: { budget: true }): Promise<never> {
      const registered = await searchAttributes.registered(
        getClient().connection.operatorService,
        activityInfo().namespace,
      );
      // One implementation of both overloads: the answer's shape follows the input's.
      if (!input?.budget) return registered as never;
      const workflowId = activityInfo().workflowExecution?.workflowId ?? '';
      const tenant = jobOfWorkflowId(workflowId)?.tenant ?? DEFAULT_TENANT;
      const settings: RunSettings = {
        registered,
        budget: tenants.budgetOf(tenant) !== undefined,
        ...(deps.storage && { storage: true }),
      };
      return settings as never;
    },

    async storeImages({ promptId, images }) {
      if (!deps.storage)
        // Another worker of the queue may have storage: retried (bounded), and named if none does.
        throw ApplicationFailure.retryable(
          "this worker copies no images: it has no storage (TUNEFLOW_STORAGE, the plugin's `storage`)",
          'StorageNotConfigured',
        );
      const { store, fetcher } = deps.storage;
      const workflowId = activityInfo().workflowExecution?.workflowId ?? '';
      // The copies an earlier attempt checked, from its heartbeats: taken again once read back with their digest.
      const earlier = (activityInfo().heartbeatDetails as { checked?: CheckedCopy[] } | undefined)?.checked ?? [];
      const checked: CheckedCopy[] = [];
      const beating = setInterval(() => heartbeat({ checked }), HEARTBEAT_EVERY_MS);
      const release = await copyTurns.take(cancellationSignal());
      try {
        const job = { workflowId, promptId, urls: checkedImageUrls(images) };
        return await copyPromptImages(store, fetcher, job, {
          signal: cancellationSignal(),
          earlier: Array.isArray(earlier) ? earlier : [],
          checked: (copy) => {
            checked.push(copy);
            heartbeat({ checked });
          },
        });
      } catch (err) {
        throw storageFailure(err, store);
      } finally {
        release();
        clearInterval(beating);
      }
    },

    ...spendActivities(tenants),
  };
}

/** Copies under way at once on one worker (each holds at most twice TUNEFLOW_IMAGE_MAX_BYTES). */
const COPIES_AT_ONCE = 4;

/** At most `size` holders at once; the others wait their turn in order (an abort leaves the line). */
class Turns {
  #free: number;
  readonly #waiting: Array<() => void> = [];

  constructor(size: number) {
    this.#free = size;
  }

  async take(signal: AbortSignal): Promise<() => void> {
    if (this.#free > 0) this.#free--;
    else
      await new Promise<void>((resolve, reject) => {
        const turn = () => {
          signal.removeEventListener('abort', abort);
          resolve();
        };
        const abort = () => {
          this.#waiting.splice(this.#waiting.indexOf(turn), 1);
          reject(signal.reason);
        };
        this.#waiting.push(turn);
        signal.addEventListener('abort', abort, { once: true });
      });
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.#waiting.shift();
      if (next) next();
      else this.#free++;
    };
  }
}

/** The most images a prompt may have: more is no answer of the service's. */
const MAX_IMAGES_PER_PROMPT = 64;

function checkedImageUrls(images: unknown): string[] {
  if (!Array.isArray(images) || images.length > MAX_IMAGES_PER_PROMPT || images.some((u) => typeof u !== 'string'))
    throw ApplicationFailure.nonRetryable(`images: must be at most ${MAX_IMAGES_PER_PROMPT} URLs`, 'ImageNotStorable');
  return images as string[];
}

/** A copy's failure, typed for its retry policy (src/workflows/policies.ts storageActivityOptions). */
function storageFailure(err: unknown, store: ImageStore): unknown {
  if (err instanceof ApplicationFailure) return err;
  if (err instanceof ImageFetchError)
    return err.retryable
      ? ApplicationFailure.retryable(err.message, 'ImageUnreachable')
      : ApplicationFailure.create({
          message: err.message,
          type: 'ImageNotStorable',
          nonRetryable: true,
          details: [{ reason: err.reason }],
        });
  if (err instanceof StoredImageDiffers) return ApplicationFailure.nonRetryable(err.message, 'StoredImageDiffers');
  if (cancellationSignal().aborted) return err;
  // A key the store cannot hold (too long a name): the same on every attempt.
  if (err instanceof TypeError || (err as NodeJS.ErrnoException).code === 'ENAMETOOLONG')
    return ApplicationFailure.nonRetryable(`${store.name}: ${(err as Error).message}`, 'ImageNotStorable');
  const { name, message } = err as Error;
  return ApplicationFailure.retryable(`${store.name}: ${name}: ${String(message).slice(0, 300)}`, 'StorageUnavailable');
}

/** Signs a callback URL of `kind` for the running activity's workflow run; undefined when callbacks are off. */
type CallbackUrl = (kind: CallbackKind, params?: Record<string, string>) => string | undefined;

/** A lost answer (504, crash, timeout) may hide a create that happened: only later attempts look first. */
function earlierAttempt(): { since: number } | undefined {
  const info = activityInfo();
  return info.attempt > 1 ? { since: info.scheduledTimestampMs } : undefined;
}

/** The newest prompts of a tune, down to `minId`, at most `limit`, in as few pages as the limit allows. */
async function listNewest(
  api: TunesApi,
  tuneId: number,
  { minId, limit }: { minId?: number; limit?: number },
): Promise<Prompt[]> {
  const prompts: Prompt[] = [];
  if (limit !== undefined && limit < 1) return prompts;
  const page = Math.min(limit ?? PAGE, PAGE);
  for await (const prompt of api.prompts.list(tuneId, { limit: page }, options())) {
    if (minId !== undefined && prompt.id < minId) break;
    prompts.push(prompt);
    if (prompts.length === limit) break;
  }
  return prompts;
}

/** What a create reaches: the service, how far a retried create looks back, the run's callback URLs. */
interface Creates {
  api: TunesApi;
  lookupPages: number;
  callbackUrl: CallbackUrl;
}

/** One attempt of a tune (spec 4.1). A later attempt first looks for a tune with the title. */
async function createTuneOnce(
  { api, lookupPages, callbackUrl }: Creates,
  tune: WithFiles<TuneSpec & { title: string }>,
): Promise<Tune> {
  if (earlierAttempt()) {
    const found = await findCreatedTune(api, tune.title, lookupPages, options());
    if (found) return found;
  }
  return api.tunes.create({ ...tune, callback: callbackUrl(CallbackKind.tune) }, options());
}

/**
 * One attempt of a prompt (spec 4.5), signed with its input position `key`. A later attempt first looks for the prompt
 * an earlier one made: by its callback, or without callbacks by its attributes since the first attempt.
 */
async function createPromptOnce(
  { api, lookupPages, callbackUrl }: Creates,
  tuneId: number,
  prompt: WithFiles<PromptSpec>,
  key: string,
): Promise<Prompt> {
  const attributes = { ...prompt, callback: callbackUrl(CallbackKind.prompt, { key }) };
  const earlier = earlierAttempt();
  if (earlier) {
    const since = attributes.callback ? undefined : earlier.since;
    const found = await findCreatedPrompt(api, tuneId, attributes, since, lookupPages, options());
    if (found) return found;
  }
  return api.prompts.create(tuneId, attributes, options());
}

/**
 * One attempt of a pack's tune (spec 4.9). A later attempt first looks for what an earlier one made: a new tune by its
 * title, prompts on reused tunes by their callback.
 */
async function createPackTuneOnce(
  { api, lookupPages, callbackUrl }: Creates,
  packId: number,
  tune: WithFiles<PackTuneSpec & { title: string }>,
): Promise<Tune> {
  const earlier = earlierAttempt();
  const promptCallback = callbackUrl(CallbackKind.prompt, { key: 'pack' });
  if (earlier && tune.tune_ids === undefined) {
    const found = await findCreatedTune(api, tune.title, lookupPages, options());
    if (found) return found;
  }
  if (earlier && tune.tune_ids !== undefined) {
    // Reused tunes: the service answers with the first one; its pack prompts carry our callback.
    const first = tune.tune_ids[0];
    if (await findCreatedPackPrompts(api, first, promptCallback, lookupPages, options()))
      return api.tunes.retrieve(first, options());
  }
  const callback = callbackUrl(CallbackKind.tune);
  const created = await api.packs.createTune(
    packId,
    {
      ...tune,
      callback,
      prompt_attributes: promptCallback ? { callback: promptCallback } : undefined,
      prompts_callback: callbackUrl(CallbackKind.packPrompts),
    },
    options(),
  );
  // The pack form of the answer leaves `callback` out: a new tune's is the one asked for (the workflow polls
  // quickly when none was).
  return tune.tune_ids === undefined && created.callback == null && callback ? { ...created, callback } : created;
}

function runOf(): CallbackRun {
  const execution = activityInfo().workflowExecution;
  if (!execution) throw new Error('tuneflow activities sign callbacks for a workflow run: run them from one');
  return { workflowId: execution.workflowId, runId: execution.runId };
}

/**
 * Cancellation of the activity aborts its request; its attempt is the request's, on its span; its requests are counted
 * in the worker's metrics.
 */
function options() {
  return {
    signal: cancellationSignal(),
    attempt: activityInfo().attempt,
    observe: requestCounter(Context.current().metricMeter),
  };
}

/**
 * A create's answer, its charge counted for the job's tenant. A create found by a retry's look-up counts then: the
 * attempt that made it never had its answer.
 */
function charged<T extends { cost_mc?: number | null }>(created: T): T {
  const workflowId = activityInfo().workflowExecution?.workflowId;
  const tenant = (workflowId !== undefined && jobOfWorkflowId(workflowId)?.tenant) || 'unknown';
  countCharge(Context.current().metricMeter, tenant, created.cost_mc);
  return created;
}

/**
 * How often a call under way heartbeats: well inside the heartbeat timeout of src/workflows/policies.ts (the SDK sends
 * at most one heartbeat per 80 % of that timeout). A call that answers sooner never heartbeats.
 */
const HEARTBEAT_EVERY_MS = 2_000;

/** A call to the service as an activity: it heartbeats while it runs; its answer is redacted, then `shape`d (brief). */
async function mapped<T>(call: () => Promise<T>, shape?: ((answer: T) => T) | false): Promise<T> {
  if (activityInfo().attempt > 1) countRetry(Context.current().metricMeter);
  const beating = setInterval(() => heartbeat(), HEARTBEAT_EVERY_MS);
  try {
    const answer = redactCallbackSignatures(await call());
    return shape ? shape(answer) : answer;
  } catch (err) {
    const { attempt, retryPolicy } = activityInfo();
    throw toApplicationFailure(err, { attempt, retryPolicy });
  } finally {
    clearInterval(beating);
  }
}

async function ignoreNotFound(deletion: Promise<unknown>): Promise<void> {
  try {
    await deletion;
  } catch (err) {
    if ((err as { status?: number }).status !== 404) throw err;
  }
}
