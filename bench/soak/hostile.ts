/**
 * The hostile-starters profile: starters tuneflow does not control, mixed into the run's own traffic of two tenants
 * (the default one and a named one, whose jobs TuneflowClient starts with `{ tenant }`, under
 * `tuneflow:nexus:<tenant>:<key>`, as its Nexus endpoint's would run: the rules are the workflows' and the
 * activities', so no Nexus is needed to meet them). Each attack is made against the other tenant's work:
 *
 * - other input under live keys (TuneflowClient: refused, KeyInUse), raw "allow duplicate" starts after a job closed
 *   (the first job's outcome; under a named tenant's ID without its starter's memo: refused);
 * - `title`: a tune titled as another tenant's run, from TuneflowClient (refused before the start) and raw (refused,
 *   InvalidInput, nothing made);
 * - `tuneIds`: generate and packTune `tune_ids` on the other tenant's tunes, and a gallery tune the operator gave no
 *   tenant but the account's own: refused, InvalidInput, nothing made;
 * - `squat`: a raw `keyClaim` under a job's claim ID before the job starts: the job fails ClaimHeld, fast;
 * - `unmemoed`: raw starts under a tenant's ID (`tuneflow:nexus:...`) without the starter's memo, and under a
 *   claim's ID: refused;
 * - `longest`: the longest key (MAX_KEY_LENGTH) of each tenant, the named one 64 bytes long, with an uploaded image:
 *   completes;
 * - `deep`: a raw JSON start whose `prompt_attributes` nests 20,000 deep: ends failed, typed, never stuck;
 * - `unpriced`: jobs under maxCostMc while the mock answers prompt creates and reads without `cost_mc`: end within
 *   the limit, completed or PriceUnknown;
 * - `path`, `smuggled`: file paths outside the upload directory, prompts smuggled in `prompts_attributes`: refused.
 *
 * Every attack that starts a run is judged like a job (judgeAttack: its ending, nothing made by a refused one, nothing
 * duplicated or lost) and by the tenancy judge (./tenancy.ts) with every other run.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure, RawValue, WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { InvalidInputError } from '../../src/api/errors';
import { TuneflowClient } from '../../src/client';
import type { TrainThenGenerateInput, TuneflowOptions } from '../../src/contract/inputs';
import { claimWorkflowId, KeyInUseError } from '../../src/contract/keys';
import {
  DEFAULT_TENANT,
  MAX_KEY_LENGTH,
  TENANT_MEMO,
  tenantWorkflowId,
  titleTenant,
  titleWorkflowId,
  tuneTitle,
} from '../../src/contract/tenants';
import { FLUX_BASE_TUNE, GALLERY_TUNES, type MockJournal } from '../../src/mock-service';
import { jobInput, promptMark, startJob, tenantOf, type SoakJob } from './jobs';
import { judgeJob, type JobOutcome, type JobTruth } from './judge';

/**
 * The soak's second tenant: its name as long as a tenant's may be (64 bytes), so its longest key's claim ID is the
 * longest ID tuneflow makes.
 */
export const SECOND_TENANT = 'studio-of-the-second-tenant-whose-name-takes-all-sixty-four-byte';

/** The tunes the operator gives every tenant in the soak: the public base tune the plan's generate jobs use. */
export const SOAK_TENANT_TUNES: Readonly<Record<string, readonly number[]>> = { '*': [FLUX_BASE_TUNE.id] };

/** The mock's answers without `cost_mc` under hostile-starters: a prompt's create, and a read of it. */
export const UNPRICED_ROUTES = ['POST /tunes/:id/prompts', 'GET /tunes/:tune_id/prompts/:id'];

export const ATTACKS = [
  'title',
  'tuneIds',
  'squat',
  'unmemoed',
  'longest',
  'deep',
  'unpriced',
  'path',
  'smuggled',
] as const;
export type AttackKind = (typeof ATTACKS)[number];

/** How an attack's run must end: completed, or failed with one of `failures` (`*`: any type), within `withinMs`. */
export interface Expectation {
  completed?: boolean;
  failures?: readonly string[];
  withinMs?: number;
}

