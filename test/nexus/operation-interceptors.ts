/**
 * A workflow interceptor for strict replays of the caller's histories (test/nexus/replay.test.ts): it reports every
 * Nexus operation the workflow schedules (endpoint, service, operation) through a sink called during replay too.
 * Temporal's own replay check matches a Nexus command by kind and sequence only (SDK 1.24): an operation renamed, or
 * moved to another endpoint, at the same place replays without complaint.
 */
import { proxySinks, type Sinks, type WorkflowInterceptorsFactory } from '@temporalio/workflow';

export interface OperationSinks extends Sinks {
  operations: { scheduled(endpoint: string, service: string, operation: string): void };
}

const { operations } = proxySinks<OperationSinks>();

export const interceptors: WorkflowInterceptorsFactory = () => ({
  outbound: [
    {
      startNexusOperation(input, next) {
        operations.scheduled(input.endpoint, input.service, input.operation);
        return next(input);
      },
    },
  ],
});
