/**
 * The hostile starters' judge (bench/soak/hostile.ts, judgeAttack): each attack's run must end as its kind must, a
 * refused one make nothing, a squatted job fail fast, and nothing be duplicated or lost. Each rule is seeded with its
 * defect here, and the journal's joins for two tenants (a mark under a tenant's ID, pack prompts by their create's
 * title) are checked.
 */
import { judgeAttack, judgeAttacks, SECOND_TENANT, type AttackKind, type AttackRun } from '../../bench/soak/hostile';
import { markOf, planJobs, promptMark, tenantOf } from '../../bench/soak/jobs';
import { callbackTimes, JournalIndex, readHistory } from '../../bench/soak/judge';
import { DEFAULT_TENANT, MAX_TENANT_BYTES, tenantWorkflowId, tuneTitle } from '../../src/contract/tenants';
import { HistoryFixture, JournalFixture, T0 } from './soak-fixtures';

const RUN_ID = '0195c1e2-6f0a-7c3e-9d7e-2b1f0c9a8d11';

function attack(kind: AttackKind, jobKind: AttackRun['kind'] = 'trainThenGenerate', prompts = 1): AttackRun {
  return {
    workflowId: tenantWorkflowId(SECOND_TENANT, `hostile-t-${kind}-0`),
    kind: jobKind,
    prompts,
    attack: kind,
    startedAt: T0,
  };
}

const refusedAt = (at: number, type = 'InvalidInput') =>
  new HistoryFixture().task(10).failed({ type, message: 'refused' }, at).history();

/** Judges `run` with `history` against `journal`. */
function judged(run: AttackRun, history: ReturnType<typeof refusedAt>, journal = new JournalFixture()) {
  const outcome = readHistory(run, history, 'key', callbackTimes(journal.journal()));
  return judgeAttack(outcome, new JournalIndex(journal.journal()).truth(run));
}

test('the second tenant takes the longest name a tenant may have; the plan takes turns between the tenants', () => {
  expect(new TextEncoder().encode(SECOND_TENANT).length).toBe(MAX_TENANT_BYTES);
  const jobs = planJobs('r', 4, [DEFAULT_TENANT, SECOND_TENANT]);
  expect(jobs.map((j) => tenantOf(j))).toEqual([
    { tenant: DEFAULT_TENANT, key: 'soak-r-0' },
    { tenant: SECOND_TENANT, key: 'soak-r-1' },
    { tenant: DEFAULT_TENANT, key: 'soak-r-2' },
    { tenant: SECOND_TENANT, key: 'soak-r-3' },
  ]);
  expect(jobs[1].workflowId).toBe(`tuneflow:nexus:${SECOND_TENANT}:soak-r-1`);
  // A mark names the whole workflow ID, the tenant's prefix and its colons included.
  expect(markOf(`sks dog ${promptMark(jobs[1].workflowId, 3)}`)).toEqual({ workflowId: jobs[1].workflowId, index: 3 });
});

test('a refused attack that failed as it must, having made nothing, is as expected', () => {
  for (const kind of ['title', 'tuneIds', 'unmemoed', 'path', 'smuggled'] as const)
    expect(judged(attack(kind), refusedAt(20))).toEqual({ asExpected: true, duplicates: 0, lost: 0, violations: [] });
  // A deep attribute may end with any type (InvalidInput, UnconvertiblePayload), never untyped or open.
  expect(judged(attack('deep', 'packTune', 0), refusedAt(20, 'UnconvertiblePayload')).asExpected).toBe(true);
  const untyped = new HistoryFixture().task(10).failed({ message: 'Unable to convert' }, 20).history();
  expect(judged(attack('deep', 'packTune', 0), untyped).violations).toEqual([
    expect.stringMatching(/^deep attack .*: failed untyped, which no injected fault explains/),
  ]);
});

test('a refused attack that completed, or failed otherwise, is reported', () => {
  const run = attack('tuneIds', 'generate');
  const completed = new HistoryFixture().task(10).completed({ prompts: [] }, 20).history();
  // judgeJob's own finding (what a completed generate lacks) beside the attack's.
  expect(judged(run, completed).violations).toEqual([
    expect.stringMatching(/^tuneIds attack .*: 1 requested object\(s\) missing on the service/),
    expect.stringMatching(/^tuneIds attack .*: result has 0 prompts, asked 1/),
    expect.stringMatching(/^tuneIds attack .*: completed, though it must fail InvalidInput$/),
  ]);
  expect(judged(run, refusedAt(20, 'OverBudget')).violations).toEqual([
    expect.stringMatching(/^tuneIds attack .*: failed OverBudget, which no injected fault explains/),
  ]);
});

