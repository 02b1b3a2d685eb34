/**
 * `tuneflow status <id>` and `tuneflow cancel <id>`: a run's state in a few readable lines (what it waits for, its
 * tune, prompts and cost, or why it failed), or its cancellation. Neither blocks on a run no worker serves.
 */
import { ApplicationFailure, type WorkflowExecutionDescription, type WorkflowHandle } from '@temporalio/client';
import { optionalTsToMs } from '@temporalio/common/lib/time';
import type { Prompt, Tune } from '../api/schemas';
import { redactCallbackSignatures } from '../callbacks/signing';
import { TuneflowClient } from '../client';
import type { Cost } from '../contract/cost';
import { FailureType, type InspectionRefusedDetails } from '../contract/failures';
import type { StoredImage } from '../contract/storage';
import type { ImageInspection } from '../contract/inspection';
import type { KeyInUseDetails } from '../contract/keys';
import type { Progress } from '../contract/messages';
import {
  connectTemporal,
  describeFailure,
  ExitCode,
  parseFlags,
  processIO,
  runCommand,
  UsageError,
  type CommandIO,
} from './command-line';
import { describeCost, describeInspection, describeWait } from './progress-view';
import {
  asksForCallbacks,
  formatDuration,
  nextTimer,
  progressWithin,
  workersOn,
  type TaskQueueWorkers,
} from './run-watch';
import { retryingCall, type RetryingCall } from '../retrying-call';

export const STATUS_USAGE = `Usage: tuneflow status <workflow-id> [--json]

Shows a run's state: RUNNING with what it waits for (and whether a worker polls its task queue, and a cancellation
asked of it), or how it ended, with its tune, prompts, images and cost, or why it failed; for a run refused for its
key (KeyInUse), how the key's job ended and what it made. Signed callback URLs are never shown.
Exit code: 0 running or completed, 1 failed, terminated or timed out, 5 cancelled, 4 no such workflow.

Options:
  --json       the raw state on stdout: { workflowId, status, startTime, closeTime, taskQueue, workers, progress,
               result, failure, inspection } (inspection: what inspecting the training images found, from the result
               or from an InspectionRefused failure), cancelRequestedAt, job (for a run refused for its key: how
               the key's job ended and what it made); an error as { "error": {...} } on stderr
  -h, --help   show this help
`;

export const CANCEL_USAGE = `Usage: tuneflow cancel <workflow-id>

Requests cancellation. A run started with options.cleanupOnCancel deletes what it created.
Exit code: 0 requested (or the run had already ended: it says how), 4 no such workflow.
`;

function oneId(positionals: string[]): string {
  if (positionals.length !== 1) throw new UsageError('expected exactly one workflow ID');
  return positionals[0];
}

/** What `status` learned about a run. */
interface RunState {
  workflowId: string;
  status: string;
  startTime: Date;
  closeTime?: Date;
  taskQueue: string;
  workers?: TaskQueueWorkers;
  /** A call that failed and will be tried again, and why (`status --json` shows it as Temporal does). */
  retrying?: RetryingCall;
  progress?: Progress;
  result?: {
    tune?: Tune;
    prompts?: (Prompt & { stored_images?: StoredImage[] })[];
    cost?: Cost;
    inspection?: ImageInspection[];
  };
  failure?: string;
  /** What inspecting the training images found (options.inspect): the result's, or an InspectionRefused failure's. */
  inspection?: ImageInspection[];
  /** When a cancellation was asked of the running run (it ends once a worker takes the request). */
  cancelRequestedAt?: Date;
  /** The run that holds the key, when this one was refused for it (read into `job`, not shown). */
  keyHolder?: string;
  /**
   * The key's job, when this run was refused for its key (KeyInUse: a raw start under a key whose job ran before, with
   * other input): how that job ended, and what it made.
   */
  job?: { runId: string; status: string; closeTime?: Date; result?: RunState['result']; failure?: string };
}

