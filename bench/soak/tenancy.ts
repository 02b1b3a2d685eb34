/**
 * Tenants apart, judged (issue 42): every tune, prompt, upload and charge in the mock's journal joined to the tenant
 * whose run made it, and everything a run held or asked the service about joined to the tenant that owns it. Pure
 * functions of histories and the journal, tested on seeded defects (test/bench/tenancy.test.ts).
 *
 * The joins: a tune to the run its title names (tuneflow titles it `<workflow ID>#<run ID>`, titleWorkflowId), and so
 * to that run's tenant (jobOfWorkflowId); its owner is the tenant its title says (titleTenant), or any tenant the
 * operator gave it to (the grants, as the workers are given them). A prompt to the run its text's mark names
 * (promptMark), or for a pack's prompts the run whose title the pack create carried (the journal's `requestTitle`). An
 * upload to the object it went into, a charge (the account's ledger) to the object it paid for.
 *
 * Reads: the mock cannot tell who read what (one API key serves every tenant), so a read is judged by what reached a
 * run: the objects in its activities' answers, its result and its failure. A job's look at a tune it was given (the
 * `owned` check, which reads the tune to learn whose it is and refuses another tenant's) reaches the run only as the
 * refusal, and counts as no read; any request naming another tenant's object that was not so refused is counted.
 */
import * as proto from '@temporalio/proto';
import { jobOfWorkflowId, titleTenant, titleWorkflowId } from '../../src/contract/tenants';
import type { Charge, JournalPrompt, JournalTune, MockJournal } from '../../src/mock-service';
import { Tenants } from '../../src/tenants';
import { markOf } from './jobs';
import { decompressed } from '../../src/codec/compression';

type HistoryEvent = proto.temporal.api.history.v1.IHistoryEvent;

/** An activity of a run that named tunes or prompts, and how it ended. */
export interface ServiceRequest {
  activity: string;
  tuneIds: number[];
  promptIds: number[];
  /** The field that named the tune, for the activity to refuse a tune that is not the run's tenant's (`owned`). */
  owned?: string;
  /** The title a create carried. */
  title?: string;
  ended: 'completed' | 'failed' | 'open';
}

/** What a run's history says it touched. */
export interface RunTouches {
  /** Tunes and prompts in what reached the run: its activities' answers, its result or its failure's details. */
  held: { tuneIds: number[]; promptIds: number[] };
  /** Every activity that named a tune or a prompt, or carried a title. */
  requests: ServiceRequest[];
  /** The run's `options.maxCostMc`, from its start. */
  maxCostMc?: number;
}

/** Keys only a tune object has among what runs hold (a prompt has `tune_id`). */
const TUNE_KEYS = ['title', 'trained_at', 'eta', 'orig_images', 'branch', 'model_type'];

/** A payload's JSON, decompressed first where the worker compressed it (TUNEFLOW_COMPRESS_PAYLOADS). */
function json(payloads: proto.temporal.api.common.v1.IPayload[] | null | undefined): unknown {
  const data = payloads?.[0] && decompressed(payloads[0]).data;
  if (!data) return undefined;
  try {
    return JSON.parse(Buffer.from(data).toString('utf8'));
  } catch {
    return undefined;
  }
}

/** The tunes and prompts anywhere in `value`: objects with an `id` (a prompt's with its `tune_id`), and `tuneId`s. */
function collect(value: unknown, into: { tuneIds: Set<number>; promptIds: Set<number> }, depth = 0): void {
  if (depth > 32 || value === null || typeof value !== 'object') return;
  if (Array.isArray(value)) {
    for (const item of value) collect(item, into, depth + 1);
    return;
  }
  const object = value as Record<string, unknown>;
  if (typeof object.id === 'number') {
    if (typeof object.tune_id === 'number') {
      into.promptIds.add(object.id);
      into.tuneIds.add(object.tune_id);
    } else if (TUNE_KEYS.some((key) => key in object)) into.tuneIds.add(object.id);
  }
  if (typeof object.tuneId === 'number') into.tuneIds.add(object.tuneId);
  for (const item of Object.values(object)) collect(item, into, depth + 1);
}

const numbers = (list: unknown): number[] =>
  (Array.isArray(list) ? list : [list]).filter((id): id is number => typeof id === 'number');