test('a refused attack that made something is reported, and what it made is lost', () => {
  const run = attack('title');
  const journal = new JournalFixture().tune(700, tuneTitle(run.workflowId, RUN_ID));
  const verdict = judged(run, refusedAt(2_000), journal);
  expect(verdict).toMatchObject({ asExpected: false, lost: 1 });
  expect(verdict.violations).toContainEqual(expect.stringMatching(/: made 1 object\(s\), though refused$/));
  // Pack prompts put on another's tune by a refused packTune (`tune_ids`): its create's title says they are its own.
  const pack = attack('tuneIds', 'packTune');
  const added = new JournalFixture()
    .tune(100, 'soak-t-0')
    .prompt(701, 100, 'a pet pack prompt', T0 + 1_500, tuneTitle(pack.workflowId, RUN_ID));
  expect(judged(pack, refusedAt(2_000), added).violations).toContainEqual(
    expect.stringMatching(/: made 1 object\(s\), though refused$/),
  );
});

test('a squatted job must fail ClaimHeld, fast; one still open is stuck', () => {
  const run = attack('squat');
  expect(judged(run, refusedAt(2_000, 'ClaimHeld')).asExpected).toBe(true);
  expect(judged(run, refusedAt(61_000, 'ClaimHeld')).violations).toEqual([
    expect.stringMatching(/^squat attack .*: took 61000 ms to end, more than 60000$/),
  ]);
  const open = new HistoryFixture().task(10).history();
  const verdict = judgeAttacks([readHistory(run, open, 'key', new Map())], () => ({ tunes: [], prompts: [] }));
  expect(verdict).toMatchObject({ stuck: 1, attacks: { squat: { made: 1, asExpected: 0, endings: { open: 1 } } } });
  expect(verdict.violations).toEqual([expect.stringMatching(/^squat attack .*: still open at the deadline/)]);
});

test('the longest keys must complete; unpriced jobs complete or fail PriceUnknown, not lose what they made', () => {
  const longest = attack('longest');
  const title = tuneTitle(longest.workflowId, RUN_ID);
  const journal = new JournalFixture()
    .tune(800, title)
    .prompt(801, 800, `sks dog ${promptMark(longest.workflowId, 0)}`);
  const completed = new HistoryFixture()
    .task(10)
    .activity('createTune', 20, {}, { id: 800 })
    .task(1_520)
    .completed({ tune: { id: 800 }, prompts: [{ id: 801 }] }, 1_530)
    .history();
  expect(judged(longest, completed, journal).asExpected).toBe(true);
  expect(judged(longest, refusedAt(20)).violations).toEqual([
    expect.stringMatching(/^longest attack .*: failed InvalidInput, which no injected fault explains/),
  ]);

  const unpriced = attack('unpriced', 'generate', 3);
  const made = new JournalFixture().prompt(901, 1504944, `sks dog ${promptMark(unpriced.workflowId, 0)}`);
  const told = new HistoryFixture()
    .task(10)
    .failed({ type: 'PriceUnknown', message: 'unknown', details: { prompts: [{ id: 901, tune_id: 1504944 }] } }, 3_000)
    .history();
  expect(judged(unpriced, told, made).asExpected).toBe(true);
  // Failed without naming the prompt it made: lost.
  expect(judged(unpriced, refusedAt(3_000, 'PriceUnknown'), made)).toMatchObject({ asExpected: false, lost: 1 });
  expect(judged(unpriced, refusedAt(3_000, 'OverBudget'), made).asExpected).toBe(false);
});

test('judgeAttacks: figures by kind (made, as they must, endings, the slowest)', () => {
  const runs = [attack('title'), { ...attack('title'), workflowId: 'hostile-t-title-1' }, attack('squat')];
  const histories = [refusedAt(1_200), refusedAt(900), refusedAt(2_500, 'ClaimHeld')];
  const outcomes = runs.map((run, i) => readHistory(run, histories[i], 'key', new Map()));
  const verdict = judgeAttacks(outcomes, () => ({ tunes: [], prompts: [] }));
  expect(verdict.attacks.title).toEqual({
    made: 2,
    asExpected: 2,
    endings: { 'failed InvalidInput': 2 },
    slowestMs: 1_200,
  });
  expect(verdict.attacks.squat).toMatchObject({ made: 1, asExpected: 1, slowestMs: 2_500 });
  expect(verdict.attacks.deep).toEqual({ made: 0, asExpected: 0, endings: {}, slowestMs: null });
  expect(verdict).toMatchObject({ stuck: 0, duplicates: 0, lost: 0, violations: [] });
});
