/**
 * `tuneflow-temporal/nexus`: tuneflow as a Nexus service, the contract a caller in another namespace imports. The
 * service's name, its operations (the workflows' names), their inputs and results, and the failures a caller can
 * branch on; no activity, client or worker code, so a caller's workflow bundle imports it with `@temporalio/workflow`
 * alone. TuneflowPlugin registers the handlers (src/nexus/handler.ts) on tuneflow's worker.
 *
 * @example
 * const tuneflow = createNexusServiceClient({ service: tuneflowService, endpoint: 'tuneflow' });
 * const { tune, prompts } = await tuneflow.executeOperation('trainThenGenerate', { key: 'order-1234', tune, prompts });
 */
import { ApplicationFailure } from '@temporalio/common';
import * as nexus from 'nexus-rpc';
import { ErrorKind, type InputIssue } from '../api/errors';
import { FailureType, type OverBudgetDetails } from '../contract/failures';
import type {
  ClaimHeldDetails,
  InspectionRefusedDetails,
  JobEndedDetails,
  PriceUnknownDetails,
  PromptsNeverSettledDetails,
  TuneNeverTrainedDetails,
} from '../contract/failures';
import type { KeyInUseDetails } from '../contract/keys';
import type {
  GenerateInput,
  GenerateResult,
  PackTuneInput,
  PackTuneResult,
  TrainThenGenerateInput,
  TrainThenGenerateResult,
} from '../contract/inputs';

export { ErrorKind, FailureType };
export type { InputIssue, OverBudgetDetails, PromptsNeverSettledDetails, TuneNeverTrainedDetails };
export type { ClaimHeldDetails, InspectionRefusedDetails, JobEndedDetails, KeyInUseDetails, PriceUnknownDetails };
export type * from '../contract/inputs';

/** The job's business key, beside the workflow's own input. */
export interface BusinessKey {
  /**
   * The job's business key (an order ID), scoped to the tenant the operator mapped the caller's endpoint to: it runs
   * as workflow ID `tuneflow:nexus:<tenant>:<key>`. A second call of the key with the same input attaches to the job
   * that exists (running, or its outcome once closed); a call with other input is refused (KeyInUse), naming the
   * fields that differ; another tenant's key of the same name is another job. Use a new key for a new job.
   * @format 1 to 905 bytes as UTF-8, not starting with "tuneflow:"
   */
  key: string;
}

export type TrainThenGenerateOperationInput = BusinessKey & TrainThenGenerateInput;
export type GenerateOperationInput = BusinessKey & GenerateInput;
export type PackTuneOperationInput = BusinessKey & PackTuneInput;

/**
 * The tuneflow Nexus service: one operation per workflow, named as the workflow, taking its input plus the business
 * key and completing with its result. A run's failure fails the operation with the run's typed failure as its cause
 * (see {@link tuneflowFailureOf}); cancelling the operation cancels the run (`cleanupOnCancel` as for any cancel).
 */
export const tuneflowService = nexus.service('tuneflow', {
  /** Trains a tune, then generates the prompts with it. */
  trainThenGenerate: nexus.operation<TrainThenGenerateOperationInput, TrainThenGenerateResult>(),
  /** Generates prompts on an existing tune. */
  generate: nexus.operation<GenerateOperationInput, GenerateResult>(),
  /** Creates a tune from a pack and waits for its prompts. */
  packTune: nexus.operation<PackTuneOperationInput, PackTuneResult>(),
});
export type TuneflowService = typeof tuneflowService;

/** The details of an InvalidInput failure: the first field that broke a rule, and every one. */
export interface InvalidInputDetails {
  field?: string;
  rule?: string;
  issues: InputIssue[];
}

/** The details of an activity's failure from the service (status, method, path, body; never the API key). */
export interface ServiceFailureDetails {
  status?: number;
  method?: string;
  path?: string;
  body?: unknown;
  fieldErrors?: Record<string, string[]>;
  issues?: InputIssue[];
}

/**
 * A tuneflow failure as a caller sees it, by type: the workflow's own (deadlines, budget, input) with their details,
 * and the service's errors that ended a run (a 422, an unknown tune, ...).
 */
export type TuneflowFailure =
  | { type: typeof FailureType.tuneNeverTrained; message: string; details: TuneNeverTrainedDetails }
  | { type: typeof FailureType.promptsNeverSettled; message: string; details: PromptsNeverSettledDetails }
  | { type: typeof FailureType.overBudget; message: string; details: OverBudgetDetails }
  | { type: typeof FailureType.priceUnknown; message: string; details: PriceUnknownDetails }
  | { type: typeof FailureType.invalidInput; message: string; details: InvalidInputDetails }
  | { type: typeof FailureType.invalidOptions; message: string; details: { option: string; rule: string } }
  | { type: typeof FailureType.missingBaseTune; message: string; details: unknown }
  | { type: typeof FailureType.keyInUse; message: string; details: KeyInUseDetails }
  | { type: typeof FailureType.jobEnded; message: string; details: JobEndedDetails }
  | { type: typeof FailureType.claimHeld; message: string; details: ClaimHeldDetails }
  | { type: typeof FailureType.inspectionRefused; message: string; details: InspectionRefusedDetails }
  | { type: Exclude<ErrorKind, typeof ErrorKind.invalidInput>; message: string; details: ServiceFailureDetails };

const TYPES: ReadonlySet<string> = new Set([...Object.values(FailureType), ...Object.values(ErrorKind)]);

/**
 * The tuneflow failure in an error's cause chain (a failed or refused Nexus operation, a failed child or run), or
 * undefined when the chain holds none (a timeout, a cancellation, a termination).
 *
 * @example
 * const failure = tuneflowFailureOf(err);
 * if (failure?.type === FailureType.tuneNeverTrained) return retryLater(failure.details.tuneId);
 */
export function tuneflowFailureOf(err: unknown): TuneflowFailure | undefined {
  for (let at = err, depth = 0; at instanceof Error && depth < 20; at = at.cause, depth++)
    if (at instanceof ApplicationFailure && at.type && TYPES.has(at.type))
      return { type: at.type, message: at.message, details: at.details?.[0] } as TuneflowFailure;
  return undefined;
}
