/**
 * The soak's tenancy judge (bench/soak/tenancy.ts) under test: a good run of two tenants passes with every object,
 * upload and charge joined to its tenant, and each defect seeded into the journal, the ledger or a run's history is
 * reported by the check that must catch it (a judge that always answered "fine" would fail here).
 */
import { tenantWorkflowId, tuneTitle } from '../../src/contract/tenants';
import type { Charge } from '../../src/mock-service';
import { judgeTenancy, readTouches, type RunTouches, type TenancyRun } from '../../bench/soak/tenancy';
import { HistoryFixture, JournalFixture } from './soak-fixtures';

const FLUX = 1504944;
const GALLERY = 690204;
const context = {
  grants: { '*': [FLUX] },
  fixtures: [
    { id: FLUX, title: 'Flux.1 dev' },
    { id: GALLERY, title: 'Gallery portrait' },
  ],
};

const RUN_IDS = [1, 2, 3, 4].map((n) => `0195c1e2-6f0a-7c3e-9d7e-2b1f0c9a8d1${n}`);
const ours = 'soak-t-0';
const theirs = tenantWorkflowId('studio', 'soak-t-1');
const theirGenerate = tenantWorkflowId('studio', 'soak-t-6');
const theirPack = tenantWorkflowId('studio', 'soak-t-8');
const titles = {
  ours: tuneTitle(ours, RUN_IDS[0]),
  theirs: tuneTitle(theirs, RUN_IDS[1]),
  theirPack: tuneTitle(theirPack, RUN_IDS[3]),
};

const touches = (over: Partial<RunTouches> = {}): RunTouches => ({
  held: { tuneIds: [], promptIds: [] },
  requests: [],
  ...over,
});

/** Two tenants' runs, each holding only its own: the default's tune 100, the studio's 300, 303 on the base tune, pack 400. */
function goodRuns(): TenancyRun[] {
  return [
    {
      workflowId: ours,
      touches: touches({
        held: { tuneIds: [100], promptIds: [101, 102] },
        requests: [
          { activity: 'createTune', tuneIds: [], promptIds: [], title: titles.ours, ended: 'completed' },
          { activity: 'createPrompt', tuneIds: [100], promptIds: [], ended: 'completed' },
        ],
      }),
    },
    {
      workflowId: theirs,
      touches: touches({
        held: { tuneIds: [300], promptIds: [301] },
        requests: [{ activity: 'createTune', tuneIds: [], promptIds: [], title: titles.theirs, ended: 'completed' }],
      }),
    },
    {
      workflowId: theirGenerate,
      touches: touches({
        held: { tuneIds: [FLUX], promptIds: [303] },
        requests: [{ activity: 'retrieveTune', tuneIds: [FLUX], promptIds: [], owned: 'tuneId', ended: 'completed' }],
        maxCostMc: 10_000,
      }),
    },
    {
      workflowId: theirPack,
      touches: touches({
        held: { tuneIds: [400], promptIds: [401, 402] },
        requests: [
          { activity: 'createPackTune', tuneIds: [], promptIds: [], title: titles.theirPack, ended: 'completed' },
        ],
      }),
    },
  ];
}

function goodJournal(): JournalFixture {
  return new JournalFixture()
    .tune(100, titles.ours)
    .prompt(101, 100, `sks dog [${ours} #0]`)
    .prompt(102, 100, `sks dog [${ours} #1]`)
    .upload('http://mock/files/1.png', { tuneId: 100 })
    .tune(300, titles.theirs)
    .prompt(301, 300, `sks dog [${theirs} #0]`)
    .upload('http://mock/files/2.png', { promptId: 301 })
    .prompt(303, FLUX, `sks dog [${theirGenerate} #0]`)
    .tune(400, titles.theirPack)
    .prompt(401, 400, 'a pet pack prompt', undefined, titles.theirPack)
    .prompt(402, 400, 'a pet pack prompt', undefined, titles.theirPack);
}

const goodCharges = (): Charge[] => [
  { object: 'tune', id: 100, mc: 0 },
  { object: 'prompt', id: 101, mc: 0 },
  { object: 'prompt', id: 102, mc: 0 },
  { object: 'tune', id: 300, mc: 150_000 },
  { object: 'prompt', id: 301, mc: 2_000 },
  { object: 'prompt', id: 303, mc: 4_000 },
  { object: 'tune', id: 400, mc: 50_000 },
  { object: 'prompt', id: 401, mc: 0 },
  { object: 'prompt', id: 402, mc: 0 },
];

function judge(
  runs: TenancyRun[] = goodRuns(),
  journal: JournalFixture = goodJournal(),
  charges: Charge[] = goodCharges(),
) {
  return judgeTenancy(runs, journal.journal(), charges, context);
}

/** The good runs with one run's touches changed. */
function withRun(workflowId: string, change: (t: RunTouches) => RunTouches): TenancyRun[] {
  return goodRuns().map((run) => (run.workflowId === workflowId ? { workflowId, touches: change(run.touches) } : run));
}

