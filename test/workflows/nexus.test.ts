/**
 * tuneflow as a Nexus service (issue 19) on a real Temporal dev server: a caller's workflow in the `shop` namespace
 * calls each operation through an endpoint the test made with the Temporal CLI, and tuneflow's worker (TuneflowPlugin,
 * as users run it) serves it in the `images` namespace. Every test reads both sides' histories and the mock service's
 * request counts, not only the outcome.
 */
import type { History } from '@temporalio/common/lib/proto-utils';
import { FailureType } from '../../src/nexus';
import type { GenerateResult, PackTuneResult, TrainThenGenerateResult } from '../../src/nexus';
import type { CallOutcome } from '../nexus/caller-workflows';
import { devServerExecutable, devServerTest } from './environment';
import { summarize } from './history-summary';
import { nexusScenarios, type NexusOutcome } from './nexus-scenarios';
import { API_KEY, CALLBACK_SECRET, waitFor } from './harness';
import { CALLER_NAMESPACE, ENDPOINT, NexusWorld, OTHER_CALLER_NAMESPACE } from './nexus-world';
import { tenantWorkflowId } from '../../src/contract/tenants';
import { progressQuery } from '../../src/contract/messages';

jest.setTimeout(240_000);

let world: NexusWorld | undefined;
beforeAll(async () => {
  world = await NexusWorld.open(devServerExecutable());
}, 180_000);
afterAll(async () => {
  await world?.close();
});

/** The history's event types, without the prefix and without workflow tasks. */
function events(history: History): string[] {
  return (history.events ?? [])
    .map((e) =>
      Object.keys(e)
        .find((k) => k.endsWith('EventAttributes'))!
        .replace(/EventAttributes$/, ''),
    )
    .filter((type) => !type.startsWith('workflowTask'));
}

function attributes<K extends keyof NonNullable<History['events']>[number]>(history: History, key: K) {
  return (history.events ?? []).flatMap((e) => (e[key] ? [e[key]] : []));
}

function completed<R>(outcome: CallOutcome): R {
  if (outcome.outcome !== 'completed') throw new Error(`the call did not complete: ${JSON.stringify(outcome)}`);
  return outcome.result as R;
}

/** No API key, callback secret or signed callback URL crossed to the caller. */
function expectNoSecret(history: History): void {
  const text = JSON.stringify(history);
  const payloads = [...text.matchAll(/"data":"([A-Za-z0-9+/=]+)"/g)].map((m) => Buffer.from(m[1], 'base64').toString());
  for (const form of [text, ...payloads]) {
    expect(form).not.toContain(API_KEY);
    expect(form).not.toContain(CALLBACK_SECRET);
    expect(form).not.toMatch(/sig(=|%3D)[0-9a-fA-F]{16,}/);
  }
}

