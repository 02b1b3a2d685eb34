/**
 * Tenants apart (issue 42) on a real Temporal dev server, with two teams' namespaces calling through their own Nexus
 * endpoints and raw starts in tuneflow's own namespace: a team is who the operator's endpoint map says, never what
 * the request says; a job reaches only its tenant's tunes; IDs tuneflow makes are the workflows' own rule; the
 * longest key fits. Every test reads the mock service's journal and request counts, and the runs' histories.
 */
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { History } from '@temporalio/common/lib/proto-utils';
import { TuneflowClient } from '../../src/client';
import { claimWorkflowId } from '../../src/contract/keys';
import { MAX_KEY_LENGTH, MAX_TENANT_BYTES, tenantWorkflowId, titleTenant } from '../../src/contract/tenants';
import { FailureType, type GenerateResult, type TrainThenGenerateResult } from '../../src/nexus';
import type { CallOutcome } from '../nexus/caller-workflows';
import { GALLERY_TUNES } from '../../src/mock-service';
import { devServerExecutable, devServerTest } from './environment';
import { blocksUnder, commandsOf } from '../readme-blocks';
import { loadTenantSettings } from '../../src/tenants';
import { summarize } from './history-summary';
import {
  CALLER_NAMESPACE,
  NexusWorld,
  OTHER_CALLER_NAMESPACE,
  OTHER_ENDPOINT,
  TENANT_ENDPOINTS,
  TUNEFLOW_NAMESPACE,
  UNMAPPED_ENDPOINT,
} from './nexus-world';

jest.setTimeout(240_000);

let world: NexusWorld | undefined;
beforeAll(async () => {
  world = await NexusWorld.open(devServerExecutable());
}, 180_000);
afterAll(async () => {
  await world?.close();
});

const TASK_QUEUE = 'tuneflow';

function completed<R>(outcome: CallOutcome): R {
  if (outcome.outcome !== 'completed') throw new Error(`the call did not complete: ${JSON.stringify(outcome)}`);
  return outcome.result as R;
}

/** The handler error's type (BAD_REQUEST, UNAUTHORIZED) of a call refused at its start, from the caller's history. */
function handlerErrorType(history: History): string | undefined {
  const failed = (history.events ?? []).find((e) => e.nexusOperationFailedEventAttributes);
  return failed?.nexusOperationFailedEventAttributes?.failure?.cause?.nexusHandlerFailureInfo?.type ?? undefined;
}

/** How a run in tuneflow's namespace failed: its failure's type and details. */
async function failureOf(workflowId: string): Promise<{ type?: string; details?: unknown; message: string }> {
  const error = await world!.images.workflow
    .getHandle(workflowId)
    .result()
    .then(
      () => undefined,
      (err: unknown) => err,
    );
  if (!(error instanceof WorkflowFailedError)) throw new Error(`${workflowId} did not fail: ${String(error)}`);
  const cause = error.cause;
  if (!(cause instanceof ApplicationFailure)) throw new Error(`${workflowId} failed untyped: ${String(cause)}`);
  return { type: cause.type ?? undefined, details: cause.details?.[0], message: cause.message };
}

const newDog = (url: string) => ({ name: 'dog', branch: 'fast', image_urls: [`${url}/images/training-1.png`] });