test('a good run of two tenants: every object, upload and charge joined to its tenant, nothing across', () => {
  expect(judge()).toEqual({
    tenants: {
      default: { runs: 1, tunes: 1, prompts: 2, uploads: 1, chargedMc: 0, deleted: 0 },
      studio: { runs: 3, tunes: 2, prompts: 4, uploads: 1, chargedMc: 206_000, deleted: 0 },
    },
    read: 0,
    createdOn: 0,
    deleted: 0,
    actedOn: 0,
    overMaxCost: 0,
    unattributed: 0,
    violations: [],
  });
});

test("read: another tenant's tune or prompt in what reached a run (an answer, its result, its failure)", () => {
  const tune = judge(withRun(ours, (t) => ({ ...t, held: { tuneIds: [100, 300], promptIds: [101] } })));
  expect(tune).toMatchObject({ read: 1, violations: [`${ours} (default) holds tune 300, another tenant's`] });
  // A prompt another tenant made on the shared base tune: the tune is everyone's, the prompt is not.
  const prompt = judge(withRun(ours, (t) => ({ ...t, held: { tuneIds: [FLUX], promptIds: [303] } })));
  expect(prompt).toMatchObject({ read: 1, violations: [`${ours} (default) holds prompt 303, studio's`] });
  // A gallery tune the operator gave the studio no part of.
  const gallery = judge(withRun(theirs, (t) => ({ ...t, held: { tuneIds: [300, GALLERY], promptIds: [] } })));
  expect(gallery.read).toBe(1);
});

test("created on: a prompt on another tenant's tune, pack prompts added to it, a create titled as another's run", () => {
  const prompt = judge(undefined, goodJournal().prompt(104, 300, `sks dog [${ours} #2]`));
  expect(prompt.createdOn).toBe(1);
  expect(prompt.violations).toEqual([`prompt 104: made by ${ours} (default) on tune 300, another tenant's`]);

  // Pack prompts on the default's tune by the studio's packTune (`tune_ids`): told by the title its create carried.
  const pack = judge(undefined, goodJournal().prompt(403, 100, 'a pet pack prompt', undefined, titles.theirPack));
  expect(pack).toMatchObject({ createdOn: 1, violations: [expect.stringMatching(/^prompt 403: made by .*soak-t-8/)] });

  const titled = judge(
    withRun(ours, (t) => ({
      ...t,
      requests: [{ activity: 'createTune', tuneIds: [], promptIds: [], title: titles.theirs, ended: 'failed' }],
    })),
  );
  expect(titled).toMatchObject({ createdOn: 1, violations: [expect.stringContaining('a title of another run')] });

  // A tune titled with a tenant's workflow ID alone (a caller's title, taken): no tenant's, whoever made it.
  const bare = judge(undefined, goodJournal().tune(310, theirs));
  expect(bare.createdOn).toBe(1);
  expect(bare.violations).toEqual([expect.stringMatching(/^tune 310: made by .*soak-t-1 \(studio\), titled as/)]);
});

test("deleted: a delete asked of another tenant's object, and an object deleted that no run of its tenant asked to", () => {
  const asked = withRun(ours, (t) => ({
    ...t,
    requests: [...t.requests, { activity: 'deleteTune', tuneIds: [300], promptIds: [], ended: 'completed' }],
  }));
  const journal = goodJournal();
  journal.tunes.find((t) => t.id === 300)!.deletedAt = 5_000;
  journal.prompts.find((p) => p.id === 301)!.deletedAt = 5_000;
  const verdict = judge(asked, journal);
  // The request itself, and the tune and its prompt gone with no studio run asking.
  expect(verdict.deleted).toBe(3);
  expect(verdict.violations).toEqual([
    `${ours} (default): deleteTune of tune 300, another tenant's`,
    'tune 300 was deleted, and no run of its tenant asked to',
    'prompt 301 was deleted, and no run of its tenant asked to',
  ]);
  expect(verdict.tenants.studio.deleted).toBe(2);

  // The studio's own cleanup: its tune, and the prompt that went with it.
  const own = withRun(theirs, (t) => ({
    ...t,
    requests: [...t.requests, { activity: 'deleteTune', tuneIds: [300], promptIds: [], ended: 'completed' }],
  }));
  expect(judge(own, journal)).toMatchObject({ deleted: 0, violations: [] });
});

