/**
 * A workflow interceptor for strict replays (test/workflows/strict-replay.ts): it reports every activity the workflow
 * schedules and every timer it starts, with the timer's duration, through a sink that is called during replay too.
 * Temporal's own replay check matches commands by kind and sequence only: an activity of another type, or a timer of
 * another length, at the same place replays without complaint.
 */
import { proxySinks, workflowInfo, type Sinks, type WorkflowInterceptorsFactory } from '@temporalio/workflow';

export interface CommandSinks extends Sinks {
  commands: {
    activity(seq: number, activityType: string): void;
    /** An activity cancelled in the workflow task that scheduled it: the core never sends it, so no history has it. */
    activityElided(seq: number): void;
    timer(seq: number, durationMs: number): void;
    /** A timer cancelled in the workflow task that started it: it never reaches the history. */
    timerElided(seq: number): void;
  };
}

const { commands } = proxySinks<CommandSinks>();

/**
 * Calls `elided` when `command` is rejected within the workflow task that issued it (cancelled at once): the core
 * never sends such a command, so no history has it. Returns `command`.
 */
function watchElided<T>(command: Promise<T>, elided: () => void): Promise<T> {
  const issuedIn = workflowInfo().historyLength;
  command.catch(() => {
    if (workflowInfo().historyLength === issuedIn) elided();
  });
  return command;
}

export const interceptors: WorkflowInterceptorsFactory = () => ({
  outbound: [
    {
      scheduleActivity(input, next) {
        commands.activity(input.seq, input.activityType);
        return watchElided(next(input), () => commands.activityElided(input.seq));
      },
      startTimer(input, next) {
        commands.timer(input.seq, input.durationMs);
        return watchElided(next(input), () => commands.timerElided(input.seq));
      },
    },
  ],
});