devServerTest(
  "a forged Nexus-Link, a tenant header and a tenant field change nothing: the studio's call runs as the studio, " +
    "never on the shop's job",
  async () => {
    await world!.withTuneflow({ trainingTime: '1s' }, async ({ mock }) => {
      const order = { key: 'order-500', tune: newDog(mock.url), prompts: [{ text: 'sks dog' }] };
      const shop = await world!.call('shop-500', { operation: 'trainThenGenerate', input: order });
      const shopResult = completed<TrainThenGenerateResult>(await shop.result());
      // The same key and input, with a link, a header and an input field that name the shop.
      const forgedInput = { ...order, tenant: CALLER_NAMESPACE } as typeof order;
      const forged = await world!.call(
        'studio-500',
        { operation: 'trainThenGenerate', input: forgedInput },
        world!.studio,
        { forgeLinkTo: CALLER_NAMESPACE },
      );
      const studioResult = completed<TrainThenGenerateResult>(await forged.result());

      expect(titleTenant(shopResult.tune.title)).toBe(CALLER_NAMESPACE);
      expect(titleTenant(studioResult.tune.title)).toBe(OTHER_CALLER_NAMESPACE);
      expect(studioResult.tune.id).not.toBe(shopResult.tune.id);
      // Two jobs, two tunes, each under its own tenant's ID; the studio's run is its own.
      expect(mock.stats().routes['POST /tunes']).toBe(2);
      const studioRun = await world!.images.workflow
        .getHandle(tenantWorkflowId(OTHER_CALLER_NAMESPACE, 'order-500'))
        .fetchHistory();
      expect(summarize(studioRun).activities).toContain('createTune');
      expect(
        mock
          .journal()
          .tunes.map((t) => titleTenant(t.title))
          .sort(),
      ).toEqual([CALLER_NAMESPACE, 'studio']);
    });
  },
);

devServerTest(
  'an endpoint the operator mapped to no tenant is refused, UNAUTHORIZED, before anything is made',
  async () => {
    await world!.withTuneflow({}, async ({ mock }) => {
      const call = await world!.call(
        'shop-unmapped',
        { operation: 'trainThenGenerate', input: { key: 'order-501', tune: newDog(mock.url), prompts: [] } },
        world!.shop,
        { endpoint: UNMAPPED_ENDPOINT },
      );
      const outcome = await call.result();
      expect(outcome).toMatchObject({ outcome: 'failed' });
      expect(handlerErrorType(await call.fetchHistory())).toBe('UNAUTHORIZED');
      expect(mock.stats().routes).toEqual({});
    });
  },
);

devServerTest(
  "a tune is its tenant's: the studio's generate and packTune on the shop's tune are refused naming the field, and " +
    'a title from a caller is refused',
  async () => {
    await world!.withTuneflow({ trainingTime: '1s' }, async ({ mock }) => {
      const shop = await world!.call('shop-510', {
        operation: 'trainThenGenerate',
        input: { key: 'order-510', tune: newDog(mock.url), prompts: [] },
      });
      const tuneId = completed<TrainThenGenerateResult>(await shop.result()).tune.id;
      const before = mock.stats().routes;

      const generate = await world!.call(
        'studio-511',
        { operation: 'generate', input: { key: 'order-511', tuneId, prompts: [{ text: 'sks dog' }] } },
        world!.studio,
      );
      const pack = await world!.call(
        'studio-512',
        { operation: 'packTune', input: { key: 'order-512', packId: 260, tune: { tune_ids: [tuneId] } } },
        world!.studio,
      );
      const titled = await world!.call(
        'studio-513',
        {
          operation: 'trainThenGenerate',
          input: {
            key: 'order-513',
            tune: { ...newDog(mock.url), title: 'tuneflow:nexus:shop:order-510' },
            prompts: [],
          },
        },
        world!.studio,
      );
      expect(await generate.result()).toMatchObject({
        outcome: 'failed',
        failure: { type: FailureType.invalidInput, details: { field: 'tuneId' } },
      });
      expect(await pack.result()).toMatchObject({
        outcome: 'failed',
        failure: { type: FailureType.invalidInput, details: { field: 'tune.tune_ids[0]' } },
      });
      expect(await titled.result()).toMatchObject({
        outcome: 'failed',
        failure: { type: FailureType.invalidInput, details: { field: 'tune.title' } },
      });
      expect(handlerErrorType(await titled.fetchHistory())).toBe('BAD_REQUEST');

      // The refused runs read the tune (to learn whose it is) and made, listed or deleted nothing.
      const after = mock.stats().routes;
      expect(after['GET /tunes/:id'] - (before['GET /tunes/:id'] ?? 0)).toBe(2);
      for (const route of Object.keys(after).filter((r) => r !== 'GET /tunes/:id'))
        expect({ route, count: after[route] }).toEqual({ route, count: before[route] });
      const generateRun = await world!.images.workflow
        .getHandle(tenantWorkflowId(OTHER_CALLER_NAMESPACE, 'order-511'))
        .fetchHistory();
      expect(summarize(generateRun).activities).toEqual(['retrieveTune']);
      const packRun = await world!.images.workflow
        .getHandle(tenantWorkflowId(OTHER_CALLER_NAMESPACE, 'order-512'))
        .fetchHistory();
      expect(summarize(packRun).activities).toEqual(['listPrompts']);
    });
  },
);

