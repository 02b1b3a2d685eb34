/**
 * `tuneflow start`: starts trainThenGenerate from flags or a JSON file, prints the workflow ID, and with --wait
 * follows it to the end.
 */
import { constants as fsConstants, promises as fs } from 'node:fs';
import * as path from 'node:path';
import { randomUUID } from 'node:crypto';
import { redactCallbackSignatures } from '../callbacks/signing';
import { loadStarterTenant } from '../tenants';
import { TuneflowClient } from '../client';
import { DEFAULT_TASK_QUEUE, loadTaskQueue } from '../config';
import type { TrainThenGenerateInput } from '../contract/inputs';
import { INSPECTION_FLAGS, type InspectionFlag, type InspectOption } from '../contract/inspection';
import {
  connectTemporal,
  durationFlag,
  ExitCode,
  ExitError,
  exitCodeForInterrupt,
  parseFlags,
  processIO,
  runCommand,
  UsageError,
  type CommandIO,
} from './command-line';
import {
  describeCost,
  describeInspection,
  follow,
  LiveLine,
  ServiceUnreachableError,
  UNREACHABLE_LIMIT,
  UNREACHABLE_LIMIT_MS,
} from './progress-view';
import { formatDuration, workersOn } from './run-watch';
import { listenForStop } from './stop-signal';

export const START_USAGE = `Usage: tuneflow start [--id KEY] --name CLASS --images PATH|URL... --prompt TEXT... [options]
       tuneflow start [--id KEY] --file job.json [options]

Starts a train-then-generate workflow. The ID is the job's business key: starting the same ID again attaches to
the first run instead of training twice.

Options:
  --id KEY          workflow ID (default: a new tuneflow-<uuid>, printed)
  --file PATH       JSON input: { "tune": {...}, "prompts": [...], "options": {...} } (flags below add to it)
  --name CLASS      the tune's class name: man, woman, cat, dog, ...
  --images X        a training image: an http(s) URL, or a file here that the worker can read at the same path
                    (repeat; not both kinds)
  --prompt TEXT     a prompt to generate after training (repeat)
  --num-images N    images per prompt, 1-8 (default: the service's)
  --branch B        flux1, sd15, sdxl1, or fast (free: mock images, nothing charged)
                    (default: the service's: the base tune's branch, else sd15, which is charged)
  --inspect FLAGS   inspect each training image before the tune is created, and refuse the job (InspectionRefused:
                    nothing created, nothing paid for training) when an image raises one of FLAGS, comma-separated:
                    ${INSPECTION_FLAGS.join(', ')}; --inspect '' inspects and refuses nothing
  --max-cost-mc N   the most the job may cost, in millicents (100,000 = 1 USD): options.maxCostMc
  --tune-cost-mc N  what training the tune costs your account, in millicents: options.tuneCostMc, needed with
                    --max-cost-mc on any branch but fast (the service publishes no price)
  --task-queue Q    (default: TUNEFLOW_TASK_QUEUE, else ${DEFAULT_TASK_QUEUE})
  --wait            follow the run until it ends: what it waits for, elapsed time, the workers on its task queue;
                    exit 0 completed, 1 failed, 5 cancelled; Ctrl-C stops following (exit 130), the run goes on
  --unreachable-limit D
                    with --wait: how long a call of the run may fail to reach the service before start stops
                    following, exit 3; the run goes on retrying (default ${UNREACHABLE_LIMIT})
  --json            machine-readable output on stdout; an error as { "error": {...} } on stderr
  -h, --help        show this help

Environment: TEMPORAL_ADDRESS (default localhost:7233), TEMPORAL_NAMESPACE (default default), TEMPORAL_API_KEY,
TEMPORAL_TLS* (the Temporal connection); TUNEFLOW_TASK_QUEUE; TUNEFLOW_TENANT (the tenant the job runs as: its
workflow ID is tuneflow:nexus:<tenant>:<id>; default the default tenant, whose IDs are the --id as given).
`;

