/**
 * A ceiling on a team's spend (issue 43 item 3) on a real Temporal dev server (updates, update-with-start): a tenant's
 * jobs reserve each paid create on the tenant's ledger workflow before it is made, commit what the service charged
 * and release what they did not spend. Many concurrent starts against a window that fits N of them: exactly N are
 * created (the mock's journal), the others fail OverBudget naming the window before any create. After faults (a 504
 * after the create, a create refused with a 422, a cancel, a `tuneflow worker` process SIGKILLed between reserve and
 * commit) the ledger's sums add up, judged by the mock's charges.
 */
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { NativeConnection, Worker, type WorkflowBundle } from '@temporalio/worker';
import { Client, WithStartWorkflowOperation, WorkflowFailedError, WorkflowUpdateFailedError } from '@temporalio/client';
import { ActivityFailure, ApplicationFailure } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { TuneflowClient } from '../../src/client';
import { ledgerWorkflowId, SpendLedger, spendQuery, spendWindow, type Spend } from '../../src/contract/spend';
import { tenantWorkflowId } from '../../src/contract/tenants';
import { startMockService, TUNE_TRAINING_MC, type MockService } from '../../src/mock-service';
import { TuneflowPlugin } from '../../src/plugin';
import type { TenantBudget } from '../../src/contract/spend';
import { spendCommand } from '../../src/cli/spend';
import type { CommandIO } from '../../src/cli/command-line';
import { bundleWorkflows } from './bundle';
import { devServerTest, startDevServer } from './environment';
import { waitFor } from './harness';
import { startWorkerProcess, type WorkerProcess } from './worker-process';

jest.setTimeout(900_000);

/** How many jobs start at once (the 500; fewer where a machine cannot take them: TUNEFLOW_SPEND_STARTS). */
const STARTS = Number(process.env.TUNEFLOW_SPEND_STARTS ?? 500);
/** How many of them the tenant's window fits. */
const FITS = 7;
const QUICK = {
  pollInterval: '1 second',
  maxPollInterval: '2 seconds',
  trainingTimeout: '1 minute',
  promptTimeout: '1 minute',
};

let env: TestWorkflowEnvironment | undefined;
let bundle: WorkflowBundle;
let connection: NativeConnection;
let mock: MockService;

beforeAll(async () => {
  env = await startDevServer();
  [bundle, connection, mock] = await Promise.all([
    bundleWorkflows(),
    NativeConnection.connect({ address: env.address }),
    startMockService({ trainingTime: '300ms', inferenceTime: '200ms' }),
  ]);
}, 180_000);

afterAll(async () => {
  await mock?.close();
  await connection?.close();
  await env?.teardown();
});

function worker(taskQueue: string, apiKey: string, budgets: Record<string, TenantBudget>) {
  return Worker.create({
    connection,
    taskQueue,
    workflowBundle: bundle,
    plugins: [
      new TuneflowPlugin({
        api: { apiKey, baseUrl: mock.url },
        callbacks: false,
        nexus: false,
        serviceRate: false,
        tenants: { budgets },
      }),
    ],
  });
}

function starter(taskQueue: string, tenant: string): TuneflowClient {
  return new TuneflowClient({
    client: new Client({ connection: env!.connection, namespace: env!.namespace ?? 'default' }),
    taskQueue,
    tenant,
  });
}

const paidTune = () => ({ name: 'dog', branch: 'sd15', image_urls: [`${mock.url}/images/training-1.png`] });

async function ledgerOf(tenant: string): Promise<Spend> {
  const window = spendWindow('month', Date.now());
  return env!.client.workflow.getHandle(ledgerWorkflowId(tenant, window)).query(spendQuery);
}

/** The activities a job scheduled, its training polls (as many as the timing makes) left out. */
async function activityTypes(tenant: string, key: string): Promise<string[]> {
  const history = await env!.client.workflow.getHandle(tenantWorkflowId(tenant, key)).fetchHistory();
  return (history.events ?? []).flatMap((e) => {
    const type = e.activityTaskScheduledEventAttributes?.activityType?.name;
    return type && type !== 'retrieveTune' ? [type] : [];
  });
}

