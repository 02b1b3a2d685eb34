/**
 * The service's error policies as Temporal retries, and the typed failures, on a time-skipping test server: awaiting
 * through env.client skips the 30 s backoff, the 60 s wait after a 504, and the deadlines.
 *
 * Every skip moves the test server's clock ahead of the mock's: nothing here compares the two (the look-up before a
 * retried create finds the tune by its title alone).
 */
import { ActivityFailure, ApplicationFailure, WorkflowFailedError } from '@temporalio/client';
import type { History } from '@temporalio/common/lib/proto-utils';
import { tsToMs } from '@temporalio/common/lib/time';
import type { TuneNeverTrainedDetails } from '../../src/workflows/failures';
import { useWorkflowHarness, workflowTest } from './environment';
import type { Outcome } from './harness';
import { play, scenarios } from './scenarios';

jest.setTimeout(180_000);

const harness = useWorkflowHarness();

/**
 * The createTune activity as history shows it: its last attempt, what failed before it, and when it started.
 * `lastFailureType` is undefined on the time-skipping test server, which does not record `lastFailure` on
 * ActivityTaskStarted (a real server does); the mock's fault settings and the delay say which failure it was there.
 */
function createTuneAttempts(history: History) {
  const events = history.events ?? [];
  const scheduled = events.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'createTune');
  const started = events.find(
    (e) =>
      e.activityTaskStartedEventAttributes &&
      Number(e.activityTaskStartedEventAttributes.scheduledEventId) === Number(scheduled?.eventId),
  );
  if (!scheduled || !started) throw new Error('no createTune activity in the history');
  const attributes = started.activityTaskStartedEventAttributes!;
  return {
    attempt: attributes.attempt,
    lastFailureType: attributes.lastFailure?.applicationFailureInfo?.type,
    waitedMs: tsToMs(started.eventTime!) - tsToMs(scheduled.eventTime!),
  };
}

/** The workflow's failure: WorkflowFailedError -> (ActivityFailure ->) ApplicationFailure. */
function applicationFailureOf(outcome: Outcome<unknown>): ApplicationFailure {
  expect(outcome.error).toBeInstanceOf(WorkflowFailedError);
  let cause = (outcome.error as WorkflowFailedError).cause;
  if (cause instanceof ActivityFailure) cause = cause.cause;
  expect(cause).toBeInstanceOf(ApplicationFailure);
  return cause as ApplicationFailure;
}

workflowTest('a 504 after the tune was created: retried 60 s later, found by title, exactly one tune', async () => {
  const outcome = await play(harness(), scenarios.gatewayTimeoutOnce);
  expect(outcome.error).toBeUndefined();
  expect(outcome.stats.faults.injected).toBe(1);
  expect(outcome.stats.routes['POST /tunes']).toBe(1);
  expect(outcome.stats.routes['GET /tunes']).toBeGreaterThanOrEqual(1); // the look-up before POSTing again
  const attempts = createTuneAttempts(outcome.history);
  expect(attempts.attempt).toBe(2);
  expect([undefined, 'GatewayTimeout']).toContain(attempts.lastFailureType);
  expect(attempts.waitedMs).toBeGreaterThanOrEqual(60_000);
});

workflowTest('500s then success: the create is retried after the 30 s backoff', async () => {
  const outcome = await play(harness(), scenarios.serverErrorBackoff);
  expect(outcome.error).toBeUndefined();
  expect(outcome.stats.faults.injected).toBe(1);
  expect(outcome.stats.routes['POST /tunes']).toBe(2);
  const attempts = createTuneAttempts(outcome.history);
  expect(attempts.attempt).toBe(2);
  expect([undefined, 'ServerError']).toContain(attempts.lastFailureType);
  expect(attempts.waitedMs).toBeGreaterThanOrEqual(30_000);
  expect(attempts.waitedMs).toBeLessThan(60_000);
});

workflowTest('a 422 fails the workflow at once, with the field errors, and is not retried', async () => {
  const outcome = await play(harness(), scenarios.validationError);
  const failure = applicationFailureOf(outcome);
  expect(failure.type).toBe('Validation');
  expect(failure.nonRetryable).toBe(true);
  expect(failure.message).toContain('tune.base_tune_id');
  const details = failure.details?.[0] as { status: number; fieldErrors: Record<string, string[]> };
  expect(details.status).toBe(422);
  expect(details.fieldErrors['tune.base_tune_id']).toEqual([
    expect.stringContaining('must be a tune of this account or the public base tune'),
  ]);
  expect(outcome.stats.routes['POST /tunes']).toBe(1);
  expect(outcome.progress.phase).toBe('failed');
});

workflowTest('a bad option fails at once with InvalidOptions, before any call to the service', async () => {
  const outcome = await play(harness(), scenarios.invalidOptions);
  const failure = applicationFailureOf(outcome);
  expect(failure.type).toBe('InvalidOptions');
  expect(failure.message).toContain('Invalid option pollInterval');
  expect(outcome.stats.routes).toEqual({});
  expect(outcome.progress).toMatchObject({ phase: 'failed', counts: { apiCalls: 0, polls: 0, callbacks: 0 } });
});

workflowTest('a tune that never trains fails at its deadline with TuneNeverTrained, after bounded polls', async () => {
  const outcome = await play(harness(), scenarios.tuneNeverTrained);
  const failure = applicationFailureOf(outcome);
  expect(failure.type).toBe('TuneNeverTrained');
  const details = failure.details?.[0] as TuneNeverTrainedDetails;
  expect(failure.message).toContain(`Tune ${details.tuneId} was not trained within 20 seconds`);
  expect(failure.message).toContain('never got trained_at');
  // Polls at eta + 5 s (6 s), then 10 s later (16 s), and a last look at the deadline (20 s).
  expect(details.polls).toBe(3);
  expect(outcome.stats.routes['GET /tunes/:id']).toBe(3);
  expect(outcome.progress).toMatchObject({ phase: 'failed', tuneId: details.tuneId, counts: { polls: 3 } });
  expect(outcome.stats.routes['POST /tunes/:id/prompts']).toBeUndefined();
  // A few events per poll: the history stays small.
  expect(outcome.history.events?.length).toBeLessThan(80);
});
