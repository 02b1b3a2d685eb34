/**
 * The workflow scenarios of the "done when" list, defined once: the workflow tests play them and assert on
 * the outcome; scripts/record-histories.ts plays them and keeps their histories as replay fixtures. Each scenario
 * brings its own mock service (short training and inference, faults) and drives its workflow as a caller would.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { request } from 'undici';
import { TunesApi } from '../../src/api';
import type { Prompt, Tune } from '../../src/api/schemas';
import { FLUX_BASE_TUNE } from '../../src/mock-service';
import { claimWorkflowId } from '../../src/contract/keys';
import { tenantWorkflowId, tuneTitle } from '../../src/contract/tenants';
import { ledgerWorkflowId, SpendLedger, spendWindow } from '../../src/contract/spend';
import { solidPng } from '../../src/mock-service/png';
import { TuneflowClient } from '../../src/client';
import { promptSettledSignal, tuneTrainedSignal } from '../../src/contract/messages';
import type { GenerateInput, PackTuneInput, TrainThenGenerateInput, TuneflowOptions } from '../../src/contract/inputs';
import {
  API_KEY,
  UPLOAD_DIR,
  waitFor,
  type Outcome,
  type Scenario,
  type Settled,
  type ScenarioOptions,
  type WorkflowHarness,
} from './harness';

/** A scenario; one whose workflow has no progress query (keyClaim) ends in a `Settled`, not an `Outcome`. */
export interface ScenarioDefinition<O extends Settled<unknown> = Outcome<unknown>> {
  /** Also the workflow ID and the history file name. */
  name: string;
  options: ScenarioOptions;
  run(s: Scenario, workflowId: string): Promise<O>;
}

/** Training images the service never fetches (the mock keeps URLs as given). */
export const IMAGE_URLS = ['https://example.com/training/1.jpg', 'https://example.com/training/2.jpg'];
/** The pet pack of the mock: a checkpoint pack for cats and dogs, two prompts per class. */
export const PET_PACK_ID = 261;
/** The instant avatars pack of the mock: FaceID tunes, ready at creation, 40,000 mc a class. */
export const FACEID_PACK_ID = 262;

/**
 * Training photos of a dog the mock's inspection finds without a refused flag: the third is low_quality (by the mock's
 * hook, a flag's name between double underscores), which the scenarios do not refuse.
 */
export const INSPECTED_URLS = ['1', '2', '3__low_quality__', '5', '6'].map(
  (n) => `https://example.com/training/${n}.jpg`,
);
/** Photos the mock's inspection flags, by its test hook (a flag's name between double underscores). */
export const BLURRY_URL = 'https://example.com/training/beach__blurry__.jpg';
export const CROWD_URL = 'https://example.com/training/party__includes_multiple_people__.jpg';
/** What the inspection scenarios refuse. */
export const REFUSE: TuneflowOptions['inspect'] = { refuse: ['blurry', 'includes_multiple_people'] };

/** Quick polls for scenarios that rely on them (the defaults are minutes), and deadlines to match. */
export const QUICK_POLLS: TuneflowOptions = {
  pollInterval: '1 second',
  maxPollInterval: '2 seconds',
  trainingTimeout: '2 minutes',
  promptTimeout: '2 minutes',
};

/**
 * Plays a scenario on the harness, as workflow `workflowId` (unique by default).
 *
 * @example
 * const outcome = await play(harness, scenarios.callbacksHappyPath);
 */
export function play<R = unknown>(
  harness: WorkflowHarness,
  definition: ScenarioDefinition,
  workflowId?: string,
): Promise<Outcome<R>>;
export function play(
  harness: WorkflowHarness,
  definition: ScenarioDefinition<Settled<unknown>>,
  workflowId?: string,
): Promise<Settled<unknown>>;
export function play(
  harness: WorkflowHarness,
  definition: ScenarioDefinition<Settled<unknown>>,
  workflowId = `${definition.name}-${Date.now()}`,
): Promise<Settled<unknown>> {
  return harness.scenario(definition.options, (s) => definition.run(s, workflowId));
}

/** Starts and settles in one worker run. */
function startAndSettle(workflow: string, input: unknown, clock: 'real' | 'skipping') {
  return (s: Scenario, workflowId: string) =>
    s.withWorker(async () => s.settle(await s.start(workflow, input, clock, workflowId)));
}

/** A paid training (150,000 mc) and ten one-image prompts (2,000 mc each) under `maxCostMc` 160,000: five fit. */
const tenPromptsUnder160k = (): TrainThenGenerateInput => ({
  tune: { name: 'dog', branch: 'sd15', image_urls: IMAGE_URLS },
  prompts: Array.from({ length: 10 }, (_, i) => ({ text: `sks dog, portrait ${i + 1}` })),
  options: { maxCostMc: 160_000, tuneCostMc: 150_000 },
});

const twoPrompts: TrainThenGenerateInput['prompts'] = [
  { text: 'sks dog on a beach', num_images: 2 },
  { text: 'sks dog in the snow', num_images: 1 },
];

/** Prompts another job makes on the shared Flux base tune while fluxLoraBusyBaseTune polls. */
const OTHER_PROMPTS = 500;

/** Prompts another job makes on the shared Flux base tune between fluxLoraInterleavedPrompts' two. */
const INTERLEAVED_PROMPTS = 130;

/** A Flux LoRA: its prompts run on the shared Flux base tune. */
const fluxLoraWoman = {
  name: 'woman',
  branch: 'flux1',
  model_type: 'lora' as const,
  base_tune_id: FLUX_BASE_TUNE.id,
  preset: 'flux-lora-portrait' as const,
  image_urls: IMAGE_URLS,
};

const fastDog = { name: 'dog', branch: 'fast' as const, image_urls: IMAGE_URLS };

/** Waits until the workflow's tune exists and it is waiting for training (a worker must run). */
function untilTraining(s: Scenario, handle: WorkflowHandle) {
  return s.progressUntil(handle, (p) => p.phase === 'training' && p.tuneId !== null);
}

