/**
 * The production worker: TuneflowPlugin on a worker of its own (workflows, activities, the callback receiver).
 * Settings come from the environment (src/config.ts; traces from OpenTelemetry's variables,
 * src/tracing-environment.ts); SIGINT/SIGTERM drain the worker, then close the receiver and send the last spans.
 */
import { Client, Connection } from '@temporalio/client';
import type { Logger } from '@temporalio/common';
import { NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { ConfigError, ENVIRONMENT, loadWorkerConfig, type WorkerConfig } from './config';
import { createJsonLogger } from './logging';
import { TuneflowPlugin } from './plugin';
import type { TuneflowTracingOptions } from './tracing';
import { loadTracingConfig, startTracing, TRACING_ENVIRONMENT, type TracingConfig } from './tracing-environment';

export { workflowSource } from './plugin';

export interface TuneflowWorker {
  worker: Worker;
  /** Runs until shutdown (a signal, or `worker.shutdown()`), then closes everything it opened. */
  run(): Promise<void>;
}

/**
 * Connects to Temporal and creates a worker with TuneflowPlugin: activities, workflows and the callback receiver.
 *
 * @example
 * const { run } = await createTuneflowWorker(loadWorkerConfig());
 * await run();
 */
export async function createTuneflowWorker(
  config: WorkerConfig,
  logger?: Logger,
  tracing?: TuneflowTracingOptions,
): Promise<TuneflowWorker> {
  const { connectionOptions, namespace = 'default' } = config.temporal;
  const connection = await NativeConnection.connect(connectionOptions);
  const opened: Array<() => Promise<void>> = [() => connection.close()];
  // Last opened, first closed: the signal client's connection before the worker's.
  const closeAll = async () => {
    for (const close of [...opened].reverse()) await close().catch(() => undefined);
  };
  try {
    let signalClient: Client | undefined;
    if (config.callbacks) {
      // Signals go through a client connection of their own, so a busy worker never delays a callback's answer.
      const clientConnection = await Connection.connect(connectionOptions as Parameters<typeof Connection.connect>[0]);
      opened.push(() => clientConnection.close());
      signalClient = new Client({ connection: clientConnection, namespace });
    }
    const plugin = new TuneflowPlugin({
      api: { apiKey: config.api.apiKey, baseUrl: config.api.baseUrl },
      callbacks: config.callbacks && { ...config.callbacks, client: signalClient },
      logger,
      tracing,
    });
    const worker = await Worker.create({
      connection,
      namespace,
      taskQueue: config.taskQueue,
      plugins: [plugin],
      // Unset: the SDK's default (from the heap limit), which the worker's spread must not replace with undefined.
      ...(config.maxCachedWorkflows !== undefined && { maxCachedWorkflows: config.maxCachedWorkflows }),
    });
    return {
      worker,
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
  ${Object.keys(TRACING_ENVIRONMENT).join(', ')}
                              traces (OpenTelemetry's variables; none are sent without an endpoint)
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
  let tracingConfig: TracingConfig | undefined;
  try {
    config = loadWorkerConfig(env);
    tracingConfig = loadTracingConfig(env);
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
  const traces = tracingConfig && (await startTracing(tracingConfig, logger));
  try {
    const tuneflow = await createTuneflowWorker(config, logger, traces?.tracing);
    logger.info('tuneflow worker started', {
      taskQueue: config.taskQueue,
      namespace: config.temporal.namespace ?? 'default',
      apiUrl: config.api.baseUrl,
      callbacks: config.callbacks?.baseUrl ?? 'off (polling only)',
      metrics: config.metricsAddress ?? 'off',
      // The origin alone: a URL's user and password are not for the log.
      traces: tracingConfig ? new URL(tracingConfig.url).origin : 'off',
    });
    await tuneflow.run();
  } finally {
    await traces?.shutdown();
  }
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
