/**
 * The mock charges like the service: training per tune, per image per prompt, a pack's price per class covering its
 * prompts, `branch: fast` free; `cost_mc` on every tune and prompt, and a ledger per account that adds up.
 */
import { FLUX_BASE_TUNE, IMAGE_MC, startMockService, TUNE_TRAINING_MC, type MockService } from '../../src/mock-service';
import { call, until, type PromptJson, type TuneJson } from './loopback';

jest.setTimeout(20_000);

let mock: MockService;
let keys = 0;
beforeAll(async () => (mock = await startMockService({ trainingTime: '100ms', inferenceTime: '50ms' })));
afterAll(() => mock.close());

const IMAGES = ['https://images.test/1.jpg'];

async function tune(key: string, extra: Record<string, unknown>): Promise<TuneJson> {
  const res = await call<TuneJson>(mock.url, key, 'POST', '/tunes', {
    tune: { title: `pricing-${Math.random()}`, name: 'woman', image_urls: IMAGES, ...extra },
  });
  expect(res.status).toBe(201);
  return res.body;
}

async function prompt(key: string, tuneId: number, attributes: Record<string, unknown>): Promise<PromptJson> {
  const res = await call<PromptJson>(mock.url, key, 'POST', `/tunes/${tuneId}/prompts`, { prompt: attributes });
  expect(res.status).toBe(201);
  return res.body;
}

test('tunes cost training (FaceID and branch fast nothing); prompts cost per image (on a fast tune nothing)', async () => {
  const key = `pricing-${++keys}`;
  const paid = await tune(key, { branch: 'sd15' });
  const fast = await tune(key, { branch: 'fast' });
  const faceid = await tune(key, { branch: 'flux1', model_type: 'faceid', base_tune_id: FLUX_BASE_TUNE.id });
  expect([paid.cost_mc, fast.cost_mc, faceid.cost_mc]).toEqual([TUNE_TRAINING_MC, 0, 0]);
  const onPaid = await prompt(key, paid.id, { text: 'sks woman', num_images: 3 });
  const onFast = await prompt(key, fast.id, { text: 'sks woman', num_images: 3 });
  const onBase = await prompt(key, FLUX_BASE_TUNE.id, { text: 'a lighthouse' });
  expect([onPaid.cost_mc, onFast.cost_mc, onBase.cost_mc]).toEqual([3 * IMAGE_MC, 0, IMAGE_MC]);
  // Reads show the same cost_mc.
  expect((await call<TuneJson>(mock.url, key, 'GET', `/tunes/${paid.id}`)).body.cost_mc).toBe(TUNE_TRAINING_MC);
  const ledger = mock.ledger(key);
  expect(ledger.charges.map((c) => [c.object, c.id, c.mc])).toEqual([
    ['tune', paid.id, TUNE_TRAINING_MC],
    ['tune', fast.id, 0],
    ['tune', faceid.id, 0],
    ['prompt', onPaid.id, 3 * IMAGE_MC],
    ['prompt', onFast.id, 0],
    ['prompt', onBase.id, IMAGE_MC],
  ]);
  expect(ledger.totalMc).toBe(TUNE_TRAINING_MC + 4 * IMAGE_MC);
  expect(mock.ledger(`pricing-${++keys}`)).toEqual({ totalMc: 0, charges: [] }); // accounts are apart
});

test("a pack tune costs the pack's price for its class, which covers its prompts; on a reused tune they cost", async () => {
  const key = `pricing-${++keys}`;
  const created = await call<TuneJson>(mock.url, key, 'POST', '/p/261/tunes', {
    tune: { title: `pack-${Math.random()}`, name: 'dog', image_urls: IMAGES },
  });
  expect(created.status).toBe(201);
  const trained = await until(
    async () => (await call<TuneJson>(mock.url, key, 'GET', `/tunes/${created.body.id}`)).body,
    (t) => t.trained_at !== null,
  );
  expect(trained.cost_mc).toBe(80_000); // cost_mc_hash.dog of the pet pack
  const listed = (await call<PromptJson[]>(mock.url, key, 'GET', `/tunes/${trained.id}/prompts`)).body;
  expect(listed.map((p) => p.cost_mc)).toEqual([0, 0]);
  expect(mock.ledger(key).totalMc).toBe(80_000);

  const other = await tune(key, { name: 'dog', branch: 'sd15' });
  await call(mock.url, key, 'POST', '/p/261/tunes', { tune: { tune_ids: [other.id] } });
  const added = (await call<PromptJson[]>(mock.url, key, 'GET', `/tunes/${other.id}/prompts`)).body;
  expect(added.map((p) => p.cost_mc)).toEqual([IMAGE_MC, IMAGE_MC]); // one image each
  expect(mock.ledger(key).totalMc).toBe(80_000 + TUNE_TRAINING_MC + 2 * IMAGE_MC);

  // The free mock mode: a pack tune in branch fast costs nothing.
  const fast = await call<TuneJson>(mock.url, key, 'POST', '/p/261/tunes', {
    tune: { title: `pack-fast-${Math.random()}`, name: 'cat', branch: 'fast', image_urls: IMAGES },
  });
  expect(fast.status).toBe(201);
  expect((await call<TuneJson>(mock.url, key, 'GET', `/tunes/${fast.body.id}`)).body.cost_mc).toBe(0);
  expect(mock.ledger(key).totalMc).toBe(80_000 + TUNE_TRAINING_MC + 2 * IMAGE_MC);
});