devServerTest(
  "a gallery tune is the account's own team's: the studio generates on it once the operator gives it",
  async () => {
    const prompts = [{ text: 'sks dog' }];
    const refused = await world!.withTuneflow({ inferenceTime: '200ms' }, async ({ mock }) => {
      const call = await world!.call(
        'studio-520',
        { operation: 'generate', input: { key: 'order-520', tuneId: GALLERY_TUNES[1].id, prompts } },
        world!.studio,
      );
      return { outcome: await call.result(), routes: mock.stats().routes };
    });
    expect(refused.outcome).toMatchObject({ outcome: 'failed', failure: { details: { field: 'tuneId' } } });
    expect(refused.routes).toEqual({ 'GET /tunes/:id': 1 });
    const given = await world!.withTuneflow(
      { inferenceTime: '200ms' },
      async ({ mock }) => {
        const call = await world!.call(
          'studio-521',
          { operation: 'generate', input: { key: 'order-521', tuneId: GALLERY_TUNES[1].id, prompts } },
          world!.studio,
        );
        return { outcome: await call.result(), routes: mock.stats().routes };
      },
      { tunes: { '*': [GALLERY_TUNES[1].id] } },
    );
    expect(completed<GenerateResult>(given.outcome).prompts).toHaveLength(1);
    expect(given.routes['POST /tunes/:id/prompts']).toBe(1);
  },
);

devServerTest(
  'raw starts under IDs tuneflow makes are refused, typed, having created nothing; a squatted claim fails its job ' +
    'fast, ClaimHeld',
  async () => {
    await world!.withTuneflow({ trainingTime: '1s' }, async ({ mock }) => {
      const input = { tune: newDog(mock.url), prompts: [] };
      const start = (workflowId: string, workflow = 'trainThenGenerate', args: unknown[] = [input]) =>
        world!.images.workflow.start(workflow, { taskQueue: TASK_QUEUE, workflowId, args });

      await start('tuneflow:nexus:shop:raw-1');
      await start('tuneflow:claim:raw-2');
      const squat = await start(claimWorkflowId('order-530'), 'keyClaim', []);
      for (const id of ['tuneflow:nexus:shop:raw-1', 'tuneflow:claim:raw-2'])
        expect(await failureOf(id)).toMatchObject({
          type: FailureType.invalidInput,
          details: { field: 'workflowId' },
        });
      expect(await failureOf(squat.workflowId)).toMatchObject({ type: FailureType.invalidInput });

      // The key's job, started after the squat: it fails at once, naming the key, instead of waiting on the claim.
      const tuneflow = new TuneflowClient({ client: world!.images, taskQueue: TASK_QUEUE });
      const began = Date.now();
      const job = await tuneflow.trainThenGenerate('order-530', input);
      expect(await failureOf('order-530')).toMatchObject({
        type: FailureType.claimHeld,
        details: { key: 'order-530', claimRunId: squat.firstExecutionRunId },
      });
      expect(Date.now() - began).toBeLessThan(60_000);
      expect(summarize(await job.handle.fetchHistory()).activities).toEqual(['priorJob']);
      // A claim nobody runs (a task queue no worker polls) is held the same.
      await world!.images.workflow.start('keyClaim', {
        taskQueue: 'nobody-polls',
        workflowId: claimWorkflowId('order-531'),
        args: [],
      });
      await tuneflow.trainThenGenerate('order-531', input);
      expect(await failureOf('order-531')).toMatchObject({ type: FailureType.claimHeld });

      expect(mock.stats().routes['POST /tunes']).toBeUndefined();
    });
  },
);

