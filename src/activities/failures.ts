/**
 * The client's errors as ApplicationFailures. The `type` is the error's kind (src/api/errors.ts ErrorKind), which
 * is retryable or not by NON_RETRYABLE_KINDS (the workflows' retry policies name the same list); the service's own rules decide the
 * delays: 504 waits 60 s (the request most likely went through), 429 waits for Retry-After (60 s when absent).
 */
import { ApplicationFailure, type Duration, type RetryPolicy } from '@temporalio/common';
import { redactCallbackSignatures } from '../callbacks/signing';
import { durationToMs } from '../duration';
import {
  APIError,
  ErrorKind,
  InvalidInputError,
  isNonRetryableKind,
  RateLimitError,
  TunesError,
  ValidationError,
} from '../api/errors';

/** After a 504 the service advises waiting a minute before asking again (spec 4.11, 7). */
export const GATEWAY_TIMEOUT_RETRY_DELAY: Duration = '60 seconds';
/** After a 429 without Retry-After. */
export const RATE_LIMIT_RETRY_DELAY: Duration = '60 seconds';

/** Where an activity stands in its retries: a 429's Retry-After never shortens the policy's own backoff. */
export interface AttemptInfo {
  attempt: number;
  retryPolicy?: RetryPolicy;
}

/** Maps any error an activity meets to the failure Temporal should see. Cancellation passes through. */
export function toApplicationFailure(err: unknown, attempt?: AttemptInfo): unknown {
  if (err instanceof ApplicationFailure) return err;
  if (err instanceof TunesError) {
    const nonRetryable = isNonRetryableKind(err.kind);
    // The error itself goes into history as the cause, its message and stack with it.
    err.message = redactCallbackSignatures(err.message);
    if (err.stack) err.stack = redactCallbackSignatures(err.stack);
    return ApplicationFailure.create({
      message: err.message,
      type: err.kind,
      nonRetryable,
      // An answer's body may echo the request, callback URL included.
      details: [redactCallbackSignatures(detailsOf(err))],
      nextRetryDelay: nonRetryable ? undefined : retryDelayOf(err, attempt),
      cause: err,
    });
  }
  return err;
}

function retryDelayOf(err: TunesError, attempt: AttemptInfo | undefined): Duration | undefined {
  if (err.kind === ErrorKind.gatewayTimeout) return GATEWAY_TIMEOUT_RETRY_DELAY;
  if (err instanceof RateLimitError) {
    if (err.retryAfterMs === undefined) return RATE_LIMIT_RETRY_DELAY;
    // Retry-After is the least the service asks for; a short one must not burn the attempts in seconds.
    return Math.max(err.retryAfterMs, attempt ? backoffMs(attempt) : 0);
  }
  return undefined;
}

/** The delay the retry policy itself would wait after this attempt. */
export function backoffMs({ attempt, retryPolicy }: AttemptInfo): number {
  if (!retryPolicy?.initialInterval) return 0;
  const initial = durationToMs(retryPolicy.initialInterval, 'initialInterval');
  const coefficient = retryPolicy.backoffCoefficient ?? 2;
  const maximum = retryPolicy.maximumInterval
    ? durationToMs(retryPolicy.maximumInterval, 'maximumInterval')
    : initial * 100;
  return Math.min(initial * coefficient ** Math.max(0, attempt - 1), maximum);
}

/** What goes into history with the failure: enough to act on, never the API key (errors never hold it). */
function detailsOf(err: TunesError): Record<string, unknown> {
  if (err instanceof InvalidInputError) return { issues: err.issues };
  if (err instanceof ValidationError) return { status: err.status, fieldErrors: err.fieldErrors, body: err.body };
  if (err instanceof APIError) return { status: err.status, method: err.method, path: err.path, body: err.body };
  return {};
}
