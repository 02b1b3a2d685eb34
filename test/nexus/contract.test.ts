/**
 * The Nexus contract (src/nexus, `tuneflow-temporal/nexus`) as a caller gets it: operations named as the workflows,
 * failures read off any cause chain, and a caller's workflow bundle that holds the contract and nothing else of
 * tuneflow's (no input schemas, activities, client or HTTP).
 */
import { ApplicationFailure, CancelledFailure, NexusOperationFailure, TimeoutFailure } from '@temporalio/common';
import { HandlerError } from 'nexus-rpc';
import { WorkflowName } from '../../src/contract/jobs';
import { FailureType, tuneflowFailureOf, tuneflowService } from '../../src/nexus';
import { bundleCallerWorkflows } from '../workflows/nexus-world';

const operationFailure = (cause: Error) =>
  new NexusOperationFailure('nexus operation completed unsuccessfully', 5, 'tuneflow', 'tuneflow', 'x', 'token', cause);

test('the service is named tuneflow and each operation as the workflow it starts', () => {
  expect(tuneflowService.name).toBe('tuneflow');
  const names = Object.entries(tuneflowService.operations).map(([key, op]) => [key, op.name]);
  expect(names).toEqual(Object.values(WorkflowName).map((name) => [name, name]));
});

test("a run's failure is read off the operation's cause chain, typed by its type", () => {
  const details = { tuneId: 7, startedTrainingAt: null, eta: null, timeoutMs: 4000, polls: 3, failedPolls: 0 };
  const failed = operationFailure(
    ApplicationFailure.nonRetryable('not trained', FailureType.tuneNeverTrained, details),
  );
  const failure = tuneflowFailureOf(failed);
  expect(failure).toEqual({ type: 'TuneNeverTrained', message: 'not trained', details });
  // Narrowed by type: the details are TuneNeverTrained's.
  if (failure?.type === FailureType.tuneNeverTrained) expect(failure.details.tuneId).toBe(7);

  // A refused start: the handler error's cause names the field.
  const invalid = { field: 'tune.name', rule: 'is required', issues: [{ field: 'tune.name', rule: 'is required' }] };
  const refused = operationFailure(
    new HandlerError('BAD_REQUEST', 'Invalid input', {
      cause: ApplicationFailure.nonRetryable('Invalid input', FailureType.invalidInput, invalid),
    }),
  );
  expect(tuneflowFailureOf(refused)).toMatchObject({ type: 'InvalidInput', details: invalid });

  // A service error that ended a run (a 422), under its activity failure.
  const validation = ApplicationFailure.nonRetryable('422', 'Validation', { status: 422 });
  expect(tuneflowFailureOf(operationFailure(new Error('activity', { cause: validation })))).toMatchObject({
    type: 'Validation',
    details: { status: 422 },
  });
});

test('what is not a tuneflow failure is undefined: timeouts, cancellations, other types, non-errors', () => {
  expect(
    tuneflowFailureOf(operationFailure(new TimeoutFailure('late', undefined, 'SCHEDULE_TO_CLOSE'))),
  ).toBeUndefined();
  expect(tuneflowFailureOf(operationFailure(new CancelledFailure('cancelled')))).toBeUndefined();
  expect(tuneflowFailureOf(ApplicationFailure.nonRetryable('mine', 'ShopOutOfStock'))).toBeUndefined();
  expect(tuneflowFailureOf('TuneNeverTrained')).toBeUndefined();
});

test("a caller's workflow bundle holds the contract and none of tuneflow's input schemas, activities or client", async () => {
  const { code } = await bundleCallerWorkflows();
  expect(code).toContain('src/nexus/index.ts');
  // The bundle's modules, by their ids (`/***/ "./src/nexus/index.ts"`), not its text: comments name other files.
  const modules = [...code.matchAll(/^\/\*\*\*\/ "(\.\/[^"]+)"/gm)].map((m) => m[1]);
  expect(modules).toContain('./src/nexus/index.ts');
  const tuneflows = modules.filter((id) => id.startsWith('./src/')).sort();
  expect(tuneflows).toEqual([
    './src/api/error-kinds.ts',
    './src/api/errors.ts',
    './src/contract/cost.ts',
    './src/contract/failures.ts',
    './src/contract/inspection.ts',
    './src/contract/keys.ts',
    './src/nexus/index.ts',
  ]);
  const forbidden = ['zod', 'undici', '@temporalio/nexus', '@temporalio/client', '@temporalio/worker'];
  expect(modules.filter((id) => forbidden.some((name) => id.startsWith(`./node_modules/${name}/`)))).toEqual([]);
}, 120_000);
