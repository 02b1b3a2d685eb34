/**
 * Packs (spec 4.9, service notes): list and detail, tunes created from a pack with the pack's configuration and
 * prompts, characteristics in placeholders, per-prompt callbacks and the one prompts_callback, tune_ids and
 * prompt_ids, idempotency by title.
 */
import { FLUX_BASE_TUNE, startMockService, type MockService } from '../../src/mock-service';
import { call, CallbackReceiver, until, type ErrorJson, type PromptJson, type TuneJson } from './loopback';

jest.setTimeout(20_000);

const PACK_FORM_FIELDS = [
  'id',
  'title',
  'name',
  'eta',
  'trained_at',
  'started_training_at',
  'expires_at',
  'created_at',
  'updated_at',
  'url',
  'orig_images',
].sort();

interface PackJson {
  id: number;
  base_tune_id: number | null;
  model_type: string | null;
  cost_mc_hash: Record<string, number>;
  [field: string]: unknown;
}
interface PackDetailJson extends PackJson {
  cover_url: string;
  costs: Record<string, { cost: number; num_images: number }>;
  prompts_per_class: Record<string, { id: number; text: string; num_images: number }[]>;
}

let mock: MockService;
let receiver: CallbackReceiver;
let keys = 0;
const newKey = () => `packs-${++keys}`;

beforeAll(async () => {
  mock = await startMockService({ trainingTime: '250ms', inferenceTime: '100ms' });
  receiver = await new CallbackReceiver().start();
});
afterAll(async () => {
  await mock.close();
  await receiver.close();
});

const images = { image_urls: ['https://images.test/1.jpg', 'https://images.test/2.jpg'] };
const tunePrompts = async (key: string, tuneId: number) =>
  (await call<PromptJson[]>(mock.url, key, 'GET', `/tunes/${tuneId}/prompts`)).body;

describe('pack list and detail', () => {
  test('GET /packs lists at least three packs covering several classes', async () => {
    const res = await call<PackJson[]>(mock.url, newKey(), 'GET', '/packs');
    expect(res.status).toBe(200);
    expect(res.body.length).toBeGreaterThanOrEqual(3);
    for (const pack of res.body)
      expect(pack).toMatchObject({
        id: expect.any(Number),
        slug: expect.any(String),
        title: expect.any(String),
        token: expect.any(String),
        multiplier: expect.any(Number),
        public_at: expect.any(String),
      });
    const classes = new Set(res.body.flatMap((p) => Object.keys(p.cost_mc_hash)));
    for (const name of ['man', 'woman', 'cat', 'dog']) expect(classes).toContain(name);
    expect(new Set(res.body.map((p) => p.model_type))).toEqual(new Set(['lora', null, 'faceid']));
    expect((await call(mock.url, newKey(), 'GET', '/gallery/packs?public=true&listed=true')).body).toEqual(res.body);
    expect((await call(mock.url, null, 'GET', '/packs')).status).toBe(401);
  });

  test('GET /p/:id adds cover_url, costs and prompts_per_class; its classes are the cost_mc_hash keys', async () => {
    const key = newKey();
    for (const { id } of (await call<PackJson[]>(mock.url, key, 'GET', '/packs')).body) {
      const res = await call<PackDetailJson>(mock.url, key, 'GET', `/p/${id}`);
      expect(res.status).toBe(200);
      const pack = res.body;
      expect(Object.keys(pack.prompts_per_class).sort()).toEqual(Object.keys(pack.cost_mc_hash).sort());
      expect(Object.keys(pack.costs).sort()).toEqual(Object.keys(pack.cost_mc_hash).sort());
      const last = Math.max(
        ...Object.values(pack.prompts_per_class)
          .flat()
          .map((p) => p.id),
      );
      expect(pack.cover_url).toBe(`${mock.url}/images/${last}-0.png`);
      for (const [name, prompts] of Object.entries(pack.prompts_per_class))
        expect(pack.costs[name].num_images).toBe(prompts.reduce((n, p) => n + p.num_images, 0));
    }
    expect((await call(mock.url, key, 'GET', '/p/999')).status).toBe(404);
    expect((await call(mock.url, key, 'GET', '/p/abc')).status).toBe(404);
  });
});

