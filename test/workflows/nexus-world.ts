/**
 * Two teams on one Temporal dev server, for the Nexus tests and scripts/record-nexus-histories.ts: tuneflow's worker
 * (TuneflowPlugin, the mock service) in the `images` namespace, a caller's worker (test/nexus/caller-workflows.ts) in
 * the `shop` namespace, and an endpoint between them made as an operator makes it, with the Temporal CLI.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import type { History } from '@temporalio/common/lib/proto-utils';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Worker, type WorkflowBundle } from '@temporalio/worker';
import { tenantWorkflowId } from '../../src/contract/tenants';
import { startMockService, type MockService, type MockServiceOptions } from '../../src/mock-service';
import { TuneflowPlugin } from '../../src/plugin';
import type { TenantSettings } from '../../src/tenants';
import { freePort, startDevServerProcess, type DevServerProcess } from '../../src/temporal-server/dev-server';
import type { callTuneflow, TuneflowCall } from '../nexus/caller-workflows';
import { bundleWorkflows } from './bundle';
import { API_KEY, CALLBACK_SECRET } from './harness';
import { installQuietRuntime } from './global-setup';

export const TUNEFLOW_NAMESPACE = 'images';
export const CALLER_NAMESPACE = 'shop';
/** A second team's namespace, calling through an endpoint of its own: its keys are its own. */
export const OTHER_CALLER_NAMESPACE = 'studio';
/** The shop's endpoint's name: what the caller's code knows of tuneflow, besides the contract. */
export const ENDPOINT = 'tuneflow';
/** The studio's endpoint, onto the same task queue. */
export const OTHER_ENDPOINT = 'tuneflow-studio';
/** An endpoint the operator made and mapped to no tenant. */
export const UNMAPPED_ENDPOINT = 'tuneflow-unmapped';
/** The operator's tenants: one per endpoint, named as the team's namespace. */
export const TENANT_ENDPOINTS = { [ENDPOINT]: CALLER_NAMESPACE, [OTHER_ENDPOINT]: OTHER_CALLER_NAMESPACE };
export const TUNEFLOW_TASK_QUEUE = 'tuneflow';
const CALLER_TASK_QUEUE = 'shop';

/** One scenario's tuneflow side: a fresh mock service, and tuneflow's worker on it. */
export interface TuneflowSide {
  readonly mock: MockService;
}

export class NexusWorld {
  private constructor(
    readonly server: DevServerProcess,
    private readonly cli: string,
    private readonly connection: Connection,
    private readonly native: NativeConnection,
    private readonly tuneflowBundle: WorkflowBundle,
    private readonly callerWorkers: Worker[],
    private readonly callerRunning: Promise<void>[],
    /** A client of tuneflow's namespace (what the caller never has). */
    readonly images: Client,
    /** A client of the caller's namespace. */
    readonly shop: Client,
    /** A client of the second team's namespace. */
    readonly studio: Client,
  ) {}

  /**
   * A dev server with both namespaces, the endpoint (`temporal operator nexus endpoint create`) and the caller's
   * worker running.
   *
   * @example
   * const world = await NexusWorld.open(devServerExecutable());
   */
  static async open(cli: string): Promise<NexusWorld> {
    installQuietRuntime();
    const server = await startDevServerProcess({
      executable: cli,
      namespace: TUNEFLOW_NAMESPACE,
      extraArgs: ['--namespace', CALLER_NAMESPACE, '--namespace', OTHER_CALLER_NAMESPACE],
    });
    // An endpoint per team, every one onto tuneflow's one task queue; who may call which is the cluster's access control.
    for (const name of [ENDPOINT, OTHER_ENDPOINT, UNMAPPED_ENDPOINT])
      await temporalCli(cli, [
        ...['operator', 'nexus', 'endpoint', 'create', '--address', server.address, '--name', name],
        ...['--target-namespace', TUNEFLOW_NAMESPACE, '--target-task-queue', TUNEFLOW_TASK_QUEUE],
      ]);
    const connection = await Connection.connect({ address: server.address });
    const native = await NativeConnection.connect({ address: server.address });
    const [tuneflowBundle, callerBundle] = await Promise.all([bundleWorkflows(), bundleCallerWorkflows()]);
    const callerWorkers = await Promise.all(
      [CALLER_NAMESPACE, OTHER_CALLER_NAMESPACE].map((namespace) =>
        Worker.create({ connection: native, namespace, taskQueue: CALLER_TASK_QUEUE, workflowBundle: callerBundle }),
      ),
    );
    const callerRunning = callerWorkers.map((worker) => worker.run());
    return new NexusWorld(
      server,
      cli,
      connection,
      native,
      tuneflowBundle,
      callerWorkers,
      callerRunning,
      new Client({ connection, namespace: TUNEFLOW_NAMESPACE }),
      new Client({ connection, namespace: CALLER_NAMESPACE }),
      new Client({ connection, namespace: OTHER_CALLER_NAMESPACE }),
    );
  }