devServerTest(
  'the longest key fits the server from each starter: TuneflowClient with the longest tenant, and Nexus',
  async () => {
    await world!.withTuneflow({ trainingTime: '1s' }, async ({ mock }) => {
      const key = 'k'.repeat(MAX_KEY_LENGTH);
      const tenant = 't'.repeat(MAX_TENANT_BYTES);
      const input = { tune: newDog(mock.url), prompts: [] };
      const client = new TuneflowClient({ client: world!.images, taskQueue: TASK_QUEUE, tenant });
      const direct = await client.trainThenGenerate(key, input);
      expect(direct.workflowId).toBe(tenantWorkflowId(tenant, key));
      expect(claimWorkflowId(direct.workflowId)).toHaveLength(1000);
      const viaNexus = await world!.call('shop-long-key', { operation: 'trainThenGenerate', input: { key, ...input } });
      const [a, b] = await Promise.all([direct.result(), viaNexus.result()]);
      expect(titleTenant(a.tune.title)).toBe(tenant);
      expect(titleTenant(completed<TrainThenGenerateResult>(b).tune.title)).toBe(CALLER_NAMESPACE);
      expect(mock.stats().routes['POST /tunes']).toBe(2);
      // Each run claimed its key before it created its tune.
      expect(summarize(await direct.handle.fetchHistory()).activities[0]).toBe('createTune');
      await expect(
        world!.images.workflow.getHandle(claimWorkflowId(direct.workflowId)).describe(),
      ).resolves.toMatchObject({ type: 'keyClaim' });
      expect(key.length + 1).toBeGreaterThan(MAX_KEY_LENGTH);
      await expect(client.trainThenGenerate(`${key}k`, input)).rejects.toThrow(/at most 905 bytes/);
    });
  },
);

devServerTest(
  "the README's Tenants commands, as printed: the studio's endpoint onto tuneflow's one task queue, and the map",
  async () => {
    // Liberties: the endpoint targets this world's tuneflow namespace (the README's is "Run it locally"'s `default`),
    // under a name of its own (the world made the studio's already), and the worker is TuneflowPlugin with the map.
    const [endpoint, worker] = commandsOf(blocksUnder('### Tenants', 'text')[0]);
    expect(endpoint).toMatch(
      new RegExp(`^temporal operator nexus endpoint create --name ${OTHER_ENDPOINT} --target-namespace default `),
    );
    expect(endpoint).toMatch(/--target-task-queue tuneflow$/);
    const made = endpoint
      .replace(`--name ${OTHER_ENDPOINT}`, '--name tuneflow-readme')
      .replace('--target-namespace default', `--target-namespace ${TUNEFLOW_NAMESPACE}`)
      .split(' ')
      .slice(1);
    await world!.cliRun(made);
    const { stdout } = await world!.cliRun(['operator', 'nexus', 'endpoint', 'get', '--name', 'tuneflow-readme']);
    expect(stdout).toContain(TUNEFLOW_NAMESPACE);
    const map = /^TUNEFLOW_TENANT_ENDPOINTS=(\S+) npx tuneflow worker/.exec(worker)![1];
    expect(loadTenantSettings({ TUNEFLOW_TENANT_ENDPOINTS: map }).endpoints).toEqual(TENANT_ENDPOINTS);
  },
);