/** `tuneflow spend --tenant T --json`, in process, against the dev server. */
async function spendShown(tenant: string): Promise<{ code: number; stdout: string }> {
  let stdout = '';
  const io = {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: process.stderr,
    env: { TEMPORAL_ADDRESS: env!.address, PATH: process.env.PATH },
  } as unknown as CommandIO;
  const code = await spendCommand(['--tenant', tenant, '--json'], io);
  return { code, stdout };
}

/** Updates straight to the ledger `workflowId` (starting it on `taskQueue` if need be), as anyone in the namespace can. */
function ledgerUpdates(client: Client, taskQueue: string, workflowId: string) {
  return (name: 'reserveSpend' | 'commitSpend', updateId: string, arg: object) =>
    client.workflow.executeUpdateWithStart(name, {
      updateId,
      args: [arg],
      startWorkflowOperation: new WithStartWorkflowOperation('spendLedger', {
        workflowId,
        taskQueue,
        args: [],
        workflowIdConflictPolicy: 'USE_EXISTING',
      }),
    });
}

/** Every reservation is accounted for: committed, released, or still held. */
function expectSumsAddUp(spend: Spend): void {
  expect(spend.reservedTotalMc + spend.overMc).toBe(spend.committedMc + spend.releasedMc + spend.reservedMc);
}

const failureOf = (err: unknown) =>
  err instanceof WorkflowFailedError && err.cause instanceof ApplicationFailure ? err.cause : undefined;

devServerTest(
  `${STARTS} concurrent starts against a window that fits ${FITS}: exactly ${FITS} tunes are created, the rest fail ` +
    "OverBudget naming the tenant and its window having created nothing; the ledger runs at its tenant's priority",
  async () => {
    const taskQueue = 'spend-many';
    const apiKey = 'spend-many-key';
    const ceilingMc = FITS * TUNE_TRAINING_MC;
    const w = await worker(taskQueue, apiKey, { shop: { ceilingMc, period: 'month' } });
    const shop = starter(taskQueue, 'shop');
    const keys = Array.from({ length: STARTS }, (_, i) => `many-${i}`);
    const createsBefore = mock.stats().routes['POST /tunes'] ?? 0;
    const {
      settled: outcomes,
      spend,
      shown,
    } = await w.runUntil(async () => {
      const began = performance.now();
      const handles = await Promise.all(
        keys.map((key) =>
          shop.trainThenGenerate(key, {
            tune: paidTune(),
            prompts: [],
            options: { ...QUICK, tuneCostMc: TUNE_TRAINING_MC },
          }),
        ),
      );
      const settled = await Promise.allSettled(handles.map((h) => h.result()));
      process.stderr.write(`${STARTS} starts settled in ${Math.round(performance.now() - began)} ms\n`);
      // A query is answered by a worker: asked while this one runs; and as the operator reads it.
      return { settled, spend: await ledgerOf('shop'), shown: await spendShown('shop') };
    });
    const done = outcomes.filter((o) => o.status === 'fulfilled');
    const refused = outcomes.flatMap((o) => (o.status === 'rejected' ? [failureOf(o.reason)] : []));
    expect(done).toHaveLength(FITS);
    expect(refused).toHaveLength(STARTS - FITS);
    const window = spendWindow('month', Date.now());
    for (const failure of refused) {
      expect(failure?.type).toBe('OverBudget');
      expect(failure?.message).toContain(`Tenant shop's budget for ${window}`);
      expect(failure?.details?.[0]).toMatchObject({ tenant: 'shop', window, ceilingMc, priceMc: TUNE_TRAINING_MC });
    }
    // The service made exactly what fits, and charged it.
    expect(mock.stats().routes['POST /tunes']).toBe(createsBefore + FITS);
    expect(mock.ledger(apiKey).totalMc).toBe(ceilingMc);
    expect(spend).toMatchObject({
      ceilingMc,
      committedMc: ceilingMc,
      reservedMc: 0,
      releasedMc: 0,
      reservations: FITS,
    });
    expectSumsAddUp(spend);
    expect(shown).toEqual({ code: 0, stdout: `${JSON.stringify(spend)}\n` });
    // Started by the jobs' activities, the ledger runs at its tenant's priority, as the jobs do.
    const ledger = await env!.client.workflow.getHandle(ledgerWorkflowId('shop', window)).describe();
    expect(ledger.priority).toMatchObject({ fairnessKey: 'shop', fairnessWeight: 1 });
    // A refused job reserved, and made nothing after: no create in its history.
    const refusedKey = keys.find((_, i) => outcomes[i].status === 'rejected') as string;
    expect(await activityTypes('shop', refusedKey)).toEqual(['reserveSpend']);
    const doneKey = keys.find((_, i) => outcomes[i].status === 'fulfilled') as string;
    expect(await activityTypes('shop', doneKey)).toEqual(['reserveSpend', 'createTune', 'commitSpend']);
  },
);

