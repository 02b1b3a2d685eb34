/**
 * The floor: tuneflow's three workflows cut down to their Temporal shape, the reference tuneflow's worker cost is
 * measured against (`npm run soak -- --compare-floor`). Same workflow, activity and signal names, the same
 * activities in the same order and concurrency, the same deadline and poll timers per wait and the same callback
 * reads (the wait's rule, src/workflows/callback-reads.ts); no validation, no ledger, no cost, a result of ids.
 *
 * Its activities read only what decides a wait (`id`, `created_at`, `eta`, `trained_at`), so the floor also replays
 * tuneflow's own recorded histories: test/bench/floor.test.ts holds it to tuneflow's commands that way. Like tuneflow,
 * it claims its workflow ID before its first create (a child that ends at once, "reject duplicate"): what any app
 * that never trains twice under one key pays on Temporal.
 */
import {
  ApplicationFailure,
  CancellationScope,
  condition,
  proxyActivities,
  setHandler,
  sleep,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import { durationToMs } from '../../src/duration';
import { CallbackReads, readWakeUp, type Waiting } from '../../src/workflows/callback-reads';
import { runBounded } from '../../src/workflows/concurrency';
import { callbackSignal, CallbackKind } from '../../src/contract/messages';
import { pollActivityOptions, serviceActivityOptions } from '../../src/workflows/policies';
import { pollDelay, untilEtaMs, type PollSchedule } from '../../src/contract/poll-schedule';

/** What the floor reads of a tune or a prompt: enough to wait, nothing else. */
export interface FloorObject {
  id: number;
  created_at?: string | null;
  eta?: string | null;
  trained_at?: string | null;
}

/** tuneflow's activities by name and argument; the floor's answer at once with a FloorObject. */
export interface FloorActivities {
  createTune(input: { tune: Record<string, unknown> }): Promise<FloorObject>;
  createPackTune(input: { packId: number; tune: Record<string, unknown> }): Promise<FloorObject>;
  retrieveTune(input: { tuneId: number }): Promise<FloorObject>;
  createPrompt(input: { tuneId: number; prompt: Record<string, unknown>; key: string }): Promise<FloorObject>;
  listPrompts(input: { tuneId: number; minId?: number; promptIds?: number[] }): Promise<FloorObject[]>;
}

/** tuneflow's inputs, taken as they are (no check: the floor's starter sends what tuneflow's does). */
interface FloorOptions {
  pollInterval?: string | number;
  maxPollInterval?: string | number;
  trainingTimeout?: string | number;
  promptTimeout?: string | number;
  promptConcurrency?: number;
}
interface FloorInput {
  tune: Record<string, unknown> & { title?: string };
  prompts: Array<Record<string, unknown> & { text: string }>;
  tuneId: number;
  packId: number;
  options?: FloorOptions;
}

/** tuneflow's defaults (src/contract/options.ts DEFAULT_OPTIONS; a test keeps them equal), for its recordings. */
export const FLOOR_DEFAULTS = {
  pollInterval: '2 minutes',
  maxPollInterval: '10 minutes',
  trainingTimeout: '6 hours',
  promptTimeout: '1 hour',
  promptConcurrency: 4,
} as const;

export interface FloorResult {
  tuneId: number;
  promptIds: number[];
}

const service = proxyActivities<FloorActivities>(serviceActivityOptions);
const polls = proxyActivities<FloorActivities>(pollActivityOptions);

const now = (): number => Date.now();
const done = (object: FloorObject | undefined): boolean => !!object?.trained_at;

/** One run: its tune, its prompts, the callbacks waiting for a read. */
class FloorRun {
  private tune: FloorObject | undefined;
  private readonly prompts = new Map<number, FloorObject>();
  // tuneflow's rule for reads its callbacks ask for, back-off included (the floor has no runs of earlier releases).
  private readonly tuneReads = Object.assign(new CallbackReads(), { backOff: true });
  private readonly promptReads = Object.assign(new CallbackReads(), { backOff: true });
  private expectingPrompts = false;
  readonly schedule: PollSchedule;
  readonly trainingTimeoutMs: number;
  readonly promptTimeoutMs: number;
  readonly promptConcurrency: number;
  /** The run creates its tune (whose callback comes to it), rather than using one made elsewhere. */
  readonly createsTune: boolean;

  constructor(
    options: FloorOptions = {},
    /** Prompts the run waits for; undefined until a pack's are listed. */
    private expected: number | undefined,
    /** A callback about an unknown tune may be this run's until its create answered. */
    private creatingTune: boolean,
  ) {
    const ms = (key: Exclude<keyof FloorOptions, 'promptConcurrency'>) =>
      durationToMs(options[key] ?? FLOOR_DEFAULTS[key], key);
    this.schedule = { pollIntervalMs: ms('pollInterval'), maxPollIntervalMs: ms('maxPollInterval') };
    this.createsTune = creatingTune;
    this.trainingTimeoutMs = ms('trainingTimeout');
    this.promptTimeoutMs = ms('promptTimeout');
    this.promptConcurrency = options.promptConcurrency ?? FLOOR_DEFAULTS.promptConcurrency;
    setHandler(callbackSignal, (payload) => {
      const wakeUp = readWakeUp(payload);
      if (!wakeUp) return;
      if (wakeUp.kind === CallbackKind.tune) this.tuneReads.wake(wakeUp.ids, now(), this.tuneWaiting());
      else this.promptReads.wake(wakeUp.ids, now(), this.promptsWaiting());
    });
  }

  private tuneWaiting(): Waiting {
    if (!this.tune) return { ids: [], unknown: this.creatingTune };
    return { ids: done(this.tune) ? [] : [this.tune.id], unknown: false };
  }

  private promptsWaiting(): Waiting {
    return { ids: this.unsettled(), unknown: this.expectingPrompts && !this.allKnown() };
  }

  private unsettled(): number[] {
    return [...this.prompts.values()].filter((p) => !done(p)).map((p) => p.id);
  }

  private allKnown(): boolean {
    return this.expected !== undefined && this.prompts.size >= this.expected;
  }

  adoptTune(tune: FloorObject): FloorObject {
    this.tune = { ...this.tune, ...tune };
    this.creatingTune = false;
    return this.tune;
  }

  /** As tuneflow's ledger: a pack waits for as many prompts as its first non-empty listing shows. */
  learn(prompts: readonly FloorObject[]): void {
    for (const prompt of prompts) this.prompts.set(prompt.id, prompt);
    if (this.prompts.size > 0 && (this.expected === undefined || this.expected < this.prompts.size))
      this.expected = this.prompts.size;
  }

  async waitUntilTrained(untilExpectedMs: number): Promise<void> {
    const tuneId = this.tune!.id;
    const trained = await this.waitFor({
      done: () => done(this.tune),
      timeoutMs: this.trainingTimeoutMs,
      untilExpectedMs,
      // As tuneflow: a tune the run did not create calls back whoever did, so its wait polls only.
      pollOnly: !this.createsTune,
      read: async () => void this.adoptTune(await polls.retrieveTune({ tuneId })),
      reads: this.tuneReads,
      waiting: () => this.tuneWaiting(),
    });
    if (!trained) throw ApplicationFailure.nonRetryable(`tune ${tuneId} never trained`, 'TuneNeverTrained');
  }

  async createPrompts(tuneId: number, specs: FloorInput['prompts']): Promise<void> {
    this.expectingPrompts = true;
    await runBounded(specs.length, this.promptConcurrency, async (i) =>
      this.learn([await service.createPrompt({ tuneId, prompt: specs[i], key: String(i) })]),
    );
  }

  /** A pack's prompts, listed once after training (tuneflow's learnPrompts). */
  async learnPackPrompts(tuneId: number): Promise<void> {
    this.expectingPrompts = true;
    this.learn(await polls.listPrompts({ tuneId, minId: 0 }));
  }

  async waitUntilSettled(tuneId: number): Promise<number[]> {
    const settled = await this.waitFor({
      done: () => this.allKnown() && this.unsettled().length === 0,
      timeoutMs: this.promptTimeoutMs,
      untilExpectedMs: 0,
      pollOnly: false,
      read: async () => {
        const promptIds = this.allKnown() ? this.unsettled() : undefined;
        const minId = Math.min(...this.unsettled(), Number.MAX_SAFE_INTEGER);
        this.learn(await polls.listPrompts(promptIds ? { tuneId, promptIds } : { tuneId, minId }));
      },
      reads: this.promptReads,
      waiting: () => this.promptsWaiting(),
    });
    if (!settled)
      throw ApplicationFailure.nonRetryable(`prompts of tune ${tuneId} never settled`, 'PromptsNeverSettled');
    return [...this.prompts.keys()];
  }

  /** tuneflow's wait (src/workflows/job.ts waitFor), command for command: callbacks first, polls, a deadline. */
  private async waitFor(wait: {
    done: () => boolean;
    timeoutMs: number;
    untilExpectedMs: number;
    pollOnly: boolean;
    read: () => Promise<void>;
    reads: CallbackReads;
    waiting: () => Waiting;
  }): Promise<boolean> {
    const { done, timeoutMs, untilExpectedMs, pollOnly, read, reads, waiting } = wait;
    if (done()) return true;
    const deadline = new Deadline(timeoutMs);
    const readDue = () => (reads.dueAt(waiting()) ?? Infinity) <= now();
    let polled = 0;
    try {
      let pollAt: number | undefined;
      for (;;) {
        const start = now();
        pollAt ??= start + pollDelay(polled, this.schedule, untilExpectedMs, pollOnly);
        const wakeAt = Math.min(pollAt, reads.dueAt(waiting()) ?? Infinity);
        const changes = reads.changes;
        const met =
          wakeAt <= start ||
          (await condition(() => done() || deadline.passed || readDue() || reads.changes !== changes, wakeAt - start));
        if (done()) return true;
        if (readDue()) {
          const startedAt = now();
          await read();
          reads.read(startedAt);
          if (done()) return true;
          continue;
        }
        if (!deadline.passed && !(!met && wakeAt === pollAt) && now() < pollAt) continue;
        await read();
        polled++;
        pollAt = undefined;
        if (done()) return true;
        if (deadline.passed) return false;
      }
    } finally {
      deadline.clear();
    }
  }
}

/** A durable deadline timer, cleared when the wait ends. */
class Deadline {
  passed = false;
  private readonly scope = new CancellationScope();

  constructor(timeoutMs: number) {
    this.scope
      .run(() => sleep(timeoutMs))
      .then(
        () => (this.passed = true),
        () => undefined,
      );
  }

  clear(): void {
    this.scope.cancel();
  }
}

/** The claim child: being started is the claim. */
export async function keyClaim(): Promise<void> {}

/** Claims the run's workflow ID before anything is created; a key already claimed ends the run. */
async function claimKey(): Promise<void> {
  const { workflowId } = workflowInfo();
  await startChild('keyClaim', {
    workflowId: `tuneflow:claim:${workflowId}`,
    workflowIdReusePolicy: 'REJECT_DUPLICATE',
    parentClosePolicy: 'ABANDON',
  });
}

export async function trainThenGenerate(input: FloorInput): Promise<FloorResult> {
  const run = new FloorRun(input.options, input.prompts.length, true);
  await claimKey();
  const title = input.tune.title ?? workflowInfo().workflowId;
  const created = run.adoptTune(await service.createTune({ tune: { ...input.tune, title } }));
  await run.waitUntilTrained(untilEtaMs(created));
  await run.createPrompts(created.id, input.prompts);
  return { tuneId: created.id, promptIds: await run.waitUntilSettled(created.id) };
}

export async function generate(input: FloorInput): Promise<FloorResult> {
  const run = new FloorRun(input.options, input.prompts.length, false);
  await claimKey();
  run.adoptTune(await service.retrieveTune({ tuneId: input.tuneId }));
  await run.waitUntilTrained(0);
  await run.createPrompts(input.tuneId, input.prompts);
  return { tuneId: input.tuneId, promptIds: await run.waitUntilSettled(input.tuneId) };
}

export async function packTune(input: FloorInput): Promise<FloorResult> {
  const run = new FloorRun(input.options, undefined, true);
  await claimKey();
  const title = input.tune.title ?? workflowInfo().workflowId;
  const created = run.adoptTune(await service.createPackTune({ packId: input.packId, tune: { ...input.tune, title } }));
  await run.waitUntilTrained(untilEtaMs(created));
  await run.learnPackPrompts(created.id);
  return { tuneId: created.id, promptIds: await run.waitUntilSettled(created.id) };
}
