/**
 * Worker Versioning's settings: the variables and the plugin's option, each refusal naming its setting and rule; the
 * default build ID from the package version and the workflow bundle; the deployment options a worker gets, a worker's
 * own kept.
 */
import type { WorkerOptions } from '@temporalio/worker';
import { ConfigError, loadVersioning } from '../../src/config';
import { defaultBuildId, describeVersioning, packageVersion, withVersioning } from '../../src/deployments/versions';
import { TuneflowPlugin } from '../../src/plugin';

const api = { apiKey: 'k', baseUrl: 'http://127.0.0.1:1' };
const bundle = (code: string) => ({ taskQueue: 'tuneflow', workflowBundle: { code } }) as WorkerOptions;

describe('TUNEFLOW_DEPLOYMENT_NAME, TUNEFLOW_BUILD_ID, TUNEFLOW_VERSIONING_BEHAVIOR', () => {
  test('unset: unversioned; set: the deployment, the build and the behaviour, auto-upgrade in any case', () => {
    expect(loadVersioning({})).toBeUndefined();
    expect(loadVersioning({ TUNEFLOW_DEPLOYMENT_NAME: 'tuneflow' })).toEqual({ deploymentName: 'tuneflow' });
    expect(
      loadVersioning({
        TUNEFLOW_DEPLOYMENT_NAME: 'tuneflow',
        TUNEFLOW_BUILD_ID: '0.2.0-8c1d0e7a6b5f',
        TUNEFLOW_VERSIONING_BEHAVIOR: 'auto-upgrade',
      }),
    ).toEqual({ deploymentName: 'tuneflow', buildId: '0.2.0-8c1d0e7a6b5f', behavior: 'AUTO_UPGRADE' });
  });

  test.each([
    [{ TUNEFLOW_BUILD_ID: 'b' }, 'TUNEFLOW_BUILD_ID', 'needs TUNEFLOW_DEPLOYMENT_NAME'],
    [{ TUNEFLOW_VERSIONING_BEHAVIOR: 'PINNED' }, 'TUNEFLOW_VERSIONING_BEHAVIOR', 'needs TUNEFLOW_DEPLOYMENT_NAME'],
    [{ TUNEFLOW_DEPLOYMENT_NAME: 'tune.flow' }, 'TUNEFLOW_DEPLOYMENT_NAME', 'got "tune.flow"'],
    [{ TUNEFLOW_DEPLOYMENT_NAME: 'x'.repeat(101) }, 'TUNEFLOW_DEPLOYMENT_NAME', 'must be 1 to 100 letters'],
    [{ TUNEFLOW_DEPLOYMENT_NAME: 't', TUNEFLOW_BUILD_ID: 'a b' }, 'TUNEFLOW_BUILD_ID', 'got "a b"'],
    [
      { TUNEFLOW_DEPLOYMENT_NAME: 't', TUNEFLOW_VERSIONING_BEHAVIOR: 'sticky' },
      'TUNEFLOW_VERSIONING_BEHAVIOR',
      'must be PINNED or AUTO_UPGRADE, got "sticky"',
    ],
  ])('%j: refused, naming %s', (env, variable, rule) => {
    const refused = (() => {
      try {
        loadVersioning(env);
      } catch (err) {
        return err;
      }
      throw new Error('not refused');
    })() as ConfigError;
    expect(refused).toBeInstanceOf(ConfigError);
    expect(refused.variable).toBe(variable);
    expect(refused.message).toContain(rule);
  });
});

describe('the default build ID', () => {
  test("the package version and the first 12 hex digits of the bundle's SHA-256: the same code, the same build", () => {
    const one = defaultBuildId({ workflowBundle: { code: 'export const a = 1;' } });
    expect(one).toMatch(new RegExp(`^${packageVersion().replace(/\./g, '\\.')}-[0-9a-f]{12}$`));
    expect(defaultBuildId({ workflowBundle: { code: 'export const a = 1;' } })).toBe(one);
    expect(defaultBuildId({ workflowBundle: { code: 'export const a = 2;' } })).not.toBe(one);
    expect(defaultBuildId({})).toBeUndefined();
  });
});