  /**
   * Runs `fn` with tuneflow's side up: a fresh mock service, and tuneflow's worker (TuneflowPlugin with callbacks, as a
   * user runs it) on the endpoint's task queue; both closed afterwards.
   */
  async withTuneflow<T>(
    mockOptions: MockServiceOptions,
    fn: (side: TuneflowSide) => Promise<T>,
    tenants: Omit<TenantSettings, 'endpoints'> = {},
  ): Promise<T> {
    const mock = await startMockService({ trainingTime: '1s', inferenceTime: '500ms', ...mockOptions });
    const callbackPort = await freePort();
    try {
      const worker = await Worker.create({
        connection: this.native,
        namespace: TUNEFLOW_NAMESPACE,
        taskQueue: TUNEFLOW_TASK_QUEUE,
        // The current sources, not a prebuilt bundle lib/ may hold from an older build.
        workflowBundle: this.tuneflowBundle,
        plugins: [
          new TuneflowPlugin({
            api: { apiKey: API_KEY, baseUrl: mock.url },
            callbacks: {
              baseUrl: `http://127.0.0.1:${callbackPort}`,
              secret: CALLBACK_SECRET,
              port: callbackPort,
              host: '127.0.0.1',
            },
            logger: new DefaultLogger('WARN'),
            tenants: { endpoints: TENANT_ENDPOINTS, ...tenants },
          }),
        ],
      });
      return await worker.runUntil(fn({ mock }));
    } finally {
      await mock.close();
    }
  }

  /**
   * Starts the caller's workflow that calls one tuneflow operation through its team's endpoint (or `endpoint`);
   * `forgeLinkTo` makes the call claim to come from that namespace (test/nexus/forged-links.ts).
   */
  call(
    workflowId: string,
    call: TuneflowCall,
    caller: Client = this.shop,
    { endpoint, forgeLinkTo }: { endpoint?: string; forgeLinkTo?: string } = {},
  ): Promise<WorkflowHandle<typeof callTuneflow>> {
    return caller.workflow.start<typeof callTuneflow>('callTuneflow', {
      taskQueue: CALLER_TASK_QUEUE,
      workflowId,
      args: [endpoint ?? (caller === this.studio ? OTHER_ENDPOINT : ENDPOINT), call],
      ...(forgeLinkTo && { memo: { forgeLinkTo } }),
    });
  }

  /** The history of tuneflow's run of `key`, and of the caller's workflow `workflowId`. */
  async histories(key: string, callerId: string): Promise<{ handler: History; caller: History }> {
    const [handler, caller] = await Promise.all([
      this.images.workflow.getHandle(tenantWorkflowId(CALLER_NAMESPACE, key)).fetchHistory(),
      this.shop.workflow.getHandle(callerId).fetchHistory(),
    ]);
    return { handler, caller };
  }

  /** Runs the Temporal CLI against this server; its output. */
  cliRun(args: string[]): Promise<{ stdout: string; stderr: string }> {
    return temporalCli(this.cli, [...args, '--address', this.server.address]);
  }

  async close(): Promise<void> {
    for (const worker of this.callerWorkers) worker.shutdown();
    await Promise.all(this.callerRunning);
    await this.native.close();
    await this.connection.close();
    await this.server.stop();
  }
}

/** The caller's workflows, bundled as the caller's own worker bundles them: nothing of tuneflow's but the contract. */
export function bundleCallerWorkflows(): Promise<WorkflowBundle> {
  return bundleWorkflowCode({
    workflowsPath: require.resolve('../nexus/caller-workflows'),
    workflowInterceptorModules: [require.resolve('../nexus/forged-links')],
    logger: new DefaultLogger('WARN'),
  });
}

async function temporalCli(cli: string, args: string[]): Promise<{ stdout: string; stderr: string }> {
  try {
    return await promisify(execFile)(cli, args, { maxBuffer: 16 * 1024 * 1024 });
  } catch (err) {
    const { stdout, stderr } = err as { stdout?: string; stderr?: string };
    throw new Error(`temporal ${args.join(' ')} failed:\n${stdout ?? ''}\n${stderr ?? ''}`);
  }
}
