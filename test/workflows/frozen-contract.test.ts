/**
 * The input contract as a worker runs it: preloaded once into the V8 context every run shares, and deep-frozen there
 * by the SDK. Freezing breaks code that writes to what it shares (zod's own regex and URL checks reset a RegExp's
 * lastIndex, and refused every valid URL frozen), so the whole refusal catalogue is played inside the sandbox against
 * the frozen contract and must give the verdicts the contract gives outside, field for field.
 */
import { randomUUID } from 'node:crypto';
import { bundleWorkflowCode, DefaultLogger, Worker, type WorkflowBundle } from '@temporalio/worker';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { z } from 'zod';
import { withPreloadedContract } from '../../src/bundling';
import { catalogueJobs } from '../api/bad-input-cases';
import { createTestEnvironment, workflowTest } from './environment';
import { verdictOf, type ContractJob, type ContractVerdict } from './contract-workflows';

jest.setTimeout(180_000);

const URLS = ['https://example.com/1.jpg'];
const VALID: ContractJob[] = [
  { workflow: 'trainThenGenerate', input: { tune: { name: 'dog', image_urls: URLS }, prompts: [{ text: 'sks dog' }] } },
  { workflow: 'generate', input: { tuneId: 7, prompts: [{ text: 'sks dog', w: 512, cfg_scale: 3 }] } },
  { workflow: 'packTune', input: { packId: 260, tune: { name: 'man', image_urls: URLS, characteristics: '{}' } } },
];

let env: TestWorkflowEnvironment;

beforeAll(async () => {
  env = await createTestEnvironment();
});
afterAll(async () => {
  await env?.teardown();
});

async function runInSandbox(bundle: WorkflowBundle, jobs: ContractJob[]) {
  const taskQueue = `contract-${randomUUID()}`;
  const worker = await Worker.create({ connection: env.nativeConnection, taskQueue, workflowBundle: bundle });
  return worker.runUntil(
    env.client.workflow.execute('contractVerdicts', { taskQueue, workflowId: taskQueue, args: [jobs] }),
  ) as Promise<{ shared: boolean; verdicts: ContractVerdict[] }>;
}

const bundleOf = (preload: boolean) => {
  const options = { workflowsPath: require.resolve('./contract-workflows'), logger: new DefaultLogger('WARN') };
  return bundleWorkflowCode(preload ? withPreloadedContract(options) : options);
};

workflowTest(
  'the refusal catalogue gives the same verdicts inside a run, against the shared frozen contract',
  async () => {
    const catalogue = catalogueJobs();
    // The contract covers the catalogue's tune, prompt and pack creates.
    expect(catalogue.length).toBeGreaterThanOrEqual(50);
    // As a run gets them: JSON (a Buffer in a prompt arrives as an object).
    const jobs = JSON.parse(JSON.stringify([...VALID, ...catalogue.map((c) => c.job)])) as ContractJob[];
    const outside = jobs.map(verdictOf);
    expect(outside.slice(0, VALID.length)).toEqual(['ok', 'ok', 'ok']);
    // Every case is refused by the contract, but what only the worker can judge (whether a path can be read) and what
    // tuneflow sets itself (a tune's title, which a job's tune leaves out: the catalogue's jobs carry none).
    const passed = catalogue.filter((_, i) => outside[VALID.length + i] === 'ok').map((c) => c.name);
    expect(passed).toEqual(['an image path that cannot be read', 'blank title', 'pack tune without a title']);

    const frozen = await runInSandbox(await bundleOf(true), jobs);
    expect(frozen.shared).toBe(true);
    expect(frozen.verdicts).toEqual(outside);
  },
);

workflowTest('without the preload, each run evaluates its own contract (the check above can tell)', async () => {
  const own = await runInSandbox(await bundleOf(false), VALID);
  expect(own).toEqual({ shared: false, verdicts: ['ok', 'ok', 'ok'] });
});

test('why the schemas use refinements: a zod regex check, frozen as a shared module is, refuses what it should take', () => {
  const freeze = (value: unknown): void => {
    if (value === null || (typeof value !== 'object' && typeof value !== 'function') || Object.isFrozen(value)) return;
    Object.freeze(value);
    if (typeof value === 'object')
      for (const key of Reflect.ownKeys(value)) freeze((value as Record<PropertyKey, unknown>)[key]);
  };
  const url = z.url({ protocol: /^https?$/ });
  expect(url.safeParse('https://example.com/1.jpg').success).toBe(true);
  freeze(url);
  expect(url.safeParse('https://example.com/1.jpg').success).toBe(false);
});