/** Each activity a run scheduled, with the task queue it was scheduled on. */
async function scheduledOn(workflowId: string): Promise<Array<[string, string]>> {
  const history = await env!.client.workflow.getHandle(workflowId).fetchHistory();
  return (history.events ?? []).flatMap((e) => {
    const a = e.activityTaskScheduledEventAttributes;
    return a ? [[a.activityType?.name ?? '', a.taskQueue?.name ?? ''] as [string, string]] : [];
  });
}

devServerTest(
  "only the calls that reach the service take the job's queue: the ledger's reservations and commits run on its " +
    "bookkeeping queue, which the worker polls beside its own; the ledger and its ceiling read on the jobs' queue",
  async () => {
    const taskQueue = 'spend-books';
    const books = `${taskQueue}.bookkeeping`;
    const w = await worker(taskQueue, 'spend-books-key', {
      books: { ceilingMc: 10 * TUNE_TRAINING_MC, period: 'month' },
    });
    const pollers = await w.runUntil(async () => {
      const handle = await starter(taskQueue, 'books').trainThenGenerate('booked', {
        tune: paidTune(),
        prompts: [],
        options: { ...QUICK, tuneCostMc: TUNE_TRAINING_MC },
      });
      await handle.result();
      const described = await env!.client.workflowService.describeTaskQueue({
        namespace: 'default',
        taskQueue: { name: books },
        taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
      });
      return (described.pollers ?? []).map((p) => p.identity);
    });
    expect(pollers).toContain(w.options.identity);
    const scheduled = await scheduledOn(tenantWorkflowId('books', 'booked'));
    const onBooks = scheduled.filter(([, queue]) => queue === books).map(([type]) => type);
    const onJobs = scheduled.filter(([, queue]) => queue === taskQueue).map(([type]) => type);
    expect(onBooks).toEqual(['reserveSpend', 'commitSpend']);
    expect(onJobs[0]).toBe('createTune');
    expect(new Set(onJobs)).toEqual(new Set(['createTune', 'retrieveTune']));
    expect(onBooks.length + onJobs.length).toBe(scheduled.length);
    const ledgerId = ledgerWorkflowId('books', spendWindow('month', Date.now()));
    // The ceiling read the reservations wait on runs in another pool than theirs: the jobs' queue.
    expect(await scheduledOn(ledgerId)).toEqual([['ledgerCeiling', taskQueue]]);
    const ledger = await env!.client.workflow.getHandle(ledgerId).describe();
    expect(ledger.taskQueue).toBe(taskQueue);
  },
);

