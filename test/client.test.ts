import * as net from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { InvalidInputError } from '../src/api/errors';
import { TuneflowClient } from '../src/client';
import { checkGenerate, checkPackTune, checkTrainThenGenerate } from '../src/contract/check';

/** A port nothing listens on: a start that got past validation would fail to connect, not throw InvalidInputError. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('TuneflowClient validates before it starts anything', () => {
  let connection: Connection;
  let tuneflow: TuneflowClient;

  beforeAll(async () => {
    connection = Connection.lazy({ address: `127.0.0.1:${await closedPort()}`, connectTimeout: '1 second' });
    tuneflow = new TuneflowClient({ client: new Client({ connection }) });
  });
  afterAll(async () => {
    await connection.close();
  });

  const tune = { name: 'woman', image_urls: ['https://img.example.com/1.jpg'], branch: 'fast' as const };
  const prompts = [{ text: 'ohwx woman, studio portrait' }];

  const cases: Array<[string, () => Promise<unknown>, string]> = [
    ['empty business key', () => tuneflow.trainThenGenerate('', { tune, prompts }), 'workflowId'],
    [
      'tune without a name',
      () => tuneflow.trainThenGenerate('k', { tune: { ...tune, name: '' }, prompts }),
      'tune.name',
    ],
    [
      'tune with both image sources',
      () => tuneflow.trainThenGenerate('k', { tune: { ...tune, images: ['/a.jpg'] }, prompts }),
      'tune.image_urls',
    ],
    [
      'tune images as bytes',
      () =>
        tuneflow.trainThenGenerate('k', {
          tune: { name: 'man', images: [Buffer.from('x') as unknown as string] },
          prompts,
        }),
      'tune.images[0]',
    ],
    [
      'prompt w not a multiple of 8',
      () => tuneflow.trainThenGenerate('k', { tune, prompts: [{ text: 'x', w: 513 }] }),
      'prompts[0].w',
    ],
    ['prompts not an array', () => tuneflow.trainThenGenerate('k', { tune, prompts: 'x' as unknown as [] }), 'prompts'],
    [
      'bad poll interval',
      () => tuneflow.trainThenGenerate('k', { tune, prompts, options: { pollInterval: 'soon' } }),
      'options.pollInterval',
    ],
    [
      'bad concurrency',
      () => tuneflow.trainThenGenerate('k', { tune, prompts, options: { promptConcurrency: 0 } }),
      'options.promptConcurrency',
    ],
    [
      'ceiling below the first poll',
      () =>
        tuneflow.trainThenGenerate('k', {
          tune,
          prompts,
          options: { pollInterval: '5 minutes', maxPollInterval: '1 minute' },
        }),
      'options.maxPollInterval',
    ],
    [
      'an option that does not exist',
      () => tuneflow.trainThenGenerate('k', { tune, prompts, options: { pollEvery: '1 minute' } as never }),
      'options.pollEvery',
    ],
    [
      'more prompts than one list page',
      () => tuneflow.trainThenGenerate('k', { tune, prompts: Array.from({ length: 121 }, () => ({ text: 'x' })) }),
      'prompts',
    ],
    ['generate without a tune id', () => tuneflow.generate('k', { tuneId: 0, prompts }), 'tuneId'],
    ['generate without prompts', () => tuneflow.generate('k', { tuneId: 1, prompts: [] }), 'prompts'],
    ['pack without images', () => tuneflow.packTune('k', { packId: 260, tune: { name: 'man' } }), 'tune.images'],
    [
      'pack with a bad id',
      () => tuneflow.packTune('k', { packId: -1, tune: { name: 'man', image_urls: ['https://a.example.com/1.jpg'] } }),
      'packId',
    ],
  ];

  test.each(cases.map(([name, start, field]) => ({ name, start, field })))(
    '$name: InvalidInputError naming $field',
    async ({ start, field }) => {
      const error = await start().then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(error).toBeInstanceOf(InvalidInputError);
      expect((error as InvalidInputError).issues.map((i) => i.field)).toContain(field);
    },
  );

  test('TuneflowClient.check refuses a bad input with no client at all, naming the field', () => {
    expect(() => TuneflowClient.check('generate', 'k', { tuneId: 0, prompts })).toThrow(InvalidInputError);
    expect(() => TuneflowClient.check('packTune', '', { packId: 260, tune: { tune_ids: [5] } })).toThrow(/workflowId/);
  });

  test('a checked start is not checked again by start; a hand-built one is refused before anything is contacted', async () => {
    const checked = TuneflowClient.check('trainThenGenerate', 'order-1', { tune, prompts: [...prompts] });
    expect(checked).toMatchObject({ workflow: 'trainThenGenerate', workflowId: 'order-1' });
    // Broken after its check, in a way a second check would refuse (InvalidInputError: prompts must be a list) and
    // the start's payload converter refuses too, before anything is sent: the converter's error shows no check ran.
    (checked.input as { prompts: unknown }).prompts = 10n;
    const error = await tuneflow.start(checked).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(Error);
    expect(error).not.toBeInstanceOf(InvalidInputError);
    expect(String(error)).toMatch(/Unable to convert .* to payload/);
    const handBuilt = {
      workflow: 'generate',
      workflowId: 'k',
      tenant: 'default',
      input: { tuneId: 0, prompts },
    } as const;
    await expect(tuneflow.start(handBuilt)).rejects.toThrow(/takes what TuneflowClient.check returns/);
  });

  test('valid inputs pass validation', () => {
    expect(() =>
      checkTrainThenGenerate('order-1', { tune, prompts, options: { pollInterval: '2 minutes' } }),
    ).not.toThrow();
    expect(() => checkGenerate({ tuneId: 1, prompts })).not.toThrow();
    expect(() =>
      checkPackTune('order-2', { packId: 260, tune: { name: 'man', image_urls: ['https://a.example.com/1.jpg'] } }),
    ).not.toThrow();
    expect(() => checkPackTune('order-3', { packId: 260, tune: { tune_ids: [5] } })).not.toThrow();
  });
});
