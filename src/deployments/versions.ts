/**
 * Worker Versioning for tuneflow's workers: a deployment name and a build ID per worker, and how a job moves between
 * builds. A job is pinned to the build it started on by default: it never meets code it did not start with, so a
 * deploy cannot break a paid job however the workflow code changed. The spend ledger, a workflow that lives a whole
 * budget window, always moves to the current build (auto-upgrade, under the SDK's patches), or an old build could never
 * be drained. Off unless a deployment name is given: a versioned worker takes no new job until the operator makes its
 * version current (README "Versioned deploys").
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { VersioningBehavior } from '@temporalio/common';
import type { WorkerOptions } from '@temporalio/worker';

/** How a worker takes part in a worker deployment. */
export interface VersioningOptions {
  /**
   * The worker deployment: every worker of the task queue gives the same name, whatever its build.
   * @format letters, digits, `-` and `_`, at most 100
   */
  deploymentName: string;
  /**
   * This worker's build, one per workflow code.
   * @default `<package version>-<the first 12 hex digits of the SHA-256 of the workflow bundle>`
   * @format letters, digits, `.`, `_`, `+` and `-`, at most 100
   */
  buildId?: string;
  /**
   * What a job does when a newer build becomes current: `PINNED`, it finishes on the build it started on (the old
   * build's workers stay up until its jobs drain); `AUTO_UPGRADE`, it moves at its next workflow task (then every
   * change must be patched, as without versioning).
   * @default 'PINNED'
   */
  behavior?: VersioningBehavior;
}

/** A deployment version, as the server names it. */
export interface DeploymentVersion {
  deploymentName: string;
  buildId: string;
}

const DEPLOYMENT_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$/;
const BUILD_ID = /^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}$/;
const BEHAVIORS: readonly VersioningBehavior[] = ['PINNED', 'AUTO_UPGRADE'];

/** What is wrong with a deployment name (the server joins it to a build ID with a dot, so it has none), if anything. */
export function deploymentNameProblem(name: unknown): string | undefined {
  if (typeof name === 'string' && DEPLOYMENT_NAME.test(name)) return undefined;
  return `must be 1 to 100 letters, digits, '-' or '_', starting with a letter or digit, got ${JSON.stringify(name)}`;
}

/** What is wrong with a build ID, if anything. */
export function buildIdProblem(buildId: unknown): string | undefined {
  if (typeof buildId === 'string' && BUILD_ID.test(buildId)) return undefined;
  return `must be 1 to 100 letters, digits, '.', '_', '+' or '-', starting with a letter or digit, got ${JSON.stringify(buildId)}`;
}

/** What is wrong with a versioning behaviour, if anything. */
export function behaviorProblem(behavior: unknown): string | undefined {
  if (BEHAVIORS.includes(behavior as VersioningBehavior)) return undefined;
  return `must be PINNED or AUTO_UPGRADE, got ${JSON.stringify(behavior)}`;
}

/**
 * The first problem of `options`, named by `names` (the variables, or the option's fields), if any.
 * @example versioningProblem({ deploymentName: 'a.b' }) // ['deploymentName', "must be 1 to 100 ..."]
 */
export function versioningProblem(
  options: VersioningOptions,
  names: Record<keyof VersioningOptions, string> = {
    deploymentName: 'versioning.deploymentName',
    buildId: 'versioning.buildId',
    behavior: 'versioning.behavior',
  },
): [string, string] | undefined {
  const name = deploymentNameProblem(options.deploymentName);
  if (name) return [names.deploymentName, name];
  const build = options.buildId === undefined ? undefined : buildIdProblem(options.buildId);
  if (build) return [names.buildId, build];
  const behavior = options.behavior === undefined ? undefined : behaviorProblem(options.behavior);
  if (behavior) return [names.behavior, behavior];
  return undefined;
}

/** This package's version, from its manifest (beside lib/ and src/ alike). */
export function packageVersion(): string {
  const manifest = path.join(__dirname, '..', '..', 'package.json');
  return (JSON.parse(fs.readFileSync(manifest, 'utf8')) as { version: string }).version;
}

/**
 * The default build ID of a worker with `source` as its workflow code: the package's version and the bundle's hash, so
 * a new release or a change to the workflows (a bundle of the user's own, say) is a new build, and the same code on
 * every machine is the same one. Undefined where the workflows are bundled at start (no bundle yet to hash).
 *
 * @example defaultBuildId({ workflowBundle: { codePath: 'lib/workflow-bundle.js' } }) // '0.1.0-3f9a2b1c4d5e'
 */
export function defaultBuildId(source: Pick<WorkerOptions, 'workflowBundle'>): string | undefined {
  const bundle = source.workflowBundle;
  if (!bundle) return undefined;
  const code = 'code' in bundle ? bundle.code : fs.readFileSync(bundle.codePath, 'utf8');
  return `${packageVersion()}-${createHash('sha256').update(code).digest('hex').slice(0, 12)}`;
}

/**
 * The worker's deployment options for `versioning` (with its build ID resolved from the worker's workflow code); the
 * worker's own `workerDeploymentOptions`, when it has them, are kept as they are (unless they name a deployment
 * without versioning, which the ledger cannot run on). Throws a TypeError naming `buildIdName`
 * where the build ID is neither given nor derivable.
 */
export function withVersioning<T extends WorkerOptions>(
  options: T,
  versioning: VersioningOptions | undefined,
  buildIdName = 'versioning.buildId',
): T {
  const own = options.workerDeploymentOptions;
  // The SDK has such a worker name its deployment and refuse every behaviour a workflow declares: the spend ledger's.
  if (own && !own.useWorkerVersioning && own.version.deploymentName)
    throw new TypeError(
      "workerDeploymentOptions: a deployment name with useWorkerVersioning false fails the spend ledger's every " +
        'workflow task (it declares AUTO_UPGRADE on a deployment): set useWorkerVersioning true, or leave the options out',
    );
  if (!versioning || own) return options;
  const buildId = versioning.buildId ?? defaultBuildId(options);
  if (buildId === undefined)
    throw new TypeError(
      `${buildIdName}: required where the workflows are bundled at start (workflowsPath, no prebuilt bundle): ` +
        'there is no bundle to take a build ID from',
    );
  return {
    ...options,
    workerDeploymentOptions: {
      version: { deploymentName: versioning.deploymentName, buildId },
      useWorkerVersioning: true,
      defaultVersioningBehavior: versioning.behavior ?? 'PINNED',
    },
  };
}

/** One line for a worker's start report: its deployment version and behaviour, or that it is unversioned. */
export function describeVersioning(options: Pick<WorkerOptions, 'workerDeploymentOptions'>): string {
  const deployment = options.workerDeploymentOptions;
  if (!deployment?.useWorkerVersioning) return 'off (unversioned: patches keep running jobs replaying)';
  const { deploymentName, buildId } = deployment.version;
  return `deployment ${deploymentName}, build ${buildId}, jobs ${deployment.defaultVersioningBehavior}`;
}