devServerTest(
  "after faults the ledger's sums add up: a 504 after the create is committed once, a training that cost less than " +
    'its price releases the rest, a job cancelled while its create is in flight commits what it paid; a tenant ' +
    'without a budget makes no ledger call',
  async () => {
    const taskQueue = 'spend-faults';
    const apiKey = 'spend-faults-key';
    const ceilingMc = 10 * TUNE_TRAINING_MC;
    const w = await worker(taskQueue, apiKey, { studio: { ceilingMc, period: 'month' } });
    const studio = starter(taskQueue, 'studio');
    const priced = { ...QUICK, tuneCostMc: TUNE_TRAINING_MC };
    const { studioMc, spend } = await w.runUntil(async () => {
      // A 504 after the tune was made: the create's retry finds it, and the reservation is committed once.
      const createsBefore = mock.stats().routes['POST /tunes'] ?? 0;
      mock.setFaults({ status504Rate: 1, maxFaults: 1, faultRoutes: ['POST /tunes'], status504DelayMs: 0 });
      await (await studio.trainThenGenerate('after-504', { tune: paidTune(), prompts: [], options: priced })).result();
      mock.setFaults({});
      expect(mock.stats().routes['POST /tunes']).toBe(createsBefore + 1);
      // Priced above what the service charges: the rest of the reservation is released at the commit.
      const dear = { ...QUICK, tuneCostMc: TUNE_TRAINING_MC + 50_000 };
      await (await studio.trainThenGenerate('cost-less', { tune: paidTune(), prompts: [], options: dear })).result();
      // Cancelled while its create is in flight: the create finishes, what it cost is committed, nothing stays held.
      mock.setFaults({ answerDelayMs: 2_000, faultRoutes: ['POST /tunes'] });
      const cancelled = await studio.trainThenGenerate('cancelled', {
        tune: paidTune(),
        prompts: [{ text: 'sks dog' }],
        options: { ...priced, trainingTimeout: '3 minutes' },
      });
      while (!(await activityTypes('studio', 'cancelled')).includes('createTune'))
        await new Promise((resolve) => setTimeout(resolve, 50));
      await cancelled.cancel();
      await expect(cancelled.result()).rejects.toThrow();
      mock.setFaults({});
      const charged = mock.ledger(apiKey).totalMc;
      // A tenant without a budget: not one ledger call.
      await (
        await starter(taskQueue, 'free').trainThenGenerate('no-budget', { tune: paidTune(), prompts: [] })
      ).result();
      return { studioMc: charged, spend: await ledgerOf('studio') };
    });
    expect(await activityTypes('studio', 'after-504')).toEqual(['reserveSpend', 'createTune', 'commitSpend']);
    // The create was retried after the 504 (its second attempt found the tune): one reservation, one commit.
    const after504 = await env!.client.workflow.getHandle(tenantWorkflowId('studio', 'after-504')).fetchHistory();
    const attempts = (after504.events ?? []).map((e) => e.activityTaskStartedEventAttributes?.attempt ?? 0);
    expect(Math.max(...attempts)).toBe(2);
    expect(await activityTypes('studio', 'cancelled')).toEqual(['reserveSpend', 'createTune', 'commitSpend']);
    expect(await activityTypes('free', 'no-budget')).toEqual(['createTune']);
    expect(spend).toMatchObject({ committedMc: studioMc, reservedMc: 0, releasedMc: 50_000, reservations: 3 });
    expect(studioMc).toBe(3 * TUNE_TRAINING_MC);
    expectSumsAddUp(spend);
  },
);