const EXPECTED: Record<AttackKind, Expectation> = {
  title: { failures: ['InvalidInput'] },
  tuneIds: { failures: ['InvalidInput'] },
  // Fast: one read of the claim, with no wait for a job that never was.
  squat: { failures: ['ClaimHeld'], withinMs: 60_000 },
  unmemoed: { failures: ['InvalidInput'] },
  longest: { completed: true },
  deep: { failures: ['*'] },
  unpriced: { completed: true, failures: ['PriceUnknown'] },
  path: { failures: ['InvalidInput'] },
  smuggled: { failures: ['InvalidInput'] },
};

/** A run an attack started, judged like a job. */
export interface AttackRun extends SoakJob {
  readonly attack: AttackKind;
}

/** What each kind of attack made, how many ended as they must, and how each ended. */
export interface AttackFigures {
  made: number;
  asExpected: number;
  endings: Record<string, number>;
  /** The longest from a start to its run's close. */
  slowestMs: number | null;
}

/** What the hostile starters tried, and how each ended. */
export interface HostileCounts {
  /** Other input under a live key, refused with KeyInUseError; taken: a violation. */
  otherInputRefused: number;
  otherInputTaken: number;
  /** Raw "allow duplicate" starts after a job closed: ended with the first job's outcome, or not (a violation). */
  duplicatesAfterClose: number;
  duplicatesAsFirst: number;
  /** A named tenant's job's key so started without the tenant's memo: refused InvalidInput. */
  duplicatesUnmemoedRefused: number;
  /** Starts TuneflowClient refused for a tune title, before any run. */
  titlesRefusedAtStart: number;
}

/** The upload directory the workers read files from, and a file outside it that no job may reach. */
export interface UploadWorld {
  uploadDir: string;
  outside: string;
}

/** Makes the upload directory (one training image, a symlink pointing out) and a secret file beside it. */
export function prepareUploads(dir: string, png: Buffer): UploadWorld {
  const uploadDir = path.join(dir, 'uploads');
  const outside = path.join(dir, 'secret.txt');
  fs.mkdirSync(uploadDir, { recursive: true });
  fs.writeFileSync(path.join(uploadDir, 'dog.png'), png);
  fs.writeFileSync(outside, 'a token only the worker may read');
  fs.symlinkSync(outside, path.join(uploadDir, 'link.png'));
  return { uploadDir, outside };
}

/** How a run ended, in a word: `completed`, `failed <type>`, `open`, `other`. */
function ending(outcome: JobOutcome): string {
  return outcome.status === 'failed' ? `failed ${outcome.failureType ?? 'untyped'}` : outcome.status;
}

/** One attack's run judged: whether it ended as it must, and what it duplicated or lost. */
export interface AttackVerdict {
  asExpected: boolean;
  duplicates: number;
  lost: number;
  violations: string[];
}

/**
 * Judges one attack's run: judgeJob's rules (nothing duplicated or lost; a failure only of a type the attack expects;
 * never open), and besides: a refused attack neither completed nor made anything, and one that must be fast was.
 *
 * @example
 * const verdict = judgeAttack(outcome, index.truth(outcome.job));
 */
export function judgeAttack(outcome: JobOutcome, truth: JobTruth): AttackVerdict {
  const run = outcome.job as AttackRun;
  const expected = EXPECTED[run.attack];
  const job = judgeJob(outcome, truth, false, expected.failures ?? []);
  const violations = job.violations.map((v) => `${run.attack} attack ${v}`);
  const id = `${run.attack} attack ${run.workflowId}`;
  if (outcome.status === 'completed' && !expected.completed)
    violations.push(`${id}: completed, though it must fail ${(expected.failures ?? []).join(' or ')}`);
  const tookMs =
    outcome.closedAt !== undefined && run.startedAt !== undefined ? outcome.closedAt - run.startedAt : undefined;
  if (expected.withinMs !== undefined && tookMs !== undefined && tookMs > expected.withinMs)
    violations.push(`${id}: took ${tookMs} ms to end, more than ${expected.withinMs}`);
  const made = truth.tunes.length + truth.prompts.length;
  if (!expected.completed && made) violations.push(`${id}: made ${made} object(s), though refused`);
  return { asExpected: violations.length === 0, duplicates: job.duplicates, lost: job.lost, violations };
}

