/**
 * `tuneflow callbacks`: the callback receiver alone, for deployments that run it apart from the workers (say, behind
 * the public ingress while the workers stay private). Settings come from the environment; flags override them.
 */
import { Client, Connection } from '@temporalio/client';
import {
  ConfigError,
  readPort,
  DEFAULT_CALLBACK_PORT,
  loadLogLevel,
  loadMetricsAddress,
  loadReceiverConfig,
  loadTemporalConfig,
  type LogLevel,
  type ReceiverConfig,
} from '../config';
import { ExitCode, exitCodeForStop, parseFlags, portProblem, runCommand, type CommandIO } from './command-line';
import { listenForStop } from './stop-signal';
import { createLogger } from '../logging';
import { tracedClient } from '../tracing';
import { loadTracingConfig, startTracing, TRACING_ENVIRONMENT } from '../tracing-environment';
import { startCallbackReceiver, temporalSignaler } from '../callbacks/receiver';
import { CallbackSigner } from '../callbacks/signing';
import { callbackCounter } from '../metrics';
import { checkMetricsPortFree, installRuntime } from './metrics-runtime';

const USAGE = `Usage: tuneflow callbacks [--port N] [--host H] [--help]

Receives the service's callbacks and turns them into workflow signals.

Options:
  --port N   port to listen on (default: TUNEFLOW_CALLBACK_PORT, else ${DEFAULT_CALLBACK_PORT}; 0 picks a free one)
  --host H   address to bind (default: TUNEFLOW_CALLBACK_HOST, else 0.0.0.0)
  --help     show this help

Environment:
  TUNEFLOW_CALLBACK_SECRET    HMAC key of the callback URLs, at least 16 characters (required)
  TUNEFLOW_CALLBACK_BASE_URL  public http(s) URL of this receiver (optional here: verifying needs only the secret)
  TUNEFLOW_CALLBACK_PORT      port, as --port
  TUNEFLOW_CALLBACK_HOST      address, as --host
  TUNEFLOW_LOG_LEVEL          TRACE, DEBUG, INFO, WARN or ERROR (default INFO)
  TUNEFLOW_METRICS_ADDRESS    Prometheus scrape address host:port of tuneflow_callbacks_total, or "off" (default off)
  TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS*, TEMPORAL_PROFILE, TEMPORAL_CONFIG_FILE
                              the Temporal connection (connected on the first callback)
  ${Object.keys(TRACING_ENVIRONMENT).join(', ')}
                              traces: each callback's span continues its job's trace (none sent without an endpoint)
`;

interface Settings extends ReceiverConfig {
  logLevel: LogLevel;
  /** Off unless set: beside a worker on one host, the worker's default port would be taken. */
  metricsAddress: string | undefined;
}

/** The environment's settings (src/config.ts), then the flags over them; a ConfigError names what is wrong. */
function readSettings(values: { port?: string; host?: string }, env: Record<string, string | undefined>): Settings {
  const settings = {
    ...loadReceiverConfig(env),
    logLevel: loadLogLevel(env),
    metricsAddress: loadMetricsAddress(env, 'off'),
  };
  if (values.port !== undefined) settings.port = readPort(values.port, '--port');
  if (values.host !== undefined) {
    if (!values.host.trim())
      throw new ConfigError('--host', 'must be an address to bind, such as 0.0.0.0 or 127.0.0.1');
    settings.host = values.host;
  }
  return settings;
}

/**
 * Runs the callback receiver until SIGINT or SIGTERM; resolves to the exit code (130 stopped by Ctrl-C, 0 by SIGTERM,
 * 1 could not listen, 2 bad flag or setting, a taken port included). `argv` holds the arguments after `callbacks`.
 *
 * @example
 * // TUNEFLOW_CALLBACK_SECRET=... TEMPORAL_ADDRESS=temporal:7233 tuneflow callbacks --port 3001
 * process.exitCode = await callbacksCommand(process.argv.slice(3));
 */
export async function callbacksCommand(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const io: CommandIO = { stdout: process.stdout, stderr: process.stderr, env };
  return runCommand('callbacks', io, () => receive(argv, io));
}

async function receive(argv: string[], { stdout, stderr, env }: CommandIO): Promise<ExitCode> {
  const { values } = parseFlags({
    args: argv,
    options: { port: { type: 'string' }, host: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) {
    stdout.write(USAGE);
    return ExitCode.ok;
  }
  const settings = readSettings(values, env);
  const temporal = loadTemporalConfig(env);
  const tracing = loadTracingConfig(env);

  const { port, host, secret, logLevel, metricsAddress } = settings;
  const urlHost = host.includes(':') ? `[${host}]` : host;
  await checkMetricsPortFree(metricsAddress);
  const logger = createLogger(stderr, logLevel);
  // Only with metrics: a receiver without them never loads the SDK's native Runtime.
  const meter = metricsAddress ? await installRuntime(logger, metricsAddress, []) : undefined;
  const signer = new CallbackSigner({ baseUrl: settings.baseUrl, secret });
  const namespace = temporal.namespace ?? 'default';
  // Lazy: the receiver answers health checks (and 503 to callbacks) while Temporal is still out of reach.
  const connection = Connection.lazy(temporal.connectionOptions as Parameters<typeof Connection.lazy>[0]);
  const traces = tracing && (await startTracing(tracing, logger));
  const client = new Client({ connection, namespace });
  const signaler = temporalSignaler(traces ? tracedClient(client) : client);

  const stop = listenForStop();

  let receiver: Awaited<ReturnType<typeof startCallbackReceiver>>;
  try {
    receiver = await startCallbackReceiver({
      port,
      host,
      signer,
      signaler,
      logger,
      limits: settings.limits,
      ...(meter && { countCallback: callbackCounter(meter.withTags({ namespace })) }),
    });
  } catch (err) {
    stop.dispose();
    await connection.close().catch(() => undefined);
    await traces?.shutdown();
    // A taken or forbidden port is a setting to change (exit 2, naming it); anything else broke (exit 1).
    const setting = argv.includes('--port') ? '--port' : 'TUNEFLOW_CALLBACK_PORT';
    throw (
      portProblem(err, setting, `${urlHost}:${port}`) ??
      new Error(`cannot listen on ${urlHost}:${port}: ${(err as Error).message}`)
    );
  }
  const boundPort = new URL(receiver.url).port;
  stdout.write(`callbacks listening on http://${urlHost}:${boundPort}\n`);
  logger.info('callback receiver started', {
    url: `http://${urlHost}:${boundPort}`,
    metrics: metricsAddress ?? 'off',
    namespace,
    temporalAddress: temporal.connectionOptions.address ?? 'localhost:7233',
  });

  const signal = await stop.stopped;
  logger.info('callback receiver stopping', { signal });
  await receiver.close();
  await connection.close().catch(() => undefined);
  await traces?.shutdown();
  return exitCodeForStop(signal);
}