devServerTest(
  'a tuneflow worker SIGKILLed while its jobs wait on their creates: a second one finishes every job once, each tune ' +
    'made once, and the ledger commits what the service charged, holds nothing, and counts each reservation once',
  async () => {
    const taskQueue = 'spend-killed';
    const apiKey = 'spend-killed-key';
    const JOBS = 3;
    const ceilingMc = 10 * TUNE_TRAINING_MC;
    // Priced above what the service charges: the retried create, which finds the tune, must still say what it cost.
    const priceMc = TUNE_TRAINING_MC + 50_000;
    const settings = {
      temporalAddress: env!.address,
      apiKey,
      apiUrl: mock.url,
      taskQueue,
      env: { TUNEFLOW_TENANT_BUDGETS: `crew=${ceilingMc}/month` },
    };
    const crew = starter(taskQueue, 'crew');
    const keys = Array.from({ length: JOBS }, (_, i) => `killed-${i}`);
    const ids = keys.map((key) => tenantWorkflowId('crew', key));
    const tunesOf = (id: string) => mock.journal().tunes.filter((t) => t.title.startsWith(`${id}#`));
    const createsBefore = mock.stats().routes['POST /tunes'] ?? 0;
    const chargedBefore = mock.ledger(apiKey).totalMc;
    const workers: WorkerProcess[] = [];
    try {
      workers.push(await startWorkerProcess(settings));
      // Every create is made at once and answered a minute late: the worker dies between reserve and commit.
      mock.setFaults({ answerDelayMs: 60_000, faultRoutes: ['POST /tunes'] });
      const handles = await Promise.all(
        keys.map((key) =>
          crew.trainThenGenerate(key, {
            tune: paidTune(),
            prompts: [],
            options: { ...QUICK, maxPollInterval: '5 seconds', trainingTimeout: '4 minutes', tuneCostMc: priceMc },
          }),
        ),
      );
      await waitFor(
        async () => ids.every((id) => tunesOf(id).length === 1),
        () => `every job's tune to be made: ${JSON.stringify(mock.journal().tunes.map((t) => t.title))}`,
        300_000,
      );
      for (const key of keys) expect(await activityTypes('crew', key)).toEqual(['reserveSpend', 'createTune']);
      workers[0].child.kill('SIGKILL');
      expect(await workers[0].exited).toBeNull(); // killed, not drained
      mock.setFaults({});
      workers.push(await startWorkerProcess(settings));
      const settled = await Promise.allSettled(handles.map((h) => h.result()));
      expect(settled.map((s) => s.status)).toEqual(ids.map(() => 'fulfilled'));
      // Asked while the second worker runs, which answers the query.
      const spend = await ledgerOf('crew');
      const shown = await spendShown('crew');
      const charged = mock.ledger(apiKey).totalMc - chargedBefore;
      process.stderr.write(`after the kill: charged ${charged} mc, ledger ${JSON.stringify(spend)}\n`);
      // Each tune made once (a retry found it by its title, no second POST), each charged once.
      for (const id of ids) expect(tunesOf(id)).toHaveLength(1);
      expect(mock.stats().routes['POST /tunes']).toBe(createsBefore + JOBS);
      expect(charged).toBe(JOBS * TUNE_TRAINING_MC);
      expect(spend).toMatchObject({
        ceilingMc,
        reservedMc: 0,
        committedMc: charged,
        releasedMc: JOBS * (priceMc - TUNE_TRAINING_MC),
        reservedTotalMc: JOBS * priceMc,
        overMc: 0,
        openReservations: 0,
        reservations: JOBS,
      });
      expectSumsAddUp(spend);
      expect(shown).toEqual({ code: 0, stdout: `${JSON.stringify(spend)}\n` });
      for (const id of ids) {
        const handle = env!.client.workflow.getHandle(id);
        expect((await handle.describe()).status.name).toBe('COMPLETED');
        const events = (await handle.fetchHistory()).events ?? [];
        // One run, its tasks completed by both workers; one reservation, one create, one commit.
        expect(events.filter((e) => e.workflowExecutionContinuedAsNewEventAttributes)).toEqual([]);
        const identities = new Set(events.flatMap((e) => e.workflowTaskCompletedEventAttributes?.identity ?? []));
        expect(identities.size).toBe(2);
        const scheduled = new Map(
          events.flatMap((e) => {
            const type = e.activityTaskScheduledEventAttributes?.activityType?.name;
            return type && type !== 'retrieveTune' ? [[String(e.eventId), type] as const] : [];
          }),
        );
        expect([...scheduled.values()]).toEqual(['reserveSpend', 'createTune', 'commitSpend']);
        const attempts = Object.fromEntries(
          events.flatMap((e) => {
            const started = e.activityTaskStartedEventAttributes;
            const type = started && scheduled.get(String(started.scheduledEventId));
            return type ? [[type, started.attempt]] : [];
          }),
        );
        // The create in flight at the kill ran again on the second worker; what came before and after, once.
        expect(attempts).toEqual({ reserveSpend: 1, createTune: expect.any(Number), commitSpend: 1 });
        expect(attempts.createTune).toBeGreaterThan(1);
      }
      workers[1].child.kill('SIGTERM');
      expect(await workers[1].exited).toBe(0);
    } finally {
      mock.setFaults({});
      for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
    }
  },
);

