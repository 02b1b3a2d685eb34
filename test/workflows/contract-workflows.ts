/**
 * A test's workflows: the input contract run inside the sandbox over a list of jobs, reporting each verdict and whether
 * the contract this run sees is the worker's shared, deep-frozen copy (preloaded) or one evaluated for this run.
 */
import { InvalidInputError } from '../../src/api/errors';
import { checkGenerate, checkPackTune, checkTrainThenGenerate } from '../../src/contract/check';

export interface ContractJob {
  workflow: 'trainThenGenerate' | 'generate' | 'packTune';
  input: unknown;
}

/** `ok`, or the fields and rules a job is refused for. */
export type ContractVerdict = 'ok' | Array<{ field: string; rule: string }>;

export function verdictOf(job: ContractJob): ContractVerdict {
  try {
    if (job.workflow === 'trainThenGenerate') checkTrainThenGenerate('contract-job', job.input);
    else if (job.workflow === 'generate') checkGenerate(job.input);
    else checkPackTune('contract-job', job.input);
    return 'ok';
  } catch (err) {
    if (err instanceof InvalidInputError) return err.issues.map(({ field, rule }) => ({ field, rule }));
    return [{ field: '?', rule: `threw ${(err as Error).name}: ${(err as Error).message}` }];
  }
}

export async function contractVerdicts(jobs: ContractJob[]): Promise<{ shared: boolean; verdicts: ContractVerdict[] }> {
  // Functions of a shared module are frozen by the SDK; a module evaluated for this run is not.
  return { shared: Object.isFrozen(checkTrainThenGenerate), verdicts: jobs.map(verdictOf) };
}
