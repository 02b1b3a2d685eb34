/**
 * The Nexus scenarios of issue 19, defined once: test/workflows/nexus.test.ts plays them and asserts on both sides;
 * scripts/record-nexus-histories.ts plays them and keeps both sides' histories (tuneflow's runs under
 * test/histories/nexus/, replayed with every tuneflow change; the caller's under test/nexus/histories/). Keys and
 * caller workflow IDs are fixed (each play has a dev server of its own): they are the histories' file names.
 */
import type { History } from '@temporalio/common/lib/proto-utils';
import { WorkflowNotFoundError } from '@temporalio/common';
import type { MockStats } from '../../src/mock-service';
import { tenantWorkflowId } from '../../src/contract/tenants';
import { progressQuery } from '../../src/contract/messages';
import type { TuneflowOptions } from '../../src/contract/inputs';
import type { TrainThenGenerateOperationInput } from '../../src/nexus';
import type { CallOutcome, TuneflowCall } from '../nexus/caller-workflows';
import { waitFor } from './harness';
import { CALLER_NAMESPACE, type NexusWorld } from './nexus-world';
import { BLURRY_URL, IMAGE_URLS, INSPECTED_URLS, PET_PACK_ID, REFUSE } from './scenarios';

/** One caller's call: its workflow ID, the key it used, how it ended. */
export interface NexusCall {
  callerId: string;
  key: string;
  outcome: CallOutcome;
}

export interface NexusOutcome {
  calls: NexusCall[];
  /** The mock's request counts: the truth of what was created. */
  stats: MockStats;
  /** tuneflow's run of each key that has one. */
  handler: Record<string, History>;
  /** Each caller's workflow. */
  caller: Record<string, History>;
}

export interface NexusScenario {
  name: string;
  play(world: NexusWorld): Promise<NexusOutcome>;
}

const prompts = [{ text: 'sks dog on a beach', num_images: 2 }, { text: 'sks dog in the snow' }];
const newDog = { name: 'dog', branch: 'fast', image_urls: IMAGE_URLS };
const quickDeadlines: TuneflowOptions = {
  pollInterval: '1 second',
  maxPollInterval: '1 second',
  trainingTimeout: '4 seconds',
  promptTimeout: '4 seconds',
};

/** Makes each call in turn, waiting for its end; then reads both sides' histories. */
async function callAll(
  world: NexusWorld,
  stats: () => MockStats,
  calls: { callerId: string; call: TuneflowCall }[],
): Promise<NexusOutcome> {
  const done: NexusCall[] = [];
  for (const { callerId, call } of calls) {
    const handle = await world.call(callerId, call);
    done.push({ callerId, key: call.input.key, outcome: await handle.result() });
  }
  return collect(world, stats(), done);
}

async function collect(world: NexusWorld, stats: MockStats, calls: NexusCall[]): Promise<NexusOutcome> {
  const outcome: NexusOutcome = { calls, stats, handler: {}, caller: {} };
  for (const { callerId, key } of calls) {
    outcome.caller[callerId] = await world.shop.workflow.getHandle(callerId).fetchHistory();
    // An empty key names no run (the server refuses to look one up).
    if (!key || outcome.handler[key]) continue;
    const run = world.images.workflow.getHandle(tenantWorkflowId(CALLER_NAMESPACE, key));
    try {
      await run.describe();
    } catch (err) {
      // A refused call leaves no run behind: nothing to record.
      if (err instanceof WorkflowNotFoundError) continue;
      throw err;
    }
    outcome.handler[key] = await run.fetchHistory();
  }
  return outcome;
}

