/**
 * The start-up probe of the callback URL, one outcome per test, over real HTTP on loopback: arrived at a receiver with
 * the same secret (which signals nothing), redirected (host only), refused (an auth wall's 401, another secret's 403),
 * unreachable (a closed port), and plain http to a public host (nothing sent).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describeProbe, isLoopback, probeCallbackUrl } from '../../src/callbacks/probe';
import { startCallbackReceiver, type Signaler } from '../../src/callbacks/receiver';
import { CallbackSigner } from '../../src/callbacks/signing';
import { freePort } from '../../src/temporal-server/dev-server';

// Generous: a loaded machine may take seconds to answer on loopback; no outcome rests on time.
jest.setTimeout(120_000);
/** The probe's own limit in these tests, well above its 5 s default, so a slow answer is never `unreachable`. */
const PATIENT_MS = 60_000;

const SECRET = 'probe-test-secret-0123456789';
const quiet = { info() {}, warn() {}, error() {}, debug() {}, trace() {}, log() {} };

/** A server on loopback that answers every request with `answer`, and counts what it was sent. */
async function answering(answer: (req: IncomingMessage, res: ServerResponse) => void): Promise<{
  server: Server;
  url: string;
  requests: string[];
}> {
  const requests: string[] = [];
  const server = createServer((req, res) => {
    requests.push(`${req.method} ${(req.url ?? '').split('?')[0]}`);
    req.resume();
    answer(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests };
}

const close = (server: Server) => new Promise<void>((resolve) => server.close(() => resolve()));

test("arrived: the worker's own receiver answers the probe and signals no run", async () => {
  const signals: unknown[] = [];
  const signaler: Signaler = {
    signal: async (...args) => {
      signals.push(args);
      return 'delivered';
    },
  };
  const receiver = await startCallbackReceiver({
    port: 0,
    host: '127.0.0.1',
    signer: new CallbackSigner({ secret: SECRET }),
    signaler,
    logger: quiet,
  });
  try {
    const result = await probeCallbackUrl(new CallbackSigner({ baseUrl: receiver.url, secret: SECRET }), PATIENT_MS);
    expect(describeProbe(result)).toBe('arrived');
    expect(signals).toEqual([]);
    // A receiver with another secret refuses it as it refuses a forged callback.
    const stranger = await probeCallbackUrl(
      new CallbackSigner({ baseUrl: receiver.url, secret: `${SECRET}-other` }),
      PATIENT_MS,
    );
    expect(describeProbe(stranger)).toBe('refused (403)');
  } finally {
    await receiver.close();
  }
});

test('redirected: the status and the host it points to, never the path or the signed query', async () => {
  const { server, url, requests } = await answering((req, res) => {
    // A login page that would send the caller back with the whole URL, signature and all.
    res.writeHead(302, { location: `https://login.example.com/sso?next=${encodeURIComponent(req.url ?? '')}` });
    res.end();
  });
  try {
    const said = describeProbe(
      await probeCallbackUrl(new CallbackSigner({ baseUrl: url, secret: SECRET }), PATIENT_MS),
    );
    expect(said).toBe('redirected (302 to login.example.com)');
    expect(requests).toEqual(['POST /callbacks/probe']);
  } finally {
    await close(server);
  }
});

test('refused: an auth wall in front of the receiver, by its status', async () => {
  const { server, url, requests } = await answering((_req, res) => {
    res.writeHead(401, { 'www-authenticate': 'Basic realm="hooks"' });
    res.end('unauthorized');
  });
  try {
    const said = describeProbe(
      await probeCallbackUrl(new CallbackSigner({ baseUrl: `${url}/hooks`, secret: SECRET }), PATIENT_MS),
    );
    expect(said).toBe('refused (401)');
    // The base URL's path is kept, as the callbacks' own URLs keep it.
    expect(requests).toEqual(['POST /hooks/callbacks/probe']);
  } finally {
    await close(server);
  }
});

test('refused: a 200 from something that is not a tuneflow receiver', async () => {
  const { server, url } = await answering((_req, res) => res.end('ok'));
  try {
    const said = describeProbe(
      await probeCallbackUrl(new CallbackSigner({ baseUrl: url, secret: SECRET }), PATIENT_MS),
    );
    expect(said).toBe('refused (200, not a tuneflow receiver)');
  } finally {
    await close(server);
  }
});

test('unreachable: a port nothing listens on, by the error code', async () => {
  const port = await freePort();
  const said = describeProbe(
    await probeCallbackUrl(new CallbackSigner({ baseUrl: `http://127.0.0.1:${port}`, secret: SECRET }), PATIENT_MS),
  );
  expect(said).toBe('unreachable (ECONNREFUSED)');
});

test('not https: plain http to a host other than this machine is not sent; loopback may be plain http', async () => {
  // 192.0.2.1 (TEST-NET-1) would hang a request until the timeout: the answer comes at once because none is sent.
  for (const baseUrl of ['http://192.0.2.1:3001', 'http://hooks.example.com'])
    expect(describeProbe(await probeCallbackUrl(new CallbackSigner({ baseUrl, secret: SECRET }), PATIENT_MS))).toBe(
      'not https (nothing sent)',
    );
  expect(['localhost', 'a.localhost', '127.0.0.1', '127.1.2.3', '[::1]'].filter(isLoopback)).toHaveLength(5);
  expect(['example.com', '10.0.0.1', '0.0.0.0', '127.example.com', 'localhost.example.com'].filter(isLoopback)).toEqual(
    [],
  );
});