export async function statusCommand(argv: string[], io: CommandIO = processIO()): Promise<ExitCode> {
  return runCommand(
    'status',
    io,
    async () => {
      const { values, positionals } = parseFlags({
        args: argv,
        options: { json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
        allowPositionals: true,
      });
      if (values.help) {
        io.stdout.write(STATUS_USAGE);
        return ExitCode.ok;
      }
      const workflowId = oneId(positionals);
      const temporal = await connectTemporal(io.env);
      try {
        const handle = new TuneflowClient({ client: temporal.client }).getHandle(workflowId);
        const description = await handle.handle.describe();
        const state: RunState = {
          workflowId,
          status: description.status.name,
          startTime: description.startTime,
          closeTime: description.closeTime,
          taskQueue: description.taskQueue,
        };
        state.workers = await workersOn(temporal.client.workflow, state.taskQueue).catch(() => undefined);
        state.retrying = retryingCall(description);
        // A query waits for a worker (closed runs too: one replays them to answer): asked only when one polls.
        if (state.workers?.polling) state.progress = await progressWithin(handle);
        // Runs started before callbacks became wake-ups hold signed callback URLs in their results: never printed.
        if (state.status === 'COMPLETED')
          state.result = redactCallbackSignatures(await handle.result()) as RunState['result'];
        else if (state.status !== 'RUNNING' && state.status !== 'CANCELLED')
          state.failure = await handle.result().then(
            () => undefined,
            (err: unknown) => {
              state.inspection = inspectionRefusedOf(err)?.inspection;
              state.keyHolder = keyInUseOf(err)?.runId;
              return redactCallbackSignatures(describeFailure(err));
            },
          );
        state.inspection ??= state.result?.inspection;
        const history = state.status === 'RUNNING' ? await handle.handle.fetchHistory() : undefined;
        state.cancelRequestedAt = history && cancelRequestedAt(history);
        if (state.keyHolder)
          state.job = await jobOfKey(handle.handle.client.getHandle(handle.workflowId, state.keyHolder));
        delete state.keyHolder;
        if (values.json) io.stdout.write(`${JSON.stringify(redactCallbackSignatures(state))}\n`);
        else io.stdout.write(summarize(state, description, history));
        if (state.status === 'RUNNING' || state.status === 'COMPLETED') return ExitCode.ok;
        return state.status === 'CANCELLED' ? ExitCode.cancelled : ExitCode.failed;
      } finally {
        await temporal.close();
      }
    },
    { json: argv.includes('--json') },
  );
}

/** The readable summary: labels in a column, one fact a line. */
function summarize(
  state: RunState,
  description: WorkflowExecutionDescription,
  history: Parameters<typeof nextTimer>[0] | undefined,
): string {
  const now = Date.now();
  const lines: Array<[string, string]> = [];
  const ran = formatDuration((state.closeTime?.getTime() ?? now) - state.startTime.getTime());
  const cancelling = state.cancelRequestedAt ? ' (cancellation requested)' : '';
  const head =
    state.status === 'RUNNING'
      ? `RUNNING for ${ran}${cancelling}`
      : `${state.status} after ${ran} (${state.closeTime?.toISOString()})`;
  lines.push(['run', `${state.workflowId}: ${head}`]);
  lines.push(['started', `${state.startTime.toISOString()} on task queue ${state.taskQueue} (${description.type})`]);
  const { progress, result } = state;
  if (state.status === 'RUNNING') {
    const view = {
      progress,
      elapsedMs: 0,
      taskQueue: state.taskQueue,
      timer: history && nextTimer(history),
      callbacks: history && asksForCallbacks(history),
      now,
      workers: state.workers,
      retrying: state.retrying,
    };
    let doing = describeWait(view);
    if (state.workers && !state.workers.polling)
      doing += `${state.workers.lastSeenAt ? ` (last seen ${formatDuration(now - state.workers.lastSeenAt.getTime())} ago)` : ''}: the run waits until one does (\`tuneflow worker\` with TUNEFLOW_TASK_QUEUE=${state.taskQueue})`;
    else if (!progress) doing = `${doing} (the progress query did not answer within seconds)`;
    lines.push(['now', progress && doing !== progress.phase ? `${progress.phase}: ${doing}` : doing]);
    if (state.cancelRequestedAt) {
      const ago = formatDuration(now - state.cancelRequestedAt.getTime());
      const taken = state.workers?.polling ? 'the run ends once it has cleaned up' : 'no worker has taken it yet';
      lines.push(['cancel', `requested ${ago} ago: ${taken}`]);
    }
  }
  if (state.failure) lines.push(['failure', state.failure]);
  const job = state.job;
  if (job) {
    const ended = job.closeTime ? ` at ${job.closeTime.toISOString()}` : '';
    const what = job.result ? ': what it made below' : job.failure ? `: ${job.failure}` : '';
    lines.push(['job', `the key's job, run ${job.runId}: ${job.status}${ended}${what}`]);
  }
  const tune = (result ?? job?.result)?.tune;
  if (tune)
    lines.push([
      'tune',
      [
        `${tune.id} "${tune.title}"`,
        tune.name && `class ${tune.name}`,
        tune.branch && `branch ${tune.branch}`,
        tune.trained_at && `trained at ${tune.trained_at}`,
      ]
        .filter(Boolean)
        .join(', '),
    ]);
  else if (progress?.tuneId) lines.push(['tune', String(progress.tuneId)]);
  const made = result ?? job?.result;
  if (made?.prompts) {
    const failed = made.prompts.filter((p) => p.user_error).length;
    lines.push(['prompts', `${made.prompts.length} settled${failed ? `, ${failed} failed` : ''}`]);
    for (const p of made.prompts) {
      const outcome = p.user_error
        ? `failed: ${p.user_error}`
        : `${(p.images ?? []).length} image${(p.images ?? []).length === 1 ? '' : 's'}: ${(p.images ?? []).join(' ')}`;
      lines.push(['', `${p.id} "${p.text}" ${outcome}`]);
      if (p.stored_images?.length) lines.push(['', `  stored: ${p.stored_images.map((c) => c.location).join(' ')}`]);
    }
  } else if (progress)
    lines.push([
      'prompts',
      `${progress.prompts.settled}/${progress.prompts.total} settled${progress.prompts.failed ? `, ${progress.prompts.failed} failed` : ''}`,
    ]);
  if (state.inspection) {
    const flagged = state.inspection.filter((i) => i.flags.length).length;
    const images = `${state.inspection.length} image${state.inspection.length === 1 ? '' : 's'}`;
    lines.push(['inspection', `${images} inspected, ${flagged} with flags`]);
    for (const line of describeInspection(state.inspection)) lines.push(['', line]);
  }
  const cost = made?.cost ?? progress?.cost;
  if (cost) lines.push(['cost', describeCost(cost)]);
  if (progress)
    lines.push([
      'counts',
      `callbacks ${progress.counts.callbacks}, polls ${progress.counts.polls}, api calls ${progress.counts.apiCalls}`,
    ]);
  const width = Math.max(...lines.map(([label]) => label.length)) + 2;
  return lines.map(([label, value]) => `${(label ? `${label}:` : '').padEnd(width)}${value}\n`).join('');
}

/** The details of a KeyInUse failure in the run's failure chain (the run that holds the key), if that is how it failed. */
function keyInUseOf(err: unknown): KeyInUseDetails | undefined {
  for (let at = err; at instanceof Error; at = at.cause)
    if (at instanceof ApplicationFailure && at.type === FailureType.keyInUse)
      return at.details?.[0] as KeyInUseDetails | undefined;
  return undefined;
}

/** How the run that holds a key ended, and what it made: read once, redacted as every result is. */
async function jobOfKey(handle: WorkflowHandle): Promise<RunState['job']> {
  const { runId, status, closeTime } = await handle.describe();
  const job: NonNullable<RunState['job']> = { runId: runId, status: status.name, closeTime };
  if (status.name === 'RUNNING') return job;
  await handle.result().then(
    (result: unknown) => (job.result = redactCallbackSignatures(result) as RunState['result']),
    (err: unknown) => (job.failure = redactCallbackSignatures(describeFailure(err))),
  );
  return job;
}

/** When a cancellation was asked of the run, from its history. */
function cancelRequestedAt(history: Parameters<typeof nextTimer>[0]): Date | undefined {
  const asked = (history.events ?? []).find((e) => e.workflowExecutionCancelRequestedEventAttributes);
  const at = asked && optionalTsToMs(asked.eventTime);
  return at === undefined ? undefined : new Date(at);
}

/** The details of an InspectionRefused failure in the run's failure chain, if that is how it failed. */
function inspectionRefusedOf(err: unknown): InspectionRefusedDetails | undefined {
  for (let at = err; at instanceof Error; at = at.cause)
    if (at instanceof ApplicationFailure && at.type === FailureType.inspectionRefused)
      return at.details?.[0] as InspectionRefusedDetails | undefined;
  return undefined;
}

export async function cancelCommand(argv: string[], io: CommandIO = processIO()): Promise<ExitCode> {
  return runCommand('cancel', io, async () => {
    const { values, positionals } = parseFlags({
      args: argv,
      options: { help: { type: 'boolean', short: 'h' } },
      allowPositionals: true,
    });
    if (values.help) {
      io.stdout.write(CANCEL_USAGE);
      return ExitCode.ok;
    }
    const workflowId = oneId(positionals);
    const temporal = await connectTemporal(io.env);
    try {
      const handle = new TuneflowClient({ client: temporal.client }).getHandle(workflowId);
      const { status, closeTime } = await handle.handle.describe();
      if (status.name !== 'RUNNING') {
        io.stdout.write(
          `${workflowId} already ended: ${status.name} at ${closeTime?.toISOString()}; nothing to cancel\n`,
        );
        return ExitCode.ok;
      }
      await handle.cancel();
      io.stdout.write(`cancellation requested for ${workflowId}\n`);
      return ExitCode.ok;
    } finally {
      await temporal.close();
    }
  });
}
