/**
 * Replays that check what Temporal's replay does not: the activity types the workflow schedules and the durations
 * of the timers it starts must be the ones in the history, in order. Temporal matches commands by kind and sequence
 * only, so a history whose activities were swapped, or whose timers were all 1 ms, would otherwise replay clean.
 */
import type { History } from '@temporalio/common/lib/proto-utils';
import { bundleWorkflowCode, DefaultLogger, Worker, type WorkerPlugin, type WorkflowBundle } from '@temporalio/worker';
import { withPreloadedContract } from '../../src/bundling';
import { summarize } from './history-summary';
import { CompressionCodec } from '../../src/codec/compression';

/**
 * The workflows bundled with the command-reporting interceptor (and `interceptors`, e.g. OpenTelemetry's); once per
 * test file.
 *
 * @example
 * const bundle = await bundleForStrictReplay();
 */
export function bundleForStrictReplay(
  workflowsPath = require.resolve('../../src/workflows'),
  interceptors: string[] = [],
): Promise<WorkflowBundle> {
  return bundleWorkflowCode(
    withPreloadedContract({
      workflowsPath,
      workflowInterceptorModules: [require.resolve('../replay-fixtures/command-interceptors'), ...interceptors],
      logger: new DefaultLogger('WARN'),
    }),
  );
}

/**
 * Replays `history` (on a replayer with `plugins`, e.g. OpenTelemetry's) and then compares the workflow's activities
 * and timers with the history's.
 *
 * @example
 * await replayStrictly(bundle, history, 'job');
 */
export async function replayStrictly(
  bundle: WorkflowBundle,
  history: History,
  workflowId: string,
  plugins: WorkerPlugin[] = [],
): Promise<void> {
  const issued = { activities: new Map<number, string>(), timers: new Map<number, number>() };
  await Worker.runReplayHistory(
    {
      plugins,
      // As every tuneflow worker does: a history stored with compressed activity payloads replays.
      dataConverter: { payloadCodecs: [new CompressionCodec()] },
      workflowBundle: bundle,
      sinks: {
        commands: {
          activity: {
            fn: (_info, seq: number, type: string) => void issued.activities.set(seq, type),
            callDuringReplay: true,
          },
          activityElided: { fn: (_info, seq: number) => void issued.activities.delete(seq), callDuringReplay: true },
          timer: { fn: (_info, seq: number, ms: number) => void issued.timers.set(seq, ms), callDuringReplay: true },
          timerElided: { fn: (_info, seq: number) => void issued.timers.delete(seq), callDuringReplay: true },
        },
      },
    },
    history,
    workflowId,
  );
  const recorded = summarize(history);
  const differs = (a: unknown[], b: unknown[]) => JSON.stringify(a) !== JSON.stringify(b);
  const issuedActivities = [...issued.activities.values()];
  if (differs(issuedActivities, recorded.activities))
    throw new Error(
      `replay of ${workflowId}: the workflow scheduled ${issuedActivities.join(', ') || 'no activity'}; ` +
        `the history has ${recorded.activities.join(', ') || 'none'}`,
    );
  const recordedTimers = recorded.timers.map((t) => t.ms);
  const issuedTimers = [...issued.timers.values()];
  if (differs(issuedTimers, recordedTimers))
    throw new Error(
      `replay of ${workflowId}: the workflow started timers of ${issuedTimers.join(', ') || 'none'} ms; ` +
        `the history has ${recordedTimers.join(', ') || 'none'} ms`,
    );
}
