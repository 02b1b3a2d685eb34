/**
 * The service's error policies as Temporal retries, and the typed failures, on a time-skipping test server: awaiting
 * through env.client skips the 30 s backoff, the 60 s wait after a 504, and the deadlines.
 *
 * Every skip moves the test server's clock ahead of the mock's: nothing here compares the two (the look-up before a
 * retried create finds the tune by its title alone).
 */
import { ActivityFailure, ApplicationFailure, WorkflowFailedError } from '@temporalio/client';
import type { History } from '@temporalio/common/lib/proto-utils';
import type { TuneNeverTrainedDetails } from '../../src/contract/failures';
import { currentVerdict, useWorkflowHarness, workflowTest } from './environment';
import type { GenerateResult } from '../../src/contract/inputs';
import { resultOf, type Outcome } from './harness';
import { summarize, type Attempt } from './history-summary';
import { IMAGE_URLS, play, scenarios } from './scenarios';

jest.setTimeout(180_000);

const harness = useWorkflowHarness();

/**
 * The failure type a retried attempt's history shows: a real server records the attempt before's failure, the
 * time-skipping test server does not (and the check would tell if it started to).
 */
function lastFailureShown(type: string): string | undefined {
  return currentVerdict().testServer.kind === 'existing' ? type : undefined;
}

/** The createTune activity's last attempt as history shows it. */
function createTuneAttempts(history: History): Attempt {
  const attempt = summarize(history).attempts.find((a) => a.activity === 'createTune');
  if (!attempt) throw new Error('no createTune activity in the history');
  return attempt;
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
  expect(outcome.stats.faults).toEqual({
    injected: 1,
    byKind: { status500: 0, status429: 0, status504: 1, garbled: 0 },
  });
  expect(outcome.stats.routes['POST /tunes']).toBe(1);
  expect(outcome.stats.routes['GET /tunes']).toBeGreaterThanOrEqual(1); // the look-up before POSTing again
  const attempts = createTuneAttempts(outcome.history);
  expect(attempts.attempt).toBe(2);
  expect(attempts.lastFailureType).toBe(lastFailureShown('GatewayTimeout'));
  expect(attempts.waitedMs).toBeGreaterThanOrEqual(60_000);
  // Its 30 s backoff would have sent it sooner: the 60 s is the 504's own delay.
  expect(attempts.waitedMs).toBeLessThan(90_000);
  expect(summarize(outcome.history).activities).toEqual(['createTune']);
});

workflowTest(
  'a tune create answered with a body cut short: retried after the backoff, found by title, one tune',
  async () => {
    const faults = { garbledAnswerRate: 1, faultRoutes: ['POST /tunes'], maxFaults: 1 };
    const input = { tune: { name: 'woman', model_type: 'faceid', image_urls: IMAGE_URLS }, prompts: [] };
    const outcome = await harness().scenario({ mock: { faults, answerStyle: 'rails' } }, (s) =>
      s.withWorker(async () =>
        s.settle(await s.start('trainThenGenerate', input, 'skipping', `garbled-${Date.now()}`)),
      ),
    );
    expect(outcome.error).toBeUndefined();
    expect(outcome.stats.faults).toEqual({
      injected: 1,
      byKind: { status500: 0, status429: 0, status504: 0, garbled: 1 },
    });
    expect(outcome.stats.routes['POST /tunes']).toBe(1);
    expect(outcome.stats.routes['GET /tunes']).toBe(1); // one look-up by title
    const attempts = createTuneAttempts(outcome.history);
    expect(attempts.attempt).toBe(2);
    expect(attempts.lastFailureType).toBe(lastFailureShown('UnexpectedResponse'));
    expect(attempts.waitedMs).toBeGreaterThanOrEqual(30_000); // the service policy's backoff
    expect(summarize(outcome.history).activities).toEqual(['createTune']);
  },
);

