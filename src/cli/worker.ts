/**
 * The production worker: TuneflowPlugin on a worker of its own (workflows, activities, the callback receiver).
 * Settings come from the environment (src/config.ts; traces from OpenTelemetry's variables,
 * src/tracing-environment.ts); SIGINT/SIGTERM drain the worker, then close the receiver and send the last spans.
 */
import { Client, Connection } from '@temporalio/client';
import type { Logger } from '@temporalio/common';
import { NativeConnection, Worker } from '@temporalio/worker';
import {
  ExitCode,
  exitCodeForStop,
  portProblem,
  portTaken,
  runCommand,
  UsageError,
  type CommandIO,
} from './command-line';
import { listenForStop } from './stop-signal';
import { ConfigError, DEFAULT_SERVICE_MARGIN, ENVIRONMENT, loadWorkerConfig, type WorkerConfig } from '../config';
import { createLogger } from '../logging';
import { CALLBACK_PORT_ADVICE, TuneflowPlugin } from '../plugin';
import { portIsFree } from '../temporal-server/dev-server';
import type { TuneflowTracingOptions } from '../tracing';
import { loadTracingConfig, startTracing, TRACING_ENVIRONMENT } from '../tracing-environment';
import { checkMetricsPortFree, installRuntime } from './metrics-runtime';

export { workflowSource } from '../plugin';

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
  startReport: Record<string, string> = {},
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
      callbacks: config.callbacks ? { ...config.callbacks, client: signalClient } : false,
      logger,
      tracing,
      uploadDir: config.uploadDir,
      // Unset in the config is off: no second look at the environment.
      storage: config.storage ?? false,
      // The config is the whole truth here: unset is no limit, not a second look at the environment.
      serviceRate: config.serviceRate ?? false,
      serviceMargin: config.serviceMargin ?? DEFAULT_SERVICE_MARGIN,
      checkApiKey: config.checkApiKey,
      compressPayloads: config.compressPayloads,
      // Unset in the config is unversioned: no second look at the environment.
      versioning: config.versioning ?? false,
      startReport,
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

Runs the tuneflow workflows and activities, the callback receiver and Prometheus metrics until SIGTERM or Ctrl-C,
which drain it (the tasks under way finish) and exit 0 (SIGTERM) or 130 (Ctrl-C). Logs go to stderr: lines for a
person on a terminal, JSON otherwise. Exit 2: a missing or bad setting, or a port already taken; 3: Temporal
unreachable.
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
  const io: CommandIO = { stdout: process.stdout, stderr: process.stderr, env };
  let started = false;
  const code = await runCommand('worker', io, async () => {
    if (argv.length === 1 && (argv[0] === '--help' || argv[0] === '-h')) {
      io.stdout.write(WORKER_USAGE);
      return ExitCode.ok;
    }
    if (argv.length > 0) throw new UsageError(`unexpected argument '${argv[0]}': settings come from the environment`);
    started = true;
    return runWorker(env);
  });
  // A worker the SDK could not create (a namespace the server lacks) leaves its workflow threads behind, which would
  // hold the process after its one line: it ends here, with its code.
  if (started && code !== ExitCode.ok && code !== ExitCode.interrupted) process.exit(code);
  return code;
}

/**
 * The worker: settings from the environment, metrics and logs, until SIGINT/SIGTERM. Every way it cannot start is
 * thrown to runCommand: one line naming the variable, and an exit code (2 a setting or a taken port, 3 Temporal
 * unreachable).
 */
async function runWorker(env: NodeJS.ProcessEnv): Promise<ExitCode> {
  const say = (line: string) => process.stderr.write(`tuneflow worker: ${line}\n`);
  const config = loadWorkerConfig(env);
  const tracingConfig = loadTracingConfig(env);
  // Before anything binds: the SDK's own error for a taken metrics port is a stack trace, and a receiver that
  // cannot listen would leave a worker that never polls.
  await checkPortsFree(config);
  const logger = createLogger(process.stderr, config.logLevel);
  await installRuntime(logger, config.metricsAddress);
  const traces = tracingConfig && (await startTracing(tracingConfig, logger));
  // What stopped the worker: 130 for Ctrl-C, 0 for SIGTERM (or a signal the SDK alone listens for, such as SIGQUIT).
  let stoppedBy: NodeJS.Signals | 'abort' | undefined;
  try {
    // A signal while connecting (up to the connect timeout) ends the worker then: it has nothing to drain yet.
    const stop = listenForStop();
    let tuneflow: TuneflowWorker | NodeJS.Signals | 'abort';
    try {
      // Temporal unreachable: runCommand says where it was looked for (exit 3).
      // The plugin's start report, with what only the command line knows: metrics, and where traces go (the origin
      // alone: a URL's user and password are not for the log).
      const report = {
        metrics: config.metricsAddress ?? 'off',
        traces: tracingConfig ? new URL(tracingConfig.url).origin : 'off',
      };
      tuneflow = await Promise.race([createTuneflowWorker(config, logger, traces?.tracing, report), stop.stopped]);
    } finally {
      stop.dispose();
    }
    if (typeof tuneflow === 'string') {
      say(`stopped by ${tuneflow} while connecting to Temporal`);
      await traces?.shutdown();
      // The core's connect cannot be cancelled, and holds the process until it times out (half a minute): the one
      // command that exits the process itself, with the code its stop gives.
      process.exit(exitCodeForStop(tuneflow));
    }
    // The SDK's own listeners drain the worker on SIGINT/SIGTERM and drop at the first; this one takes a repeat
    // that comes at once (npx forwards the terminal's Ctrl-C once more) for the same stop, so it cannot kill the
    // worker as it drains.
    const stopping = listenForStop();
    void stopping.stopped.then((signal) => (stoppedBy = signal));
    try {
      await tuneflow.run();
    } catch (err) {
      // The plugin names its options (the config passes them in code); here they are the variables.
      if (err instanceof ConfigError && err.variable === 'api.apiKey')
        throw new ConfigError('TUNEFLOW_API_KEY', err.message.slice('api.apiKey: '.length));
      // Taken between the check and the listen: the worker did not poll, and stops here. The plugin names its option
      // (the config passes it in code); here it is the variable.
      const listenError = err instanceof ConfigError && err.cause ? err.cause : err;
      throw (
        portProblem(listenError, 'TUNEFLOW_CALLBACK_PORT', `port ${config.callbacks?.port}`, CALLBACK_PORT_ADVICE) ??
        err
      );
    } finally {
      stopping.dispose();
    }
  } finally {
    await traces?.shutdown();
  }
  logger.info('tuneflow worker stopped');
  return stoppedBy ? exitCodeForStop(stoppedBy) : ExitCode.ok;
}

/** The metrics and callback ports, free to listen on; a ConfigError names the variable of a taken one. */
async function checkPortsFree(config: WorkerConfig): Promise<void> {
  await checkMetricsPortFree(config.metricsAddress);
  const callbacks = config.callbacks;
  if (callbacks && callbacks.port !== 0 && !(await portIsFree(callbacks.port, callbacks.host)))
    throw portTaken('TUNEFLOW_CALLBACK_PORT', `port ${callbacks.port}`, CALLBACK_PORT_ADVICE);
}