/** The attacks' runs judged: figures by kind, the stuck, duplicated and lost over them all, and every violation. */
export interface AttacksVerdict {
  attacks: Record<AttackKind, AttackFigures>;
  stuck: number;
  duplicates: number;
  lost: number;
  violations: string[];
}

/**
 * Judges every attack's run (judgeAttack), `truth` telling what the mock made for each.
 *
 * @example
 * const verdict = judgeAttacks(outcomes, (job) => index.truth(job));
 */
export function judgeAttacks(outcomes: readonly JobOutcome[], truth: (job: SoakJob) => JobTruth): AttacksVerdict {
  const attacks = Object.fromEntries(
    ATTACKS.map((kind): [AttackKind, AttackFigures] => [
      kind,
      { made: 0, asExpected: 0, endings: {}, slowestMs: null },
    ]),
  ) as Record<AttackKind, AttackFigures>;
  const verdict: AttacksVerdict = { attacks, stuck: 0, duplicates: 0, lost: 0, violations: [] };
  for (const outcome of outcomes) {
    const run = outcome.job as AttackRun;
    const figures = attacks[run.attack];
    const judged = judgeAttack(outcome, truth(run));
    figures.made++;
    if (judged.asExpected) figures.asExpected++;
    figures.endings[ending(outcome)] = (figures.endings[ending(outcome)] ?? 0) + 1;
    if (outcome.closedAt !== undefined && run.startedAt !== undefined)
      figures.slowestMs = Math.max(figures.slowestMs ?? 0, outcome.closedAt - run.startedAt);
    if (outcome.status === 'open') verdict.stuck++;
    verdict.duplicates += judged.duplicates;
    verdict.lost += judged.lost;
    verdict.violations.push(...judged.violations);
  }
  return verdict;
}

/** What the hostile starters need of the run. */
export interface HostileDeps {
  client: Client;
  /** A TuneflowClient per tenant the plan's jobs run as. */
  tuneflows: ReadonlyMap<string, TuneflowClient>;
  taskQueue: string;
  mockUrl: string;
  uploads: UploadWorld;
  options: TuneflowOptions;
  /** The plan's jobs started so far (their run IDs known). */
  started: () => readonly SoakJob[];
  journal: () => MockJournal;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A start tried again while the server is away (the server-restart fault), as the plan's starts are. */
async function retried<T>(start: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (err) {
      if (err instanceof WorkflowExecutionAlreadyStartedError || attempt >= 30) throw err;
      await sleep(1_000);
    }
  }
}

export class HostileStarters {
  readonly counts: HostileCounts = {
    otherInputRefused: 0,
    otherInputTaken: 0,
    duplicatesAfterClose: 0,
    duplicatesAsFirst: 0,
    duplicatesUnmemoedRefused: 0,
    titlesRefusedAtStart: 0,
  };
  readonly violations: string[] = [];
  /** The runs the attacks started: judged with judgeAttacks, and by the tenancy judge. */
  readonly runs: AttackRun[] = [];
  private readonly pending: Promise<void>[] = [];
  /** Runs left open on purpose (a claim on a task queue nobody polls), terminated at the end. */
  private readonly squatters: WorkflowHandle[] = [];
  private readonly tenants: string[];
  /** Set once every attack's run has started (or given up). */
  launched = false;

  constructor(
    private readonly deps: HostileDeps,
    private readonly runId: string,
    /** How many of each kind (a few for a short run, more for a long one). */
    private readonly count: number,
  ) {
    this.tenants = [...deps.tuneflows.keys()];
  }

  /** The tenant other than `tenant` (the attacks cross between the two). */
  private other(tenant: string): string {
    return this.tenants.find((t) => t !== tenant) ?? tenant;
  }

  /** The attacker of the i-th attack of a kind: the tenants take turns. */
  private attacker(i: number): string {
    return this.tenants[i % this.tenants.length];
  }

  /** Run by the harness as each job starts: every fifth job also gets a start of other input under its key. */
  onStarted(job: SoakJob, index: number): void {
    if (index % 5 === 1 && job.kind === 'trainThenGenerate') this.pending.push(this.otherInput(job));
  }