workflowTest(
  'a prompt create answered with a body cut short: the retry finds the prompt, one prompt per request',
  async () => {
    const faults = { garbledAnswerRate: 1, faultRoutes: ['POST /tunes/:id/prompts'], maxFaults: 1 };
    let listed: number[] = [];
    const outcome = await harness().scenario({ mock: { answerStyle: 'rails' } }, (s) =>
      s.withWorker(async () => {
        const created = await s.api.tunes.create({
          title: 'garbled-dog',
          name: 'dog',
          branch: 'fast',
          image_urls: IMAGE_URLS,
        });
        while (!(await s.api.tunes.retrieve(created.id)).trained_at) await new Promise((r) => setTimeout(r, 50));
        s.mock.setFaults(faults);
        const input = {
          tuneId: created.id,
          prompts: [
            { text: 'sks dog', cfg_scale: 3 },
            { text: 'sks dog', seed: 2 },
          ],
        };
        const outcome = await s.settle(await s.start('generate', input, 'skipping', `garbled-prompt-${Date.now()}`));
        listed = (await s.api.prompts.list(created.id, { limit: 120 })).map((p) => p.id);
        return outcome;
      }),
    );
    expect(outcome.error).toBeUndefined();
    expect(outcome.stats.faults.injected).toBe(1);
    expect(outcome.stats.routes['POST /tunes/:id/prompts']).toBe(2);
    const { prompts } = resultOf(outcome) as GenerateResult;
    expect(prompts).toHaveLength(2);
    // The mock holds exactly the two prompts the run returns: the garbled create was not made again.
    expect([...listed].sort()).toEqual(prompts.map((p) => p.id).sort());
    const creates = summarize(outcome.history).attempts.filter((a) => a.activity === 'createPrompt');
    expect(creates.map((a) => a.attempt).sort()).toEqual([1, 2]);
  },
);

workflowTest('two 500s then success: the create is retried after 30 s, then after 60 s (doubling)', async () => {
  const outcome = await play(harness(), scenarios.serverErrorBackoff);
  expect(outcome.error).toBeUndefined();
  expect(outcome.stats.faults).toEqual({
    injected: 2,
    byKind: { status500: 2, status429: 0, status504: 0, garbled: 0 },
  });
  expect(outcome.stats.routes['POST /tunes']).toBe(3);
  const attempts = createTuneAttempts(outcome.history);
  expect(attempts.attempt).toBe(3);
  expect(attempts.lastFailureType).toBe(lastFailureShown('ServerError'));
  // 30 s, then 60 s: 90 s before the third attempt; a third backoff (120 s) would make it 210 s.
  expect(attempts.waitedMs).toBeGreaterThanOrEqual(90_000);
  expect(attempts.waitedMs).toBeLessThan(210_000);
  expect(summarize(outcome.history).activities).toEqual(['createTune']);
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
    expect.stringContaining('must be a tune of this account or a gallery base tune'),
  ]);
  expect(outcome.stats.routes['POST /tunes']).toBe(1);
  expect(outcome.progress.phase).toBe('failed');
  expect(createTuneAttempts(outcome.history).attempt).toBe(1);
  expect(summarize(outcome.history).activities).toEqual(['createTune']);
});

workflowTest('a bad option fails at once with InvalidOptions, before any call to the service', async () => {
  const outcome = await play(harness(), scenarios.invalidOptions);
  const failure = applicationFailureOf(outcome);
  expect(failure.type).toBe('InvalidOptions');
  expect(failure.message).toContain('Invalid option pollInterval');
  expect(outcome.stats.routes).toEqual({});
  expect(outcome.progress).toMatchObject({ phase: 'failed', counts: { apiCalls: 0, polls: 0, callbacks: 0 } });
  expect(summarize(outcome.history)).toMatchObject({ activities: [], timers: [] });
});

workflowTest('started by name with an invalid prompt: InvalidInput naming prompts[1].w, nothing created', async () => {
  const outcome = await play(harness(), scenarios.invalidPrompt);
  const failure = applicationFailureOf(outcome);
  expect(failure.type).toBe('InvalidInput');
  expect(failure.nonRetryable).toBe(true);
  const rule = 'must be a positive integer multiple of 8';
  expect(failure.message).toBe(`Invalid input: prompts[1].w: ${rule}`);
  expect(failure.details).toEqual([{ field: 'prompts[1].w', rule, issues: [{ field: 'prompts[1].w', rule }] }]);
  expect(outcome.stats.routes).toEqual({});
  expect(summarize(outcome.history)).toMatchObject({ activities: [], timers: [] });
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
  // One retrieveTune per poll, each after its timer: the deadline (20 s), the first poll at eta + 5 s, then 10 s
  // later, then the deadline fires during the next wait and the last look is made.
  const { activities, timers } = summarize(outcome.history);
  expect(activities).toEqual(['createTune', 'retrieveTune', 'retrieveTune', 'retrieveTune']);
  expect(timers).toEqual([
    { ms: 20_000, ended: 'fired' },
    { ms: 6_000, ended: 'fired' },
    { ms: 10_000, ended: 'fired' },
    { ms: 10_000, ended: 'cancelled' },
  ]);
  // A few events per poll: the history stays small.
  expect(outcome.history.events?.length).toBeLessThan(80);
});