describe('the deployment options a worker gets', () => {
  test('versioning given: the deployment, the default build, jobs PINNED; said in the start line', () => {
    const options = withVersioning(bundle('code'), { deploymentName: 'tuneflow' });
    expect(options.workerDeploymentOptions).toEqual({
      version: { deploymentName: 'tuneflow', buildId: defaultBuildId(bundle('code')) },
      useWorkerVersioning: true,
      defaultVersioningBehavior: 'PINNED',
    });
    expect(describeVersioning(options)).toBe(
      `deployment tuneflow, build ${defaultBuildId(bundle('code'))}, jobs PINNED`,
    );
    expect(describeVersioning(bundle('code'))).toMatch(/^off \(unversioned/);
  });

  test("a worker's own deployment options win; one naming a deployment unversioned is refused (the ledger's tasks would fail)", () => {
    const own = {
      ...bundle('code'),
      workerDeploymentOptions: {
        version: { deploymentName: 'mine', buildId: '7' },
        useWorkerVersioning: true,
        defaultVersioningBehavior: 'AUTO_UPGRADE',
      },
    } as WorkerOptions;
    expect(withVersioning(own, { deploymentName: 'tuneflow' }).workerDeploymentOptions).toBe(
      own.workerDeploymentOptions,
    );
    const unversioned = {
      ...bundle('code'),
      workerDeploymentOptions: { version: { deploymentName: 'mine', buildId: '7' }, useWorkerVersioning: false },
    } as WorkerOptions;
    expect(() => withVersioning(unversioned, undefined)).toThrow(
      /^workerDeploymentOptions: .*useWorkerVersioning true/,
    );
  });

  test('workflows bundled at start have no bundle to hash: the build ID is required, named', () => {
    const fromSources = { taskQueue: 'tuneflow', workflowsPath: '/somewhere' } as WorkerOptions;
    expect(() => withVersioning(fromSources, { deploymentName: 'tuneflow' }, 'TUNEFLOW_BUILD_ID')).toThrow(
      /^TUNEFLOW_BUILD_ID: required where the workflows are bundled at start/,
    );
    expect(
      withVersioning(fromSources, { deploymentName: 'tuneflow', buildId: 'b' }).workerDeploymentOptions?.version,
    ).toEqual({
      deploymentName: 'tuneflow',
      buildId: 'b',
    });
  });

  test('the plugin: its option, checked when it is made; the variables when left out; false is unversioned', () => {
    expect(() => new TuneflowPlugin({ api, callbacks: false, versioning: { deploymentName: 'a.b' } })).toThrow(
      /^TuneflowPlugin: versioning\.deploymentName must be 1 to 100 letters/,
    );
    expect(
      () =>
        new TuneflowPlugin({ api, callbacks: false, versioning: { deploymentName: 't', behavior: 'LATEST' as never } }),
    ).toThrow(/^TuneflowPlugin: versioning\.behavior must be PINNED or AUTO_UPGRADE/);
    const configured = new TuneflowPlugin({
      api,
      callbacks: false,
      versioning: { deploymentName: 'tuneflow', buildId: 'b', behavior: 'AUTO_UPGRADE' },
    }).configureWorker(bundle('code'));
    expect(configured.workerDeploymentOptions).toEqual({
      version: { deploymentName: 'tuneflow', buildId: 'b' },
      useWorkerVersioning: true,
      defaultVersioningBehavior: 'AUTO_UPGRADE',
    });
    const saved = { ...process.env };
    try {
      process.env.TUNEFLOW_DEPLOYMENT_NAME = 'from-env';
      process.env.TUNEFLOW_BUILD_ID = 'e';
      const fromEnv = new TuneflowPlugin({ api, callbacks: false }).configureWorker(bundle('code'));
      expect(fromEnv.workerDeploymentOptions?.version).toEqual({ deploymentName: 'from-env', buildId: 'e' });
      const off = new TuneflowPlugin({ api, callbacks: false, versioning: false }).configureWorker(bundle('code'));
      expect(off.workerDeploymentOptions).toBeUndefined();
    } finally {
      process.env = saved;
    }
  });
});
