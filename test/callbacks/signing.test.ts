import { createHmac } from 'node:crypto';
import { CallbackSigner, redactCallbackSignatures } from '../../src/callbacks/signing';

const secret = 'a-secret-of-enough-length';
const signer = new CallbackSigner({ baseUrl: 'https://hooks.example.com', secret });
const RUN_ID = '0190b7c1-2f7e-7c1a-9d52-5a4f3c2b1a00';
/** The run of a workflow ID (the same run ID for all: tests that need another say so). */
const run = (workflowId: string, runId = RUN_ID) => ({ workflowId, runId });

function sigOf(url: string): string {
  return new URL(url).searchParams.get('sig') ?? '';
}

describe('CallbackSigner.url', () => {
  it('builds <baseUrl>/callbacks/<kind>?workflowId=<id>&runId=<id>&sig=<hex> plus the extra params', () => {
    const url = new URL(signer.url('prompt', run('job 42/ä'), { key: 'p3', user: 'u-1' }));
    expect(url.origin + url.pathname).toBe('https://hooks.example.com/callbacks/prompt');
    expect(url.searchParams.get('workflowId')).toBe('job 42/ä');
    expect(url.searchParams.get('runId')).toBe(RUN_ID);
    expect(url.searchParams.get('sig')).toMatch(/^[0-9a-f]{64}$/);
    expect(url.searchParams.get('key')).toBe('p3');
    expect(url.searchParams.get('user')).toBe('u-1');
  });

  it('signs HMAC-SHA256 of the kind, the run ID and the workflow ID with the secret', () => {
    const expected = createHmac('sha256', secret).update(`tune\n${RUN_ID}\njob-1`).digest('hex');
    expect(sigOf(signer.url('tune', run('job-1')))).toBe(expected);
  });

  it('is deterministic: same kind, workflow ID and params give the same URL, whatever the param order', () => {
    const a = signer.url('pack-prompts', run('job-7'), { key: 'k', user: 'u' });
    const b = new CallbackSigner({ baseUrl: 'https://hooks.example.com/', secret }).url('pack-prompts', run('job-7'), {
      user: 'u',
      key: 'k',
    });
    expect(b).toBe(a);
    expect(signer.url('tune', run('job-7'))).toBe(signer.url('tune', run('job-7')));
  });

  it("signs the context params too: another value, another signature; none, the first releases' signature", () => {
    expect(sigOf(signer.url('prompt', run('job-1'), { key: 'a' }))).not.toBe(
      sigOf(signer.url('prompt', run('job-1'), { key: 'b' })),
    );
    const legacy = createHmac('sha256', secret).update(`prompt\n${RUN_ID}\njob-1`).digest('hex');
    expect(sigOf(signer.url('prompt', run('job-1')))).toBe(legacy);
  });

  it('keeps a path in the base URL', () => {
    const withPath = new CallbackSigner({ baseUrl: 'http://10.0.0.5:3001/hooks/', secret });
    expect(withPath.url('tune', run('w'))).toMatch(
      /^http:\/\/10\.0\.0\.5:3001\/hooks\/callbacks\/tune\?workflowId=w&runId=/,
    );
  });

  it('refuses an unknown kind, an empty workflow ID and params that would override its own', () => {
    expect(() => signer.url('video' as never, run('w'))).toThrow(/kind: must be one of tune, prompt, pack-prompts/);
    expect(() => signer.url('tune', run(''))).toThrow(/run\.workflowId: must be a non-empty string/);
    expect(() => signer.url('tune', run('w', ''))).toThrow(/run\.runId: must be a run ID/);
    expect(() => signer.url('tune', run('w', 'a\nb'))).toThrow(/run\.runId: must be a run ID/);
    expect(() => signer.url('tune', run('w'), { runId: 'other' })).toThrow(/params\.runId: is set by the signer/);
    expect(() => signer.url('tune', run('w'), { sig: 'x' })).toThrow(/params\.sig: is set by the signer/);
    expect(() => signer.url('tune', run('w'), { workflowId: 'other' })).toThrow(
      /params\.workflowId: is set by the signer/,
    );
  });
});

