/**
 * `tuneflow images`: a job's or a tenant's stored images checked against their digests (src/storage/check.ts), and
 * each image that exists only at the service listed, or with `--copy` copied again while the service still has it.
 */
import { loadApiUrl, loadStorageSettings } from '../config';
import { WORKFLOW_NAMES } from '../contract/jobs';
import type { ImagesNotStoredDetails } from '../contract/failures';
import type { ResultPrompt } from '../contract/results';
import { SearchAttribute } from '../contract/search-attributes';
import { tenantNameProblem } from '../contract/tenants';
import { checkStoredImages, copyAgain, storageOf, type StoredImageProblem } from '../storage';
import type { CheckedJob } from '../storage/check';
import {
  connectTemporal,
  ExitCode,
  parseFlags,
  processIO,
  runCommand,
  UsageError,
  type CommandIO,
} from './command-line';

export const IMAGES_USAGE = `Usage: tuneflow images (WORKFLOW_ID... | --tenant T) [--copy] [--limit N] [--json]

Checks the stored copies of the jobs' images (TUNEFLOW_STORAGE) against the SHA-256 their results name, and lists
each image that exists only at the service: never copied, missing from storage, or changed there, with its service URL.
The service deletes images 30 days after training (unless extended): copy them again before then.

Options:
  --tenant T    every completed job of tenant T (by its TuneflowTenant search attribute)
  --limit N     with --tenant: the newest N jobs (default 1000)
  --copy        copy each image that is missing or never copied again, from the service, under its key
  --json        { images, stored, problems, copied?, failed? } as one JSON object
  -h, --help    show this help

Environment: TUNEFLOW_STORAGE (required), TUNEFLOW_STORAGE_ENDPOINT, AWS_* (an s3:// store's credentials),
TUNEFLOW_IMAGE_HOSTS, TUNEFLOW_API_URL (its host is allowed); TEMPORAL_ADDRESS (default localhost:7233),
TEMPORAL_NAMESPACE, TEMPORAL_TLS*, TEMPORAL_API_KEY, TEMPORAL_PROFILE. Exit 0: every image stored (or copied again);
1: some only at the service; 2: a bad flag or setting; 3: Temporal unreachable.
`;

export async function imagesCommand(argv: string[], io: CommandIO = processIO()): Promise<ExitCode> {
  return runCommand('images', io, async () => {
    const { values, positionals } = parseFlags({
      args: argv,
      allowPositionals: true,
      options: {
        tenant: { type: 'string' },
        limit: { type: 'string' },
        copy: { type: 'boolean' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    if (values.help) {
      io.stdout.write(IMAGES_USAGE);
      return ExitCode.ok;
    }
    if (positionals.length > 0 === (values.tenant !== undefined))
      throw new UsageError('expected workflow IDs or --tenant, one of the two');
    const problem = values.tenant === undefined ? undefined : tenantNameProblem(values.tenant);
    if (problem) throw new UsageError(`--tenant: ${JSON.stringify(values.tenant)} ${problem}`);
    const limit = values.limit === undefined ? 1000 : Number(values.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 100_000)
      throw new UsageError('--limit: must be a whole number from 1 to 100000');
    const settings = loadStorageSettings(io.env);
    if (!settings) throw new UsageError('TUNEFLOW_STORAGE: is required: the storage the worker copies images to');
    const { store, fetcher } = storageOf(settings, loadApiUrl(io.env));
    const { client, close } = await connectTemporal(io.env);
    try {
      const ids =
        values.tenant === undefined ? [...new Set(positionals)] : await tenantJobs(client, values.tenant, limit);
      const jobs: CheckedJob[] = [];
      const unchecked: { workflowId: string; why: string }[] = [];
      for (const workflowId of ids) {
        const prompts = await promptsOf(client, workflowId);
        if (Array.isArray(prompts)) jobs.push({ workflowId, prompts });
        else unchecked.push({ workflowId, why: prompts.why });
      }
      const check = await checkStoredImages(store, jobs);
      const again = values.copy ? await copyAgain(store, fetcher, check.problems) : undefined;
      const left = again ? again.failed : check.problems;
      if (values.json) io.stdout.write(`${JSON.stringify({ ...check, ...again, unchecked })}\n`);
      else {
        for (const u of unchecked) io.stdout.write(`${u.workflowId}: not checked: ${u.why}\n`);
        io.stdout.write(`${check.stored} of ${check.images} images of ${jobs.length} jobs stored with their digest\n`);
        for (const p of check.problems) io.stdout.write(`${describe(p)}\n`);
        for (const c of again?.copied ?? []) io.stdout.write(`copied again: ${c.stored.location}\n`);
        for (const f of again?.failed ?? []) io.stdout.write(`not copied: ${f.url}: ${f.error}\n`);
      }
      return left.length ? ExitCode.failed : ExitCode.ok;
    } finally {
      store.close?.();
      await fetcher.close();
      await close();
    }
  });
}

function describe(p: StoredImageProblem): string {
  const what = { missing: 'missing from storage', differs: 'changed in storage', 'not-copied': 'never copied' }[
    p.problem
  ];
  return `${p.workflowId} prompt ${p.promptId} image ${p.index}: ${what}${p.location ? ` (${p.location})` : ''}; at the service: ${p.url}`;
}

type Temporal = Awaited<ReturnType<typeof connectTemporal>>['client'];

/**
 * The newest `limit` jobs of `tenant` with images to check: completed, or failed ImagesNotStored; each ID once (a key
 * run again is one job).
 */
async function tenantJobs(client: Temporal, tenant: string, limit: number): Promise<string[]> {
  const types = WORKFLOW_NAMES.map((name) => `'${name}'`).join(', ');
  const ended = `(ExecutionStatus = 'Completed' OR ${SearchAttribute.failure.name} = 'ImagesNotStored')`;
  const query = `${SearchAttribute.tenant.name} = '${tenant}' AND WorkflowType IN (${types}) AND ${ended}`;
  const ids = new Set<string>();
  for await (const run of client.workflow.list({ query, pageSize: Math.min(limit, 1000) })) {
    ids.add(run.workflowId);
    if (ids.size >= limit) break;
  }
  return [...ids];
}

/**
 * The job's prompts with their copies: its result's, or an ImagesNotStored failure's (the copies made, and the prompts
 * whose images were not, with their service URLs); why not, for a job still running or that ended otherwise.
 */
async function promptsOf(client: Temporal, workflowId: string): Promise<ResultPrompt[] | { why: string }> {
  const handle = client.workflow.getHandle(workflowId);
  const { status } = await handle.describe();
  if (status.name === 'RUNNING') return { why: 'still running' };
  try {
    const result = (await handle.result()) as { prompts?: ResultPrompt[] };
    return result.prompts ?? [];
  } catch (err) {
    const cause = (err as { cause?: { type?: string; details?: unknown[]; message?: string } }).cause;
    if (cause?.type !== 'ImagesNotStored')
      return { why: `ended ${status.name}${cause?.type ? ` (${cause.type})` : ''}` };
    const details = cause.details?.[0] as ImagesNotStoredDetails;
    return [
      ...details.stored.map((p) => ({
        id: p.promptId,
        tune_id: 0,
        text: '',
        images: p.images,
        stored_images: p.stored,
      })),
      ...details.notStored.map((p) => ({ id: p.promptId, tune_id: 0, text: '', images: p.images })),
    ];
  }
}