  /** Starts every attack; resolves once each has started its runs (those that wait on targets included). */
  async launch(): Promise<void> {
    const kinds: Array<[string, () => Promise<void>]> = [
      ['paths and smuggled prompts', () => this.refusedInputs()],
      ['raw starts without the memo', () => this.unmemoed()],
      ['squatted claims', () => this.squats()],
      ['longest keys', () => this.longestKeys()],
      ['deep attributes', () => this.deepAttributes()],
      ['answers without cost', () => this.unpriced()],
      ['titles of other runs', () => this.titles()],
      ["other tenants' tunes", () => this.otherTenantsTunes()],
    ];
    await Promise.all(
      kinds.map(([what, attack]) =>
        attack().catch((err: unknown) => {
          this.violations.push(`hostile ${what}: ${(err as Error).message.split('\n')[0]}`);
        }),
      ),
    );
    this.launched = true;
  }

  private key(kind: string, i: number | string): string {
    return `hostile-${this.runId}-${kind}-${i}`;
  }

  private trainInput(tune: Record<string, unknown>, mark: string, options: TuneflowOptions = this.deps.options) {
    const base = { name: 'dog', branch: 'fast', image_urls: [`${this.deps.mockUrl}/images/training-1.png`] };
    const withFiles = 'images' in tune ? { name: 'dog', branch: 'fast', ...tune } : { ...base, ...tune };
    return { tune: withFiles, prompts: [{ text: `sks dog, hostile ${promptMark(mark, 0)}` }], options };
  }

  /** A raw start (as the Temporal CLI or another SDK makes one), its memo that of the tenant's starter unless told otherwise. */
  private async rawStart(
    attack: AttackKind,
    run: { workflowId: string; kind: SoakJob['kind']; prompts: number },
    args: unknown[],
    memo = true,
  ): Promise<void> {
    const tenant = tenantOf(run).tenant;
    const job: AttackRun = { ...run, attack };
    const handle = await retried(() =>
      this.deps.client.workflow.start(run.kind, {
        taskQueue: this.deps.taskQueue,
        workflowId: run.workflowId,
        args,
        workflowIdReusePolicy: 'ALLOW_DUPLICATE',
        ...(memo && tenant !== DEFAULT_TENANT && run.workflowId.startsWith('tuneflow:nexus:')
          ? { memo: { [TENANT_MEMO]: tenant } }
          : {}),
      }),
    );
    job.startedAt = Date.now();
    job.runId = handle.firstExecutionRunId;
    this.runs.push(job);
  }

  /** A job through TuneflowClient of its tenant, as the plan's are started. */
  private async typedStart(attack: AttackRun, input: unknown): Promise<void> {
    const { tenant } = tenantOf(attack);
    await startJob(this.deps.tuneflows.get(tenant)!, attack, this.deps.mockUrl, this.deps.options, input);
    this.runs.push(attack);
  }

  /** File paths outside the upload directory, and prompts smuggled past a budget: raw starts, refused. */
  private async refusedInputs(): Promise<void> {
    const { uploadDir, outside } = this.deps.uploads;
    const paths = [outside, `../${path.basename(outside)}`, 'link.png', path.join(uploadDir, '..', 'secret.txt')];
    await Promise.all(
      Array.from({ length: this.count }, async (_, i) => {
        const tenant = this.attacker(i);
        const pathId = tenantWorkflowId(tenant, this.key('path', i));
        await this.rawStart('path', { workflowId: pathId, kind: 'trainThenGenerate', prompts: 1 }, [
          this.trainInput({ images: [paths[i % paths.length]] }, pathId),
        ]);
        const smuggledId = tenantWorkflowId(tenant, this.key('smuggled', i));
        const smuggled = Array.from({ length: 100 }, () => ({ text: 'sks dog', num_images: 8 }));
        await this.rawStart('smuggled', { workflowId: smuggledId, kind: 'trainThenGenerate', prompts: 1 }, [
          this.trainInput({ prompts_attributes: smuggled }, smuggledId, { maxCostMc: 200_000, tuneCostMc: 150_000 }),
        ]);
      }),
    );
  }

