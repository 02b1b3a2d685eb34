/**
 * A floor worker process: a Temporal worker with tuneflow's worker options (the SDK's defaults, the same cache size
 * when the soak sets one), the floor's prebuilt workflow bundle, and activities a hand-written app would have: the
 * requests tuneflow's activities make (method, path, body, list page), to the same mock, over bare undici with the
 * client's pool size, each answer `JSON.parse`d and cut to what a wait reads; callback URLs signed with a bare HMAC
 * for the floor's receiver (./receiver.ts). No validation, no retries of its own, no redaction. Started by
 * bench/floor/phase.ts, compiled to plain JavaScript first so that no TypeScript loader weighs on its memory; prints
 * `floor worker started` once it polls. It imports packages only: its folder is a scratch one.
 */
import { createHmac } from 'node:crypto';
import { Context } from '@temporalio/activity';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { Pool } from 'undici';
import type { FloorActivities, FloorObject } from './workflows';

const env = process.env;
const pool = new Pool(env.FLOOR_SERVICE_URL!, { connections: 32 });
const headers = { authorization: `Bearer ${env.FLOOR_API_KEY}`, 'content-type': 'application/json' };
/** tuneflow's list page (src/activities: PAGE). */
const PAGE = 120;

async function call(method: 'GET' | 'POST', path: string, body?: object): Promise<unknown> {
  const res = await pool.request({ method, path, headers, ...(body && { body: JSON.stringify(body) }) });
  const text = await res.body.text();
  if (res.statusCode >= 400) throw new Error(`${method} ${path}: ${res.statusCode} ${text.slice(0, 200)}`);
  return JSON.parse(text);
}

/** What a wait reads of an answer. */
function cut(answer: unknown): FloorObject {
  const o = answer as Record<string, string | null | undefined> & { id: number };
  return { id: o.id, created_at: o.created_at, eta: o.eta, trained_at: o.trained_at };
}

/** This run's callback URL of `kind`, signed over the kind, the run and the workflow (as tuneflow's are). */
function callbackUrl(kind: string, params: Record<string, string> = {}): string {
  const { workflowId, runId } = Context.current().info.workflowExecution ?? { workflowId: '', runId: '' };
  const sig = createHmac('sha256', env.FLOOR_CALLBACK_SECRET!).update(`${kind}\n${runId}\n${workflowId}`).digest('hex');
  const query = new URLSearchParams({ workflowId, runId, ...params, sig });
  return `${env.FLOOR_RECEIVER_URL}/callbacks/${kind}?${query.toString()}`;
}

const activities: FloorActivities = {
  async createTune({ tune }) {
    return cut(await call('POST', '/tunes', { tune: { ...tune, callback: callbackUrl('tune') } }));
  },
  async createPackTune({ packId, tune }) {
    const body = {
      tune: {
        ...tune,
        callback: callbackUrl('tune'),
        prompt_attributes: { callback: callbackUrl('prompt', { key: 'pack' }) },
        prompts_callback: callbackUrl('pack-prompts'),
      },
    };
    return cut(await call('POST', `/p/${packId}/tunes`, body));
  },
  async retrieveTune({ tuneId }) {
    return cut(await call('GET', `/tunes/${tuneId}`));
  },
  async createPrompt({ tuneId, prompt, key }) {
    const body = { prompt: { ...prompt, callback: callbackUrl('prompt', { key }) } };
    return cut(await call('POST', `/tunes/${tuneId}/prompts`, body));
  },
  async listPrompts({ tuneId, minId, promptIds }) {
    if (promptIds) {
      // As tuneflow reads its own prompts: one page from the newest of them, as long as their span.
      const newest = Math.max(...promptIds);
      const limit = Math.min(PAGE, newest - Math.min(...promptIds) + 1);
      const page = (await call('GET', `/tunes/${tuneId}/prompts?before_id=${newest + 1}&limit=${limit}`)) as unknown[];
      return page.map(cut).filter((p) => promptIds.includes(p.id));
    }
    const page = (await call('GET', `/tunes/${tuneId}/prompts?limit=${PAGE}`)) as unknown[];
    return page.map(cut).filter((p) => minId === undefined || p.id >= minId);
  },
};

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('INFO'), telemetryOptions: {} });
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
    await pool.close();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`floor worker: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