test("acted on: a request naming another tenant's tune that its activity did not refuse; a refused look is none", () => {
  const listed = withRun(ours, (t) => ({
    ...t,
    requests: [...t.requests, { activity: 'listPrompts', tuneIds: [300], promptIds: [], ended: 'completed' }],
  }));
  expect(judge(listed)).toMatchObject({
    actedOn: 1,
    violations: [`${ours} (default): listPrompts on tune 300, another tenant's, not refused`],
  });
  // The ownership check answered with the tune: not refused, whatever the field.
  const looked = withRun(ours, (t) => ({
    ...t,
    requests: [{ activity: 'retrieveTune', tuneIds: [300], promptIds: [], owned: 'tuneId', ended: 'completed' }],
  }));
  expect(judge(looked).actedOn).toBe(1);
  // Refused by the activity (InvalidInput naming the field): the run never had the tune.
  const refused = withRun(ours, (t) => ({
    ...t,
    requests: [{ activity: 'listPrompts', tuneIds: [300], promptIds: [], owned: 'tune.tune_ids[0]', ended: 'failed' }],
  }));
  expect(judge(refused)).toMatchObject({ actedOn: 0, violations: [] });
  // Another tenant's prompt, by id: even a request that failed named it.
  const prompt = withRun(ours, (t) => ({
    ...t,
    requests: [{ activity: 'retrievePrompt', tuneIds: [FLUX], promptIds: [303], ended: 'failed' }],
  }));
  expect(judge(prompt).actedOn).toBe(1);
});

test('over maxCostMc: the ledger joined to the run that made each object, against its maxCostMc', () => {
  const charges = [...goodCharges(), { object: 'prompt' as const, id: 304, mc: 8_000 }];
  const journal = goodJournal().prompt(304, FLUX, `sks dog [${theirGenerate} #1]`);
  const verdict = judge(undefined, journal, charges);
  expect(verdict).toMatchObject({
    overMaxCost: 1,
    violations: [`${theirGenerate}: charged 12000 mc, over its maxCostMc 10000`],
  });
  expect(verdict.tenants.studio.chargedMc).toBe(214_000);
  // At the limit is within it.
  const atLimit = [...goodCharges(), { object: 'prompt' as const, id: 304, mc: 6_000 }];
  expect(judge(undefined, journal, atLimit).overMaxCost).toBe(0);
});

test('unattributed: a tune, prompt, upload or charge the journal joins to no run the soak started', () => {
  const journal = goodJournal()
    .tune(500, tuneTitle('someone-else', RUN_IDS[0]))
    .prompt(501, 100, 'a prompt with no mark')
    .upload('http://mock/files/9.png', {});
  const charges = [...goodCharges(), { object: 'prompt' as const, id: 999, mc: 2_000 }];
  const verdict = judge(undefined, journal, charges);
  expect(verdict.unattributed).toBe(4);
  expect(verdict.violations).toEqual([
    `tune 500 (${JSON.stringify(tuneTitle('someone-else', RUN_IDS[0]))}) was made by no run the soak started`,
    'prompt 501 on tune 100 was made by no run the soak started',
    'upload http://mock/files/9.png went into no object a run the soak started made',
    'a charge of 2000 mc for prompt 999 joins no run',
  ]);
});

test('a run under an ID of no tenant (a claim squatted as a job) holds nothing of anyone', () => {
  const runs = [
    ...goodRuns(),
    { workflowId: 'tuneflow:claim:soak-t-0', touches: touches({ held: { tuneIds: [100], promptIds: [] } }) },
  ];
  expect(judge(runs)).toMatchObject({
    read: 1,
    violations: ["tuneflow:claim:soak-t-0 (no tenant) holds tune 100, another tenant's"],
  });
});

test('readTouches: what reached the run, what it asked for and how each request ended, its maxCostMc', () => {
  const history = new HistoryFixture({ tuneId: FLUX, prompts: [], options: { maxCostMc: 20_000 } })
    .task(10)
    .activity('retrieveTune', 20, { tuneId: FLUX, brief: true, owned: 'tuneId' }, { id: FLUX, title: 'Flux.1 dev' })
    .failedActivity('listPrompts', 30, { tuneId: 300, limit: 1, owned: 'tune.tune_ids[0]' }, 'InvalidInput')
    .activity('createPrompt', 40, { tuneId: FLUX, key: 'k', prompt: { text: 'x' } }, { id: 303, tune_id: FLUX })
    .task(50)
    .failed({ type: 'PriceUnknown', message: 'price unknown', details: { prompts: [{ id: 304, tune_id: FLUX }] } }, 60)
    .history();
  const read = readTouches(history.events ?? []);
  expect(read.maxCostMc).toBe(20_000);
  expect(read.held).toEqual({ tuneIds: [FLUX], promptIds: [303, 304] });
  expect(read.requests).toEqual([
    { activity: 'retrieveTune', tuneIds: [FLUX], promptIds: [], owned: 'tuneId', ended: 'completed' },
    { activity: 'listPrompts', tuneIds: [300], promptIds: [], owned: 'tune.tune_ids[0]', ended: 'failed' },
    { activity: 'createPrompt', tuneIds: [FLUX], promptIds: [], ended: 'completed' },
  ]);
  // A create's title and a pack's tune_ids are named too.
  const pack = new HistoryFixture()
    .task(10)
    .activity('createPackTune', 20, { packId: 261, tune: { tune_ids: [100], title: titles.theirPack } }, { id: 100 })
    .history();
  expect(readTouches(pack.events ?? []).requests).toEqual([
    { activity: 'createPackTune', tuneIds: [100], promptIds: [], title: titles.theirPack, ended: 'completed' },
  ]);
});