export const scenarios = {
  /** Callbacks end every wait: no poll at all with the default (minutes-long) poll interval. */
  callbacksHappyPath: {
    name: 'callbacks-happy-path',
    options: {},
    run: startAndSettle('trainThenGenerate', { tune: fastDog, prompts: twoPrompts }, 'real'),
  },

  /** The happy path on a worker that stores activity payloads compressed (`compressPayloads`). */
  compressedHappyPath: {
    name: 'compressed-happy-path',
    options: { compressPayloads: true },
    run: startAndSettle('trainThenGenerate', { tune: fastDog, prompts: twoPrompts }, 'real'),
  },

  /** The happy path on a worker that copies the images to its storage: a storeImages activity per prompt. */
  storedImagesHappyPath: {
    name: 'stored-images-happy-path',
    options: { storeImages: true },
    run: startAndSettle('trainThenGenerate', { tune: fastDog, prompts: twoPrompts }, 'real'),
  },

  /** Every callback is lost: polls near the eta, then after each prompt's start, finish the job. */
  callbacksDropped: {
    name: 'callbacks-dropped',
    options: { mock: { faults: { callbackDropRate: 1 } } },
    run: startAndSettle('trainThenGenerate', { tune: fastDog, prompts: twoPrompts, options: QUICK_POLLS }, 'real'),
  },

  /**
   * Every callback comes twice; while the prompts run, stale copies of the tune and prompts and callbacks about
   * objects that are not the workflow's arrive too. None of it changes the outcome.
   */
  callbacksDuplicatedAndReordered: {
    name: 'callbacks-duplicated-reordered',
    // Prompts that run long enough for the stale copies to land before they settle (a signal to a closed run fails).
    options: { mock: { inferenceTime: '3s', faults: { callbackDuplicateRate: 1 } } },
    run: (s, workflowId) =>
      s.withWorker(async () => {
        const handle = await s.start('trainThenGenerate', { tune: fastDog, prompts: twoPrompts }, 'real', workflowId);
        // Callbacks about objects that are not the workflow's, before its tune exists.
        await handle.signal(promptSettledSignal, { id: 987_654, tune_id: 1, text: 'other job', images: ['x.png'] });
        await handle.signal(tuneTrainedSignal, { id: 987_655, trained_at: '2025-01-01T00:00:00.000Z' });
        const { tuneId } = await s.progressUntil(handle, (p) => p.phase === 'generating');
        // Late, out-of-order copies: the tune as it was before training, the prompts before they settled (without
        // the signed callback URL the service echoes: a signal's payload enters the history).
        const trained = await s.api.tunes.retrieve(tuneId as number);
        const stale: Tune = { ...trained, callback: null, trained_at: null, updated_at: trained.created_at };
        await handle.signal(tuneTrainedSignal, stale);
        for await (const prompt of s.api.prompts.list(tuneId as number))
          await handle.signal(promptSettledSignal, { ...prompt, callback: null, images: [], user_error: null });
        return s.settle(handle);
      }),
  },

  /**
   * Forged callbacks sent with the run's own signed URLs, taken from where they leak (the service echoes them in every
   * tune and prompt): a trained tune from the far future that costs nothing and points at another base tune, a
   * foreign tune, 100 padded copies, settled prompts with an attacker's images and no cost, a foreign prompt. The run
   * reads what each one names and goes on as the service says: the forged bodies change nothing.
   */
  forgedCallbacks: {
    name: 'forged-callbacks',
    // Training and inference long enough for the forgeries to land while each wait is open.
    options: { mock: { trainingTime: '4s', inferenceTime: '3s' } },
    run: (s, workflowId) =>
      s.withWorker(async () => {
        const input: TrainThenGenerateInput = {
          tune: { name: 'dog', branch: 'sd15', image_urls: IMAGE_URLS },
          prompts: twoPrompts,
        };
        const handle = await s.start('trainThenGenerate', input, 'real', workflowId);
        const { tuneId } = await untilTraining(s, handle);
        const leaked = (await s.api.tunes.retrieve(tuneId as number)).callback as string;
        const future = '2999-01-01T00:00:00.000Z';
        const forgedTune = {
          id: tuneId,
          trained_at: future,
          updated_at: future,
          cost_mc: 0,
          model_type: 'lora',
          base_tune_id: FLUX_BASE_TUNE.id,
          ckpt_url: 'https://attacker.example/model.ckpt',
        };
        const answers = [await forge(leaked, forgedTune), await forge(leaked, { ...forgedTune, id: 987_655 })];
        const padded = { ...forgedTune, padding: 'x'.repeat(60_000) };
        answers.push(...(await Promise.all(Array.from({ length: 100 }, () => forge(leaked, padded)))));
        // The forgeries' read found the tune training: the genuine callback is read when that read's back-off ends
        // (CALLBACK_REREAD_FIRST_MS), or a poll comes first.
        await s.progressUntil(handle, (p) => p.phase === 'generating' && p.prompts.total === 2, 90_000);
        const prompts: Prompt[] = [];
        for await (const prompt of s.api.prompts.list(tuneId as number)) prompts.push(prompt);
        for (const prompt of prompts) {
          const forged = {
            id: prompt.id,
            images: ['https://attacker.example/forged.jpg'],
            cost_mc: 0,
            updated_at: future,
          };
          answers.push(await forge(prompt.callback as string, forged));
        }
        answers.push(await forge(prompts[0].callback as string, { id: 987_654, images: ['x.png'], tune_id: tuneId }));
        const delivered = answers.filter((a) => a === 'delivered').length;
        const outcome = await s.settle(handle);
        const served = {
          tune: await s.api.tunes.retrieve(tuneId as number),
          prompts: await Promise.all(prompts.map((p) => s.api.prompts.retrieve(p.tune_id, p.id))),
        };
        return { ...outcome, context: { forgeries: answers.length, delivered }, served };
      }),
  },

  /**
   * Polling only (no callback URL: a laptop behind NAT), with the default options: the first poll comes 1 s after the
   * tune's eta, the prompts' 1 s after their creation, then 2 s, 4 s, ... (not the callback schedule's 2 minutes).
   */
  pollOnly: {
    name: 'poll-only',
    options: { callbacks: false, mock: { trainingTime: '2s', inferenceTime: '1s' } },
    run: startAndSettle('trainThenGenerate', { tune: fastDog, prompts: twoPrompts }, 'real'),
  },

  /** The worker stops while the workflow waits for training; a new worker picks it up and the callback ends it. */
  workerRestart: {
    name: 'worker-restart',
    options: { mock: { trainingTime: '3s' } },
    run: async (s, workflowId) => {
      const input: TrainThenGenerateInput = { tune: fastDog, prompts: twoPrompts };
      const handle = await s.withWorker(async () => {
        const started = await s.start('trainThenGenerate', input, 'real', workflowId);
        await untilTraining(s, started);
        return started;
      }, 'worker-1');
      // No worker now: the tune trains and its callback is recorded as a signal, waiting for a worker.
      await untilSignalled(handle);
      return s.withWorker(() => s.settle(handle), 'worker-2');
    },
  },

  /** A Flux LoRA: prompts go to the Flux base tune with `<lora:ID:1>` ahead of the text. */
  fluxLora: {
    name: 'flux-lora',
    options: {},
    run: startAndSettle(
      'trainThenGenerate',
      {
        tune: fluxLoraWoman,
        prompts: [{ text: 'ohwx woman, studio portrait' }, { text: 'ohwx woman, on a bike', num_images: 2 }],
      },
      'real',
    ),
  },

  /**
   * A Flux LoRA whose callbacks are lost, while another job of the account makes 500 prompts on the shared base tune:
   * its polls read and return only its own two prompts. Its prompts run long enough that the run can only end by a
   * poll made after the 500 exist (`context.othersDoneAtMs`).
   */
  fluxLoraBusyBaseTune: {
    name: 'flux-lora-busy-base-tune',
    options: { callbacks: false, mock: { inferenceTime: '10s' } },
    run: (s, workflowId) =>
      s.withWorker(async () => {
        const input: TrainThenGenerateInput = {
          tune: fluxLoraWoman,
          prompts: [{ text: 'ohwx woman, studio portrait' }, { text: 'ohwx woman, on a bike', num_images: 2 }],
          options: QUICK_POLLS,
        };
        const handle = await s.start('trainThenGenerate', input, 'real', workflowId);
        // Generating: the run's prompts exist; every other prompt is newer.
        await s.progressUntil(handle, (p) => p.phase === 'generating');
        for (let i = 0; i < OTHER_PROMPTS; i += 20)
          await Promise.all(
            Array.from({ length: 20 }, (_, j) =>
              s.api.prompts.create(FLUX_BASE_TUNE.id, { text: `another job's prompt ${i + j}` }),
            ),
          );
        const othersDoneAtMs = Date.now();
        return { ...(await s.settle(handle)), context: { others: OTHER_PROMPTS, othersDoneAtMs } };
      }),
  },

  /**
   * A Flux LoRA whose callbacks are lost and whose two prompts are made one at a time, while another job of the account
   * makes 130 prompts on the shared base tune between them: the job's prompts lie further apart than a list page (120)
   * reaches, so a poll's page misses the first, and the run reads it by id, an activity of its own. The service
   * answers prompt creates 5 s late (each made at once), so the others are all made before the run's second.
   */
  fluxLoraInterleavedPrompts: {
    name: 'flux-lora-interleaved-prompts',
    options: {
      callbacks: false,
      mock: {
        inferenceTime: '5s',
        faults: { answerDelayMs: 5_000, faultRoutes: ['POST /tunes/:id/prompts'] },
      },
    },
    run: (s, workflowId) =>
      s.withWorker(async () => {
        const input: TrainThenGenerateInput = {
          tune: fluxLoraWoman,
          prompts: [{ text: 'ohwx woman, studio portrait' }, { text: 'ohwx woman, on a bike', num_images: 2 }],
          options: { ...QUICK_POLLS, promptConcurrency: 1 },
        };
        const handle = await s.start('trainThenGenerate', input, 'real', workflowId);
        // The run's first prompt exists (its answer is 5 s away): the other job's are made now, all at once.
        await waitFor(
          async () => s.mock.journal().prompts.length > 0,
          () => 'the run to make its first prompt',
          60_000,
        );
        const other = new TunesApi({ apiKey: API_KEY, baseUrl: s.mock.url, connections: INTERLEAVED_PROMPTS });
        try {
          await Promise.all(
            Array.from({ length: INTERLEAVED_PROMPTS }, (_, i) =>
              other.prompts.create(FLUX_BASE_TUNE.id, { text: `another job's prompt ${i}` }),
            ),
          );
        } finally {
          await other.close();
        }
        return { ...(await s.settle(handle)), context: { others: INTERLEAVED_PROMPTS } };
      }),
  },

  /**
   * A paid job with `maxCostMc`: training (150,000 mc, stated as `tuneCostMc`) and two 2,000 mc images fit under
   * 155,000, a third would pass it. The mock answers the way Rails renders (`"cost_mc": "150000.0"`): the cost is read
   * all the same.
   */
  overBudgetPrompts: {
    name: 'over-budget-prompts',
    options: { mock: { answerStyle: 'rails' } },
    run: startAndSettle(
      'trainThenGenerate',
      {
        tune: { name: 'dog', branch: 'sd15', image_urls: IMAGE_URLS },
        prompts: ['on a beach', 'in the snow', 'in a forest', 'on a boat'].map((where) => ({
          text: `sks dog ${where}`,
        })),
        options: { maxCostMc: 155_000, tuneCostMc: 150_000 },
      } satisfies TrainThenGenerateInput,
      'real',
    ),
  },

  /**
   * Issue 42's budget that failed open: `maxCostMc` 160,000 over a 150,000 mc training and ten 2,000 mc prompts whose
   * creates answer without `cost_mc` (the spec does not promise it). A read of each such prompt says its price: five
   * prompts fit, and the run stops there (OverBudget), at 160,000.
   */
  unpricedPromptsRead: {
    name: 'unpriced-prompts-read',
    options: { mock: { faults: { unpricedRoutes: ['POST /tunes/:id/prompts'] } } },
    run: startAndSettle('trainThenGenerate', tenPromptsUnder160k(), 'real'),
  },

  /**
   * The same, and neither the read of a prompt nor a list says its price: the first prompt is created and read, no
   * other is created, and the run fails PriceUnknown once that prompt has settled, at 152,000.
   */
  unpricedPromptsStop: {
    name: 'unpriced-prompts-stop',
    options: {
      mock: {
        faults: {
          unpricedRoutes: ['POST /tunes/:id/prompts', 'GET /tunes/:tune_id/prompts/:id', 'GET /tunes/:id/prompts'],
        },
      },
    },
    run: startAndSettle('trainThenGenerate', tenPromptsUnder160k(), 'real'),
  },

  /** A pack whose price for the class (80,000 mc) is above `maxCostMc`: refused before anything is created. */
  overBudgetPack: {
    name: 'over-budget-pack',
    options: {},
    run: startAndSettle(
      'packTune',
      { packId: PET_PACK_ID, tune: { name: 'dog', image_urls: IMAGE_URLS }, options: { maxCostMc: 50_000 } },
      'real',
    ),
  },

  /** A training priced (`tuneCostMc`) above `maxCostMc`: refused before anything is created. */
  /**
   * The default tenant with a budget (10,000,000 mc a month): the training and each prompt reserved on the tenant's
   * ledger before its create, committed with what the service charged.
   */
  tenantSpendHeld: {
    name: 'tenant-spend-held',
    options: { tenants: { budgets: { default: { ceilingMc: 10_000_000, period: 'month' } } } },
    run: startAndSettle(
      'trainThenGenerate',
      {
        tune: { name: 'dog', branch: 'sd15', image_urls: IMAGE_URLS },
        prompts: twoPrompts,
        options: { tuneCostMc: 150_000 },
      } satisfies TrainThenGenerateInput,
      'real',
    ),
  },

  /**
   * A tenant's ledger as its jobs keep it: started by the training's reservation (update-with-start), its ceiling read
   * from the operator's budgets (activity `ledgerCeiling`, marker `ledger-ceiling-from-operator`), the training and two prompts
   * reserved and committed. Recorded as it goes on (a ledger lasts its window and a day).
   */
  ledgerOfJobs: {
    name: 'ledger-of-jobs',
    options: { tenants: { budgets: { ledgered: { ceilingMc: 10_000_000, period: 'month' } } } },
    run: (s, workflowId) =>
      s.withWorker(async () => {
        const input = {
          tune: { name: 'dog', branch: 'sd15', image_urls: IMAGE_URLS },
          prompts: twoPrompts,
          options: { tuneCostMc: 150_000 },
        } satisfies TrainThenGenerateInput;
        // The tenant's own starter, whose memo a run under a tenant's ID needs.
        const starter = new TuneflowClient({ client: s.env.client, taskQueue: s.taskQueue, tenant: 'ledgered' });
        await (await starter.trainThenGenerate(workflowId, input)).result();
        const ledger = ledgerWorkflowId('ledgered', spendWindow('month', Date.now()));
        return s.settleRunning(s.env.client.workflow.getHandle(ledger));
      }),
  },

  /**
   * A raw start of a tenant's ledger carrying sums of its own making (`committedMc` below 0, which would give the
   * tenant room it never had): not its own continue-as-new, so the ledger fails at once, InvalidInput.
   */
  ledgerForgedState: {
    name: 'ledger-forged-state',
    options: {},
    run: (s) =>
      s.withWorker(async () => {
        const state = { ...SpendLedger.empty('ledgered', '2026-01').state, committedMc: -1_000_000_000 };
        const start = { taskQueue: s.taskQueue, workflowId: ledgerWorkflowId('ledgered', '2026-01'), args: [state] };
        return s.settleUnqueried(await s.env.client.workflow.start('spendLedger', start));
      }),
  },

  /**
   * The default tenant's day's budget (100,000 mc) below a training's price (150,000): the reservation is refused and
   * the job fails OverBudget naming the tenant's window, having created nothing.
   */
  tenantOverBudget: {
    name: 'tenant-over-budget',
    options: { tenants: { budgets: { default: { ceilingMc: 100_000, period: 'day' } } } },
    run: startAndSettle(
      'trainThenGenerate',
      {
        tune: { name: 'dog', branch: 'sd15', image_urls: IMAGE_URLS },
        prompts: twoPrompts,
        options: { tuneCostMc: 150_000 },
      } satisfies TrainThenGenerateInput,
      'real',
    ),
  },

  overBudgetTune: {
    name: 'over-budget-tune',
    options: {},
    run: startAndSettle(
      'trainThenGenerate',
      {
        tune: { name: 'dog', branch: 'sd15', image_urls: IMAGE_URLS },
        prompts: twoPrompts,
        options: { maxCostMc: 100_000, tuneCostMc: 150_000 },
      } satisfies TrainThenGenerateInput,
      'real',
    ),
  },

  /**
   * A training whose stated price (`tuneCostMc` 100,000) is below what the service charges (150,000), under
   * `maxCostMc` 120,000: the create passes the limit, and the run stops right there, creating no prompt.
   */
  tunePriceUnderstated: {
    name: 'tune-price-understated',
    options: {},
    run: startAndSettle(
      'trainThenGenerate',
      {
        tune: { name: 'dog', branch: 'sd15', image_urls: IMAGE_URLS },
        prompts: twoPrompts,
        options: { maxCostMc: 120_000, tuneCostMc: 100_000 },
      } satisfies TrainThenGenerateInput,
      'real',
    ),
  },

  /** A priced training and no prompts, exactly within `maxCostMc`: the job is the tune, and completes. */
  pricedTrainingNoPrompts: {
    name: 'priced-training-no-prompts',
    options: {},
    run: startAndSettle(
      'trainThenGenerate',
      {
        tune: { name: 'dog', branch: 'sd15', image_urls: IMAGE_URLS },
        prompts: [],
        options: { maxCostMc: 150_000, tuneCostMc: 150_000 },
      } satisfies TrainThenGenerateInput,
      'real',
    ),
  },

  /** `maxCostMc` 0 on a training on branch fast (free, spec 1): no `tuneCostMc` needed, one prompt. */
  fastTrainingMaxCost: {
    name: 'fast-training-max-cost',
    options: {},
    run: startAndSettle(
      'trainThenGenerate',
      {
        tune: { name: 'dog', branch: 'fast', image_urls: IMAGE_URLS },
        prompts: [{ text: 'sks dog on a beach' }],
        options: { maxCostMc: 0 },
      } satisfies TrainThenGenerateInput,
      'real',
    ),
  },

  /**
   * `maxCostMc` on a paid training whose price the caller does not state, and no prompts: the service publishes no
   * price for a tune and charges it when the tune is created (150,000 mc here, above the limit).
   */
  unpricedTraining: {
    name: 'unpriced-training',
    options: {},
    run: startAndSettle(
      'trainThenGenerate',
      { tune: { name: 'dog', branch: 'sd15', image_urls: IMAGE_URLS }, prompts: [], options: { maxCostMc: 100_000 } },
      'real',
    ),
  },

  /**
   * `generate` on a paid tune with one 4-image prompt (8,000 mc) under `maxCostMc` 5,000: the price per image is
   * learned from the first create's answer, so that create can pass the limit.
   */
  firstPromptOverBudget: {
    name: 'first-prompt-over-budget',
    options: {},
    run: async (s, workflowId) => {
      const tune = await trainedTune(s, 'paid-dog', 'sd15');
      const input: GenerateInput = {
        tuneId: tune.id,
        prompts: [{ text: 'sks dog on a beach', num_images: 4 }],
        options: { maxCostMc: 5_000 },
      };
      const outcome = await startAndSettle('generate', input, 'real')(s, workflowId);
      return { ...outcome, context: { tuneId: tune.id } };
    },
  },

  /**
   * A pack on an existing paid tune (`tune_ids`) under `maxCostMc`: the prompts the request adds cost per image, a
   * price the service does not publish, and one request makes them all.
   */
  packReusedTuneMaxCost: {
    name: 'pack-reused-tune-max-cost',
    options: {},
    run: async (s, workflowId) => {
      const tune = await trainedTune(s, 'existing-paid-dog', 'sd15');
      const input: PackTuneInput = {
        packId: PET_PACK_ID,
        tune: { tune_ids: [tune.id] },
        options: { maxCostMc: 1_000 },
      };
      const outcome = await startAndSettle('packTune', input, 'real')(s, workflowId);
      return { ...outcome, context: { tuneId: tune.id } };
    },
  },

  /** A pack on two existing paid tunes: the service adds the pack's prompts (and charges them) on both. */
  packSeveralTunes: {
    name: 'pack-several-tunes',
    options: {},
    run: async (s, workflowId) => {
      const first = await trainedTune(s, 'existing-dog-1', 'sd15');
      const second = await trainedTune(s, 'existing-dog-2', 'sd15');
      const input: PackTuneInput = { packId: PET_PACK_ID, tune: { tune_ids: [first.id, second.id] } };
      const outcome = await startAndSettle('packTune', input, 'real')(s, workflowId);
      return { ...outcome, context: { tuneId: first.id, secondTuneId: second.id } };
    },
  },

  /**
   * A FaceID pack (instant avatars, 40,000 mc for a woman): the tune is ready at creation, and the create's answer
   * (the pack form) shows no price.
   */
  packFaceId: {
    name: 'pack-faceid',
    options: {},
    run: startAndSettle(
      'packTune',
      { packId: FACEID_PACK_ID, tune: { name: 'woman', image_urls: IMAGE_URLS } } satisfies PackTuneInput,
      'real',
    ),
  },

  /** A pack in `branch: fast` (free, spec 1) under `maxCostMc: 0`; the pack's price for dogs is 80,000 mc. */
  packFastMaxCost: {
    name: 'pack-fast-max-cost',
    options: {},
    run: startAndSettle(
      'packTune',
      {
        packId: PET_PACK_ID,
        tune: { name: 'dog', branch: 'fast', image_urls: IMAGE_URLS },
        options: { maxCostMc: 0 },
      } satisfies PackTuneInput,
      'real',
    ),
  },

  /**
   * A FaceID tune is ready at creation: no wait for training, not even a poll, though every callback is lost.
   * Its training image is a file the worker reads (a path in the input, never bytes).
   */
  faceId: {
    name: 'faceid',
    options: { mock: { faults: { callbackDropRate: 1 } } },
    run: (s, workflowId) => {
      const image = path.join(fs.mkdtempSync(path.join(UPLOAD_DIR, 'faceid-')), 'face.png');
      fs.writeFileSync(image, solidPng('faceid-training-image', 64));
      const input: TrainThenGenerateInput = {
        tune: { name: 'woman', model_type: 'faceid', base_tune_id: FLUX_BASE_TUNE.id, images: [image] },
        prompts: [{ text: 'woman, watercolor avatar' }],
        options: QUICK_POLLS,
      };
      return startAndSettle('trainThenGenerate', input, 'real')(s, workflowId);
    },
  },

  /** Cancelled while training, with cleanupOnCancel: the tune is deleted before the workflow ends cancelled. */
  cancelWithCleanup: {
    name: 'cancel-with-cleanup',
    options: { mock: { trainingTime: '60s' } },
    run: (s, workflowId) =>
      s.withWorker(async () => {
        const input = { tune: fastDog, prompts: twoPrompts, options: { cleanupOnCancel: true } };
        const handle = await s.start('trainThenGenerate', input, 'real', workflowId);
        await untilTraining(s, handle);
        await handle.cancel();
        return s.settle(handle);
      }),
  },

  /**
   * A raw start with "allow duplicate" after the job closed, as the Temporal CLI and every SDK start by default: the
   * new run finds its key claimed, reads the first run and ends with its result, creating nothing.
   */
  duplicateAfterClose: {
    name: 'duplicate-after-close',
    options: {},
    run: (s, workflowId) => startAgainAfterClose(s, workflowId, twoPrompts),
  },

  /** Other input under a closed key: the new run fails KeyInUse, naming the field, creating nothing. */
  otherInputAfterClose: {
    name: 'other-input-after-close',
    options: {},
    run: (s, workflowId) => startAgainAfterClose(s, workflowId, [{ text: 'sks dog in the rain' }]),
  },

  /**
   * A training image from the upload directory, and a prompt's input image outside it: the run checks both before it
   * creates anything (the upload check) and fails InvalidInput naming the prompt's field.
   */
  uploadOutsideRefused: {
    name: 'upload-outside-refused',
    options: {},
    run: (s, workflowId) => {
      const image = path.join(fs.mkdtempSync(path.join(UPLOAD_DIR, 'refused-')), 'dog.png');
      fs.writeFileSync(image, solidPng('upload-training-image', 64));
      const input: TrainThenGenerateInput = {
        tune: { name: 'dog', branch: 'fast', images: [image] },
        prompts: [{ text: 'sks dog', controlnet: 'canny', input_image: '/etc/hostname' }],
      };
      return startAndSettle('trainThenGenerate', input, 'real')(s, workflowId);
    },
  },

  /**
   * A key whose claim a raw start squats (a `keyClaim` under the key's claim ID on a task queue no worker polls): the
   * job reads the claim once and fails ClaimHeld, naming the key, having created nothing.
   */
  claimHeld: {
    name: 'claim-held',
    options: {},
    run: async (s, workflowId) => {
      await s.start('keyClaim', [], 'real', claimWorkflowId(workflowId)).catch(() => undefined);
      return startAndSettle('trainThenGenerate', { tune: fastDog, prompts: twoPrompts }, 'real')(s, workflowId);
    },
  },

  /**
   * A raw start under a `tuneflow:` ID that is not the run's own (its key's claim ID, `tuneflow:claim:<workflowId>`):
   * the run refuses it at once (InvalidInput naming `workflowId`, marker `workflow-id-owned`) and creates nothing. No
   * file name can hold that ID: the replay reads it from the history's start event.
   */
  workflowIdNotOwned: {
    name: 'workflow-id-not-owned',
    options: {},
    run: (s, workflowId) => {
      const start = startAndSettle('trainThenGenerate', { tune: fastDog, prompts: twoPrompts }, 'real');
      return start(s, claimWorkflowId(workflowId));
    },
  },

  /**
   * A raw start of a pack under a tenant's ID (`tuneflow:nexus:shop:<workflowId>`) without the memo tuneflow's
   * starters write: refused the same way (the tenant named), nothing created.
   */
  tenantIdNotOwned: {
    name: 'tenant-id-not-owned',
    options: {},
    run: (s, workflowId) => {
      const start = startAndSettle(
        'packTune',
        { packId: PET_PACK_ID, tune: { name: 'dog', image_urls: IMAGE_URLS } },
        'real',
      );
      return start(s, tenantWorkflowId('shop', workflowId));
    },
  },

  /**
   * A key's claim as its job makes it: `keyClaim`, the child a train-then-generate job starts under
   * `tuneflow:claim:<workflowId>`, completes at once. Its history (not the job's) is the recording, read once the job
   * completed; it has no progress query.
   */
  keyClaimOfJob: {
    name: 'key-claim-of-job',
    options: {},
    run: (s, workflowId) =>
      s.withWorker(async () => {
        await (await s.start('trainThenGenerate', { tune: fastDog, prompts: twoPrompts }, 'real', workflowId)).result();
        return s.settleUnqueried(s.env.client.workflow.getHandle(claimWorkflowId(workflowId)));
      }),
  },

  /**
   * A raw `keyClaim` start squatting a key (`tuneflow:claim:<workflowId>`, no job of that key its parent, no input, as
   * `temporal workflow start --type keyClaim` makes it): the claim ends at once, InvalidInput naming `workflowId`.
   */
  keyClaimSquatted: {
    name: 'key-claim-squatted',
    options: {},
    run: (s, workflowId) =>
      s.withWorker(async () => {
        const start = { taskQueue: s.taskQueue, workflowId: claimWorkflowId(workflowId), args: [] };
        return s.settleUnqueried(await s.env.client.workflow.start('keyClaim', start));
      }),
  },

  /**
   * `generate` on a tune another tenant's job made (its title says so): the run reads the tune, refuses it
   * (InvalidInput naming `tuneId`), and creates nothing.
   */
  otherTenantsTune: {
    name: 'other-tenants-tune',
    options: {},
    run: async (s, workflowId) => {
      const title = tuneTitle('tuneflow:nexus:shop:order-1', '0195c1e2-6f0a-7c3e-9d7e-2b1f0c9a8d11');
      const tune = await s.api.tunes.create({ title, name: 'dog', branch: 'fast', image_urls: IMAGE_URLS });
      const outcome = await startAndSettle('generate', { tuneId: tune.id, prompts: twoPrompts }, 'real')(s, workflowId);
      return { ...outcome, context: { tuneId: tune.id } };
    },
  },

  /** Cancelled without cleanupOnCancel: nothing is deleted. */
  cancelWithoutCleanup: {
    name: 'cancel-without-cleanup',
    options: { mock: { trainingTime: '60s' } },
    run: (s, workflowId) =>
      s.withWorker(async () => {
        const handle = await s.start('trainThenGenerate', { tune: fastDog, prompts: twoPrompts }, 'real', workflowId);
        await untilTraining(s, handle);
        await handle.cancel();
        return s.settle(handle);
      }),
  },

  /** A Flux LoRA cancelled while its prompts run on the base tune: those prompts and the LoRA are deleted. */
  cancelFluxWhileGenerating: {
    name: 'cancel-flux-while-generating',
    options: { mock: { inferenceTime: '60s' } },
    run: (s, workflowId) =>
      s.withWorker(async () => {
        const input: TrainThenGenerateInput = {
          tune: { name: 'man', model_type: 'lora', base_tune_id: FLUX_BASE_TUNE.id, image_urls: IMAGE_URLS },
          prompts: [{ text: 'ohwx man, headshot' }, { text: 'ohwx man, hiking' }],
          options: { cleanupOnCancel: true },
        };
        const handle = await s.start('trainThenGenerate', input, 'real', workflowId);
        await s.progressUntil(handle, (p) => p.phase === 'generating');
        await handle.cancel();
        return s.settle(handle);
      }),
  },

  /** The first two POST /tunes get a 500: the create is retried 30 seconds later, then 60 seconds, and succeeds. */
  serverErrorBackoff: {
    name: 'server-error-backoff',
    options: { mock: { faults: { status500Rate: 1, faultRoutes: ['POST /tunes'], maxFaults: 2 } } },
    run: startAndSettle(
      'trainThenGenerate',
      { tune: { name: 'woman', model_type: 'faceid', image_urls: IMAGE_URLS }, prompts: [] },
      'skipping',
    ),
  },

  /**
   * The first POST /tunes is processed but answered 504: the create waits 60 seconds, finds the tune by its title,
   * and does not create a second one.
   */
  gatewayTimeoutOnce: {
    name: 'gateway-timeout-once',
    options: { mock: { faults: { status504Rate: 1, faultRoutes: ['POST /tunes'], maxFaults: 1 } } },
    run: startAndSettle(
      'trainThenGenerate',
      { tune: { name: 'woman', model_type: 'faceid', image_urls: IMAGE_URLS }, prompts: [] },
      'skipping',
    ),
  },

  /** The service refuses the tune with a 422: the workflow fails at once with the field errors, no retry. */
  validationError: {
    name: 'validation-422',
    options: {},
    run: startAndSettle(
      'trainThenGenerate',
      { tune: { ...fastDog, base_tune_id: 999_999 }, prompts: twoPrompts },
      'skipping',
    ),
  },

  /** A tune that never trains fails at its deadline with TuneNeverTrained, after a bounded number of polls. */
  tuneNeverTrained: {
    name: 'tune-never-trained',
    options: { mock: { faults: { neverTrainRate: 1 } } },
    run: startAndSettle(
      'trainThenGenerate',
      {
        tune: fastDog,
        prompts: twoPrompts,
        options: {
          pollInterval: '5 seconds',
          maxPollInterval: '10 seconds',
          trainingTimeout: '20 seconds',
          promptTimeout: '20 seconds',
        },
      },
      'skipping',
    ),
  },

  /** A bad option fails the workflow at once, before any call to the service. */
  invalidOptions: {
    name: 'invalid-options',
    options: {},
    run: startAndSettle(
      'trainThenGenerate',
      { tune: fastDog, prompts: twoPrompts, options: { pollInterval: 'soon' } },
      'skipping',
    ),
  },

  /**
   * Started by name with a raw Temporal client (as another service, the CLI or the UI would), with a prompt the
   * service would refuse: the workflow checks its whole input first and fails with InvalidInput, having created
   * nothing (no tune trained and paid for, then a failed prompt).
   */
  invalidPrompt: {
    name: 'invalid-prompt',
    options: {},
    run: startAndSettle(
      'trainThenGenerate',
      { tune: fastDog, prompts: [{ text: 'sks dog' }, { text: 'sks dog, wide', w: 500 }] },
      'skipping',
    ),
  },

  /**
   * Started by name with a pack tune whose `prompt_attributes` nests deeper than a job's input may (as a raw JSON
   * start can): the workflow refuses it with InvalidInput naming where, before anything is created (marker
   * input-bounded).
   */
  deepAttributeRefused: {
    name: 'deep-attribute-refused',
    options: {},
    run: startAndSettle(
      'packTune',
      {
        packId: PET_PACK_ID,
        tune: { name: 'dog', image_urls: IMAGE_URLS, prompt_attributes: { layout: [[[[[[[['x']]]]]]]] } },
      },
      'skipping',
    ),
  },

  /** A pack on a new tune: the pack's prompts for the class, with the tune's characteristics in their text. */
  pack: {
    name: 'pack',
    options: {},
    run: startAndSettle(
      'packTune',
      {
        packId: PET_PACK_ID,
        tune: { name: 'dog', image_urls: IMAGE_URLS, characteristics: { fur: 'brown' } },
      } satisfies PackTuneInput,
      'real',
    ),
  },

  /**
   * A pack on an existing tune (`tune_ids`) that already has a prompt: only the prompts the request adds are the
   * workflow's; the tune is not trained again.
   */
  packReusedTune: {
    name: 'pack-reused-tune',
    options: {},
    run: async (s, workflowId) => {
      const tune = await trainedTune(s, 'existing-dog');
      const old = await s.api.prompts.create(tune.id, { text: 'sks dog, an older prompt' });
      const input: PackTuneInput = { packId: PET_PACK_ID, tune: { tune_ids: [tune.id] } };
      const outcome = await startAndSettle('packTune', input, 'real')(s, workflowId);
      return { ...outcome, context: { tuneId: tune.id, oldPromptId: old.id } };
    },
  },

  /**
   * `generate` on an existing tune still training: it polls until trained (the tune's callback is not its own),
   * then runs the prompts; one of them fails by the mock's `__fail__` hook and settles with a user_error.
   */
  generateOnTrainingTune: {
    name: 'generate-on-training-tune',
    // Trains for 4 s: still training at the first read however loaded the machine, trained at a later poll.
    options: { mock: { trainingTime: '4s' } },
    run: async (s, workflowId) => {
      const tune = await s.api.tunes.create({
        title: 'existing-cat',
        name: 'cat',
        branch: 'fast',
        image_urls: IMAGE_URLS,
      });
      const input: GenerateInput = {
        tuneId: tune.id,
        prompts: [{ text: 'sks cat on a sofa', num_images: 2 }, { text: 'sks cat __fail__' }],
        // Polls for the training wait, but none due while the prompt callbacks (0.5 s) end theirs: the time-skipping
        // test server refuses to cancel a timer that fired during the workflow task that cancels it, and the run
        // then hangs (temporalio/sdk-java#2606, #3088).
        options: { ...QUICK_POLLS, pollInterval: '3 seconds', maxPollInterval: '3 seconds' },
      };
      const outcome = await startAndSettle('generate', input, 'real')(s, workflowId);
      return { ...outcome, context: { tuneId: tune.id } };
    },
  },

  /**
   * Inspection before paying: a paid training whose photos include a blurry one and a crowd. Every photo is inspected,
   * the run fails InspectionRefused naming both, and no tune is created: nothing is charged.
   */
  inspectionRefused: {
    name: 'inspection-refused',
    options: {},
    run: startAndSettle(
      'trainThenGenerate',
      {
        tune: { name: 'dog', branch: 'sd15', image_urls: [INSPECTED_URLS[0], BLURRY_URL, CROWD_URL] },
        prompts: twoPrompts,
        options: { inspect: REFUSE },
      } satisfies TrainThenGenerateInput,
      'real',
    ),
  },

  /** Five photos inspected, four at once, none with a refused flag: the tune is created and the job completes. */
  inspectionClean: {
    name: 'inspection-clean',
    options: {},
    run: startAndSettle(
      'trainThenGenerate',
      {
        tune: { name: 'dog', branch: 'fast', image_urls: INSPECTED_URLS },
        prompts: [{ text: 'sks dog on a beach' }],
        options: { inspect: REFUSE },
      } satisfies TrainThenGenerateInput,
      'real',
    ),
  },

  /** The first inspection gets a 500: retried 30 seconds later, as any call, then the job goes on. */
  inspectionServerError: {
    name: 'inspection-server-error',
    options: { mock: { faults: { status500Rate: 1, faultRoutes: ['POST /images/inspect'], maxFaults: 1 } } },
    run: startAndSettle(
      'trainThenGenerate',
      {
        tune: { name: 'woman', model_type: 'faceid', image_urls: [INSPECTED_URLS[1]] },
        prompts: [],
        options: { inspect: REFUSE },
      } satisfies TrainThenGenerateInput,
      'skipping',
    ),
  },

  /** A pack on a new tune whose photos pass inspection: inspected, then the pack request, then its prompts. */
  packInspection: {
    name: 'pack-inspection',
    options: {},
    run: startAndSettle(
      'packTune',
      {
        packId: PET_PACK_ID,
        tune: { name: 'dog', image_urls: INSPECTED_URLS.slice(0, 2) },
        options: { inspect: REFUSE },
      } satisfies PackTuneInput,
      'real',
    ),
  },

  /** A pack (80,000 mc for a dog) with a blurry photo: refused after inspection, before the pack is paid for. */
  packInspectionRefused: {
    name: 'pack-inspection-refused',
    options: {},
    run: startAndSettle(
      'packTune',
      {
        packId: PET_PACK_ID,
        tune: { name: 'dog', image_urls: [INSPECTED_URLS[0], BLURRY_URL] },
        options: { inspect: REFUSE },
      } satisfies PackTuneInput,
      'real',
    ),
  },
} satisfies Record<string, ScenarioDefinition<Settled<unknown>>>;

