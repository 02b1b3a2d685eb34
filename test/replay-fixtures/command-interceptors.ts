/**
 * A workflow interceptor for strict replays (test/workflows/strict-replay.ts): it reports every activity the workflow
 * schedules and every timer it starts, with the timer's duration, through a sink that is called during replay too.
 * Temporal's own replay check matches commands by kind and sequence only: an activity of another type, or a timer of
 * another length, at the same place replays without complaint.
 */
import { proxySinks, workflowInfo, type Sinks, type WorkflowInterceptorsFactory } from '@temporalio/workflow';

export interface CommandSinks extends Sinks {
  commands: {
    activity(activityType: string): void;
    timer(seq: number, durationMs: number): void;
    /** A timer cancelled in the workflow task that started it: it never reaches the history. */
    timerElided(seq: number): void;
  };
}

const { commands } = proxySinks<CommandSinks>();

export const interceptors: WorkflowInterceptorsFactory = () => ({
  outbound: [
    {
      scheduleActivity(input, next) {
        commands.activity(input.activityType);
        return next(input);
      },
      startTimer(input, next) {
        commands.timer(input.seq, input.durationMs);
        const startedIn = workflowInfo().historyLength;
        const timer = next(input);
        timer.catch(() => {
          if (workflowInfo().historyLength === startedIn) commands.timerElided(input.seq);
        });
        return timer;
      },
    },
  ],
});
