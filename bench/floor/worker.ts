/**
 * A floor worker process: a Temporal worker with tuneflow's worker options (the SDK's defaults, the same cache size
 * when the soak sets one), the floor's prebuilt workflow bundle and activities that ask the harness over the IPC
 * channel. Started by bench/floor/phase.ts, compiled to plain JavaScript first so that no TypeScript loader weighs on
 * its memory; prints `floor worker started` once it polls.
 */
import { Context } from '@temporalio/activity';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import type { FloorAnswer, FloorRequest } from './service';
import type { FloorActivities } from './workflows';

const pending = new Map<number, (answer: FloorAnswer) => void>();
let seq = 0;

function ask(activity: keyof FloorActivities, input: object): Promise<unknown> {
  const request: FloorRequest = {
    seq: ++seq,
    workflowId: Context.current().info.workflowExecution?.workflowId ?? '',
    activity,
    input: input as Record<string, unknown>,
  };
  return new Promise((resolve, reject) => {
    pending.set(request.seq, (answer) => (answer.error ? reject(new Error(answer.error)) : resolve(answer.result)));
    process.send!(request);
  });
}

const activities = Object.fromEntries(
  (['createTune', 'createPackTune', 'retrieveTune', 'createPrompt', 'listPrompts'] as const).map((name) => [
    name,
    (input: object) => ask(name, input),
  ]),
);

async function main(): Promise<void> {
  process.on('message', (answer: FloorAnswer) => {
    pending.get(answer.seq)?.(answer);
    pending.delete(answer.seq);
  });
  Runtime.install({ logger: new DefaultLogger('INFO'), telemetryOptions: {} });
  const env = process.env;
  const connection = await NativeConnection.connect({ address: env.TEMPORAL_ADDRESS });
  const worker = await Worker.create({
    connection,
    taskQueue: env.FLOOR_TASK_QUEUE!,
    workflowBundle: { codePath: env.FLOOR_BUNDLE! },
    activities,
    ...(env.FLOOR_MAX_CACHED_WORKFLOWS && { maxCachedWorkflows: Number(env.FLOOR_MAX_CACHED_WORKFLOWS) }),
  });
  process.stderr.write('floor worker started\n');
  try {
    await worker.run();
  } finally {
    await connection.close();
    process.disconnect?.();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`floor worker: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
