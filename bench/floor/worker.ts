/**
 * A floor worker process: a Temporal worker with tuneflow's worker options (the SDK's defaults, the same cache size
 * when the soak sets one), the floor's prebuilt workflow bundle and activities that ask the harness over the IPC
 * channel. Started by bench/floor/phase.ts, compiled to plain JavaScript first so that no TypeScript loader weighs on
 * its memory; prints `floor worker started` once it polls.
 */
import { Context } from '@temporalio/activity';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { Pool } from 'undici';
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

/**
 * With FLOOR_HTTP_URL (`--floor-http`): one request to the service per activity as well, over bare undici with the
 * client's pool size, its body parsed as JSON and dropped: the HTTP every real activity pays, without tuneflow's code.
 */
const http = process.env.FLOOR_HTTP_URL
  ? {
      pool: new Pool(process.env.FLOOR_HTTP_URL, { connections: 32 }),
      options: {
        method: 'GET' as const,
        path: process.env.FLOOR_HTTP_PATH!,
        headers: { authorization: `Bearer ${process.env.FLOOR_HTTP_KEY}` },
      },
    }
  : undefined;

async function request(): Promise<void> {
  if (!http) return;
  const res = await http.pool.request(http.options);
  await res.body.json();
  if (res.statusCode !== 200) throw new Error(`floor http: ${res.statusCode}`);
}

const activities = Object.fromEntries(
  (['createTune', 'createPackTune', 'retrieveTune', 'createPrompt', 'listPrompts'] as const).map((name) => [
    name,
    async (input: object) => {
      await request();
      return ask(name, input);
    },
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
