/**
 * Another team's workflow (the shop's), in a namespace of its own: it knows tuneflow by its contract entry point,
 * `tuneflow-temporal/nexus`, and an endpoint's name, nothing else of tuneflow's: no task queue, no namespace, no
 * client. It trains a tune for an order and branches on a typed failure tuneflow sends back.
 */
import { createNexusServiceClient, workflowInfo } from '@temporalio/workflow';
import { FailureType, tuneflowFailureOf, tuneflowService, type PromptSpec } from 'tuneflow-temporal/nexus';

export interface ShopOrder {
  /** The Nexus endpoint an operator made for tuneflow (`temporal operator nexus endpoint create`). */
  endpoint: string;
  imageUrls: string[];
  prompts: PromptSpec[];
}

export interface ShopOrderResult {
  tuneId: number;
  images: string[];
  /** A follow-up order tuneflow refused, as the caller branched on it. */
  refused: { type: string; field?: string } | 'accepted';
}

export async function shopOrder(order: ShopOrder): Promise<ShopOrderResult> {
  const tuneflow = createNexusServiceClient({ service: tuneflowService, endpoint: order.endpoint });
  const key = `${workflowInfo().workflowId}-tune`;
  // The result is typed by the contract: tune.id is a number, prompts[].images a list of URLs.
  const { tune, prompts } = await tuneflow.executeOperation(
    'trainThenGenerate',
    { key, tune: { name: 'person', branch: 'fast', image_urls: order.imageUrls }, prompts: order.prompts },
    { scheduleToCloseTimeout: '10 minutes' },
  );
  let refused: ShopOrderResult['refused'] = 'accepted';
  try {
    // Nine images of one prompt break the service's rules: refused before anything is created.
    await tuneflow.executeOperation('generate', {
      key: `${key}-more`,
      tuneId: tune.id,
      prompts: [{ text: 'ohwx person, nine times', num_images: 9 }],
    });
  } catch (err) {
    const failure = tuneflowFailureOf(err);
    if (failure?.type !== FailureType.invalidInput) throw err;
    refused = { type: failure.type, field: failure.details.field };
  }
  return { tuneId: tune.id, images: prompts.flatMap((prompt) => prompt.images ?? []), refused };
}
