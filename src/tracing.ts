/**
 * One trace per job, through Temporal's OpenTelemetry plugin: the start, the workflow, each activity, each request to
 * the service, the callback and the signal it sends. TuneflowPlugin and TuneflowClient compose what is here when their
 * `tracing` option is set; src/tracing-environment.ts sets it up from the standard OTEL_* variables for `tuneflow
 * worker`.
 *
 * Spans made outside workflow code (the client's, the activities', the service requests', the receiver's) go to the
 * global OpenTelemetry provider, as OpenTelemetry libraries do: the application installs the SDK (a provider, a
 * context manager and the W3C propagator). Workflow code runs in Temporal's sandbox, which cannot reach it: its spans
 * go to the span processor given here.
 */
import type { Resource } from '@opentelemetry/resources';
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { Client } from '@temporalio/client';
import type { OpenTelemetryPlugin } from '@temporalio/interceptors-opentelemetry/lib/plugin';

// The package's modules, not its index (which loads the workflow side too, only the sandbox's), and only once tracing
// is asked for: 1.2 MiB of heap that every user of TuneflowPlugin or TuneflowClient would otherwise hold, tracing or not.
type ClientModule = typeof import('@temporalio/interceptors-opentelemetry/lib/client');
type PluginModule = typeof import('@temporalio/interceptors-opentelemetry/lib/plugin');
/* eslint-disable @typescript-eslint/no-require-imports */
const clientModule = () => require('@temporalio/interceptors-opentelemetry/lib/client') as ClientModule;
const pluginModule = () => require('@temporalio/interceptors-opentelemetry/lib/plugin') as PluginModule;
/* eslint-enable @typescript-eslint/no-require-imports */

/** Where a worker's workflow spans go. */
export interface TuneflowTracingOptions {
  /**
   * The processor of the application's tracer provider (e.g. a BatchSpanProcessor over an OTLP exporter): the
   * workflows' spans are made in the sandbox and handed to it by the worker.
   */
  spanProcessor: SpanProcessor;
  /** The resource the workflows' spans are exported with: the provider's, so every span names the same service. */
  resource: Resource;
}

/**
 * Temporal's OpenTelemetry plugin for these options: the client, activity and workflow interceptors, and the sink
 * that exports the workflows' spans.
 *
 * @example
 * const otel = openTelemetryPlugin({ spanProcessor, resource });
 */
export function openTelemetryPlugin(options: TuneflowTracingOptions): OpenTelemetryPlugin {
  if (typeof options?.spanProcessor?.onEnd !== 'function')
    throw new TypeError('tracing.spanProcessor: must be an OpenTelemetry SpanProcessor');
  if (typeof options.resource?.attributes !== 'object')
    throw new TypeError('tracing.resource: must be an OpenTelemetry Resource');
  return new (pluginModule().OpenTelemetryPlugin)({ spanProcessor: options.spanProcessor, resource: options.resource });
}

/**
 * `client`, or a client on the same connection whose workflow calls (start, signal, query, cancel) make spans in the
 * caller's trace and carry it to the run. A client that traces already is returned as it is.
 *
 * @example
 * const traced = tracedClient(new Client({ connection }));
 * await traced.workflow.start('trainThenGenerate', { ... }); // a StartWorkflow span, the run's parent
 */
export function tracedClient(client: Client): Client {
  const { interceptors } = client.options;
  const workflow = Array.isArray(interceptors?.workflow) ? interceptors.workflow : [];
  const { OpenTelemetryWorkflowClientInterceptor } = clientModule();
  if (workflow.some((interceptor) => interceptor instanceof OpenTelemetryWorkflowClientInterceptor)) return client;
  if (interceptors?.workflow !== undefined && !Array.isArray(interceptors.workflow))
    throw new TypeError('tracing: a client with the old form of workflow interceptors (an object) cannot be traced');
  // The connection's own plugins configure this client again; their interceptors may then appear twice.
  return new Client({
    connection: client.connection,
    namespace: client.options.namespace,
    identity: client.options.identity,
    dataConverter: client.options.dataConverter,
    workflow: client.options.workflow,
    interceptors: { ...interceptors, workflow: [...workflow, new OpenTelemetryWorkflowClientInterceptor()] },
  });
}
