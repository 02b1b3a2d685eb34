/**
 * A caller's workflows in a namespace of its own (the shop's): they know tuneflow by its Nexus contract alone
 * (src/nexus, `tuneflow-temporal/nexus` in a user's project) and an endpoint's name. The Nexus tests run them, and the
 * caller-side histories replay against them (test/nexus/replay.test.ts).
 */
import {
  createNexusServiceClient,
  isCancellation,
  workflowInfo,
  type StartNexusOperationOptions,
} from '@temporalio/workflow';
import {
  tuneflowFailureOf,
  tuneflowService,
  type GenerateOperationInput,
  type PackTuneOperationInput,
  type TrainThenGenerateOperationInput,
  type TuneflowFailure,
} from '../../src/nexus';

/** One call of a tuneflow operation. */
export type TuneflowCall =
  | { operation: 'trainThenGenerate'; input: TrainThenGenerateOperationInput }
  | { operation: 'generate'; input: GenerateOperationInput }
  | { operation: 'packTune'; input: PackTuneOperationInput };

/** How a call ended, as the caller's workflow saw it. */
export type CallOutcome =
  | { outcome: 'completed'; result: unknown }
  | {
      outcome: 'failed';
      message: string;
      /** The tuneflow failure the caller branches on. */
      failure?: TuneflowFailure;
      /** The error classes of the cause chain, outermost first. */
      chain: string[];
    }
  | { outcome: 'cancelled'; chain: string[] };

/**
 * Calls one tuneflow operation through `endpoint` and reports how it ended. Cancelling this workflow cancels the
 * operation and waits until tuneflow's run has finished cancelling (the SDK's default, WAIT_CANCELLATION_COMPLETED).
 */
export async function callTuneflow(endpoint: string, call: TuneflowCall): Promise<CallOutcome> {
  const tuneflow = createNexusServiceClient({ service: tuneflowService, endpoint });
  const options: StartNexusOperationOptions = {
    scheduleToCloseTimeout: '10 minutes',
    summary: `${call.operation} for ${workflowInfo().workflowId}`,
  };
  try {
    switch (call.operation) {
      case 'trainThenGenerate':
        return { outcome: 'completed', result: await tuneflow.executeOperation(call.operation, call.input, options) };
      case 'generate':
        return { outcome: 'completed', result: await tuneflow.executeOperation(call.operation, call.input, options) };
      case 'packTune':
        return { outcome: 'completed', result: await tuneflow.executeOperation(call.operation, call.input, options) };
    }
  } catch (err) {
    const chain: string[] = [];
    for (let at: unknown = err; at instanceof Error; at = at.cause) chain.push(at.constructor.name);
    if (isCancellation(err)) return { outcome: 'cancelled', chain };
    return { outcome: 'failed', message: (err as Error).message, failure: tuneflowFailureOf(err), chain };
  }
}
