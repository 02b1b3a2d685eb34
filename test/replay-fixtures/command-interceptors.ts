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

export const interceptors: WorkflowInterceptorsFactory = () => ({
  outbound: [
    {
      scheduleActivity(input, next) {
        commands.activity(input.seq, input.activityType);
        const scheduledIn = workflowInfo().historyLength;
        const activity = next(input);
        activity.catch(() => {
          if (workflowInfo().historyLength === scheduledIn) commands.activityElided(input.seq);
        });
        return activity;
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
