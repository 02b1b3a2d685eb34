/**
 * The mock's journal (`GET /__mock/journal`, `mock.journal()`): every tune and prompt created, deleted ones included,
 * with what became of it (trained, settled, deleted, never to train), and every callback POST with its workflow ID,
 * the ids it reports, when it was sent and how it was answered; and the `callbackJitterMs` fault that delivers
 * callbacks out of order. A soak run is judged by it.
 */
import { startMockService, type MockJournal, type MockService } from '../../src/mock-service';
import { solidPng } from '../../src/mock-service/png';
import { call, CallbackReceiver, multipart, until, type PromptJson, type TuneJson } from './loopback';

jest.setTimeout(20_000);

let mock: MockService;
let receiver: CallbackReceiver;

beforeAll(async () => {
  mock = await startMockService({ trainingTime: '100ms', inferenceTime: '50ms' });
  receiver = await new CallbackReceiver().start();
});
afterAll(async () => {
  await mock.close();
  await receiver.close();
});
beforeEach(() => mock.setFaults({}));

test('records every tune and prompt created, deleted ones too, over HTTP as in process', async () => {
  const key = 'journal-objects';
  const tune = (
    await call<TuneJson>(mock.url, key, 'POST', '/tunes', {
      tune: { title: 'journal-job-1', name: 'dog', image_urls: ['https://images.test/1.jpg'] },
    })
  ).body;
  const prompt = (
    await call<PromptJson>(mock.url, key, 'POST', `/tunes/${tune.id}/prompts`, { prompt: { text: 'sks dog [m #0]' } })
  ).body;
  expect((await call(mock.url, key, 'DELETE', `/tunes/${tune.id}/prompts/${prompt.id}`)).status).toBeLessThan(300);

  const journal = (await call<MockJournal>(mock.url, null, 'GET', '/__mock/journal')).body;
  // Trained or not yet: training takes 100 ms here.
  expect(journal.tunes).toContainEqual({
    id: tune.id,
    title: 'journal-job-1',
    packId: null,
    createdAt: expect.any(Number),
    trainedAt: journal.tunes.find((t) => t.id === tune.id)?.trainedAt === null ? null : expect.any(Number),
    neverTrains: false,
    deletedAt: null,
  });
  expect(journal.prompts).toContainEqual({
    id: prompt.id,
    tuneId: tune.id,
    text: 'sks dog [m #0]',
    packId: null,
    requestTitle: null,
    createdAt: expect.any(Number),
    settledAt: null,
    deletedAt: expect.any(Number),
  });
  expect(mock.journal().prompts.map((p) => p.id)).toContain(prompt.id);
  // Not an API route: the journal is never counted as a call to the service.
  expect(mock.stats().routes['GET /__mock/journal']).toBeUndefined();
});

test('records each callback POST with its workflow ID, the ids it reports and when it was sent', async () => {
  const key = 'journal-callbacks';
  mock.setFaults({ callbackDuplicateRate: 1 });
  const url = `${receiver.url}/journal-tune?workflowId=job-7&sig=00`;
  const tune = (
    await call<TuneJson>(mock.url, key, 'POST', '/tunes', {
      tune: { title: 'journal-job-7', name: 'dog', image_urls: ['https://images.test/1.jpg'], callback: url },
    })
  ).body;
  const arrived = await receiver.waitFor('/journal-tune', 2);
  // The receiver has them; the mock records each answer when it comes back (a moment later).
  const answered = () => mock.journal().callbacks.filter((c) => c.path === '/journal-tune' && c.status !== null);
  for (const start = Date.now(); answered().length < 2 && Date.now() - start < 5_000; )
    await new Promise((resolve) => setTimeout(resolve, 10));
  const sent = mock.journal().callbacks.filter((c) => c.path === '/journal-tune');
  const entry = { path: '/journal-tune', workflowId: 'job-7', ids: [tune.id], sentAt: expect.any(Number) };
  expect(sent).toEqual([
    { ...entry, status: 200, failure: null },
    { ...entry, status: 200, failure: null },
  ]);
  for (const callback of sent) expect(callback.sentAt).toBeLessThanOrEqual(arrived[1].at);
});

test('callbackJitterMs delays each copy of a callback by its own random share: they arrive apart', async () => {
  const key = 'journal-jitter';
  mock.setFaults({ callbackDuplicateRate: 1, callbackJitterMs: 1_500 });
  const started = Date.now();
  await call<TuneJson>(mock.url, key, 'POST', '/tunes', {
    tune: {
      title: 'journal-jitter',
      name: 'dog',
      image_urls: ['https://images.test/1.jpg'],
      callback: `${receiver.url}/jitter`,
    },
  });
  const [a, b] = await receiver.waitFor('/jitter', 2);
  expect(b.at - started).toBeLessThan(100 + 1_500 + 1_000);
  const times = mock
    .journal()
    .callbacks.filter((c) => c.path === '/jitter')
    .map((c) => c.sentAt);
  expect(times).toHaveLength(2);
  expect(a.body).toEqual(b.body);
});