devServerTest(
  'a create the service refuses (422, never retried): the job fails Validation and its reservation is released whole',
  async () => {
    const taskQueue = 'spend-refused';
    const apiKey = 'spend-refused-key';
    const priceMc = TUNE_TRAINING_MC;
    const w = await worker(taskQueue, apiKey, { atelier: { ceilingMc: 10 * priceMc, period: 'month' } });
    const atelier = starter(taskQueue, 'atelier');
    const options = { ...QUICK, tuneCostMc: priceMc };
    const { before, after, outcome, createsBefore } = await w.runUntil(async () => {
      await (await atelier.trainThenGenerate('paid', { tune: paidTune(), prompts: [], options })).result();
      const spendBefore = await ledgerOf('atelier');
      const creates = mock.stats().routes['POST /tunes'] ?? 0;
      // A base tune the account does not have: the service answers 422.
      const refused = await atelier.trainThenGenerate('refused', {
        tune: { ...paidTune(), base_tune_id: 999_999 },
        prompts: [],
        options,
      });
      const end = await refused.result().then(
        () => undefined,
        (err: unknown) => err,
      );
      return { before: spendBefore, after: await ledgerOf('atelier'), outcome: end, createsBefore: creates };
    });
    process.stderr.write(`before the 422: ${JSON.stringify(before)}; after: ${JSON.stringify(after)}\n`);
    // The service's refusal, as the create's activity failed with it.
    const cause = outcome instanceof WorkflowFailedError ? outcome.cause : undefined;
    const failure = cause instanceof ActivityFailure ? cause.cause : cause;
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect((failure as ApplicationFailure).type).toBe('Validation');
    expect(((failure as ApplicationFailure).details?.[0] as { status?: number })?.status).toBe(422);
    // One create, not retried, nothing charged for it.
    expect(mock.stats().routes['POST /tunes']).toBe(createsBefore + 1);
    expect(mock.ledger(apiKey).totalMc).toBe(priceMc);
    expect(before).toMatchObject({ committedMc: priceMc, releasedMc: 0, reservedMc: 0, reservations: 1 });
    expect(after).toMatchObject({
      committedMc: before.committedMc,
      releasedMc: before.releasedMc + priceMc,
      reservedMc: 0,
      openReservations: 0,
      reservedTotalMc: before.reservedTotalMc + priceMc,
      reservations: before.reservations + 1,
    });
    expectSumsAddUp(before);
    expectSumsAddUp(after);
    expect(await activityTypes('atelier', 'refused')).toEqual(['reserveSpend', 'createTune', 'releaseSpend']);
  },
);

devServerTest(
  'the ledger continues as new every 500 updates carrying its sums: 1,000 reservations and their commits, straight to ' +
    'the ledger 10 at a time (the server keeps at most 10 updates in flight), and each run stays small',
  async () => {
    const taskQueue = 'spend-ledger';
    const w = await worker(taskQueue, 'spend-ledger-key', { bulk: { ceilingMc: 1_000_000, period: 'month' } });
    const client = new Client({ connection: env!.connection, namespace: env!.namespace ?? 'default' });
    // This month's: a past window's ledger, a day after it closed, ends whenever nothing is held.
    const workflowId = ledgerWorkflowId('bulk', spendWindow('month', Date.now()));
    const update = ledgerUpdates(client, taskQueue, workflowId);
    const RESERVATIONS = 1_000;
    const spend = await w.runUntil(async () => {
      for (let i = 0; i < RESERVATIONS; i += 10)
        await Promise.all(
          Array.from({ length: 10 }, async (_, j) => {
            const id = `r${i + j}`;
            await update('reserveSpend', `reserve:${id}`, { id, priceMc: 10, ceilingMc: 1_000_000 });
            await update('commitSpend', `commit:${id}`, { id, costMc: 9 });
          }),
        );
      return client.workflow.getHandle(workflowId).query(spendQuery);
    });
    expect(spend).toMatchObject({
      committedMc: 9 * RESERVATIONS,
      releasedMc: RESERVATIONS,
      reservedMc: 0,
      reservations: RESERVATIONS,
    });
    expectSumsAddUp(spend);
    // Every run's history: the first ones closed by continue-as-new after 500 updates each.
    const runs: { events: number; bytes: number }[] = [];
    for await (const run of client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) {
      const history = await client.workflow.getHandle(workflowId, run.runId).fetchHistory();
      runs.push({ events: history.events?.length ?? 0, bytes: Buffer.byteLength(JSON.stringify(history)) });
    }
    process.stderr.write(`ledger runs for ${RESERVATIONS} reservations and commits: ${JSON.stringify(runs)}\n`);
    expect(runs.length).toBeGreaterThanOrEqual(4);
    for (const run of runs) expect(run.events).toBeLessThan(2_000);
  },
);

