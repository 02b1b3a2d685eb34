/**
 * The floor's receiver process: what a hand-written app puts where tuneflow's receiver is. A bare `node:http` server
 * takes the service's POSTs to `/callbacks/<kind>?workflowId&runId&sig`, checks the HMAC the floor's worker signed
 * (./worker.ts), reads the object's id (a pack's list: every id) and signals the run `callback` with the wake-up, then
 * answers 200. No rate gate, no body bounds beyond one, no tracing, no refusal bodies. Compiled to plain JavaScript by
 * bench/floor/phase.ts, as the worker is; prints `floor receiver listening on <port>`.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import * as http from 'node:http';
import { Client, Connection } from '@temporalio/client';

const env = process.env;
const MAX_BODY = 1 << 20;

function signed(kind: string, workflowId: string, runId: string, sig: string): boolean {
  const expected = createHmac('sha256', env.FLOOR_CALLBACK_SECRET!).update(`${kind}\n${runId}\n${workflowId}`).digest();
  const given = Buffer.from(sig, 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

function idsOf(kind: string, body: unknown): number[] {
  if (kind !== 'pack-prompts') return [(body as { id: number }).id];
  const list = Array.isArray(body) ? body : (body as { prompts: unknown[] }).prompts;
  return (list as Array<{ id: number }>).map((p) => p.id);
}

async function main(): Promise<void> {
  const connection = await Connection.connect({ address: env.TEMPORAL_ADDRESS });
  const client = new Client({ connection });
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://floor');
    const kind = url.pathname.slice('/callbacks/'.length);
    const [workflowId, runId, sig] = ['workflowId', 'runId', 'sig'].map((k) => url.searchParams.get(k) ?? '');
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY) chunks.push(chunk);
    });
    req.on('end', () => {
      const answer = (status: number) => res.writeHead(status).end();
      if (req.method !== 'POST' || size > MAX_BODY || !signed(kind, workflowId, runId, sig)) return answer(403);
      let ids: number[];
      try {
        ids = idsOf(kind, JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch {
        return answer(400);
      }
      client.workflow
        .getHandle(workflowId, runId)
        .signal('callback', { kind, ids })
        .then(
          () => answer(200),
          () => answer(503),
        );
    });
  });
  server.keepAliveTimeout = 5_000;
  server.listen(Number(env.FLOOR_RECEIVER_PORT ?? 0), '127.0.0.1', () => {
    process.stderr.write(`floor receiver listening on ${(server.address() as { port: number }).port}\n`);
  });
  const stop = () => server.close(() => void connection.close().finally(() => process.exit(0)));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((err: unknown) => {
  process.stderr.write(`floor receiver: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
