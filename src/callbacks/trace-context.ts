/**
 * The trace a callback belongs to, carried in its URL as a W3C `traceparent` query parameter, so the receiver's span
 * (and the `callback` signal it sends) joins the job's trace instead of starting one of its own.
 *
 * The parameter names the workflow's span that scheduled the activity handing out the URL (`StartActivity:createTune`),
 * read from the activity's Temporal headers: every attempt of that activity sees the same headers, so a retried create
 * sends the URL the first attempt sent (the service's idempotency and the look-up before a retry compare it).
 *
 * It is context, not authority: the signature covers the kind and the run, never this parameter. A forged one can
 * only move the receiver's span into another trace (or mark it unsampled), and only on a URL whose signature holds;
 * it is parsed strictly (W3C version 00, 55 characters) and nothing else of it (tracestate, baggage) is read.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import {
  type Context,
  isSpanContextValid,
  ROOT_CONTEXT,
  type SpanContext,
  trace,
  TraceFlags,
} from '@opentelemetry/api';
import { defaultPayloadConverter, type Headers } from '@temporalio/common';
import type {
  ActivityExecuteInput,
  ActivityInboundCallsInterceptor,
  ActivityInterceptorsFactory,
} from '@temporalio/worker';

/** The query parameter of a callback URL that carries the trace context. */
export const TRACEPARENT_PARAM = 'traceparent';

/** The Temporal header OpenTelemetry's interceptors carry the context in (the same name in every Temporal SDK). */
const TEMPORAL_TRACE_HEADER = '_tracer-data';

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/**
 * `00-<trace id>-<span id>-<flags>` for a span context.
 *
 * @example
 * formatTraceparent(trace.getSpanContext(context.active())!); // '00-4bf92f35...-00f067aa0ba902b7-01'
 */
export function formatTraceparent(span: SpanContext): string {
  return `00-${span.traceId}-${span.spanId}-${(span.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

/**
 * The span context a `traceparent` names, or undefined for anything but a well-formed version-00 value with non-zero
 * ids (lowercase hex, as the W3C format requires).
 *
 * @example
 * parseTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'); // { traceId, spanId, traceFlags: 1 }
 */
export function parseTraceparent(value: unknown): SpanContext | undefined {
  if (typeof value !== 'string' || value.length !== 55) return undefined;
  const match = TRACEPARENT.exec(value);
  if (match === null) return undefined;
  const span: SpanContext = {
    traceId: match[1],
    spanId: match[2],
    // Only the sampled bit is defined; the others are not carried on.
    traceFlags: parseInt(match[3], 16) & TraceFlags.SAMPLED,
    isRemote: true,
  };
  return isSpanContextValid(span) ? span : undefined;
}

/**
 * The context a callback's span continues: the span its URL's signed `traceparent` names, or none (a new trace).
 *
 * @example
 * tracer.startSpan('POST /callbacks/tune', { kind: SpanKind.SERVER }, callbackParent(verified.params));
 */
export function callbackParent(params: Readonly<Record<string, string>>): Context {
  const span = parseTraceparent(params[TRACEPARENT_PARAM]);
  return span === undefined ? ROOT_CONTEXT : trace.setSpanContext(ROOT_CONTEXT, span);
}

// ---------------------------------------------------------------------------------------------------------------
// Activity side: which span scheduled the running activity.

const scheduledBy = new AsyncLocalStorage<string>();

/**
 * The `traceparent` the activity's Temporal headers carry, when the workflow that scheduled it was traced. Read from
 * the header itself, not through OpenTelemetry's propagator: a worker that does not trace hands out the same URL as
 * one that does.
 */
function scheduledTraceparent(headers: Headers): string | undefined {
  const payload = headers[TEMPORAL_TRACE_HEADER];
  if (payload === undefined) return undefined;
  try {
    const carrier = defaultPayloadConverter.fromPayload<Record<string, unknown>>(payload);
    const span = parseTraceparent(carrier?.traceparent);
    return span === undefined ? undefined : formatTraceparent(span);
  } catch {
    return undefined;
  }
}

class ScheduledByInterceptor implements ActivityInboundCallsInterceptor {
  execute(input: ActivityExecuteInput, next: (input: ActivityExecuteInput) => Promise<unknown>): Promise<unknown> {
    const traceparent = scheduledTraceparent(input.headers);
    return traceparent === undefined ? next(input) : scheduledBy.run(traceparent, () => next(input));
  }
}

/** The activity interceptor that remembers, for `callbackTraceParams`, which span scheduled the running activity. */
export const rememberScheduledBy: ActivityInterceptorsFactory = () => ({ inbound: new ScheduledByInterceptor() });

/**
 * The context parameters of the callback URLs an activity hands out: `{ traceparent }` when the activity was
 * scheduled by a traced workflow, else none.
 *
 * @example
 * signer.url('tune', run, { ...callbackTraceParams() });
 */
export function callbackTraceParams(): Record<string, string> | undefined {
  const traceparent = scheduledBy.getStore();
  return traceparent === undefined ? undefined : { [TRACEPARENT_PARAM]: traceparent };
}
