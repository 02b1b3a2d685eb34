/**
 * The client's errors as ApplicationFailures. The `type` is the error's kind (src/api/errors.ts ErrorKind), which
 * the retry policies of src/workflows/policies.ts list as retryable or not; the service's own rules decide the
 * delays: 504 waits 60 s (the request most likely went through), 429 waits for Retry-After (60 s when absent).
 */
import { ApplicationFailure, type Duration } from '@temporalio/common';
import { APIError, ErrorKind, InvalidInputError, RateLimitError, TunesError, ValidationError } from '../api/errors';

/** After a 504 the service advises waiting a minute before asking again (spec 4.11, 7). */
export const GATEWAY_TIMEOUT_RETRY_DELAY: Duration = '60 seconds';
/** After a 429 without Retry-After. */
export const RATE_LIMIT_RETRY_DELAY: Duration = '60 seconds';

const NON_RETRYABLE: ReadonlySet<string> = new Set([
  ErrorKind.invalidInput,
  ErrorKind.offsetTooDeep,
  ErrorKind.badRequest,
  ErrorKind.unauthorized,
  ErrorKind.notFound,
  ErrorKind.validation,
]);

/** Maps any error an activity meets to the failure Temporal should see. Cancellation passes through. */
export function toApplicationFailure(err: unknown): unknown {
  if (err instanceof ApplicationFailure) return err;
  if (err instanceof TunesError) {
    const nonRetryable = NON_RETRYABLE.has(err.kind);
    return ApplicationFailure.create({
      message: err.message,
      type: err.kind,
      nonRetryable,
      details: [detailsOf(err)],
      nextRetryDelay: nonRetryable ? undefined : retryDelayOf(err),
      cause: err,
    });
  }
  return err;
}

function retryDelayOf(err: TunesError): Duration | undefined {
  if (err.kind === ErrorKind.gatewayTimeout) return GATEWAY_TIMEOUT_RETRY_DELAY;
  if (err instanceof RateLimitError) return err.retryAfterMs ?? RATE_LIMIT_RETRY_DELAY;
  return undefined;
}

/** What goes into history with the failure: enough to act on, never the API key (errors never hold it). */
function detailsOf(err: TunesError): Record<string, unknown> {
  if (err instanceof InvalidInputError) return { issues: err.issues };
  if (err instanceof ValidationError) return { status: err.status, fieldErrors: err.fieldErrors, body: err.body };
  if (err instanceof APIError) return { status: err.status, method: err.method, path: err.path, body: err.body };
  return {};
}
