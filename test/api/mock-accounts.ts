/**
 * What the client tests against the mock share: one mock service per test file (started in beforeAll, closed with
 * every client in afterAll), a client on a new account of it per test, and reading again until something holds.
 */
import { randomUUID } from 'node:crypto';
import { TunesApi } from '../../src/api';
import { startMockService, type MockService, type MockServiceOptions } from '../../src/mock-service';

export interface MockAccounts {
  /** The file's mock service (exists once beforeAll ran). */
  mock(): MockService;
  /** A client on a new account of the mock; closed in afterAll. */
  account(): TunesApi;
}

/**
 * @example
 * const { mock, account } = useMockAccounts({ trainingTime: '400ms' });
 * test('...', async () => { const api = account(); ... mock().stats() ... });
 */
export function useMockAccounts(options: MockServiceOptions): MockAccounts {
  let mock: MockService | undefined;
  const opened: TunesApi[] = [];
  beforeAll(async () => {
    mock = await startMockService(options);
  });
  afterAll(async () => {
    await Promise.all(opened.map((api) => api.close()));
    await mock?.close();
  });
  const started = (): MockService => {
    if (!mock) throw new Error('no mock service: beforeAll did not start one');
    return mock;
  };
  return {
    mock: started,
    account() {
      const api = new TunesApi({ apiKey: `sk-${randomUUID()}`, baseUrl: started().url });
      opened.push(api);
      return api;
    },
  };
}

/**
 * Reads `read` again until `done` holds (the jest timeout is the deadline).
 *
 * @example
 * const tune = await until(() => api.tunes.retrieve(id), isTuneTrained);
 */
export async function until<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
