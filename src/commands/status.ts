/** `tuneflow status <id>` and `tuneflow cancel <id>`: a run's state, progress and result; or its cancellation. */
import { redactCallbackSignatures } from '../callbacks/signing';
import { TuneflowClient } from '../client';
import type { Cost } from '../workflows/cost';
import type { Progress } from '../workflows/messages';
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
import { describeCost, renderProgress } from './progress-view';

export const STATUS_USAGE = `Usage: tuneflow status <workflow-id> [--json]

Shows a run's status (RUNNING, COMPLETED, FAILED, ...), its progress and, once completed, its result.
Exit code: 0 running or completed, 1 failed/cancelled/terminated/timed out, 4 no such workflow.

Options:
  --json   machine-readable output on stdout
  --help   show this help
`;

export const CANCEL_USAGE = `Usage: tuneflow cancel <workflow-id>

Requests cancellation. A run started with options.cleanupOnCancel deletes what it created.
Exit code: 0 requested, 4 no such workflow.
`;

function oneId(positionals: string[]): string {
  if (positionals.length !== 1) throw new UsageError('expected exactly one workflow ID');
  return positionals[0];
}

export async function statusCommand(argv: string[], io: CommandIO = processIO()): Promise<ExitCode> {
  return runCommand('status', STATUS_USAGE, io, async () => {
    const { values, positionals } = parseFlags({
      args: argv,
      options: { json: { type: 'boolean' }, help: { type: 'boolean' } },
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
      const status = description.status.name;
      let progress: Progress | undefined;
      try {
        progress = await handle.progress();
      } catch {
        // Closed runs answer queries only while a worker can replay them.
      }
      let result: unknown;
      let failure: string | undefined;
      // Runs started before callbacks became wake-ups hold signed callback URLs in their results: never printed.
      if (status === 'COMPLETED') result = redactCallbackSignatures(await handle.result());
      else if (status !== 'RUNNING')
        failure = await handle.result().then(
          () => undefined,
          (err: unknown) => describeFailure(err),
        );
      if (values.json) io.stdout.write(`${JSON.stringify({ workflowId, status, progress, result, failure })}\n`);
      else {
        io.stdout.write(`${workflowId}: ${status}\n`);
        if (progress) io.stdout.write(`${renderProgress(progress)}\n`);
        const cost = progress?.cost ?? (result as { cost?: Cost } | undefined)?.cost;
        if (cost) io.stdout.write(`cost: ${describeCost(cost)}\n`);
        if (failure) io.stdout.write(`failure: ${failure}\n`);
        if (result) io.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
      }
      return status === 'RUNNING' || status === 'COMPLETED' ? ExitCode.ok : ExitCode.failed;
    } finally {
      await temporal.close();
    }
  });
}

export async function cancelCommand(argv: string[], io: CommandIO = processIO()): Promise<ExitCode> {
  return runCommand('cancel', CANCEL_USAGE, io, async () => {
    const { values, positionals } = parseFlags({
      args: argv,
      options: { help: { type: 'boolean' } },
      allowPositionals: true,
    });
    if (values.help) {
      io.stdout.write(CANCEL_USAGE);
      return ExitCode.ok;
    }
    const workflowId = oneId(positionals);
    const temporal = await connectTemporal(io.env);
    try {
      await new TuneflowClient({ client: temporal.client }).getHandle(workflowId).cancel();
      io.stdout.write(`cancellation requested for ${workflowId}\n`);
      return ExitCode.ok;
    } finally {
      await temporal.close();
    }
  });
}
