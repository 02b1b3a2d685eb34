/**
 * The hostile-starters profile: starters tuneflow does not control, mixed into the run's own traffic. Other input
 * under live keys (TuneflowClient: refused), raw starts with "allow duplicate" after a job closed (the run ends with
 * the first job's outcome, creating nothing), and raw starts under keys of their own with file paths outside the
 * upload directory (absolute, climbing out with `..`, a symlink inside pointing out) or prompts smuggled in
 * `prompts_attributes` under a budget (each refused InvalidInput, creating nothing). The judge then reads the mock's
 * journal: no title with a second tune, no tune under a hostile key, and nothing a hostile start was taken for.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { WorkflowFailedError, type Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { TuneflowClient } from '../../src/client';
import type { TrainThenGenerateInput } from '../../src/contract/inputs';
import { KeyInUseError } from '../../src/contract/keys';
import { titleWorkflowId } from '../../src/contract/tenants';
import type { MockJournal } from '../../src/mock-service';
import { jobInput, type SoakJob } from './jobs';
import type { TuneflowOptions } from '../../src/contract/inputs';

/** What the hostile starters tried, and how each ended. */
export interface HostileCounts {
  /** Other input under a live key, refused with KeyInUseError; taken: a violation. */
  otherInputRefused: number;
  otherInputTaken: number;
  /** Raw "allow duplicate" starts after a job closed: ended with the first job's outcome, or not (a violation). */
  duplicatesAfterClose: number;
  duplicatesAsFirst: number;
  /** Raw starts naming files outside the upload directory, and smuggling prompts: refused InvalidInput, or not. */
  pathsRefused: number;
  smuggledRefused: number;
  hostileTaken: number;
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

export class HostileStarters {
  readonly counts: HostileCounts = {
    otherInputRefused: 0,
    otherInputTaken: 0,
    duplicatesAfterClose: 0,
    duplicatesAsFirst: 0,
    pathsRefused: 0,
    smuggledRefused: 0,
    hostileTaken: 0,
  };
  readonly violations: string[] = [];
  /** The keys of the hostile starts: no tune may carry one as its title. */
  readonly keys: string[] = [];
  private readonly pending: Promise<void>[] = [];

  constructor(
    private readonly deps: {
      client: Client;
      tuneflow: TuneflowClient;
      taskQueue: string;
      mockUrl: string;
      uploads: UploadWorld;
      options: TuneflowOptions;
    },
  ) {}

  /** Run by the harness as each job starts: every fifth job also gets a start of other input under its key. */
  onStarted(job: SoakJob, index: number): void {
    if (index % 5 === 1 && job.kind === 'trainThenGenerate') this.pending.push(this.otherInput(job));
  }

  /** Raw starts under keys of their own, at the start of the run, a few of each kind. */
  startRefused(runId: string, count: number): void {
    for (let i = 0; i < count; i++) {
      const { uploadDir, outside } = this.deps.uploads;
      const paths = [outside, `../${path.basename(outside)}`, 'link.png', path.join(uploadDir, '..', 'secret.txt')];
      const image = paths[i % paths.length];
      this.pending.push(this.refused(`hostile-${runId}-path-${i}`, 'path', this.trainInput({ images: [image] })));
      this.pending.push(
        this.refused(
          `hostile-${runId}-smuggled-${i}`,
          'smuggled',
          this.trainInput(
            { prompts_attributes: Array.from({ length: 100 }, () => ({ text: 'sks dog', num_images: 8 })) },
            { maxCostMc: 200_000, tuneCostMc: 150_000 },
          ),
        ),
      );
    }
  }

  /** After the run's jobs closed: a raw "allow duplicate" start of every fifth job's key, with its own input. */
  async afterClose(jobs: readonly SoakJob[]): Promise<void> {
    await Promise.all(this.pending.splice(0));
    const chosen = jobs.filter((job, i) => i % 5 === 2 && job.runId);
    for (let at = 0; at < chosen.length; at += 8)
      await Promise.all(chosen.slice(at, at + 8).map((job) => this.duplicateAfterClose(job)));
  }

  /** Judged from the mock's journal: no title with two tunes, no tune under a hostile key. */
  judge(journal: MockJournal): { secondTunes: number; hostileTunes: number } {
    const byTitle = new Map<string, number>();
    // A key's tunes: those titled with its workflow ID, whichever run made them (the title's run ID apart).
    for (const { title } of journal.tunes)
      byTitle.set(titleWorkflowId(title), (byTitle.get(titleWorkflowId(title)) ?? 0) + 1);
    const secondTunes = [...byTitle.values()].reduce((sum, n) => sum + Math.max(0, n - 1), 0);
    const hostile = new Set(this.keys);
    const hostileTunes = journal.tunes.filter((t) => hostile.has(titleWorkflowId(t.title))).length;
    if (secondTunes) this.violations.push(`${secondTunes} second tunes under a title (key)`);
    if (hostileTunes) this.violations.push(`${hostileTunes} tunes under hostile keys (a file read, or a smuggled job)`);
    return { secondTunes, hostileTunes };
  }

  private trainInput(tune: Record<string, unknown>, options: TuneflowOptions = this.deps.options): unknown {
    const base = { name: 'dog', branch: 'fast', image_urls: [`${this.deps.mockUrl}/images/training-1.png`] };
    const withFiles = 'images' in tune ? { name: 'dog', branch: 'fast', ...tune } : { ...base, ...tune };
    return { tune: withFiles, prompts: [{ text: 'sks dog, hostile' }], options };
  }

  private async otherInput(job: SoakJob): Promise<void> {
    const input = jobInput(job, this.deps.mockUrl, this.deps.options) as TrainThenGenerateInput;
    const other = { ...input, tune: { ...input.tune, name: 'cat' } };
    try {
      await this.deps.tuneflow.trainThenGenerate(job.workflowId, other);
      this.counts.otherInputTaken++;
      this.violations.push(`${job.workflowId}: other input under the live key was taken`);
    } catch (err) {
      if (err instanceof KeyInUseError && err.fields.includes('input.tune.name')) this.counts.otherInputRefused++;
      else this.violations.push(`${job.workflowId}: other input met ${(err as Error).message.split('\n')[0]}`);
    }
  }

  private async refused(key: string, kind: 'path' | 'smuggled', input: unknown): Promise<void> {
    this.keys.push(key);
    const handle = await this.deps.client.workflow.start('trainThenGenerate', {
      taskQueue: this.deps.taskQueue,
      workflowId: key,
      args: [input],
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    });
    const type = await handle.result().then(
      () => 'completed',
      (err: unknown) =>
        err instanceof WorkflowFailedError ? (err.cause as ApplicationFailure | undefined)?.type : 'other',
    );
    if (type === 'InvalidInput') this.counts[kind === 'path' ? 'pathsRefused' : 'smuggledRefused']++;
    else {
      this.counts.hostileTaken++;
      this.violations.push(`${key}: a hostile start ended ${type}, not InvalidInput`);
    }
  }

  private async duplicateAfterClose(job: SoakJob): Promise<void> {
    const { client, taskQueue, mockUrl, options } = this.deps;
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
    });
    const againOutcome = await outcomeOf(again.result());
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
