/**
 * `tuneflow worker`'s traces, set up from OpenTelemetry's standard variables: an OTLP endpoint turns them on, nothing
 * is exported without one. Spans are batched to the collector over OTLP/HTTP (protobuf, OTLP's default protocol);
 * the OpenTelemetry SDK reads the rest of its variables (headers, timeout, sampler, batch sizes, propagators) itself.
 */
import { diag, type DiagLogger, DiagLogLevel } from '@opentelemetry/api';
import type { Logger } from '@temporalio/common';
import { ConfigError } from './config';
import type { TuneflowTracingOptions } from './tracing';

/** The service name of the worker's spans unless OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) names another. */
export const DEFAULT_TRACING_SERVICE_NAME = 'tuneflow-worker';

/** The OpenTelemetry variables the worker acts on: the README's configuration table follows this. */
export const TRACING_ENVIRONMENT = {
  OTEL_EXPORTER_OTLP_ENDPOINT:
    'OTLP/HTTP base URL of a collector, e.g. http://jaeger:4318 (spans go to <url>/v1/traces); unset: no traces',
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'the full URL for spans, instead of the base URL above',
  OTEL_EXPORTER_OTLP_HEADERS: 'headers for the collector, `name=value,...` (its API key, say)',
  OTEL_SERVICE_NAME: `service.name of the spans (default ${DEFAULT_TRACING_SERVICE_NAME})`,
  OTEL_RESOURCE_ATTRIBUTES: 'more resource attributes, `key=value,...`',
  OTEL_TRACES_SAMPLER: 'sampler, with OTEL_TRACES_SAMPLER_ARG (default parentbased_always_on)',
  OTEL_TRACES_EXPORTER: '`otlp` (default) or `none`',
  OTEL_SDK_DISABLED: '`true`: no traces',
} as const;

type Env = Record<string, string | undefined>;

/** Where the worker sends spans; undefined when tracing is off. */
export interface TracingConfig {
  /** The collector's URL for spans. */
  url: string;
}

/**
 * Reads and checks the worker's tracing variables: off unless an OTLP endpoint is set, or when the SDK is disabled or
 * the exporter is `none`.
 *
 * @example
 * loadTracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://jaeger:4318' }); // { url: 'http://jaeger:4318/v1/traces' }
 */
export function loadTracingConfig(env: Env = process.env): TracingConfig | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined;
  const exporters = (env.OTEL_TRACES_EXPORTER || 'otlp').split(',').map((name) => name.trim());
  if (exporters.includes('none')) return undefined;
  if (exporters.some((name) => name !== 'otlp'))
    throw new ConfigError('OTEL_TRACES_EXPORTER', 'must be otlp or none (spans are sent over OTLP only)');
  const protocol = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL || 'http/protobuf';
  if (protocol !== 'http/protobuf')
    throw new ConfigError('OTEL_EXPORTER_OTLP_PROTOCOL', 'must be http/protobuf (OTLP over HTTP, port 4318)');
  const tracesUrl = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  const baseUrl = env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (tracesUrl) return { url: checkedUrl('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', tracesUrl) };
  if (baseUrl) return { url: `${checkedUrl('OTEL_EXPORTER_OTLP_ENDPOINT', baseUrl).replace(/\/+$/, '')}/v1/traces` };
  return undefined;
}

function checkedUrl(variable: string, value: string): string {
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:'))
    throw new ConfigError(variable, 'must be an http(s) URL of an OTLP collector');
  return value;
}

/** Tracing that runs: the options for TuneflowPlugin, and the shutdown that sends what is left. */
export interface RunningTracing {
  tracing: TuneflowTracingOptions;
  /** Exports the spans still batched, then stops. */
  shutdown(): Promise<void>;
}

/**
 * Installs the OpenTelemetry SDK for `config` as the global provider (with an AsyncLocalStorage context manager and
 * the propagators of OTEL_PROPAGATORS, W3C trace context by default); OpenTelemetry's own warnings (a collector that
 * cannot be reached) go to `logger`. The SDK is loaded only here: a process that does not trace never pays for it.
 *
 * @example
 * const config = loadTracingConfig(process.env);
 * const traces = config && (await startTracing(config, logger));
 * new TuneflowPlugin({ api, tracing: traces?.tracing });
 */
export async function startTracing(config: TracingConfig, logger: Logger): Promise<RunningTracing> {
  const [{ AsyncLocalStorageContextManager }, { OTLPTraceExporter }, { envDetectorSync, Resource }, sdk] =
    await Promise.all([
      import('@opentelemetry/context-async-hooks'),
      import('@opentelemetry/exporter-trace-otlp-proto'),
      import('@opentelemetry/resources'),
      import('@opentelemetry/sdk-trace-base'),
    ]);
  const { BasicTracerProvider, BatchSpanProcessor } = sdk;
  diag.setLogger(diagLogger(logger), DiagLogLevel.WARN);
  const resource = Resource.default()
    .merge(new Resource({ 'service.name': DEFAULT_TRACING_SERVICE_NAME }))
    .merge(envDetectorSync.detect());
  const spanProcessor = new BatchSpanProcessor(new OTLPTraceExporter({ url: config.url }));
  const provider = new BasicTracerProvider({ resource, spanProcessors: [spanProcessor] });
  provider.register({ contextManager: new AsyncLocalStorageContextManager().enable() });
  return { tracing: { spanProcessor, resource }, shutdown: () => provider.shutdown() };
}

function diagLogger(logger: Logger): DiagLogger {
  const line =
    (level: 'error' | 'warn' | 'info' | 'debug') =>
    (message: string, ...args: unknown[]) =>
      logger[level](`opentelemetry: ${message}`, args.length ? { details: args.map(String).join(' ') } : undefined);
  return { error: line('error'), warn: line('warn'), info: line('info'), debug: line('debug'), verbose: line('debug') };
}
