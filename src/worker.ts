/**
 * The production worker: workflows and activities on one task queue, and the callback receiver beside them.
 * Settings come from the environment (src/config.ts); SIGINT/SIGTERM drain the worker, then close the receiver.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import type { Logger } from '@temporalio/common';
import { NativeConnection, Runtime, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities } from './activities';
import { TunesApi } from './api';
import { CallbackSigner } from './callbacks/signing';
import { startCallbackReceiver, temporalSignaler } from './callbacks/receiver';
import { ConfigError, ENVIRONMENT, loadWorkerConfig, type WorkerConfig } from './config';
import { createJsonLogger } from './logging';

/** The workflow bundle `npm run build` writes beside this file; without it the worker bundles at start-up. */
const PREBUILT_BUNDLE = path.join(__dirname, 'workflow-bundle.js');

export interface TuneflowWorker {
  worker: Worker;
  /** Where the callback receiver listens, when callbacks are on. */
  callbackUrl?: string;
  /** Runs until shutdown (a signal, or `worker.shutdown()`), then closes everything it opened. */
  run(): Promise<void>;
}

/** Where the worker takes its workflow code from: the prebuilt bundle when present, the sources otherwise. */
export function workflowSource(): Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'> {
  if (fs.existsSync(PREBUILT_BUNDLE)) return { workflowBundle: { codePath: PREBUILT_BUNDLE } };
  return { workflowsPath: require.resolve('./workflows') };
}

/**
 * Connects to Temporal, builds the activities over the service client, and starts the callback receiver.
 *
 * @example
 * const { run } = await createTuneflowWorker(loadWorkerConfig());
 * await run();
 */
export async function createTuneflowWorker(config: WorkerConfig, logger?: Logger): Promise<TuneflowWorker> {
  const { connectionOptions, namespace = 'default' } = config.temporal;
  const api = new TunesApi({ apiKey: config.api.apiKey, baseUrl: config.api.baseUrl });
  const signer = config.callbacks
    ? new CallbackSigner({ baseUrl: config.callbacks.baseUrl, secret: config.callbacks.secret })
    : undefined;

  const connection = await NativeConnection.connect(connectionOptions);
  const opened: Array<() => Promise<void>> = [() => api.close(), () => connection.close()];
  // Last opened, first closed: the receiver before the connection its signals use.
  const closeAll = async () => {
    for (const close of [...opened].reverse()) await close().catch(() => undefined);
  };
  try {
    const worker = await Worker.create({
      connection,
      namespace,
      taskQueue: config.taskQueue,
      activities: createActivities({ api, callbacks: signer }),
      ...workflowSource(),
    });

    let callbackUrl: string | undefined;
    if (config.callbacks && signer) {
      // Signals go through a client connection of their own, so a busy worker never delays a callback's answer.
      const clientConnection = await Connection.connect(connectionOptions as Parameters<typeof Connection.connect>[0]);
      opened.push(() => clientConnection.close());
      const receiver = await startCallbackReceiver({
        port: config.callbacks.port,
        host: config.callbacks.host,
        signer,
        signaler: temporalSignaler(new Client({ connection: clientConnection, namespace })),
        logger,
      });
      opened.push(() => receiver.close());
      callbackUrl = receiver.url;
    }

    return {
      worker,
      callbackUrl,
      async run() {
        try {
          await worker.run();
        } finally {
          await closeAll();
        }
      },
    };
  } catch (err) {
    await closeAll();
    throw err;
  }
}

export const WORKER_USAGE = `Usage: tuneflow worker [--help]

Runs the tuneflow workflows and activities, the callback receiver and Prometheus metrics until SIGINT/SIGTERM.
Every setting comes from the environment:
${Object.entries(ENVIRONMENT)
  .map(([name, meaning]) => `  ${name.padEnd(27)} ${meaning}`)
  .join('\n')}
  TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS*, TEMPORAL_PROFILE, TEMPORAL_CONFIG_FILE
                              the Temporal connection
`;

/** `tuneflow worker [--help]`. */
export async function workerCommand(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  if (argv.length === 1 && (argv[0] === '--help' || argv[0] === '-h')) {
    process.stdout.write(WORKER_USAGE);
    return 0;
  }
  if (argv.length > 0) {
    process.stderr.write(
      `tuneflow worker: unexpected argument '${argv[0]}': settings come from the environment\n\n${WORKER_USAGE}`,
    );
    return 2;
  }
  return runWorker(env);
}

/** The worker: settings from the environment, metrics and JSON logs, until SIGINT/SIGTERM. */
export async function runWorker(env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let config: WorkerConfig;
  try {
    config = loadWorkerConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`tuneflow worker: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  const logger = createJsonLogger(process.stderr, config.logLevel);
  Runtime.install({
    logger,
    telemetryOptions: config.metricsAddress ? { metrics: { prometheus: { bindAddress: config.metricsAddress } } } : {},
  });
  const tuneflow = await createTuneflowWorker(config, logger);
  logger.info('tuneflow worker started', {
    taskQueue: config.taskQueue,
    namespace: config.temporal.namespace ?? 'default',
    apiUrl: config.api.baseUrl,
    callbacks: tuneflow.callbackUrl ? config.callbacks?.baseUrl : 'off (polling only)',
    metrics: config.metricsAddress ?? 'off',
  });
  await tuneflow.run();
  logger.info('tuneflow worker stopped');
  return 0;
}

if (require.main === module) {
  runWorker().then(
    (code) => (process.exitCode = code),
    (err) => {
      process.stderr.write(`tuneflow worker: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