  /**
   * Raw starts under IDs only tuneflow's starters make: a tenant's without its starter's memo (the soak's second
   * tenant, and one no operator configured), and a claim's.
   */
  private async unmemoed(): Promise<void> {
    await Promise.all(
      Array.from({ length: Math.max(3, this.count) }, (_, i) => {
        const key = this.key('unmemoed', i);
        const ids = [tenantWorkflowId(SECOND_TENANT, key), tenantWorkflowId('shop', key), claimWorkflowId(key)];
        const workflowId = ids[i % ids.length];
        return this.rawStart(
          'unmemoed',
          { workflowId, kind: 'trainThenGenerate', prompts: 1 },
          [this.trainInput({}, workflowId)],
          false,
        );
      }),
    );
  }

  /**
   * A raw `keyClaim` under a job's claim ID, then the job itself through TuneflowClient: it must fail ClaimHeld at
   * once. Every other squat is on a task queue nobody polls, so the squatting claim is still running.
   */
  private async squats(): Promise<void> {
    await Promise.all(
      Array.from({ length: this.count }, async (_, i) => {
        const tenant = this.attacker(i);
        const job: AttackRun = {
          workflowId: tenantWorkflowId(tenant, this.key('squat', i)),
          kind: 'trainThenGenerate',
          prompts: 1,
          attack: 'squat',
        };
        const squatter = await retried(() =>
          this.deps.client.workflow.start('keyClaim', {
            taskQueue: i % 2 ? `nobody-polls-${this.runId}` : this.deps.taskQueue,
            workflowId: claimWorkflowId(job.workflowId),
            args: [],
          }),
        );
        if (i % 2) this.squatters.push(squatter);
        await this.typedStart(job, this.trainInput({}, job.workflowId));
      }),
    );
  }

  /** The longest key of each tenant (the second one's name is 64 bytes), with a file uploaded: completes. */
  private async longestKeys(): Promise<void> {
    await Promise.all(
      this.tenants.map((tenant, i) => {
        const key = `${this.key('longest', i)}-`.padEnd(MAX_KEY_LENGTH, 'k');
        const job: AttackRun = {
          workflowId: tenantWorkflowId(tenant, key),
          kind: 'trainThenGenerate',
          prompts: 1,
          attack: 'longest',
        };
        return this.typedStart(job, this.trainInput({ images: ['dog.png'] }, job.workflowId));
      }),
    );
  }

  /** A raw JSON start (the bytes as a CLI sends them) of a pack tune whose prompt_attributes nests 20,000 deep. */
  private async deepAttributes(): Promise<void> {
    await Promise.all(
      this.tenants.map((tenant, i) => {
        const workflowId = tenantWorkflowId(tenant, this.key('deep', i));
        const json =
          `{"packId":261,"tune":{"name":"dog","image_urls":["${this.deps.mockUrl}/images/training-1.png"],` +
          `"prompt_attributes":{"x":${'['.repeat(20_000)}${']'.repeat(20_000)}}}}`;
        const payload = { metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from(json) };
        return this.rawStart('deep', { workflowId, kind: 'packTune', prompts: 0 }, [RawValue.fromPayload(payload)]);
      }),
    );
  }

  /**
   * Generate on the public base tune (priced per image) under maxCostMc, while the mock answers prompt creates and
   * reads without `cost_mc` (UNPRICED_ROUTES): within the limit, completed or PriceUnknown.
   */
  private async unpriced(): Promise<void> {
    await Promise.all(
      Array.from({ length: this.count }, (_, i) => {
        const job: AttackRun = {
          workflowId: tenantWorkflowId(this.attacker(i), this.key('unpriced', i)),
          kind: 'generate',
          prompts: 3,
          attack: 'unpriced',
        };
        const prompts = Array.from({ length: 3 }, (_, p) => ({
          text: `sks dog, unpriced ${promptMark(job.workflowId, p)}`,
          num_images: 2,
        }));
        // 3 prompts of 2 images at 2,000 mc an image: 12,000 in all, under the limit if every price were said.
        const options = { ...this.deps.options, maxCostMc: 20_000 };
        return this.typedStart(job, { tuneId: FLUX_BASE_TUNE.id, prompts, options });
      }),
    );
  }

  /** Waits (up to 2 minutes) for `find` to give something: an attack's target made by the plan's jobs. */
  private async target<T>(what: string, find: () => T | undefined): Promise<T> {
    for (const since = Date.now(); Date.now() - since < 120_000; await sleep(500)) {
      const found = find();
      if (found !== undefined) return found;
    }
    throw new Error(`no ${what} to attack within 2 minutes`);
  }