test('callbackJitterMs must be a whole number of milliseconds', () => {
  expect(() => mock.setFaults({ callbackJitterMs: -1 })).toThrow(
    /callbackJitterMs: must be an integer number of milliseconds, at least 0/,
  );
});

test('what became of each object: trained, settled, never to train (neverTrainTitles), deleted', async () => {
  const key = 'journal-fates';
  mock.setFaults({ neverTrainTitles: ['journal-stuck'] });
  const tuneBody = (title: string) => ({ tune: { title, name: 'dog', image_urls: ['https://images.test/1.jpg'] } });
  const stuck = (await call<TuneJson>(mock.url, key, 'POST', '/tunes', tuneBody('journal-stuck'))).body;
  const tune = (await call<TuneJson>(mock.url, key, 'POST', '/tunes', tuneBody('journal-trains'))).body;
  const prompt = (
    await call<PromptJson>(mock.url, key, 'POST', `/tunes/${tune.id}/prompts`, { prompt: { text: 'sks dog' } })
  ).body;
  const settled = await until(
    async () => mock.journal().prompts.find((p) => p.id === prompt.id)!,
    (p) => p.settledAt !== null,
  );
  const journal = mock.journal();
  const trained = journal.tunes.find((t) => t.id === tune.id)!;
  expect(trained).toMatchObject({ neverTrains: false, trainedAt: expect.any(Number), deletedAt: null });
  expect(settled.settledAt!).toBeGreaterThanOrEqual(trained.trainedAt!);
  expect(journal.tunes.find((t) => t.id === stuck.id)).toMatchObject({ neverTrains: true, trainedAt: null });

  expect((await call(mock.url, key, 'DELETE', `/tunes/${stuck.id}`)).status).toBeLessThan(300);
  expect(mock.journal().tunes.find((t) => t.id === stuck.id)!.deletedAt).toEqual(expect.any(Number));
});

test('a callback that got no answer is recorded with why', async () => {
  const key = 'journal-no-answer';
  // Port 9 (discard) on loopback: nothing listens there.
  const tune = (
    await call<TuneJson>(mock.url, key, 'POST', '/tunes', {
      tune: {
        title: 'journal-nobody',
        name: 'dog',
        image_urls: ['https://images.test/1.jpg'],
        callback: 'http://127.0.0.1:9/x',
      },
    })
  ).body;
  const sent = await until(
    async () => mock.journal().callbacks.find((c) => c.ids.includes(tune.id)),
    (c) => c?.failure != null,
  );
  expect(sent).toMatchObject({ status: null, failure: expect.stringMatching(/ECONNREFUSED|connect/i) });
});

test('records each uploaded file with the tune or prompt it went into, and the title a pack create carried', async () => {
  const key = 'journal-uploads';
  const png = new Blob([solidPng('journal-upload', 8)], { type: 'image/png' });
  const tune = (
    await call<TuneJson>(
      mock.url,
      key,
      'POST',
      '/tunes',
      multipart([
        ['tune[title]', 'journal-upload-1'],
        ['tune[name]', 'dog'],
        ['tune[images][]', png, 'a.png'],
      ]),
    )
  ).body;
  const prompt = (
    await call<PromptJson>(
      mock.url,
      key,
      'POST',
      `/tunes/${tune.id}/prompts`,
      multipart([
        ['prompt[text]', 'sks dog [m #1]'],
        ['prompt[input_image]', png, 'b.png'],
      ]),
    )
  ).body;
  // Pack prompts added to that tune: the create's title says whose they are (their text is the pack's).
  await call(mock.url, key, 'POST', '/p/261/tunes', { tune: { title: 'journal-pack-adder', tune_ids: [tune.id] } });

  const journal = mock.journal();
  const uploads = journal.uploads.filter((u) => u.tuneId === tune.id || u.promptId === prompt.id);
  expect(uploads).toEqual([
    { url: tune.orig_images[0], uploadedAt: expect.any(Number), tuneId: tune.id, promptId: null },
    { url: expect.stringMatching(/\/files\//), uploadedAt: expect.any(Number), tuneId: null, promptId: prompt.id },
  ]);
  const added = journal.prompts.filter((p) => p.tuneId === tune.id && p.packId === 261);
  expect(added.length).toBeGreaterThan(0);
  for (const p of added) expect(p.requestTitle).toBe('journal-pack-adder');
  expect(journal.prompts.find((p) => p.id === prompt.id)?.requestTitle).toBeNull();
});