describe('CallbackSigner.verify', () => {
  const sig = sigOf(signer.url('prompt', run('job-1'), { key: 'p1' }));

  it('accepts the signature it made, with the params it was made over, and not with others', () => {
    expect(signer.verify('prompt', run('job-1'), sig, { key: 'p1' })).toBe(true);
    expect(signer.verify('prompt', run('job-1'), sig, { key: 'p2' })).toBe(false);
    expect(signer.verify('prompt', run('job-1'), sig, { key: 'p1', traceparent: 'x' })).toBe(false);
    expect(signer.verify('prompt', run('job-1'), sig)).toBe(false);
  });

  it('accepts the signature in upper-case hex', () => {
    expect(signer.verify('prompt', run('job-1'), sig.toUpperCase(), { key: 'p1' })).toBe(true);
  });

  it('refuses a tampered signature', () => {
    const flipped = (sig[0] === '0' ? '1' : '0') + sig.slice(1);
    expect(signer.verify('prompt', run('job-1'), flipped)).toBe(false);
    const lastFlipped = sig.slice(0, -1) + (sig.endsWith('f') ? 'e' : 'f');
    expect(signer.verify('prompt', run('job-1'), lastFlipped)).toBe(false);
  });

  it('refuses the signature of another run of the same workflow ID, and an old URL without a run', () => {
    expect(signer.verify('prompt', run('job-1', '0190b7c1-2f7e-7c1a-9d52-5a4f3c2b1a01'), sig)).toBe(false);
    const unbound = createHmac('sha256', secret).update('prompt\njob-1').digest('hex');
    expect(signer.verify('prompt', run('job-1', ''), unbound)).toBe(false);
    expect(signer.verify('prompt', run('job-1'), unbound)).toBe(false);
  });

  it('refuses the signature of another workflow', () => {
    expect(signer.verify('prompt', run('job-2'), sig)).toBe(false);
    expect(signer.verify('prompt', run('job-1 '), sig)).toBe(false);
  });

  it('refuses the signature of another kind', () => {
    expect(signer.verify('tune', run('job-1'), sig)).toBe(false);
    expect(signer.verify('pack-prompts', run('job-1'), sig)).toBe(false);
  });

  it('refuses a kind that is not a callback kind, even one built to shift the boundary', () => {
    // "tune\nR" + "\n" + "A\nB" would equal "tune" + "\n" + "R\nA\nB" without the kind and run ID checks.
    const shifted = sigOf(signer.url('tune', run('A\nB')));
    expect(signer.verify('tune', run('A\nB'), shifted)).toBe(true);
    expect(signer.verify(`tune\n${RUN_ID}`, { workflowId: 'A\nB', runId: 'x' } as never, shifted)).toBe(false);
    expect(signer.verify('tune', run('B', `${RUN_ID}\nA`), shifted)).toBe(false);
    expect(signer.verify('video', run('job-1'), sig)).toBe(false);
  });

  it('refuses signatures of the wrong length, non-hex and empty ones', () => {
    expect(signer.verify('prompt', run('job-1'), sig.slice(0, 62))).toBe(false);
    expect(signer.verify('prompt', run('job-1'), sig + '00')).toBe(false);
    expect(signer.verify('prompt', run('job-1'), '')).toBe(false);
    expect(signer.verify('prompt', run('job-1'), 'z' + sig.slice(1))).toBe(false);
    expect(signer.verify('prompt', run('job-1'), sig.slice(0, 63) + 'g')).toBe(false);
    expect(signer.verify('prompt', run('job-1'), 'x'.repeat(64))).toBe(false);
  });

  it('refuses a signature made with another secret', () => {
    const other = new CallbackSigner({ baseUrl: 'https://hooks.example.com', secret: 'another-secret-0123' });
    expect(signer.verify('prompt', run('job-1'), sigOf(other.url('prompt', run('job-1'))))).toBe(false);
  });
});

