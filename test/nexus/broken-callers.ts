/**
 * A deliberately broken change to the caller's workflows, for test/nexus/replay.test.ts to prove that the recorded
 * caller histories catch one: callTuneflow now calls every job as `generate`, an operation no recorded
 * trainThenGenerate call scheduled.
 */
import { callTuneflow as released, type CallOutcome, type TuneflowCall } from './caller-workflows';

export function callTuneflow(endpoint: string, call: TuneflowCall): Promise<CallOutcome> {
  return released(endpoint, { ...call, operation: 'generate' } as TuneflowCall);
}
