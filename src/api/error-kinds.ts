/**
 * The kinds of failure the client reports, and which of them retrying cannot fix: one list, read by the activities
 * (a failure's `nonRetryable`) and the workflows' retry policies. No imports: workflow bundles take it whole.
 */

/** The stable name of each failure kind; activities map these to ApplicationFailure types. */
export const ErrorKind = {
  invalidInput: 'InvalidInput',
  offsetTooDeep: 'OffsetTooDeep',
  badRequest: 'BadRequest',
  unauthorized: 'Unauthorized',
  notFound: 'NotFound',
  validation: 'Validation',
  rateLimited: 'RateLimited',
  server: 'ServerError',
  gatewayTimeout: 'GatewayTimeout',
  connection: 'ConnectionFailure',
  timeout: 'ClientTimeout',
  unexpectedResponse: 'UnexpectedResponse',
} as const;
export type ErrorKind = (typeof ErrorKind)[keyof typeof ErrorKind];

/**
 * The kinds retrying cannot fix, as the same request would fail the same way: input refused before it was sent, a
 * too-deep offset, a 400, 401/403, 404 and 422. The activities fail these non-retryable, and the workflows' retry
 * policies name them (`nonRetryableErrorTypes`); every other kind retries.
 */
export const NON_RETRYABLE_KINDS: readonly ErrorKind[] = [
  ErrorKind.invalidInput,
  ErrorKind.offsetTooDeep,
  ErrorKind.badRequest,
  ErrorKind.unauthorized,
  ErrorKind.notFound,
  ErrorKind.validation,
];

/**
 * True when `type` (an error's kind, or a failure's type) is one retrying cannot fix.
 *
 * @example
 * isNonRetryableKind('Validation'); // true
 */
export function isNonRetryableKind(type: string | null | undefined): boolean {
  return (NON_RETRYABLE_KINDS as readonly (string | null | undefined)[]).includes(type);
}
