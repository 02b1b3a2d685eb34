/**
 * Following a run in a terminal: one line of phase, a bar over prompts, and callbacks vs polls, redrawn in place
 * on a TTY and printed on change elsewhere. Driven by the workflow's `progress` query.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { TuneflowHandle } from '../client';
import type { Progress } from '../workflows/messages';

const BAR_WIDTH = 20;

/**
 * Money as the service counts it and in dollars: `156000 mc ($1.56)`.
 * @example describeCost({ mc: 156_000, usd: 1.56 }) // '156000 mc ($1.56)'
 */
export function describeCost(cost: { mc: number; usd: number }): string {
  return `${cost.mc} mc ($${cost.usd.toFixed(2)})`;
}

/** `training      [####------]  2/5 prompts  tune 123  cost $1.50  callbacks 3  polls 1  api calls 7` */
export function renderProgress(p: Progress): string {
  const { total, settled, failed } = p.prompts;
  const filled = total > 0 ? Math.round((settled / total) * BAR_WIDTH) : 0;
  const bar = `[${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}]`;
  const parts = [
    p.phase.padEnd(16),
    bar,
    `${settled}/${total} prompts${failed ? ` (${failed} failed)` : ''}`,
    p.tuneId ? `tune ${p.tuneId}` : 'no tune yet',
    // Runs of an older worker answer without a cost.
    ...(p.cost ? [`cost $${p.cost.usd.toFixed(2)}`] : []),
    `callbacks ${p.counts.callbacks}`,
    `polls ${p.counts.polls}`,
    `api calls ${p.counts.apiCalls}`,
  ];
  return parts.join('  ');
}

export interface FollowOptions {
  out: NodeJS.WritableStream & { isTTY?: boolean };
  /** How often to ask the workflow. @default 500 ms */
  intervalMs?: number;
}

/** Shows progress until the run ends, then returns its result (or throws its failure). */
export async function follow<R>(handle: TuneflowHandle<R>, { out, intervalMs = 500 }: FollowOptions): Promise<R> {
  let done = false;
  const result = handle.result().finally(() => {
    done = true;
  });
  let last = '';
  const draw = (line: string) => {
    if (line === last) return;
    last = line;
    out.write(out.isTTY ? `\r\x1b[2K${line}` : `${line}\n`);
  };
  while (!done) {
    try {
      draw(renderProgress(await handle.progress()));
    } catch {
      // A query can fail while the worker restarts; the next one will tell.
    }
    await Promise.race([sleep(intervalMs), result.catch(() => undefined)]);
  }
  try {
    draw(renderProgress(await handle.progress()));
  } catch {
    // Closed runs answer queries only while a worker can replay them.
  }
  if (out.isTTY) out.write('\n');
  return result;
}
