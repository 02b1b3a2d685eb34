/**
 * Tests that test/quiet-environment.test.ts runs with jest, to read what a run prints: expected failures logged by a
 * passing test, the same by a failing one, an error logged by a passing test.
 */
import { Runtime } from '@temporalio/worker';
import { installQuietRuntime } from './workflows/global-setup';

beforeAll(() => installQuietRuntime());

test('a test that expects a workflow to fail', () => {
  Runtime.instance().logger.warn('Workflow failed', { error: new Error('the failure this test expects') });
  console.info('the timing of a passing test');
});

test('a test that fails', () => {
  Runtime.instance().logger.warn('Workflow failed', { error: new Error('the failure that explains it') });
  console.info('the timing of a failing test');
  expect('the result').toBe('another result');
});

test('a test that passes and logs an error', () => {
  Runtime.instance().logger.error('Failed to initiate shutdown', { error: new Error('nobody expected this') });
});