const FLAGS = {
  id: { type: 'string' },
  file: { type: 'string' },
  name: { type: 'string' },
  images: { type: 'string', multiple: true },
  prompt: { type: 'string', multiple: true },
  'num-images': { type: 'string' },
  branch: { type: 'string' },
  inspect: { type: 'string' },
  'max-cost-mc': { type: 'string' },
  'tune-cost-mc': { type: 'string' },
  'task-queue': { type: 'string' },
  wait: { type: 'boolean' },
  'unreachable-limit': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Flags = ReturnType<typeof parseFlags<{ args: string[]; options: typeof FLAGS }>>['values'];

/** Builds the workflow input from the file and flags; throws UsageError naming what is wrong. */
export async function startInput(values: Flags): Promise<TrainThenGenerateInput> {
  let input: Partial<TrainThenGenerateInput> = {};
  if (values.file) {
    let text: string;
    try {
      text = await fs.readFile(values.file, 'utf8');
    } catch (err) {
      throw new UsageError(`--file: cannot read ${values.file}: ${(err as Error).message}`);
    }
    try {
      input = JSON.parse(text);
    } catch (err) {
      throw new UsageError(`--file: ${values.file} is not JSON: ${(err as Error).message}`);
    }
    if (!input || typeof input !== 'object' || Array.isArray(input))
      throw new UsageError('--file: must hold an object { "tune": {...}, "prompts": [...] }');
  }
  const tune = { ...(input.tune ?? {}) } as TrainThenGenerateInput['tune'];
  if (values.name) tune.name = values.name;
  if (values.branch) tune.branch = values.branch as TrainThenGenerateInput['tune']['branch'];
  if (values.images?.length) {
    const urls = values.images.filter((i) => /^https?:\/\//i.test(i));
    // ftp:, file:, s3:... would start a run that fails a moment later on the worker.
    const other = values.images.find((i) => !urls.includes(i) && /^[a-z][a-z\d+.-]*:/i.test(i));
    if (other) throw new UsageError(`--images: ${other}: only http(s) URLs or file paths`);
    if (urls.length && urls.length !== values.images.length)
      throw new UsageError('--images: give all URLs or all paths, not a mix');
    if (urls.length) tune.image_urls = urls;
    else tune.images = await readableFiles(values.images);
  }
  if (!tune.name)
    throw new UsageError('--name is required (the class name, such as woman or dog), or a tune.name in --file');
  if (!tune.images && !tune.image_urls)
    throw new UsageError('--images is required (URLs or paths), or tune.image_urls in --file');

  let numImages: number | undefined;
  if (values['num-images'] !== undefined) {
    numImages = Number(values['num-images']);
    if (!Number.isInteger(numImages)) throw new UsageError('--num-images: must be an integer from 1 to 8');
  }
  const prompts = [...(input.prompts ?? []), ...(values.prompt ?? []).map((text) => ({ text }))].map((p) =>
    numImages === undefined ? p : { ...p, num_images: numImages },
  );
  if (prompts.length === 0) throw new UsageError('--prompt is required at least once (or prompts in --file)');
  const flagged = {
    ...(values.inspect !== undefined && { inspect: inspectFlag(values.inspect) }),
    ...(values['max-cost-mc'] !== undefined && { maxCostMc: millicentsFlag('--max-cost-mc', values['max-cost-mc']) }),
    ...(values['tune-cost-mc'] !== undefined && {
      tuneCostMc: millicentsFlag('--tune-cost-mc', values['tune-cost-mc']),
    }),
  };
  const options = Object.keys(flagged).length ? { ...input.options, ...flagged } : input.options;
  return { tune, prompts, options };
}

/** `--max-cost-mc 150000`: a whole number of millicents (the contract then checks its rules). */
function millicentsFlag(flag: string, value: string): number {
  if (!/^\d+$/.test(value.trim())) throw new UsageError(`${flag}: must be a whole number of millicents, 0 or more`);
  return Number(value);
}

/** `--inspect blurry,selfie`: the flags to refuse, each a flag of the service's inspection, once. */
function inspectFlag(value: string): InspectOption {
  const refuse = value
    .split(',')
    .map((flag) => flag.trim())
    .filter(Boolean);
  const unknown = refuse.find((flag) => !(INSPECTION_FLAGS as readonly string[]).includes(flag));
  if (unknown !== undefined)
    throw new UsageError(`--inspect: ${unknown} is not an inspection flag (known: ${INSPECTION_FLAGS.join(', ')})`);
  if (new Set(refuse).size !== refuse.length) throw new UsageError('--inspect: names a flag twice');
  return { refuse: refuse as InspectionFlag[] };
}

/** Paths made absolute, each a file this process can read (the worker reads it at the same path). */
async function readableFiles(paths: string[]): Promise<string[]> {
  const files = paths.map((p) => path.resolve(p));
  for (const [i, file] of files.entries()) {
    const readable = await fs
      .access(file, fsConstants.R_OK)
      .then(() => fs.stat(file))
      .then((stat) => stat.isFile())
      .catch(() => false);
    if (!readable) throw new UsageError(`--images: ${paths[i]}: not a readable file here (or give http(s) URLs)`);
  }
  return files;
}

export async function startCommand(argv: string[], io: CommandIO = processIO()): Promise<ExitCode> {
  return runCommand(
    'start',
    io,
    async () => {
      const { values } = parseFlags({ args: argv, options: FLAGS });
      if (values.help) {
        io.stdout.write(START_USAGE);
        return ExitCode.ok;
      }
      const input = await startInput(values);
      const unreachableLimitMs = durationFlag('--unreachable-limit', values['unreachable-limit'], UNREACHABLE_LIMIT_MS);
      const key = values.id ?? `tuneflow-${randomUUID()}`;
      const taskQueue = values['task-queue'] ?? loadTaskQueue(io.env);
      // Bad input is refused before anything is contacted: the client's check, made once, before the connection. The
      // tenant is the operator's setting (TUNEFLOW_TENANT); its jobs' IDs name it.
      const checked = TuneflowClient.check('trainThenGenerate', key, input, loadStarterTenant(io.env));
      const { workflowId } = checked;
      const temporal = await connectTemporal(io.env);
      try {
        const tuneflow = new TuneflowClient({ client: temporal.client, taskQueue, tenant: checked.tenant });
        const handle = await tuneflow.start(checked);
        if (!values.json) io.stdout.write(`${handle.started ? 'started' : 'attached to'} ${workflowId}\n`);
        if (!values.wait) {
          // Said at once: a run nobody picks up looks the same as one that runs, until much later.
          const workers = await workersOn(temporal.client.workflow, taskQueue).catch(() => undefined);
          if (workers && !workers.polling)
            io.stderr.write(
              `tuneflow start: no worker polls task queue ${taskQueue}${workers.lastSeenAt ? ` (last seen ${formatDuration(Date.now() - workers.lastSeenAt.getTime())} ago)` : ''}: the run waits until one does\n`,
            );
          if (values.json) io.stdout.write(`${JSON.stringify({ workflowId, started: handle.started })}\n`);
          return ExitCode.ok;
        }
        const output = values.json ? io.stderr : io.stdout;
        const line = new LiveLine(output as NodeJS.WriteStream);
        // Ctrl-C (or the output closed) stops following, not the run.
        const stop = listenForStop(undefined, { output });
        const following = new AbortController();
        void stop.stopped.then((signal) => following.abort(signal));
        let result;
        try {
          result = redactCallbackSignatures(
            await follow(handle, { line, signal: following.signal, unreachableLimitMs }),
          );
        } catch (err) {
          if (err instanceof ServiceUnreachableError)
            throw new ExitError(
              ExitCode.unavailable,
              'unreachable',
              `${err.message}. Stopped following ${workflowId}: the run goes on retrying (tuneflow status ` +
                `${workflowId}, tuneflow cancel ${workflowId}); check TUNEFLOW_API_URL and its worker's network`,
              { setting: 'TUNEFLOW_API_URL' },
            );
          if (!following.signal.aborted) throw err;
          line.end();
          io.stderr.write(
            `tuneflow start: stopped following ${workflowId}; the run goes on (tuneflow status ${workflowId}, tuneflow cancel ${workflowId})\n`,
          );
          return exitCodeForInterrupt(following.signal.reason as NodeJS.Signals | 'abort');
        } finally {
          stop.dispose();
        }
        if (values.json) io.stdout.write(`${JSON.stringify({ workflowId, started: handle.started, result })}\n`);
        else {
          io.stdout.write(`tune ${result.tune.id} trained at ${result.tune.trained_at}\n`);
          for (const p of result.prompts) {
            io.stdout.write(
              `prompt ${p.id}: ${p.user_error ? `failed: ${p.user_error}` : (p.images ?? []).join(' ')}\n`,
            );
            if (p.stored_images?.length)
              io.stdout.write(`  stored: ${p.stored_images.map((c) => c.location).join(' ')}\n`);
          }
          if (result.cost) io.stdout.write(`cost: ${describeCost(result.cost)}\n`);
          for (const line of describeInspection(result.inspection)) io.stdout.write(`inspected ${line}\n`);
        }
        return ExitCode.ok;
      } finally {
        await temporal.close();
      }
    },
    { json: argv.includes('--json') },
  );
}
