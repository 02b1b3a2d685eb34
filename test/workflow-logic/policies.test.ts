import { ActivityFailure, ApplicationFailure, CancelledFailure, RetryState, TimeoutFailure } from '@temporalio/common';
import { msToNumber } from '@temporalio/common/lib/time';
import { toApplicationFailure } from '../../src/activities/failures';
import {
  APIError,
  ConnectionError,
  ErrorKind,
  InvalidInputError,
  isNonRetryableKind,
  NON_RETRYABLE_KINDS,
  TimeoutError,
  UnexpectedResponseError,
} from '../../src/api/errors';
import { LIMITS } from '../../src/api/schemas';
import {
  isTransientFailure,
  pollActivityOptions,
  serviceActivityOptions,
  serviceRetryPolicy,
} from '../../src/workflows/policies';

const request = { method: 'POST', path: '/tunes' };

/** One error of every kind the client throws, as the activities would meet them. */
const errorsByKind: Record<ErrorKind, Error> = {
  InvalidInput: new InvalidInputError('tune', [{ field: 'tune.name', rule: 'is required' }]),
  OffsetTooDeep: APIError.generate(400, request, { error: 'offset too large, use before_id' }),
  BadRequest: APIError.generate(400, request, { error: 'bad' }),
  Unauthorized: APIError.generate(401, request, { error: 'no key' }),
  NotFound: APIError.generate(404, request, { error: 'no such tune' }),
  Validation: APIError.generate(422, request, { images: ['must contain at least one image'] }),
  RateLimited: APIError.generate(429, request, {}, { 'retry-after': '5' }),
  ServerError: APIError.generate(500, request, { error: 'boom' }),
  GatewayTimeout: APIError.generate(504, request, ''),
  ConnectionFailure: new ConnectionError('POST', '/tunes', new Error('ECONNREFUSED')),
  ClientTimeout: new TimeoutError('POST', '/tunes', 35_000),
  UnexpectedResponse: new UnexpectedResponseError('POST', '/tunes', '<html>', 'not JSON'),
};

function activityFailure(cause: Error): ActivityFailure {
  return new ActivityFailure(
    'activity failed',
    'createTune',
    '1',
    RetryState.MAXIMUM_ATTEMPTS_REACHED,
    'worker',
    cause,
  );
}

describe('failure types', () => {
  const kinds = Object.values(ErrorKind);

  test("the non-retryable ones are the issue's list (422, 401/403, 404, deep offset, bad input) plus a plain 400", () => {
    expect([...NON_RETRYABLE_KINDS].sort()).toEqual(
      ['BadRequest', 'InvalidInput', 'NotFound', 'OffsetTooDeep', 'Unauthorized', 'Validation'].sort(),
    );
    expect(serviceRetryPolicy.nonRetryableErrorTypes).toEqual([...NON_RETRYABLE_KINDS]);
    expect(pollActivityOptions.retry?.nonRetryableErrorTypes).toEqual([...NON_RETRYABLE_KINDS]);
  });

  test.each(kinds)('the activities and the policy agree on %s', (kind) => {
    const failure = toApplicationFailure(errorsByKind[kind]);
    expect(failure).toBeInstanceOf(ApplicationFailure);
    const { type, nonRetryable } = failure as ApplicationFailure;
    expect(type).toBe(kind);
    expect(nonRetryable).toBe(isNonRetryableKind(kind));
  });

  test('a 403 is Unauthorized like a 401', () => {
    expect((toApplicationFailure(APIError.generate(403, request, {})) as ApplicationFailure).type).toBe('Unauthorized');
  });
});

describe('retry options', () => {
  test('back off from 30 seconds, doubling, to a ceiling of minutes', () => {
    expect(msToNumber(serviceRetryPolicy.initialInterval!)).toBe(30_000);
    expect(serviceRetryPolicy.backoffCoefficient).toBe(2);
    const max = msToNumber(serviceRetryPolicy.maximumInterval!);
    expect(max).toBeGreaterThanOrEqual(60_000);
    expect(max).toBeLessThanOrEqual(30 * 60_000);
  });

  test('attempts are bounded, so a dead service ends in a failure within the hour', () => {
    const attempts = serviceRetryPolicy.maximumAttempts!;
    expect(attempts).toBeGreaterThan(1);
    let waited = 0;
    let interval = msToNumber(serviceRetryPolicy.initialInterval!);
    for (let i = 1; i < attempts; i++) {
      waited += interval;
      interval = Math.min(interval * 2, msToNumber(serviceRetryPolicy.maximumInterval!));
    }
    const attemptMs = msToNumber(serviceActivityOptions.startToCloseTimeout!);
    expect(waited + attempts * attemptMs).toBeLessThanOrEqual(60 * 60_000);
    // Long enough to ride out a short outage.
    expect(waited).toBeGreaterThanOrEqual(10 * 60_000);
  });

  test("one attempt outlasts the service's 30 s limit and the client's 35 s timeout", () => {
    for (const options of [serviceActivityOptions, pollActivityOptions]) {
      const attemptMs = msToNumber(options.startToCloseTimeout!);
      expect(attemptMs).toBeGreaterThan(LIMITS.requestTimeoutMs + 5_000);
      expect(attemptMs).toBeLessThanOrEqual(5 * 60_000);
    }
  });

  test('polls give up sooner than creates (the next poll or a callback will come)', () => {
    expect(pollActivityOptions.retry!.maximumAttempts!).toBeLessThan(serviceRetryPolicy.maximumAttempts!);
    expect(pollActivityOptions.retry!.initialInterval).toBe(serviceRetryPolicy.initialInterval);
  });
});

describe('isTransientFailure', () => {
  test('retries that ran out on a server error, a timeout or a lost connection: try again later', () => {
    expect(isTransientFailure(activityFailure(ApplicationFailure.retryable('500', 'ServerError')))).toBe(true);
    expect(isTransientFailure(activityFailure(ApplicationFailure.retryable('gone', 'ConnectionFailure')))).toBe(true);
    expect(isTransientFailure(activityFailure(new TimeoutFailure('timed out', undefined, 'START_TO_CLOSE')))).toBe(
      true,
    );
  });

  test('failures that cannot heal, and cancellation, are not transient', () => {
    expect(isTransientFailure(activityFailure(ApplicationFailure.nonRetryable('404', 'NotFound')))).toBe(false);
    // A non-retryable type even without the flag (the policy would not have retried it).
    expect(isTransientFailure(activityFailure(ApplicationFailure.retryable('401', 'Unauthorized')))).toBe(false);
    expect(isTransientFailure(activityFailure(new CancelledFailure('cancelled')))).toBe(false);
    expect(isTransientFailure(new CancelledFailure('cancelled'))).toBe(false);
    expect(isTransientFailure(new Error('a bug'))).toBe(false);
  });
});