/** The tunes, prompts and title an activity's input names. */
function requestOf(activity: string, input: unknown): ServiceRequest | undefined {
  const i = (input ?? {}) as {
    tuneId?: unknown;
    promptId?: unknown;
    promptIds?: unknown;
    owned?: unknown;
    tune?: { tune_ids?: unknown; title?: unknown };
  };
  const tuneIds = [...numbers(i.tuneId), ...numbers(i.tune?.tune_ids)];
  const promptIds = [...numbers(i.promptId), ...(Array.isArray(i.promptIds) ? numbers(i.promptIds) : [])];
  const title = typeof i.tune?.title === 'string' ? i.tune.title : undefined;
  if (!tuneIds.length && !promptIds.length && title === undefined) return undefined;
  return {
    activity,
    tuneIds,
    promptIds,
    ...(typeof i.owned === 'string' && { owned: i.owned }),
    ...(title !== undefined && { title }),
    ended: 'open',
  };
}

/**
 * What a run touched, from its history's events.
 *
 * @example
 * const touches = readTouches(history.events ?? []);
 */
export function readTouches(events: readonly HistoryEvent[]): RunTouches {
  const held = { tuneIds: new Set<number>(), promptIds: new Set<number>() };
  const requests = new Map<number, ServiceRequest>();
  let maxCostMc: number | undefined;
  for (const event of events) {
    const started = event.workflowExecutionStartedEventAttributes;
    if (started) {
      const options = (json(started.input?.payloads) as { options?: { maxCostMc?: unknown } } | undefined)?.options;
      if (typeof options?.maxCostMc === 'number') maxCostMc = options.maxCostMc;
    }
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (scheduled) {
      const request = requestOf(scheduled.activityType?.name ?? '', json(scheduled.input?.payloads));
      if (request) requests.set(Number(event.eventId), request);
    }
    const completed = event.activityTaskCompletedEventAttributes;
    if (completed) {
      collect(json(completed.result?.payloads), held);
      const request = requests.get(Number(completed.scheduledEventId));
      if (request) request.ended = 'completed';
    }
    const ended =
      event.activityTaskFailedEventAttributes ??
      event.activityTaskTimedOutEventAttributes ??
      event.activityTaskCanceledEventAttributes;
    const request = ended && requests.get(Number(ended.scheduledEventId));
    if (request) request.ended = 'failed';
    collect(json(event.workflowExecutionCompletedEventAttributes?.result?.payloads), held);
    collect(
      json(event.workflowExecutionFailedEventAttributes?.failure?.applicationFailureInfo?.details?.payloads),
      held,
    );
  }
  return {
    held: { tuneIds: [...held.tuneIds], promptIds: [...held.promptIds] },
    requests: [...requests.values()],
    ...(maxCostMc !== undefined && { maxCostMc }),
  };
}

/** One run as the tenancy judge sees it: its workflow ID (so its tenant) and what it touched. */
export interface TenancyRun {
  workflowId: string;
  touches: RunTouches;
}

/** What the journal holds of one tenant. */
export interface TenantFigures {
  /** Runs of the tenant that the soak started and judged. */
  runs: number;
  tunes: number;
  prompts: number;
  uploads: number;
  /** What the account was charged for the tenant's objects. */
  chargedMc: number;
  /** The tenant's tunes and prompts deleted. */
  deleted: number;
}

/** The tenancy verdict: each count must be 0, every broken rule in words. */
export interface TenancyVerdict {
  tenants: Record<string, TenantFigures>;
  /** Objects of another tenant in what reached a run: an activity's answer, its result, its failure. */
  read: number;
  /** Objects made on another tenant's: a prompt on its tune (or pack prompts added to it), a create titled for a run not its own. */
  createdOn: number;
  /** Deletes asked of another tenant's objects, and objects deleted that no run of their tenant asked to delete. */
  deleted: number;
  /** Other requests naming another tenant's tune or prompt that the activity did not refuse (`owned`). */
  actedOn: number;
  /** Runs whose charges (the ledger's, joined to the objects they made) passed their maxCostMc. */
  overMaxCost: number;
  /** Tunes, prompts, uploads and charges joined to no run the soak started. */
  unattributed: number;
  violations: string[];
}

/** What the judge is told besides: the grants the workers run with, and the service's own tunes (not journaled). */
export interface TenancyContext {
  /** TenantSettings.tunes: `*` gives tunes to every tenant. */
  grants: Readonly<Record<string, readonly number[]>>;
  fixtures: ReadonlyArray<{ id: number; title: string }>;
}