describe('POST /p/:pack_id/tunes', () => {
  test('answers the pack form, trains with the pack configuration and runs its prompts with callbacks', async () => {
    const key = newKey();
    const res = await call<TuneJson>(mock.url, key, 'POST', '/p/261/tunes', {
      tune: {
        title: 'rex',
        name: 'dog',
        ...images,
        callback: `${receiver.url}/pets/tune?order=7`,
        characteristics: { fur: 'golden' },
        prompt_attributes: { callback: `${receiver.url}/pets/prompt?order=7` },
        prompts_callback: `${receiver.url}/pets/all?order=7`,
      },
    });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(PACK_FORM_FIELDS);
    expect(res.body).toMatchObject({ title: 'rex', name: 'dog', trained_at: null, orig_images: images.image_urls });

    const full = (await call<TuneJson>(mock.url, key, 'GET', `/tunes/${res.body.id}`)).body;
    expect(full).toMatchObject({ base_tune_id: null, model_type: null, branch: 'sd15', token: 'sks', pack_id: 261 });
    const prompts = await tunePrompts(key, res.body.id);
    expect(prompts.map((p) => p.text).sort()).toEqual([
      'sks dog as a renaissance painting, golden fur',
      'sks dog astronaut, golden fur, studio light',
    ]);
    for (const p of prompts)
      expect(p).toMatchObject({
        pack_id: 261,
        orig_prompt_id: expect.any(Number),
        callback: `${receiver.url}/pets/prompt?order=7`,
      });

    const [all] = await receiver.waitFor('/pets/all', 1);
    const perPrompt = await receiver.waitFor('/pets/prompt', 2);
    const [tuneCallback] = await receiver.waitFor('/pets/tune', 1);
    expect(all.query.get('order')).toBe('7');
    const sent = all.body as PromptJson[];
    expect(sent.map((p) => p.id).sort()).toEqual(prompts.map((p) => p.id).sort());
    for (const p of sent) expect(p.images.length).toBeGreaterThan(0);
    expect(perPrompt.map((c) => (c.body as PromptJson).id).sort()).toEqual(prompts.map((p) => p.id).sort());
    expect((tuneCallback.body as TuneJson).id).toBe(res.body.id);
    // Every callback of this mock so far is accounted for: the prompts callback went exactly once.
    expect(receiver.at('/pets/all')).toHaveLength(1);
    expect(mock.stats().callbacks.sent).toBe(receiver.received.length);
  });

  test('a Flux LoRA pack trains a flux1 LoRA on the base tune; placeholders without a value are dropped', async () => {
    const key = newKey();
    const res = await call<TuneJson>(mock.url, key, 'POST', '/p/260/tunes', {
      tune: { title: 'jane', name: 'woman', ...images },
    });
    expect(res.status).toBe(201);
    const full = (await call<TuneJson>(mock.url, key, 'GET', `/tunes/${res.body.id}`)).body;
    expect(full).toMatchObject({
      base_tune_id: FLUX_BASE_TUNE.id,
      model_type: 'lora',
      branch: 'flux1',
      preset: 'flux-lora-portrait',
    });
    const prompts = await tunePrompts(key, res.body.id);
    expect(prompts).toHaveLength(3);
    expect(prompts.map((p) => p.text)).toContain('ohwx woman, corporate headshot, blazer, office background');
    for (const p of prompts) expect(p.text).not.toMatch(/\{\{|\}\}/);
    // The prompts wait for the training, then settle.
    expect(prompts.every((p) => p.started_training_at === null)).toBe(true);
    await until(
      () => tunePrompts(key, res.body.id),
      (list) => list.every((p) => p.images.length > 0),
    );
  });

  test('a FaceID pack tune is ready at once and its prompts start at once', async () => {
    const key = newKey();
    const res = await call<TuneJson>(mock.url, key, 'POST', '/p/262/tunes', {
      tune: { title: 'kid', name: 'girl', ...images },
    });
    expect(res.status).toBe(201);
    expect(res.body.trained_at).toBe(res.body.created_at);
    const prompts = await tunePrompts(key, res.body.id);
    expect(prompts).toHaveLength(2);
    for (const p of prompts) expect(p.started_training_at).not.toBeNull();
  });

  test('the class must be one the pack supports; the body follows the schema', async () => {
    const key = newKey();
    const cat = await call<ErrorJson>(mock.url, key, 'POST', '/p/260/tunes', {
      tune: { title: 'tom', name: 'cat', ...images },
    });
    expect(cat.status).toBe(422);
    expect(cat.body).toEqual({
      error: 'tune.name: must be a class the pack supports: man, woman',
      'tune.name': ['must be a class the pack supports: man, woman'],
    });
    const noImages = await call<ErrorJson>(mock.url, key, 'POST', '/p/260/tunes', {
      tune: { title: 'x', name: 'man' },
    });
    expect(noImages.status).toBe(422);
    expect(noImages.body['tune.images']).toEqual(['exactly one of images or image_urls is required']);
    expect(
      (await call(mock.url, key, 'POST', '/p/999/tunes', { tune: { title: 'x', name: 'man', ...images } })).status,
    ).toBe(404);
    expect((await call<TuneJson[]>(mock.url, key, 'GET', '/tunes')).body).toEqual([]);
  });

  test('tune_ids: only the pack prompts are created, for existing tunes of the account', async () => {
    const key = newKey();
    const own = await call<TuneJson>(mock.url, key, 'POST', '/tunes', {
      tune: { title: 'me', name: 'man', model_type: 'faceid', ...images },
    });
    const res = await call<TuneJson>(mock.url, key, 'POST', '/p/260/tunes', {
      tune: { tune_ids: [own.body.id], prompts_callback: `${receiver.url}/reuse/all` },
    });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(PACK_FORM_FIELDS);
    expect(res.body.id).toBe(own.body.id);
    expect((await call<TuneJson[]>(mock.url, key, 'GET', '/tunes')).body.map((t) => t.id)).toEqual([own.body.id]);
    const prompts = await tunePrompts(key, own.body.id);
    expect(prompts).toHaveLength(3);
    for (const p of prompts) expect(p.pack_id).toBe(260);
    const [all] = await receiver.waitFor('/reuse/all', 1);
    expect((all.body as PromptJson[]).map((p) => p.id).sort()).toEqual(prompts.map((p) => p.id).sort());

    const cat = await call<TuneJson>(mock.url, key, 'POST', '/tunes', {
      tune: { title: 'tom', name: 'cat', ...images },
    });
    const wrongClass = await call<ErrorJson>(mock.url, key, 'POST', '/p/260/tunes', {
      tune: { tune_ids: [cat.body.id] },
    });
    expect(wrongClass.status).toBe(422);
    expect(wrongClass.body['tune.tune_ids']).toEqual(['must be a class the pack supports: man, woman']);
    const foreign = await call<ErrorJson>(mock.url, newKey(), 'POST', '/p/260/tunes', {
      tune: { tune_ids: [own.body.id] },
    });
    expect(foreign.status).toBe(422);
    expect(foreign.body['tune.tune_ids']).toEqual([`${own.body.id} is not a tune of this account`]);
  });

  test('prompt_ids runs a subset of the pack prompts for the class', async () => {
    const key = newKey();
    const detail = (await call<PackDetailJson>(mock.url, key, 'GET', '/p/260')).body;
    const chosen = detail.prompts_per_class.man[1];
    const res = await call<TuneJson>(mock.url, key, 'POST', '/p/260/tunes', {
      tune: { title: 'one', name: 'man', ...images, characteristics: { hair_color: 'red' }, prompt_ids: [chosen.id] },
    });
    expect(res.status).toBe(201);
    const prompts = await tunePrompts(key, res.body.id);
    expect(prompts.map((p) => [p.orig_prompt_id, p.text])).toEqual([
      [chosen.id, 'ohwx man, red hair, linkedin profile photo, soft light'],
    ]);

    const womanPrompt = detail.prompts_per_class.woman[0].id;
    const wrong = await call<ErrorJson>(mock.url, key, 'POST', '/p/260/tunes', {
      tune: { title: 'two', name: 'man', ...images, prompt_ids: [womanPrompt] },
    });
    expect(wrong.status).toBe(422);
    expect(wrong.body['tune.prompt_ids']).toEqual([`${womanPrompt} are not prompts of the pack for class man`]);
  });

  test('with idempotency on, the same title returns the existing tune and creates nothing', async () => {
    const idem = await startMockService({ idempotency: true, trainingTime: '1s' });
    try {
      const body = { tune: { title: 'same', name: 'man', ...images } };
      const first = await call<TuneJson>(idem.url, 'k', 'POST', '/p/260/tunes', body);
      const second = await call<TuneJson>(idem.url, 'k', 'POST', '/p/260/tunes', body);
      expect([first.status, second.status]).toEqual([201, 200]);
      expect(second.body).toEqual(first.body);
      expect((await call<PromptJson[]>(idem.url, 'k', 'GET', '/prompts')).body).toHaveLength(3);
    } finally {
      await idem.close();
    }
  });
});
