/**
 * The client reads answers as the live service renders them: the mock in `rails` style (decimals as strings, `""`
 * for an empty text, a prompt create answered as a one-element array, fields the spec does not list), over real
 * HTTP. Fields tuneflow reads come out as numbers; the others pass through as sent.
 */
import { isPromptSettled, isTuneTrained, UnexpectedResponseError } from '../../src/api';
import { until, useMockAccounts } from './mock-accounts';

const URLS = ['https://example.com/train/1.jpg', 'https://example.com/train/2.jpg'];

const accounts = useMockAccounts({ trainingTime: '200ms', inferenceTime: '100ms', answerStyle: 'rails' });
const { account } = accounts;

beforeEach(() => accounts.mock().setFaults({}));

test('a tune and its prompts: created, read, listed and settled with decimals as strings', async () => {
  const api = account();
  const tune = await api.tunes.create({ title: 'live-1', name: 'woman', branch: 'fast', image_urls: URLS });
  expect(typeof tune.id).toBe('number');
  await until(() => api.tunes.retrieve(tune.id), isTuneTrained);

  const prompt = await api.prompts.create(tune.id, { text: 'ohwx woman', cfg_scale: 3, denoising_strength: 0.5 });
  expect(Array.isArray(prompt)).toBe(false);
  expect(prompt).toMatchObject({ tune_id: tune.id, cfg_scale: '3.0', negative_prompt: '' });
  const done = await until(() => api.prompts.retrieve(tune.id, prompt.id), isPromptSettled);
  expect(done.images?.length).toBeGreaterThan(0);
  expect((await api.prompts.list(tune.id)).map((p) => [p.id, p.cfg_scale])).toEqual([[prompt.id, '3.0']]);
  expect((await api.prompts.listAll()).map((p) => p.id)).toEqual([prompt.id]);
  expect((await api.tunes.list()).map((t) => t.id)).toEqual([tune.id]);
});

test('packs with numeric strings', async () => {
  const [pack] = await account().packs.list();
  expect(typeof pack.id).toBe('number');
});

test('a create answered with a body cut short: UnexpectedResponseError (retryable), and the prompt exists', async () => {
  const api = account();
  const tune = await api.tunes.create({ title: 'live-2', name: 'man', branch: 'fast', image_urls: URLS });
  accounts.mock().setFaults({ garbledAnswerRate: 1, faultRoutes: ['POST /tunes/:id/prompts'], maxFaults: 1 });
  const err = await api.prompts.create(tune.id, { text: 'ohwx man' }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(UnexpectedResponseError);
  expect((err as UnexpectedResponseError).kind).toBe('UnexpectedResponse');
  expect(await api.prompts.list(tune.id)).toHaveLength(1);
});

test('the un-nested prompt path, a tune on the gallery base 690204, and tunes found by title', async () => {
  const api = account();
  const tune = await api.tunes.create({ title: 'on-690204', name: 'dog', base_tune_id: 690204, image_urls: URLS });
  expect(tune).toMatchObject({ base_tune_id: 690204, branch: 'sd15' });
  await api.tunes.create({ title: 'another', name: 'dog', image_urls: URLS });
  expect((await api.tunes.list({ title: 'on-690204' })).map((t) => t.id)).toEqual([tune.id]);

  const prompt = await api.prompts.create(690204, { text: 'sks dog', cfg_scale: 7.5 });
  const byId = await api.prompts.retrieveById(prompt.id);
  expect(byId).toMatchObject({ id: prompt.id, tune_id: 690204, cfg_scale: '7.5' });
  const settled = await until(() => api.prompts.retrieveById(prompt.id), isPromptSettled);
  expect(settled).toEqual(await api.prompts.retrieve(690204, prompt.id));
});