/** The tenant a run runs as; undefined for a run under an ID no tenant's job has (a claim's). */
function tenantOfRun(workflowId: string): string | undefined {
  return jobOfWorkflowId(workflowId)?.tenant;
}

/**
 * Judges the runs and the journal: every object joined to a tenant, and nothing of one tenant's reached, made on or
 * deleted by another's.
 *
 * @example
 * const verdict = judgeTenancy(runs, mock.journal(), mock.ledger(apiKey).charges, { grants, fixtures: GALLERY_TUNES });
 */
export function judgeTenancy(
  runs: readonly TenancyRun[],
  journal: MockJournal,
  charges: readonly Charge[],
  context: TenancyContext,
): TenancyVerdict {
  const verdict: TenancyVerdict = {
    tenants: {},
    read: 0,
    createdOn: 0,
    deleted: 0,
    actedOn: 0,
    overMaxCost: 0,
    unattributed: 0,
    violations: [],
  };
  const tenants = new Tenants({ tunes: context.grants });
  const figures = (tenant: string): TenantFigures =>
    (verdict.tenants[tenant] ??= { runs: 0, tunes: 0, prompts: 0, uploads: 0, chargedMc: 0, deleted: 0 });
  const byWorkflowId = new Map(runs.map((run) => [run.workflowId, run]));
  for (const run of runs) figures(tenantOfRun(run.workflowId) ?? 'none').runs++;

  // Who made each object (the run, so the tenant), and whose each tune is.
  const tunes = new Map<number, JournalTune>(journal.tunes.map((t) => [t.id, t]));
  const fixtures = new Map(context.fixtures.map((f) => [f.id, f]));
  const tuneMaker = new Map<number, TenancyRun | undefined>();
  for (const tune of journal.tunes) tuneMaker.set(tune.id, byWorkflowId.get(titleWorkflowId(tune.title)));
  const promptMaker = (prompt: JournalPrompt): TenancyRun | undefined => {
    const mark = markOf(prompt.text);
    if (mark) return byWorkflowId.get(mark.workflowId);
    return prompt.requestTitle === null ? undefined : byWorkflowId.get(titleWorkflowId(prompt.requestTitle));
  };
  const prompts = new Map(journal.prompts.map((p) => [p.id, { prompt: p, maker: promptMaker(p) }]));
  /** Whether `tenant` may touch tune `id`; true for an id the service never had (a forgery's, say). */
  const mayTouchTune = (tenant: string | undefined, id: number): boolean => {
    const tune = tunes.get(id) ?? fixtures.get(id);
    if (!tune) return true;
    return tenant !== undefined && tenants.owns(tenant, { id, title: tune.title });
  };
  /** The tenant whose a prompt is: its maker's, else its tune's; undefined when neither is known. */
  const promptTenant = (id: number): string | undefined | null => {
    const known = prompts.get(id);
    if (!known) return null;
    if (known.maker) return tenantOfRun(known.maker.workflowId);
    const tune = tunes.get(known.prompt.tuneId);
    return tune ? titleTenant(tune.title) : undefined;
  };
  const fail = (count: 'read' | 'createdOn' | 'deleted' | 'actedOn' | 'unattributed', line: string) => {
    verdict[count]++;
    verdict.violations.push(line);
  };

  for (const tune of journal.tunes) {
    const maker = tuneMaker.get(tune.id);
    if (!maker) {
      fail('unattributed', `tune ${tune.id} (${JSON.stringify(tune.title)}) was made by no run the soak started`);
      continue;
    }
    const tenant = tenantOfRun(maker.workflowId) ?? 'none';
    figures(tenant).tunes++;
    if (tune.deletedAt !== null) figures(tenant).deleted++;
    if (titleTenant(tune.title) !== tenant)
      fail('createdOn', `tune ${tune.id}: made by ${maker.workflowId} (${tenant}), titled as another tenant's`);
  }
  for (const { prompt, maker } of prompts.values()) {
    if (!maker) {
      fail('unattributed', `prompt ${prompt.id} on tune ${prompt.tuneId} was made by no run the soak started`);
      continue;
    }
    const tenant = tenantOfRun(maker.workflowId);
    figures(tenant ?? 'none').prompts++;
    if (prompt.deletedAt !== null) figures(tenant ?? 'none').deleted++;
    if (!mayTouchTune(tenant, prompt.tuneId))
      fail(
        'createdOn',
        `prompt ${prompt.id}: made by ${maker.workflowId} (${tenant}) on tune ${prompt.tuneId}, another tenant's`,
      );
  }
  for (const upload of journal.uploads) {
    const maker =
      upload.tuneId !== null
        ? tuneMaker.get(upload.tuneId)
        : upload.promptId !== null
          ? prompts.get(upload.promptId)?.maker
          : undefined;
    if (maker) figures(tenantOfRun(maker.workflowId) ?? 'none').uploads++;
    else fail('unattributed', `upload ${upload.url} went into no object a run the soak started made`);
  }

  // Charges, by the run that made what they paid for.
  const spent = new Map<TenancyRun, number>();
  for (const charge of charges) {
    const maker = charge.object === 'tune' ? tuneMaker.get(charge.id) : prompts.get(charge.id)?.maker;
    if (!maker) {
      if (charge.mc > 0)
        fail('unattributed', `a charge of ${charge.mc} mc for ${charge.object} ${charge.id} joins no run`);
      continue;
    }
    spent.set(maker, (spent.get(maker) ?? 0) + charge.mc);
    figures(tenantOfRun(maker.workflowId) ?? 'none').chargedMc += charge.mc;
  }
  for (const [run, mc] of spent) {
    const limit = run.touches.maxCostMc;
    if (limit !== undefined && mc > limit) {
      verdict.overMaxCost++;
      verdict.violations.push(`${run.workflowId}: charged ${mc} mc, over its maxCostMc ${limit}`);
    }
  }

  // What each run held and asked for, against its tenant.
  const deletesAsked: Array<{ tenant: string | undefined; tuneId?: number; promptId?: number }> = [];
  for (const run of runs) {
    const tenant = tenantOfRun(run.workflowId);
    const who = `${run.workflowId} (${tenant ?? 'no tenant'})`;
    const { held, requests } = run.touches;
    for (const id of held.tuneIds)
      if (!mayTouchTune(tenant, id)) fail('read', `${who} holds tune ${id}, another tenant's`);
    for (const id of held.promptIds) {
      const owner = promptTenant(id);
      if (owner !== null && owner !== tenant)
        fail('read', `${who} holds prompt ${id}, ${owner ?? 'no known tenant'}'s`);
    }
    for (const request of requests) {
      const deleting = request.activity === 'deleteTune' || request.activity === 'deletePrompt';
      if (request.activity === 'deleteTune')
        deletesAsked.push(...request.tuneIds.map((tuneId) => ({ tenant, tuneId })));
      if (request.activity === 'deletePrompt')
        deletesAsked.push(...request.promptIds.map((promptId) => ({ tenant, promptId })));
      const what = `${who}: ${request.activity}`;
      if (request.title !== undefined && titleWorkflowId(request.title) !== run.workflowId)
        fail('createdOn', `${what} titled ${JSON.stringify(request.title)}, a title of another run`);
      // Another tenant's prompt is named by no request: not even a refused one needs to.
      const foreign = [
        ...request.tuneIds.filter((id) => !mayTouchTune(tenant, id)).map((id) => `tune ${id}`),
        ...request.promptIds.filter((id) => ![tenant, null].includes(promptTenant(id))).map((id) => `prompt ${id}`),
      ];
      const refused = request.owned !== undefined && request.ended !== 'completed' && request.promptIds.length === 0;
      if (!foreign.length || (refused && !deleting)) continue;
      if (deleting) fail('deleted', `${what} of ${foreign.join(', ')}, another tenant's`);
      else fail('actedOn', `${what} on ${foreign.join(', ')}, another tenant's, not refused`);
    }
  }
  // Every object deleted: asked by a run of its own tenant (a prompt also goes with its checkpoint tune).
  const askedBy = (tenant: string | undefined, match: (ask: (typeof deletesAsked)[number]) => boolean) =>
    deletesAsked.some((ask) => ask.tenant === tenant && match(ask));
  for (const tune of journal.tunes)
    if (tune.deletedAt !== null && !askedBy(titleTenant(tune.title), (ask) => ask.tuneId === tune.id))
      fail('deleted', `tune ${tune.id} was deleted, and no run of its tenant asked to`);
  for (const { prompt } of prompts.values()) {
    const tenant = promptTenant(prompt.id) ?? undefined;
    const asked = askedBy(tenant, (ask) => ask.promptId === prompt.id || ask.tuneId === prompt.tuneId);
    if (prompt.deletedAt !== null && !asked)
      fail('deleted', `prompt ${prompt.id} was deleted, and no run of its tenant asked to`);
  }
  return verdict;
}