export const nexusScenarios = {
  /** Each operation, one after the other, each completing with its run's result. */
  operations: {
    name: 'operations',
    play: (world) =>
      world.withTuneflow({}, async ({ mock }) => {
        const calls: NexusCall[] = [];
        const call = async (callerId: string, c: TuneflowCall) => {
          const outcome = await (await world.call(callerId, c)).result();
          calls.push({ callerId, key: c.input.key, outcome });
          return outcome;
        };
        const trained = await call('shop-train-then-generate', {
          operation: 'trainThenGenerate',
          input: { key: 'nexus-train-then-generate', tune: newDog, prompts },
        });
        const tuneId = trained.outcome === 'completed' ? (trained.result as { tune: { id: number } }).tune.id : 0;
        await call('shop-generate', {
          operation: 'generate',
          input: { key: 'nexus-generate', tuneId, prompts: [{ text: 'sks dog, oil painting' }] },
        });
        await call('shop-pack-tune', {
          operation: 'packTune',
          input: { key: 'nexus-pack-tune', packId: PET_PACK_ID, tune: { name: 'dog', image_urls: IMAGE_URLS } },
        });
        return collect(world, mock.stats(), calls);
      }),
  },

  /**
   * Two callers with the same key at once (a retried order, two services for one order): one run, both answered;
   * then a third after it closed: answered at once with the same result, nothing run again.
   */
  duplicate: {
    name: 'duplicate',
    play: (world) =>
      // Training long enough that the second call surely finds the run running.
      world.withTuneflow({ trainingTime: '3s' }, async ({ mock }) => {
        const call: TuneflowCall = {
          operation: 'trainThenGenerate',
          input: { key: 'nexus-duplicate', tune: newDog, prompts },
        };
        const ids = ['shop-duplicate-first', 'shop-duplicate-second'];
        const handles = await Promise.all(ids.map((id) => world.call(id, call)));
        const calls: NexusCall[] = [];
        for (const [i, handle] of handles.entries())
          calls.push({ callerId: ids[i], key: call.input.key, outcome: await handle.result() });
        const after = await world.call('shop-duplicate-after-close', call);
        calls.push({ callerId: 'shop-duplicate-after-close', key: call.input.key, outcome: await after.result() });
        return collect(world, mock.stats(), calls);
      }),
  },

  /** The caller cancels while the tune trains: the run is cancelled and deletes its tune (cleanupOnCancel). */
  cancel: {
    name: 'cancel',
    play: (world) =>
      world.withTuneflow({ trainingTime: '5 minutes' }, async ({ mock }) => {
        const key = 'nexus-cancel-with-cleanup';
        const handle = await world.call('shop-cancel', {
          operation: 'trainThenGenerate',
          input: { key, tune: newDog, prompts, options: { cleanupOnCancel: true } },
        });
        await waitFor(
          async () => {
            try {
              return (
                (await world.images.workflow.getHandle(tenantWorkflowId(CALLER_NAMESPACE, key)).query(progressQuery))
                  .phase === 'training'
              );
            } catch {
              return false; // not started yet
            }
          },
          () => `${key} to wait for training`,
        );
        await handle.cancel();
        const outcome = await handle.result();
        return collect(world, mock.stats(), [{ callerId: 'shop-cancel', key, outcome }]);
      }),
  },

  /** Input that breaks the contract, and an empty key: refused at the start, nothing created anywhere. */
  badInput: {
    name: 'bad-input',
    play: (world) =>
      world.withTuneflow({}, async ({ mock }) =>
        callAll(world, () => mock.stats(), [
          {
            callerId: 'shop-bad-input',
            call: {
              operation: 'trainThenGenerate',
              // A job without the tune's name (a class such as "dog") and with too many images for a prompt.
              input: {
                key: 'nexus-bad-input',
                tune: { branch: 'fast', image_urls: IMAGE_URLS },
                prompts: [{ text: 'sks dog', num_images: 99 }],
              } as unknown as TrainThenGenerateOperationInput,
            },
          },
          {
            callerId: 'shop-bad-key',
            call: { operation: 'generate', input: { key: '', tuneId: 1, prompts: [{ text: 'sks dog' }] } },
          },
        ]),
      ),
  },

  /** A run's own failures reach the caller typed: a tune that never trains, a pack above the budget. */
  failures: {
    name: 'failures',
    play: (world) =>
      world.withTuneflow(
        { faults: { neverTrainTitles: [tenantWorkflowId(CALLER_NAMESPACE, 'nexus-tune-never-trained')] } },
        async ({ mock }) =>
          callAll(world, () => mock.stats(), [
            {
              callerId: 'shop-tune-never-trained',
              call: {
                operation: 'trainThenGenerate',
                input: { key: 'nexus-tune-never-trained', tune: newDog, prompts, options: quickDeadlines },
              },
            },
            {
              callerId: 'shop-over-budget',
              call: {
                operation: 'packTune',
                input: {
                  key: 'nexus-over-budget',
                  packId: PET_PACK_ID,
                  tune: { name: 'dog', image_urls: IMAGE_URLS },
                  options: { maxCostMc: 50_000 },
                },
              },
            },
          ]),
      ),
  },

  /**
   * A caller asks for inspection before paying (`options.inspect` passes through the operation): a blurry photo fails
   * the run InspectionRefused, which reaches the caller typed, and no tune is created.
   */
  inspection: {
    name: 'inspection',
    play: (world) =>
      world.withTuneflow({}, async ({ mock }) =>
        callAll(world, () => mock.stats(), [
          {
            callerId: 'shop-inspection-refused',
            call: {
              operation: 'trainThenGenerate',
              input: {
                key: 'nexus-inspection-refused',
                tune: { name: 'dog', branch: 'sd15', image_urls: [INSPECTED_URLS[0], BLURRY_URL] },
                prompts,
                options: { inspect: REFUSE },
              },
            },
          },
        ]),
      ),
  },
} satisfies Record<string, NexusScenario>;