devServerTest(
  "anyone in the namespace who reaches a ledger gains nothing: the operator's ceiling holds against a reservation " +
    'under a higher one, a raw, retried or scheduled start with made-up sums fails, a negative commit is refused, and a ' +
    'cancel changes nothing',
  async () => {
    const taskQueue = 'spend-forged';
    const ceilingMc = 1_000;
    const w = await worker(taskQueue, 'spend-forged-key', { mallory: { ceilingMc, period: 'month' } });
    const client = new Client({ connection: env!.connection, namespace: env!.namespace ?? 'default' });
    const window = spendWindow('month', Date.now());
    const workflowId = ledgerWorkflowId('mallory', window);
    const update = ledgerUpdates(client, taskQueue, workflowId);
    const outcome = await w.runUntil(async () => {
      // Under a ceiling of its own making, a billion: only the operator's 1,000 holds, read when the ledger starts.
      const first = await update('reserveSpend', 'reserve:a', { id: 'a', priceMc: 600, ceilingMc: 1e9 });
      const second = await update('reserveSpend', 'reserve:b', { id: 'b', priceMc: 600, ceilingMc: 1e9 }).then(
        () => undefined,
        (err: unknown) => err,
      );
      // Under a lower one, it is refused: an update's ceiling only ever lowers the operator's.
      const lower = await update('reserveSpend', 'reserve:c', { id: 'c', priceMc: 300, ceilingMc: 700 }).then(
        () => undefined,
        (err: unknown) => err,
      );
      // A commit of less than nothing, which would free room the tenant never had: refused before the handler.
      const negative = await update('commitSpend', 'commit:a', { id: 'a', costMc: -1_000_000 }).then(
        () => undefined,
        (err: unknown) => err,
      );
      // The ceiling came from the operator, read once at the start: the reservation under a higher one came within the
      // minute after, so the ledger refused it by its validator, as the lower one and the negative commit: no history.
      const early = (await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
      const reads = early.flatMap((e) => e.activityTaskScheduledEventAttributes?.activityType?.name ?? []);
      const accepted = early.flatMap(
        (e) => e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.meta?.updateId ?? [],
      );
      // A raw start of another window's ledger carrying sums of its own: fails, nothing believed.
      const forgedId = ledgerWorkflowId('mallory', '2026-01');
      const forged = await client.workflow.start('spendLedger', {
        taskQueue,
        workflowId: forgedId,
        args: [{ ...SpendLedger.empty('mallory', '2026-01').state, committedMc: -1e9 }],
      });
      const forgedEnd = await forged.result().then(
        () => undefined,
        (err: unknown) => err,
      );
      // Retried, the same start is handed its sums again with continuedFromExecutionRunId set: every attempt fails.
      const retriedId = ledgerWorkflowId('mallory', '2026-02');
      const retried = await client.workflow.start('spendLedger', {
        taskQueue,
        workflowId: retriedId,
        args: [{ ...SpendLedger.empty('mallory', '2026-02').state, committedMc: -1e9 }],
        retry: { maximumAttempts: 2, initialInterval: '1 second' },
        // A ledger that believed its sums would run on to its window's end: cut short, it fails by the timeout instead.
        workflowRunTimeout: '1 minute',
      });
      const retriedEnd = await retried.result().then(
        () => undefined,
        (err: unknown) => err,
      );
      const retriedRuns: string[] = [];
      for await (const run of client.workflow.list({ query: `WorkflowId = '${retriedId}'` }))
        retriedRuns.push(run.status.name);
      // On a schedule, a ledger does not run at all (each cron run would be handed its first run's input); the first
      // run starts at the next minute.
      const scheduled = await client.workflow.start('spendLedger', {
        taskQueue,
        workflowId: ledgerWorkflowId('mallory', '2026-03'),
        args: [],
        cronSchedule: '* * * * *',
      });
      const scheduledRun = await client.workflow.getHandle(scheduled.workflowId, scheduled.firstExecutionRunId);
      let scheduledEvents = (await scheduledRun.fetchHistory()).events ?? [];
      // Its first run starts within a minute; a ledger that ran on it would never fail.
      const giveUpAt = Date.now() + 150_000;
      while (!scheduledEvents.some((e) => e.workflowExecutionFailedEventAttributes) && Date.now() < giveUpAt) {
        await new Promise((resolve) => setTimeout(resolve, 200));
        scheduledEvents = (await scheduledRun.fetchHistory()).events ?? [];
      }
      await scheduled.terminate('the test is done with it');
      // Cancelled, the ledger goes on with its sums: a cancelled one would leave the tenant's next job an empty one.
      await client.workflow.getHandle(workflowId).cancel();
      const afterCancel = await update('reserveSpend', 'reserve:d', { id: 'd', priceMc: 100, ceilingMc: 1e9 });
      return {
        reads,
        accepted,
        afterCancel,
        retriedEnd,
        retriedRuns,
        scheduledFailure: scheduledEvents.find((e) => e.workflowExecutionFailedEventAttributes)
          ?.workflowExecutionFailedEventAttributes?.failure,
        first,
        second,
        lower,
        negative,
        forgedEnd,
        spend: await client.workflow.getHandle(workflowId).query(spendQuery),
      };
    });
    expect(outcome.first).toMatchObject({ ceilingMc, reservedMc: 600, reservations: 1 });
    for (const refused of [outcome.second, outcome.lower]) {
      expect(refused).toBeInstanceOf(WorkflowUpdateFailedError);
      expect((refused as WorkflowUpdateFailedError).cause).toMatchObject({ type: 'OverBudget' });
    }
    expect(((outcome.second as WorkflowUpdateFailedError).cause as ApplicationFailure).details?.[0]).toMatchObject({
      ceilingMc,
      reservedMc: 600,
      priceMc: 600,
    });
    expect(outcome.negative).toBeInstanceOf(WorkflowUpdateFailedError);
    expect(String((outcome.negative as WorkflowUpdateFailedError).cause?.message)).toMatch(/0 or more/);
    expect(failureOf(outcome.forgedEnd)?.type).toBe('InvalidInput');
    expect(failureOf(outcome.retriedEnd)?.type).toBe('InvalidInput');
    expect(outcome.retriedRuns).toEqual(['FAILED']);
    expect(outcome.scheduledFailure?.applicationFailureInfo?.type).toBe('InvalidInput');
    expect(outcome.afterCancel).toMatchObject({ ceilingMc, reservedMc: 700, reservations: 2 });
    expect(outcome.spend).toMatchObject({ ceilingMc, reservedMc: 700, committedMc: 0, reservations: 2 });
    expect(outcome.reads).toEqual(['ledgerCeiling']);
    expect(outcome.accepted).toEqual(['reserve:a']);
    const history = await client.workflow.getHandle(workflowId).fetchHistory();
    expect((history.events ?? []).some((e) => e.workflowExecutionCancelRequestedEventAttributes)).toBe(true);
  },
);
