/**
 * The CI-sized soak run (issue 10): exactly `npm run soak -- --jobs 20 --profile all --json` as a child process, on a
 * dev server of its own (DESIGN.md tier 5), with every fault profile mixed. Its last line of stdout is the JSON report;
 * the test checks the invariants there (the harness judged them against the mock's ledger and the histories) and that
 * every kind of fault was really injected. Speed is reported by the run, never asserted here.
 */
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { SECOND_TENANT } from '../../bench/soak/hostile';
import { devServerTest } from './environment';

jest.setTimeout(420_000);

const ROOT = path.resolve(__dirname, '../..');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function soak(args: string[]): Promise<Run> {
  // A dev server of the run's own: the server-restart fault needs one it may stop (TEMPORAL_ADDRESS would name a
  // server that is not the run's).
  const env = { ...process.env };
  delete env.TEMPORAL_ADDRESS;
  const child = spawn('npm', ['run', 'soak', '--', ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

devServerTest(
  'npm run soak -- --jobs 20 --profile all --json: every invariant holds, every fault was injected',
  async () => {
    const run = await soak(['--jobs', '20', '--profile', 'all', '--json']);
    const lines = run.stdout.trimEnd().split('\n');
    const last = lines[lines.length - 1];
    let report: Record<string, unknown>;
    try {
      report = JSON.parse(last) as Record<string, unknown>;
    } catch {
      throw new Error(
        `the last line is not JSON: ${last}\n--- stdout\n${run.stdout}\n--- stderr\n${run.stderr.slice(-4000)}`,
      );
    }
    expect(report).toEqual(
      expect.objectContaining({
        jobs: 20,
        duplicates: 0,
        lost: 0,
        stuck: 0,
        failedOther: 0,
        notStarted: 0,
        apiKeyLeaks: 0,
        forgedAccepted: 0,
        forgedDataRuns: 0,
        terminated: 0,
        signedUrlsInLogs: 0,
        signedUrlsInHistories: 0,
        violations: [],
      }),
    );
    for (const key of ['apiCalls', 'apiCallsPerJob', 'workerRssMiB', 'reactionP50Ms', 'reactionP99Ms', 'jobsPerSecond'])
      expect(report).toHaveProperty(key);
    expect((report.completed as number) + (report.failedTyped as number)).toBe(20);
    expect(report.apiCalls as number).toBeGreaterThanOrEqual(20);

    // Every kind of fault took effect at least once, counted where it landed (bench/soak/faults.ts).
    const faults = report.faults as Record<string, number>;
    for (const kind of [
      'status500',
      'status429',
      'status504',
      'neverTrain',
      'callbacksDropped',
      'callbacksDuplicated',
      'workerKills',
      'serverRestarts',
      'receiverCuts',
    ])
      expect({ kind, times: faults[kind] }).toEqual({ kind, times: expect.any(Number) });
    expect(Object.entries(faults).filter(([, times]) => times === 0)).toEqual([]);
    expect(report.forgedSent as number).toBeGreaterThan(0);
    expect(report.forgedAnswered as number).toBeGreaterThan(0);
    // Forgeries with URLs the service held reached the receiver and woke runs; none wrote anything (forgedDataRuns).
    const leaked = report.forgedWithLeakedUrls as { sent: number; delivered: number; signals: number };
    expect(leaked.sent).toBeGreaterThan(0);
    expect(leaked.delivered).toBeGreaterThan(0);
    // Jobs whose tune never trained failed as they should, and only those.
    expect(report.failureTypes).toEqual({ TuneNeverTrained: faults.neverTrain });

    // Two tenants (hostile-starters): nothing of one read, made on or deleted by the other's runs, every object,
    // upload and charge joined to one, no run over its maxCostMc.
    const tenancy = report.tenancy as Record<string, unknown> & { tenants: Record<string, { runs: number }> };
    expect(tenancy).toMatchObject({ read: 0, createdOn: 0, deleted: 0, actedOn: 0, overMaxCost: 0, unattributed: 0 });
    expect(tenancy.tenants.default.runs).toBeGreaterThan(0);
    expect(tenancy.tenants[SECOND_TENANT].runs).toBeGreaterThan(0);
    // Every attack was made, and each ended as it must (refused, ClaimHeld fast, completed, within the budget).
    const hostile = report.hostile as { attacks: Record<string, { made: number; asExpected: number }> } & {
      stuck: number;
      duplicates: number;
      lost: number;
    };
    expect(hostile).toMatchObject({ stuck: 0, duplicates: 0, lost: 0 });
    for (const [kind, { made, asExpected }] of Object.entries(hostile.attacks))
      expect({ kind, made: made > 0, asExpected }).toEqual({ kind, made: true, asExpected: made });
    expect(run.code).toBe(0);
  },
);

devServerTest(
  "npm run soak -- --compare-floor: the floor makes tuneflow's requests and takes its callbacks through its own receiver",
  async () => {
    const run = await soak([
      ...['--jobs', '20', '--profile', 'none', '--compare-floor'],
      ...['--training-time', '3s', '--inference-time', '1s', '--json'],
    ]);
    interface Side {
      finished: number;
      receiverCpuMsPerJob: number | null;
      reactionP99Ms: number | null;
      historyBytesByPartPerJob: Record<string, number>;
    }
    const report = JSON.parse(run.stdout.trimEnd().split('\n').pop()!) as Side & {
      violations: string[];
      floor: Side;
      floorShape: { sameActivities: number; differing: Array<{ job: number }> };
      apiCallsByRoute: Record<string, number>;
      floorApiCallsByRoute: Record<string, number>;
      ratios: Record<string, number | null>;
    };
    expect({ violations: report.violations, code: run.code }).toEqual({ violations: [], code: 0 });
    expect(report.floor.finished).toBe(20);
    // The floor's runs scheduled tuneflow's activities, in its order, for every job but packs whose prompts may settle
    // before or after their first listing (one read more or fewer; jobs 8 and 9 of every ten are packs, jobs.ts).
    expect(report.floorShape.sameActivities).toBeGreaterThanOrEqual(16);
    expect(report.floorShape.differing.filter(({ job }) => job % 10 < 8)).toEqual([]);
    // The same creates, exactly (the plan decides them); the same reads, by route.
    const creates = (routes: Record<string, number>) =>
      Object.fromEntries(Object.entries(routes).filter(([route]) => route.startsWith('POST ')));
    expect(creates(report.floorApiCallsByRoute)).toEqual(creates(report.apiCallsByRoute));
    expect(Object.keys(report.floorApiCallsByRoute).sort()).toEqual(Object.keys(report.apiCallsByRoute).sort());
    // Each side's callbacks went through a receiver process of its own, which spent CPU on them.
    expect(report.receiverCpuMsPerJob).toBeGreaterThan(0);
    expect(report.floor.receiverCpuMsPerJob).toBeGreaterThan(0);
    expect(report.floor.reactionP99Ms).toEqual(expect.any(Number));
    expect(report.ratios.workerAndReceiverCpuMsPerJob).toEqual(expect.any(Number));
    // The sizing table and where the bytes go, for both sides.
    expect(run.stdout).toContain('sizing, from this run on this machine');
    expect(report.historyBytesByPartPerJob.result).toBeGreaterThan(report.floor.historyBytesByPartPerJob.result);
  },
);

devServerTest('npm run soak with a bad flag names it and exits 2 before starting anything', async () => {
  const run = await soak(['--jobs', 'many']);
  expect(run.code).toBe(2);
  expect(run.stderr).toContain("--jobs: must be a whole number from 1 to 100000, got 'many'");
  const unknown = await soak(['--profile', 'earthquake']);
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toContain('--profile: must be one of none, status-500');
});
