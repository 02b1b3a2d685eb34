/**
 * The soak run's jobs: a fixed mix of the three workflows (6 in 10 trainThenGenerate, 2 generate on the public base
 * tune, 2 packTune), 1 to 8 prompts each, of one tenant or taking turns between several. Every prompt's text carries
 * its job (its workflow ID) and position, so the mock's journal tells which job, and so which tenant, made it and
 * whether it was made twice.
 */
import type { TuneflowClient, TuneflowHandle } from '../../src/client';
import { DEFAULT_TENANT, jobOfWorkflowId, tenantWorkflowId } from '../../src/contract/tenants';
import { FLUX_BASE_TUNE, PACKS } from '../../src/mock-service';
import type { GenerateInput, PackTuneInput, TrainThenGenerateInput, TuneflowOptions } from '../../src/contract/inputs';

export type JobKind = 'trainThenGenerate' | 'generate' | 'packTune';

export interface SoakJob {
  /** The job's workflow ID: its key, under its tenant's prefix for a named tenant (tenantWorkflowId). */
  readonly workflowId: string;
  readonly kind: JobKind;
  /** Prompts the job asks for (a pack's own prompts for packTune). */
  readonly prompts: number;
  /** The pack and class of a packTune job. */
  readonly pack?: { id: number; name: string };
  startedAt?: number;
  handle?: TuneflowHandle<unknown>;
  /** The run the job started (the judge reads it, not a later run of the key). */
  runId?: string;
}

/** Marks a prompt's text with its job and position: `[soak-x-12 #3]`. */
export function promptMark(workflowId: string, index: number): string {
  return `[${workflowId} #${index}]`;
}

/** The job and position a prompt's text is marked with (promptMark), or undefined for a text with no mark. */
export function markOf(text: string): { workflowId: string; index: number } | undefined {
  const mark = /\[([^\]\s]+) #(\d+)\]/.exec(text);
  return mark ? { workflowId: mark[1], index: Number(mark[2]) } : undefined;
}

/** The tenant and key a job runs as (its workflow ID says them). */
export function tenantOf(job: Pick<SoakJob, 'workflowId'>): { tenant: string; key: string } {
  return jobOfWorkflowId(job.workflowId) ?? { tenant: DEFAULT_TENANT, key: job.workflowId };
}

const PET_PACK = PACKS.find((p) => p.id === 261)!;
const HEADSHOT_PACK = PACKS.find((p) => p.id === 260)!;

/**
 * The jobs of one run: job i's kind and prompt count follow from i alone, so two runs of the same size do the same
 * work; with several tenants, job i runs as `tenants[i % tenants.length]` (a named tenant's under its prefix).
 */
export function planJobs(runId: string, count: number, tenants: readonly string[] = [DEFAULT_TENANT]): SoakJob[] {
  return Array.from({ length: count }, (_, i): SoakJob => {
    const workflowId = tenantWorkflowId(tenants[i % tenants.length], `soak-${runId}-${i}`);
    const slot = i % 10;
    const prompts = 1 + ((i * 5) % 8);
    if (slot < 6) return { workflowId, kind: 'trainThenGenerate', prompts };
    if (slot < 8) return { workflowId, kind: 'generate', prompts };
    const pack = slot === 8 ? { fixture: PET_PACK, name: 'dog' } : { fixture: HEADSHOT_PACK, name: 'woman' };
    return {
      workflowId,
      kind: 'packTune',
      prompts: pack.fixture.prompts_per_class[pack.name].length,
      pack: { id: pack.fixture.id, name: pack.name },
    };
  });
}

/**
 * A job's input, the same for tuneflow and for the floor (so their histories carry the same payloads).
 *
 * @example
 * jobInput(job, mock.url, { pollInterval: '5 seconds' });
 */
export function jobInput(job: SoakJob, mockUrl: string, options: TuneflowOptions): unknown {
  const image_urls = [`${mockUrl}/images/training-1.png`, `${mockUrl}/images/training-2.png`];
  const prompts = Array.from({ length: job.prompts }, (_, i) => ({
    text: `sks dog, soak portrait ${promptMark(job.workflowId, i)}`,
    num_images: 1 + (i % 2),
  }));
  switch (job.kind) {
    case 'trainThenGenerate':
      return { tune: { name: 'dog', branch: 'fast', image_urls }, prompts, options };
    case 'generate':
      return { tuneId: FLUX_BASE_TUNE.id, prompts, options };
    case 'packTune':
      return { packId: job.pack!.id, tune: { name: job.pack!.name, image_urls }, options };
  }
}

/**
 * Starts one job through the typed starters, `tuneflow` being a client of the job's tenant (a start the server
 * refused for a moment is tried again: the workflow ID makes it idempotent). `input` defaults to jobInput's.
 */
export async function startJob(
  tuneflow: TuneflowClient,
  job: SoakJob,
  mockUrl: string,
  options: TuneflowOptions,
  input: unknown = jobInput(job, mockUrl, options),
): Promise<void> {
  const { key } = tenantOf(job);
  for (let attempt = 1; ; attempt++) {
    try {
      switch (job.kind) {
        case 'trainThenGenerate':
          job.handle = await tuneflow.trainThenGenerate(key, input as TrainThenGenerateInput);
          break;
        case 'generate':
          job.handle = await tuneflow.generate(key, input as GenerateInput);
          break;
        case 'packTune':
          job.handle = await tuneflow.packTune(key, input as PackTuneInput);
          break;
      }
      job.startedAt ??= Date.now();
      job.runId ??= (job.handle.handle as { firstExecutionRunId?: string }).firstExecutionRunId;
      return;
    } catch (err) {
      if (attempt >= 30) throw err;
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
  }
}