  /**
   * A tune titled as another tenant's run (its workflow ID and run ID): TuneflowClient refuses it before any start;
   * a raw start of each workflow that makes a tune is refused by the run, having made nothing.
   */
  private async titles(): Promise<void> {
    await Promise.all(
      Array.from({ length: this.count }, async (_, i) => {
        const tenant = this.attacker(i);
        const victim = await this.target(
          `started job of ${this.other(tenant)}`,
          () => this.deps.started().filter((j) => j.runId && tenantOf(j).tenant === this.other(tenant))[i],
        );
        const title = tuneTitle(victim.workflowId, victim.runId!);
        const key = this.key('title', i);
        const workflowId = tenantWorkflowId(tenant, key);
        const input = this.trainInput({ title }, workflowId);
        try {
          await this.deps.tuneflows.get(tenant)!.trainThenGenerate(key, input as TrainThenGenerateInput);
          this.violations.push(`${workflowId}: TuneflowClient started a job titled as ${victim.workflowId}`);
        } catch (err) {
          if (err instanceof InvalidInputError && err.issues.some((issue) => issue.field === 'tune.title'))
            this.counts.titlesRefusedAtStart++;
          else this.violations.push(`${workflowId}: a title met ${(err as Error).message.split('\n')[0]}`);
        }
        const image_urls = [`${this.deps.mockUrl}/images/training-1.png`];
        const pack = { packId: 261, tune: { name: 'dog', title, image_urls } };
        await (i % 2
          ? this.rawStart('title', { workflowId, kind: 'packTune', prompts: 0 }, [
              { ...pack, options: this.deps.options },
            ])
          : this.rawStart('title', { workflowId, kind: 'trainThenGenerate', prompts: 1 }, [input]));
      }),
    );
  }

  /**
   * Generate, and packTune `tune_ids`, on a tune the other tenant's job made (a `dog`, so pack 261 fits it), and the
   * second tenant's generate on a gallery tune the operator gave no tenant: each refused, naming the field.
   */
  private async otherTenantsTunes(): Promise<void> {
    const runs = Array.from({ length: this.count }, async (_, i) => {
      const tenant = this.attacker(i);
      const victim = this.other(tenant);
      const victims = () =>
        new Set(
          this.deps
            .started()
            .filter((j) => j.kind === 'trainThenGenerate' && tenantOf(j).tenant === victim)
            .map((j) => j.workflowId),
        );
      const tune = await this.target(
        `tune of ${victim}`,
        () =>
          this.deps
            .journal()
            .tunes.filter((t) => titleTenant(t.title) === victim && victims().has(titleWorkflowId(t.title)))[i],
      );
      const workflowId = tenantWorkflowId(tenant, this.key('tune-ids', i));
      const job: AttackRun = { workflowId, kind: i % 2 ? 'packTune' : 'generate', prompts: 1, attack: 'tuneIds' };
      const prompts = [{ text: `sks dog, not yours ${promptMark(workflowId, 0)}` }];
      await this.typedStart(
        job,
        i % 2
          ? { packId: 261, tune: { tune_ids: [tune.id] }, options: this.deps.options }
          : { tuneId: tune.id, prompts, options: this.deps.options },
      );
    });
    const gallery = async () => {
      const workflowId = tenantWorkflowId(SECOND_TENANT, this.key('tune-ids', 'gallery'));
      const prompts = [{ text: `sks dog, not given ${promptMark(workflowId, 0)}` }];
      const job: AttackRun = { workflowId, kind: 'generate', prompts: 1, attack: 'tuneIds' };
      await this.typedStart(job, { tuneId: GALLERY_TUNES[1].id, prompts, options: this.deps.options });
    };
    await Promise.all([...runs, this.tenants.includes(SECOND_TENANT) ? gallery() : Promise.resolve()]);
  }

