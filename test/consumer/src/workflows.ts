/**
 * A user's own workflows: tuneflow's, re-exported so this worker runs them, and a parent of the user's that runs
 * trainThenGenerate as a child. Imports `tuneflow-temporal/workflows` only: the package root is worker-side code.
 */
import { executeChild, workflowInfo } from '@temporalio/workflow';
import { trainThenGenerate, type PromptSpec, type TrainThenGenerateResult } from 'tuneflow-temporal/workflows';

export * from 'tuneflow-temporal/workflows';

export interface PortraitOrder {
  customer: string;
  imageUrls: string[];
  prompts: PromptSpec[];
}

export interface PortraitOrderResult {
  tuneId: number;
  images: string[];
  /** The child's whole result, typed by tuneflow. */
  child: TrainThenGenerateResult;
}

/** The child's workflow ID: the order's, so a retried order attaches to the same tune. */
export function childIdOf(orderId: string): string {
  return `${orderId}-tune`;
}

/** A portrait order: one tune of the customer's photos, then the prompts, as a child workflow. */
export async function portraitOrder(order: PortraitOrder): Promise<PortraitOrderResult> {
  const child = await executeChild(trainThenGenerate, {
    workflowId: childIdOf(workflowInfo().workflowId),
    args: [
      {
        tune: { name: 'person', image_urls: order.imageUrls, branch: 'fast' },
        prompts: order.prompts,
      },
    ],
  });
  return { tuneId: child.tune.id, images: child.prompts.flatMap((prompt) => prompt.images ?? []), child };
}
