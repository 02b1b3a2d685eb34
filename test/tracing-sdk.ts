/**
 * The OpenTelemetry SDK as an application installs it, with an in-memory exporter: the tracing tests read every span
 * the process made, and check none carries a secret.
 */
import { context, propagation, type Attributes, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { Resource } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import type { TuneflowTracingOptions } from '../src/tracing';

export interface TestTracing {
  exporter: InMemorySpanExporter;
  /** What TuneflowPlugin's `tracing` option takes. */
  options: TuneflowTracingOptions;
  /** Unregisters the global provider, context manager and propagator. */
  uninstall(): Promise<void>;
}

/**
 * A global provider exporting every span, at once, to memory.
 *
 * @example
 * const tracing = installTestTracing();
 * // ... tracing.exporter.getFinishedSpans()
 */
export function installTestTracing(): TestTracing {
  const exporter = new InMemorySpanExporter();
  const spanProcessor = new SimpleSpanProcessor(exporter);
  const resource = new Resource({ 'service.name': 'tuneflow-test' });
  const provider = new BasicTracerProvider({ resource, spanProcessors: [spanProcessor] });
  provider.register({ contextManager: new AsyncLocalStorageContextManager().enable() });
  return {
    exporter,
    options: { spanProcessor, resource },
    async uninstall() {
      await provider.shutdown();
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
}

/** Every text a span carries: its name, status message, attributes, events' names and attributes, links. */
export function spanTexts(span: ReadableSpan): string[] {
  const values = (attributes: Attributes | undefined) =>
    Object.entries(attributes ?? {}).flatMap(([key, value]) => [key, String(JSON.stringify(value))]);
  return [
    span.name,
    span.status.message ?? '',
    ...values(span.attributes),
    ...values(span.resource.attributes),
    ...span.events.flatMap((event) => [event.name, ...values(event.attributes)]),
    ...span.links.flatMap((link) => values(link.attributes)),
  ];
}

/** A callback signature in a URL, as given or percent-encoded. */
export const SIGNATURE = /sig(=|%3D)[0-9a-fA-F]+/;

/**
 * The spans that carry a secret: one of `secrets`, or a callback signature.
 *
 * @example
 * expect(spansWithSecrets(spans, [API_KEY, CALLBACK_SECRET])).toEqual([]);
 */
export function spansWithSecrets(spans: readonly ReadableSpan[], secrets: readonly string[]): string[] {
  return spans
    .filter((span) => spanTexts(span).some((text) => SIGNATURE.test(text) || secrets.some((s) => text.includes(s))))
    .map((span) => span.name);
}
