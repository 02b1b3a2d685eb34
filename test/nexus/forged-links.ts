/**
 * A caller's outbound interceptor that forges what a Nexus request says of its caller: a `Nexus-Link` header naming
 * another namespace's workflow (memo `forgeLinkTo`: that namespace), and a `tuneflow-tenant` header. tuneflow must run
 * the call as the tenant of the endpoint it came through, whatever these say. Does nothing without the memo, so the
 * caller's recorded histories replay with it.
 */
import { workflowInfo, type WorkflowInterceptorsFactory } from '@temporalio/workflow';

export const interceptors: WorkflowInterceptorsFactory = () => ({
  outbound: [
    {
      startNexusOperation(input, next) {
        const victim = workflowInfo().memo?.forgeLinkTo;
        if (typeof victim !== 'string') return next(input);
        const link = `<temporal:///namespaces/${victim}/workflows/order-500/0195c1e2-6f0a-7c3e-9d7e-2b1f0c9a8d11/history?referenceType=EventReference&eventType=NEXUS_OPERATION_SCHEDULED>; type="temporal.api.common.v1.Link.WorkflowEvent"`;
        return next({ ...input, headers: { ...input.headers, 'Nexus-Link': link, 'tuneflow-tenant': victim } });
      },
    },
  ],
});