describe('CallbackSigner options', () => {
  it.each([
    ['that is not a URL', 'hooks.example.com'],
    ['of another protocol', 'ftp://hooks.example.com'],
    ['with a query', 'https://hooks.example.com/?a=1'],
    ['with a fragment', 'https://hooks.example.com/#x'],
    ['that is empty', ''],
  ])('refuses a baseUrl %s, naming the option', (_what, baseUrl) => {
    expect(() => new CallbackSigner({ baseUrl, secret })).toThrow(
      /CallbackSigner: baseUrl must be an http\(s\) URL without query or fragment/,
    );
  });

  it('refuses a short or missing secret, naming the option and never echoing it', () => {
    const attempt = () => new CallbackSigner({ baseUrl: 'https://h.example.com', secret: 'short-secret-15' });
    expect(attempt).toThrow('CallbackSigner: secret must be a string of at least 16 characters');
    expect(attempt).not.toThrow(/short-secret-15/);
    expect(() => new CallbackSigner({ baseUrl: 'https://h.example.com' } as never)).toThrow(/secret must be/);
  });

  it('accepts a 16-character secret and an http base URL', () => {
    expect(new CallbackSigner({ baseUrl: 'http://localhost:3001', secret: '0123456789abcdef' }).baseUrl).toBe(
      'http://localhost:3001',
    );
  });
});

describe('a signer without a base URL (a receiver)', () => {
  test('checks URLs made by a signer with one, and refuses to make URLs itself', () => {
    const secret = 'receiver-only-secret-0123';
    const maker = new CallbackSigner({ baseUrl: 'https://hooks.example.com', secret });
    const checker = new CallbackSigner({ secret });
    const sig = new URL(maker.url('tune', run('job-7'))).searchParams.get('sig')!;
    expect(checker.verify('tune', run('job-7'), sig)).toBe(true);
    expect(checker.verify('tune', run('job-8'), sig)).toBe(false);
    expect(() => checker.url('tune', run('job-7'))).toThrow('needs the baseUrl option');
  });
});

describe('redactCallbackSignatures', () => {
  const url = signer.url('prompt', run('job-1'), { key: '3' });
  const sig = sigOf(url);

  test('replaces the signature in every string of an object the service answered, at any depth, and only it', () => {
    const tune = {
      id: 7,
      callback: signer.url('tune', run('job-1')),
      prompt_attributes: { callback: url },
      prompts: [{ id: 8, callback: url, text: 'sig=short stays' }],
      escaped: encodeURIComponent(url),
    };
    const redacted = redactCallbackSignatures(tune);
    const text = JSON.stringify(redacted);
    expect(text).not.toMatch(/[0-9a-f]{64}/);
    expect(redacted.prompt_attributes.callback).toBe(url.replace(sig, 'redacted'));
    expect(redacted.prompts[0].text).toBe('sig=short stays');
    expect(redacted.escaped).toBe(encodeURIComponent(url).replace(sig, 'redacted'));
    // The rest of the URL is kept: which run and which callback it was.
    expect(redacted.callback).toMatch(/workflowId=job-1&runId=.+&sig=redacted$/);
    // The object given is left as it was.
    expect(tune.prompt_attributes.callback).toBe(url);
  });

  test('returns what holds no signature as it is, without copying', () => {
    const prompt = { id: 1, images: ['https://cdn.example.com/1.png'], nested: { a: [1, 2] } };
    expect(redactCallbackSignatures(prompt)).toBe(prompt);
    expect(redactCallbackSignatures('plain')).toBe('plain');
    expect(redactCallbackSignatures(null)).toBe(null);
  });
});
