/**
 * Every rule of spec sections 4 and 8 that the client checks itself: each bad input must be refused with an
 * InvalidInputError naming the field and the rule, and nothing may reach the network. The base URL is a plain
 * node:http server that only counts requests.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { InvalidInputError, TunesApi } from '../../src/api';
import { bad, badInputCases as cases, BASE_TUNE_ID as BASE } from './bad-input-cases';

const API_KEY = 'sk-bad-input-0123456789abcdef';

let server: Server;
let requests = 0;
let api: TunesApi;

beforeAll(async () => {
  server = createServer((req, res) => {
    requests++;
    res.writeHead(500).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  api = new TunesApi({ apiKey: API_KEY, baseUrl: `http://127.0.0.1:${port}` });
});

afterAll(async () => {
  await api.close();
  await new Promise((resolve) => server.close(resolve));
});

describe('bad input is refused before any request', () => {
  test('the catalogue covers at least 40 inputs', () => {
    expect(cases.length).toBeGreaterThanOrEqual(40);
  });

  test.each(cases)('$name -> $field $rule', async ({ call, field, rule }) => {
    const before = requests;
    const error = await Promise.resolve()
      .then(() => call(api))
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(error).toBeInstanceOf(InvalidInputError);
    const issues = (error as InvalidInputError).issues;
    expect(issues).toContainEqual({ field, rule: expect.stringContaining(rule) });
    expect((error as Error).message).toContain(field);
    expect(requests - before).toBe(0);
  });

  test('a list iterated with a bad limit is refused on the first step, before any request', async () => {
    const iterator = api.tunes.list({ limit: 1000 })[Symbol.asyncIterator]();
    await expect(iterator.next()).rejects.toMatchObject({
      issues: [{ field: 'params.limit', rule: expect.stringContaining('from 1 to 120') }],
    });
  });

  afterAll(() => {
    // Belt and braces: not one of the calls above reached the server.
    expect(requests).toBe(0);
  });
});

describe('TunesApi options are checked at construction, naming the option', () => {
  test.each([
    { options: { apiKey: '' }, option: 'apiKey' },
    { options: { apiKey: '   ' }, option: 'apiKey' },
    { options: { apiKey: API_KEY, baseUrl: 'api.astria.ai' }, option: 'baseUrl' },
    { options: { apiKey: API_KEY, baseUrl: 'ftp://api.astria.ai' }, option: 'baseUrl' },
    { options: { apiKey: API_KEY, timeout: bad<'1s'>('soon') }, option: 'timeout' },
    { options: { apiKey: API_KEY, timeout: 0 }, option: 'timeout' },
    { options: { apiKey: API_KEY, connections: 0 }, option: 'connections' },
    { options: { apiKey: API_KEY, connections: 2.5 }, option: 'connections' },
  ])('$option: $options', ({ options, option }) => {
    let error: unknown;
    try {
      new TunesApi(options);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toContain(`TunesApiOptions.${option}`);
    expect((error as Error).message).not.toContain(API_KEY);
  });
});

describe('the counting server', () => {
  test('sees a valid call, so the zero counts above mean something', async () => {
    const before = requests;
    await expect(api.tunes.retrieve(BASE)).rejects.toMatchObject({ status: 500, kind: 'ServerError' });
    expect(requests - before).toBe(1);
  });
});
