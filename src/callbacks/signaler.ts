/**
 * How the receiver wakes a run: a Signaler. The one tuneflow uses signals through a Temporal client; a Temporal that
 * cannot be reached is told apart from one that said no, so the receiver can answer 503 for the first.
 */
import { type Client, isGrpcServiceError, ServiceError, WorkflowNotFoundError } from '@temporalio/client';
import { callbackSignal, type CallbackWakeUp } from '../contract/messages';
import { type Duration, durationToMs } from '../duration';
import type { CallbackRun } from './signing';

/** What became of a signal: sent, or its workflow is closed or unknown. */
export type SignalOutcome = 'delivered' | 'workflow-not-found';

/** Wakes a run with a callback's wake-up, as a signal. */
export interface Signaler {
  signal(run: CallbackRun, wakeUp: CallbackWakeUp): Promise<SignalOutcome>;
}

/** Temporal could not be reached (or did not answer in time): the receiver answers 503. */
export class SignalerUnavailableError extends Error {
  /** The workflow the signal was for, when the thrower knew it. */
  readonly workflowId?: string;
  constructor(message?: string, options?: { cause?: unknown; workflowId?: string }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'SignalerUnavailableError';
    this.workflowId = options?.workflowId;
  }
}

export interface TemporalSignalerOptions {
  /**
   * Deadline of one signal, the client's own retries of an unreachable server included; past it the callback is
   * answered 503. The answer can come up to one retry interval (at most about 6 s) after the deadline, since the
   * client checks the deadline when it retries.
   * @default '10 seconds'
   */
  timeout?: Duration;
}

/**
 * gRPC status codes that mean "the server was not reached or did not answer", not "the server said no"
 * (numbers from the gRPC spec; @grpc/grpc-js is not a direct dependency).
 */
const UNAVAILABLE_CODES: ReadonlySet<number> = new Set([
  1, // CANCELLED: the connection was closed under the call
  4, // DEADLINE_EXCEEDED
  8, // RESOURCE_EXHAUSTED
  10, // ABORTED
  14, // UNAVAILABLE
]);

function isTemporalUnavailable(err: unknown): boolean {
  if (isGrpcServiceError(err)) return UNAVAILABLE_CODES.has(err.code);
  if (err instanceof ServiceError) {
    // A ServiceError without a gRPC status never reached the server (closed channel, transport failure).
    return isGrpcServiceError(err.cause) ? UNAVAILABLE_CODES.has(err.cause.code) : true;
  }
  return false;
}

/**
 * A Signaler that signals runs through a Temporal client: the `callback` signal, to the run the URL was signed for
 * (a closed run, or a later run with the same workflow ID, takes nothing).
 *
 * @example
 * const client = new Client({ connection: await Connection.connect({ address: 'localhost:7233' }) });
 * const receiver = await startCallbackReceiver({ signer, signaler: temporalSignaler(client) });
 */
export function temporalSignaler(client: Client, options: TemporalSignalerOptions = {}): Signaler {
  const timeoutMs = durationToMs(options.timeout ?? '10 seconds', 'timeout');
  return {
    async signal({ workflowId, runId }, wakeUp) {
      // A deadline, not a timer raced against the call: it ends the client's retries too, so no retry is left
      // pending (and firing on a closed connection) once this returns.
      try {
        await client.withDeadline(Date.now() + timeoutMs, () =>
          client.workflow.getHandle(workflowId, runId).signal(callbackSignal, wakeUp),
        );
        return 'delivered';
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return 'workflow-not-found';
        if (isTemporalUnavailable(err))
          throw new SignalerUnavailableError(`Temporal is unavailable: ${(err as Error).message}`, {
            cause: err,
            workflowId,
          });
        throw err;
      }
    },
  };
}