  /**
   * After the run's jobs closed: a raw "allow duplicate" start of every fifth job's key, with its own input. A named
   * tenant's key is started with its starter's memo every other time (the first job's outcome), and without it
   * otherwise (refused).
   */
  async afterClose(jobs: readonly SoakJob[]): Promise<void> {
    await Promise.all(this.pending.splice(0));
    const chosen = jobs.filter((job, i) => i % 5 === 2 && job.runId);
    // A named tenant's keys take turns: with the memo, without it.
    let named = 0;
    const memos = chosen.map((job) => tenantOf(job).tenant === DEFAULT_TENANT || named++ % 2 === 0);
    for (let at = 0; at < chosen.length; at += 8)
      await Promise.all(chosen.slice(at, at + 8).map((job, i) => this.duplicateAfterClose(job, memos[at + i])));
  }

  /** Ends the squatting claims left running on a task queue nobody polls (the harness's own runs). */
  async endSquatters(): Promise<void> {
    for (const squatter of this.squatters.splice(0))
      await squatter.terminate('the soak is over').catch(() => undefined);
  }

  /** Judged from the mock's journal: no key with two tunes (a second run's, or a retried create's). */
  judge(journal: MockJournal): { secondTunes: number } {
    const byKey = new Map<string, number>();
    // A key's tunes: those titled with its workflow ID, whichever run made them (the title's run ID apart).
    for (const { title } of journal.tunes)
      byKey.set(titleWorkflowId(title), (byKey.get(titleWorkflowId(title)) ?? 0) + 1);
    const secondTunes = [...byKey.values()].reduce((sum, n) => sum + Math.max(0, n - 1), 0);
    if (secondTunes) this.violations.push(`${secondTunes} second tunes under a key`);
    return { secondTunes };
  }

  private async otherInput(job: SoakJob): Promise<void> {
    const input = jobInput(job, this.deps.mockUrl, this.deps.options) as TrainThenGenerateInput;
    const other = { ...input, tune: { ...input.tune, name: 'cat' } };
    const { tenant, key } = tenantOf(job);
    try {
      await this.deps.tuneflows.get(tenant)!.trainThenGenerate(key, other);
      this.counts.otherInputTaken++;
      this.violations.push(`${job.workflowId}: other input under the live key was taken`);
    } catch (err) {
      if (err instanceof KeyInUseError && err.fields.includes('input.tune.name')) this.counts.otherInputRefused++;
      else this.violations.push(`${job.workflowId}: other input met ${(err as Error).message.split('\n')[0]}`);
    }
  }

  private async duplicateAfterClose(job: SoakJob, withMemo: boolean): Promise<void> {
    const { client, taskQueue, mockUrl, options } = this.deps;
    const { tenant } = tenantOf(job);
    const memo = tenant !== DEFAULT_TENANT && withMemo ? { memo: { [TENANT_MEMO]: tenant } } : {};
    const first = client.workflow.getHandle(job.workflowId, job.runId, { followRuns: false });
    const outcomeOf = (promise: Promise<unknown>) =>
      promise.then(
        (result) => ({ result }),
        (err: unknown) => ({ failure: failureType(err) }),
      );
    const firstOutcome = await outcomeOf(first.result());
    const again = await client.workflow.start(job.kind, {
      taskQueue,
      workflowId: job.workflowId,
      args: [jobInput(job, mockUrl, options)],
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
      ...memo,
    });
    const againOutcome = await outcomeOf(again.result());
    if (tenant !== DEFAULT_TENANT && !withMemo) {
      // A named tenant's ID without its starter's memo: refused, whatever the first job did.
      if (isDeepStrictEqual(againOutcome, { failure: 'InvalidInput' })) this.counts.duplicatesUnmemoedRefused++;
      else this.violations.push(`${job.workflowId}: a raw start without the tenant's memo was not refused`);
      return;
    }
    this.counts.duplicatesAfterClose++;
    // A failure comes back as the first run's (its type), or JobEnded where the first closed without a result.
    const same =
      isDeepStrictEqual(againOutcome, firstOutcome) ||
      ('failure' in againOutcome && againOutcome.failure === 'JobEnded' && 'failure' in firstOutcome);
    if (same) this.counts.duplicatesAsFirst++;
    else this.violations.push(`${job.workflowId}: a duplicate start after close ended otherwise than the first run`);
  }
}

function failureType(err: unknown): string {
  let at: unknown = err;
  while (at instanceof Error && !(at instanceof ApplicationFailure)) at = at.cause;
  return at instanceof ApplicationFailure ? (at.type ?? 'ApplicationFailure') : String((err as Error).name);
}