devServerTest(
  'a caller in another namespace runs each operation through the endpoint, with typed results',
  async () => {
    const { calls, stats, handler, caller } = await nexusScenarios.operations.play(world!);
    const [trained, generated, packed] = calls;

    const job = completed<TrainThenGenerateResult>(trained.outcome);
    // The key, scoped to the caller's namespace, is the workflow ID, and so the tune's title.
    // tuneflow's title: the run's workflow ID (the shop's tenant's) and run ID.
    expect(job.tune.title).toMatch(/^tuneflow:nexus:shop:nexus-train-then-generate#[0-9a-f-]{36}$/);
    expect(job.prompts.map((p) => p.images?.length)).toEqual([2, 1]);
    expect(job.cost.mc).toBeGreaterThanOrEqual(0);
    const more = completed<GenerateResult>(generated.outcome);
    expect(more.prompts.map((p) => [p.tune_id, p.text])).toEqual([[job.tune.id, 'sks dog, oil painting']]);
    const pack = completed<PackTuneResult>(packed.outcome);
    expect(pack.tune.pack_id).toBe(261);
    expect(pack.prompts.length).toBeGreaterThan(0);
    expect(stats.routes).toMatchObject({ 'POST /tunes': 1, 'POST /tunes/:id/prompts': 3, 'POST /p/:pack_id/tunes': 1 });

    for (const { callerId, key } of calls) {
      // The caller's side: one operation of tuneflow's service, started asynchronously and completed.
      expect(events(caller[callerId])).toEqual([
        'workflowExecutionStarted',
        'nexusOperationScheduled',
        'nexusOperationStarted',
        'nexusOperationCompleted',
        'workflowExecutionCompleted',
      ]);
      const [scheduled] = attributes(caller[callerId], 'nexusOperationScheduledEventAttributes');
      expect(scheduled).toMatchObject({ endpoint: ENDPOINT, service: 'tuneflow' });
      // tuneflow's side: the run of the key, linked back to the caller's operation, which its end completed.
      const [started] = attributes(handler[key], 'workflowExecutionStartedEventAttributes');
      expect(started!.workflowType?.name).toBe(scheduled!.operation);
      expect(started!.completionCallbacks?.[0]?.links?.[0]?.workflowEvent).toMatchObject({
        namespace: CALLER_NAMESPACE,
        workflowId: callerId,
      });
      expect(events(handler[key]).at(-1)).toBe('workflowExecutionCompleted');
      expectNoSecret(caller[callerId]);
    }
    expect(summarize(handler['nexus-train-then-generate']).activities.slice(0, 2)).toEqual([
      'createTune',
      'retrieveTune',
    ]);
    // Results carry no callback URL, signed or redacted: what crosses to the caller is the result's fields.
    expect(job.tune).not.toHaveProperty('callback');
    expect(JSON.stringify(job)).not.toContain('/callbacks/');
  },
);

devServerTest('a duplicate call attaches to the running job, a later one gets its result: one tune', async () => {
  const { calls, stats, handler, caller } = await nexusScenarios.duplicate.play(world!);
  const [first, second, afterClose] = calls.map((c) => completed<TrainThenGenerateResult>(c.outcome));
  expect(second).toEqual(first);
  expect(afterClose).toEqual(first);
  // The mock made one tune and its two prompts, once.
  expect(stats.routes['POST /tunes']).toBe(1);
  expect(stats.routes['POST /tunes/:id/prompts']).toBe(2);

  // One run of the key, started by the first call; the second call's completion callback was attached to it.
  const run = handler['nexus-duplicate'];
  expect(attributes(run, 'workflowExecutionStartedEventAttributes')).toHaveLength(1);
  expect(events(run)).toContain('workflowExecutionOptionsUpdated');
  expect(summarize(run).activities.filter((a) => a === 'createTune')).toHaveLength(1);
  // Both running calls were answered by that run's operation; the call after it closed was answered at once.
  const tokens = ['shop-duplicate-first', 'shop-duplicate-second'].map(
    (id) => attributes(caller[id], 'nexusOperationStartedEventAttributes')[0]?.operationToken,
  );
  expect(tokens[0]).toBeTruthy();
  expect(tokens[1]).toBe(tokens[0]);
  expect(events(caller['shop-duplicate-after-close'])).toEqual([
    'workflowExecutionStarted',
    'nexusOperationScheduled',
    'nexusOperationCompleted',
    'workflowExecutionCompleted',
  ]);
});

devServerTest("the caller's cancel cancels tuneflow's run, which deletes its tune (cleanupOnCancel)", async () => {
  const { calls, stats, handler, caller } = await nexusScenarios.cancel.play(world!);
  expect(calls[0].outcome).toEqual({ outcome: 'cancelled', chain: ['NexusOperationFailure', 'CancelledFailure'] });
  expect(stats.routes['POST /tunes']).toBe(1);
  expect(stats.routes['DELETE /tunes/:id']).toBe(1);

  // The caller asked, the request was delivered, and the operation ended cancelled once the run had cleaned up.
  expect(events(caller['shop-cancel'])).toEqual([
    'workflowExecutionStarted',
    'nexusOperationScheduled',
    'nexusOperationStarted',
    'workflowExecutionCancelRequested',
    'nexusOperationCancelRequested',
    'nexusOperationCancelRequestCompleted',
    'nexusOperationCanceled',
    'workflowExecutionCompleted',
  ]);
  const run = handler['nexus-cancel-with-cleanup'];
  expect(events(run)).toContain('workflowExecutionCancelRequested');
  expect(events(run).at(-1)).toBe('workflowExecutionCanceled');
  expect(summarize(run).activities).toEqual(['createTune', 'deleteTune']);
});

devServerTest('bad input is refused at the start as a bad request naming the field: nothing is created', async () => {
  const { calls, stats, handler, caller } = await nexusScenarios.badInput.play(world!);
  const [badJob, badKey] = calls.map((c) => c.outcome);
  expect(badJob).toMatchObject({
    outcome: 'failed',
    chain: ['NexusOperationFailure', 'HandlerError', 'ApplicationFailure'],
    failure: {
      type: FailureType.invalidInput,
      details: {
        field: 'tune.name',
        issues: [
          { field: 'tune.name', rule: 'is required and must be a non-empty string' },
          { field: 'prompts[0].num_images', rule: 'must be an integer from 1 to 8' },
        ],
      },
    },
  });
  expect(badKey).toMatchObject({ outcome: 'failed', failure: { type: 'InvalidInput', details: { field: 'key' } } });

  // No request reached the service; no run of either key exists in tuneflow's namespace.
  expect(stats.routes).toEqual({});
  expect(handler).toEqual({});
  for (const id of ['shop-bad-input', 'shop-bad-key']) {
    expect(events(caller[id])).toEqual([
      'workflowExecutionStarted',
      'nexusOperationScheduled',
      'nexusOperationFailed',
      'workflowExecutionCompleted',
    ]);
    const [failed] = attributes(caller[id], 'nexusOperationFailedEventAttributes');
    // A handler error the server did not retry: BAD_REQUEST.
    const handlerError = failed!.failure?.cause;
    expect(handlerError?.nexusHandlerFailureInfo?.type).toBe('BAD_REQUEST');
    expect(handlerError?.cause?.applicationFailureInfo?.type).toBe('InvalidInput');
    // What the caller reads, as the README prints a refusal: the message alone, no "BAD_REQUEST: " before it.
    expect(handlerError?.message).toMatch(/^Invalid input: /);
    expect(handlerError?.message).toBe(handlerError?.cause?.message);
  }
});

devServerTest("a run's failure reaches the caller typed: TuneNeverTrained, OverBudget", async () => {
  const outcome: NexusOutcome = await nexusScenarios.failures.play(world!);
  const [neverTrained, overBudget] = outcome.calls.map((c) => c.outcome);
  expect(neverTrained).toMatchObject({ outcome: 'failed', failure: { type: FailureType.tuneNeverTrained } });
  if (neverTrained.outcome === 'failed' && neverTrained.failure?.type === FailureType.tuneNeverTrained) {
    expect(neverTrained.failure.details.tuneId).toBeGreaterThan(0);
    expect(neverTrained.failure.details.timeoutMs).toBe(4000);
  }
  expect(overBudget).toMatchObject({
    outcome: 'failed',
    failure: { type: FailureType.overBudget, details: { maxCostMc: 50_000, packPriceMc: 80_000 } },
  });
  // One tune (the one that never trained); the pack was refused before anything was created.
  expect(outcome.stats.routes['POST /tunes']).toBe(1);
  expect(outcome.stats.routes['POST /p/:pack_id/tunes']).toBeUndefined();
  for (const key of ['nexus-tune-never-trained', 'nexus-over-budget'])
    expect(events(outcome.handler[key]).at(-1)).toBe('workflowExecutionFailed');
  for (const history of Object.values(outcome.caller)) expect(events(history)).toContain('nexusOperationFailed');
});

devServerTest(
  'options.inspect passes through the operation: a blurry photo fails the run InspectionRefused, typed at the caller, no tune',
  async () => {
    const outcome = await nexusScenarios.inspection.play(world!);
    const [refused] = outcome.calls.map((c) => c.outcome);
    expect(refused).toMatchObject({ outcome: 'failed', failure: { type: FailureType.inspectionRefused } });
    if (refused.outcome === 'failed' && refused.failure?.type === FailureType.inspectionRefused) {
      expect(refused.failure.details.images).toEqual([
        { field: 'tune.image_urls[1]', image: expect.stringContaining('__blurry__'), flags: ['blurry'] },
      ]);
      expect(refused.failure.details.inspection).toHaveLength(2);
    }
    // tuneflow's run got the option: it inspected both photos and created nothing.
    const run = outcome.handler['nexus-inspection-refused'];
    expect(summarize(run).activities).toEqual(['inspectImage', 'inspectImage']);
    expect(events(run).at(-1)).toBe('workflowExecutionFailed');
    expect(outcome.stats.routes).toEqual({ 'POST /images/inspect': 2 });
    expect(events(outcome.caller['shop-inspection-refused'])).toContain('nexusOperationFailed');
  },
);

devServerTest(
  "keys of different teams never meet: another namespace's same key is its own job, its cancel reaches only its own " +
    'run, and other input under a key is refused naming the field',
  async () => {
    await world!.withTuneflow({ trainingTime: '3s' }, async ({ mock }) => {
      const newDog = { name: 'dog', branch: 'fast', image_urls: [`${mock.url}/images/training-1.png`] };
      const order = (key: string, text: string) => ({
        operation: 'trainThenGenerate' as const,
        input: { key, tune: newDog, prompts: [{ text }] },
      });
      const shop = await world!.call('shop-1001', order('order-1001', 'sks dog, the shop'));
      const studio = await world!.call('studio-1001', order('order-1001', 'sks dog, the studio'), world!.studio);
      const shopKept = await world!.call('shop-1002', order('order-1002', 'sks dog, kept'));
      const studioCancelled = await world!.call(
        'studio-1002',
        order('order-1002', 'sks dog, cancelled'),
        world!.studio,
      );
      const studioRun = world!.images.workflow.getHandle(tenantWorkflowId(OTHER_CALLER_NAMESPACE, 'order-1002'));
      // Cancelled once its tune exists, so each of the four jobs made one.
      await waitFor(
        () =>
          studioRun.query(progressQuery).then(
            (p) => p.phase === 'training',
            () => false,
          ),
        () => "the studio's run of order-1002 to train",
      );
      await studioCancelled.cancel();
      const otherInput = await world!.call('shop-1001-other', order('order-1001', 'sks dog, another job'));

      const [a, b, kept, cancelled, refused] = await Promise.all(
        [shop, studio, shopKept, studioCancelled, otherInput].map((h) => h.result()),
      );
      const textOf = (outcome: CallOutcome) => completed<TrainThenGenerateResult>(outcome).prompts[0].text;
      expect(textOf(a)).toBe('sks dog, the shop');
      expect(textOf(b)).toBe('sks dog, the studio');
      expect(textOf(kept)).toBe('sks dog, kept');
      expect(cancelled.outcome).toBe('cancelled');
      expect(refused).toMatchObject({
        outcome: 'failed',
        failure: { type: FailureType.keyInUse, details: { key: 'order-1001', fields: ['input.prompts[0].text'] } },
      });
      // Four jobs, four tunes: the refused call created nothing.
      expect(mock.stats().routes['POST /tunes']).toBe(4);
      const shopRun = await world!.images.workflow
        .getHandle(tenantWorkflowId(CALLER_NAMESPACE, 'order-1002'))
        .describe();
      expect(shopRun.status.name).toBe('COMPLETED');
      const studioDescribed = await studioRun.describe();
      expect(studioDescribed.status.name).toBe('CANCELLED');
      // Each run's priority is its endpoint's tenant, so its workflow tasks share the queue by tenant.
      expect(shopRun.priority).toMatchObject({ fairnessKey: CALLER_NAMESPACE, fairnessWeight: 1 });
      expect(studioDescribed.priority).toMatchObject({ fairnessKey: OTHER_CALLER_NAMESPACE, fairnessWeight: 1 });
    });
  },
);