/** A tune made through the API (free in branch fast, 150,000 mc otherwise), waited for until trained. */
async function trainedTune(s: Scenario, title: string, branch: 'fast' | 'sd15' = 'fast'): Promise<Tune> {
  const created = await s.api.tunes.create({ title, name: 'dog', branch, image_urls: IMAGE_URLS });
  let tune = created;
  await waitFor(
    async () => !!(tune = await s.api.tunes.retrieve(created.id)).trained_at,
    () => `tune ${created.id} to train`,
  );
  return tune;
}

/** POSTs a forged body to a signed callback URL; returns the receiver's outcome (or its status). */
async function forge(url: string, body: unknown): Promise<string> {
  const res = await request(url, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
  });
  const answer = (await res.body.json()) as { outcome?: string };
  return answer.outcome ?? String(res.statusCode);
}

/** Waits until the workflow's history holds a signal (no worker needed). */
/**
 * A train-then-generate job under `workflowId`, then, once it closed, a raw "allow duplicate" start of the same key with
 * `prompts`: what the second run did.
 */
function startAgainAfterClose(s: Scenario, workflowId: string, prompts: TrainThenGenerateInput['prompts']) {
  return s.withWorker(async () => {
    await (await s.start('trainThenGenerate', { tune: fastDog, prompts: twoPrompts }, 'real', workflowId)).result();
    const again = await s.start('trainThenGenerate', { tune: fastDog, prompts }, 'real', workflowId, {
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    });
    return s.settle(again);
  });
}

function untilSignalled(handle: WorkflowHandle): Promise<void> {
  return waitFor(
    async () => !!(await handle.fetchHistory()).events?.some((e) => e.workflowExecutionSignaledEventAttributes),
    () => `a signal to reach ${handle.workflowId}`,
  );
}
