/**
 * The replay gate's rules without a server: which runs a new build would take (unversioned, auto-upgrade, already on
 * it, an override over the declared behaviour), the query it reads, and its bounded count. The gate against a real
 * namespace is test/workflows/worker-versioning.test.ts.
 */
import { temporal } from '@temporalio/proto';
import { Client } from '@temporalio/client';
import { gateCountProblem, gateQuery, replayGate, routeOf } from '../../src/deployments/replay-gate';

const { VersioningBehavior } = temporal.api.enums.v1;
const B = { deploymentName: 'tuneflow', buildId: 'b' };
const on = (buildId: string, deploymentName = 'tuneflow') => ({ deploymentName, buildId });

describe('which runs the new build takes', () => {
  test.each([
    ['no versioning info (unversioned)', undefined, { behavior: 'unversioned', replay: true }],
    [
      'unversioned, its last task by a worker naming a version',
      { behavior: VersioningBehavior.VERSIONING_BEHAVIOR_UNSPECIFIED, deploymentVersion: on('a') },
      { behavior: 'unversioned', version: 'tuneflow.a', replay: true },
    ],
    [
      'auto-upgrade on A',
      { behavior: VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE, deploymentVersion: on('a') },
      { behavior: 'AUTO_UPGRADE', version: 'tuneflow.a', replay: true },
    ],
    [
      'pinned to A',
      { behavior: VersioningBehavior.VERSIONING_BEHAVIOR_PINNED, deploymentVersion: on('a') },
      { behavior: 'PINNED', version: 'tuneflow.a', replay: false },
    ],
    [
      'pinned to B',
      { behavior: VersioningBehavior.VERSIONING_BEHAVIOR_PINNED, deploymentVersion: on('b') },
      { behavior: 'PINNED', version: 'tuneflow.b', replay: true },
    ],
    [
      'pinned to a build b of another deployment',
      { behavior: VersioningBehavior.VERSIONING_BEHAVIOR_PINNED, deploymentVersion: on('b', 'other') },
      { behavior: 'PINNED', version: 'other.b', replay: false },
    ],
    [
      'auto-upgrade, overridden: pinned to A',
      {
        behavior: VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE,
        deploymentVersion: on('b'),
        versioningOverride: { pinned: { version: on('a') } },
      },
      { behavior: 'PINNED', version: 'tuneflow.a', replay: false },
    ],
    [
      'pinned to A, overridden: auto-upgrade',
      {
        behavior: VersioningBehavior.VERSIONING_BEHAVIOR_PINNED,
        deploymentVersion: on('a'),
        versioningOverride: { autoUpgrade: true },
      },
      { behavior: 'AUTO_UPGRADE', version: 'tuneflow.a', replay: true },
    ],
    [
      "the server's older override form: pinned to tuneflow.a",
      {
        behavior: VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE,
        versioningOverride: { behavior: VersioningBehavior.VERSIONING_BEHAVIOR_PINNED, pinnedVersion: 'tuneflow.a' },
      },
      { behavior: 'PINNED', version: 'tuneflow.a', replay: false },
    ],
    [
      "pinned to A, the server's oldest override form: pinned to deployment A",
      {
        behavior: VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE,
        deploymentVersion: on('b'),
        versioningOverride: {
          behavior: VersioningBehavior.VERSIONING_BEHAVIOR_PINNED,
          deployment: { seriesName: 'tuneflow', buildId: 'a' },
        },
      },
      { behavior: 'PINNED', version: 'tuneflow.a', replay: false },
    ],
    [
      'pinned to A, its next task sent once to B',
      {
        behavior: VersioningBehavior.VERSIONING_BEHAVIOR_PINNED,
        deploymentVersion: on('a'),
        versioningOverride: { oneTime: { targetDeploymentVersion: on('b') } },
      },
      { behavior: 'PINNED', version: 'tuneflow.a', replay: true },
    ],
  ])('%s', (_, info, route) => {
    expect(routeOf(info, B)).toEqual({ version: undefined, ...route });
  });

  test('an unversioned new build takes no pinned run', () => {
    const pinned = { behavior: VersioningBehavior.VERSIONING_BEHAVIOR_PINNED, deploymentVersion: on('b') };
    expect(routeOf(pinned, undefined).replay).toBe(false);
  });
});

test("the query: tuneflow's workflow types, and the caller's own joined with AND", () => {
  expect(gateQuery()).toBe("WorkflowType IN ('trainThenGenerate', 'generate', 'packTune', 'spendLedger')");
  expect(gateQuery(' StartTime > "2026-11-01T00:00:00Z" OR TaskQueue = "x" ')).toBe(
    "WorkflowType IN ('trainThenGenerate', 'generate', 'packTune', 'spendLedger') AND " +
      '(StartTime > "2026-11-01T00:00:00Z" OR TaskQueue = "x")',
  );
});

test('the count: a whole number from 1 to 1000, refused before the namespace is read', async () => {
  expect(gateCountProblem(1)).toBeUndefined();
  expect(gateCountProblem(1000)).toBeUndefined();
  for (const count of [0, 1001, 2.5, NaN, '5']) expect(gateCountProblem(count)).toMatch(/^must be a whole number/);
  // A client that was never connected: a gate that read anything before the check would throw otherwise.
  const client = {} as Client;
  await expect(replayGate({ client, count: 0, replayer: {} })).rejects.toThrow(
    /^count: must be a whole number from 1 to 1000, got 0$/,
  );
});
