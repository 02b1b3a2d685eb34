import { createHmac } from 'node:crypto';
import { CallbackSigner } from '../../src/callbacks/signing';

const secret = 'a-secret-of-enough-length';
const signer = new CallbackSigner({ baseUrl: 'https://hooks.example.com', secret });

function sigOf(url: string): string {
  return new URL(url).searchParams.get('sig') ?? '';
}

describe('CallbackSigner.url', () => {
  it('builds <baseUrl>/callbacks/<kind>?workflowId=<id>&sig=<hex> plus the extra params', () => {
    const url = new URL(signer.url('prompt', 'job 42/ä', { key: 'p3', user: 'u-1' }));
    expect(url.origin + url.pathname).toBe('https://hooks.example.com/callbacks/prompt');
    expect(url.searchParams.get('workflowId')).toBe('job 42/ä');
    expect(url.searchParams.get('sig')).toMatch(/^[0-9a-f]{64}$/);
    expect(url.searchParams.get('key')).toBe('p3');
    expect(url.searchParams.get('user')).toBe('u-1');
  });

  it('signs HMAC-SHA256 of the kind and the workflow ID with the secret', () => {
    const expected = createHmac('sha256', secret).update('tune\njob-1').digest('hex');
    expect(sigOf(signer.url('tune', 'job-1'))).toBe(expected);
  });

  it('is deterministic: same kind, workflow ID and params give the same URL, whatever the param order', () => {
    const a = signer.url('pack-prompts', 'job-7', { key: 'k', user: 'u' });
    const b = new CallbackSigner({ baseUrl: 'https://hooks.example.com/', secret }).url('pack-prompts', 'job-7', {
      user: 'u',
      key: 'k',
    });
    expect(b).toBe(a);
    expect(signer.url('tune', 'job-7')).toBe(signer.url('tune', 'job-7'));
  });

  it('leaves the signature alone when only the context params change', () => {
    expect(sigOf(signer.url('prompt', 'job-1', { key: 'a' }))).toBe(sigOf(signer.url('prompt', 'job-1', { key: 'b' })));
  });

  it('keeps a path in the base URL', () => {
    const withPath = new CallbackSigner({ baseUrl: 'http://10.0.0.5:3001/hooks/', secret });
    expect(withPath.url('tune', 'w').startsWith('http://10.0.0.5:3001/hooks/callbacks/tune?workflowId=w&sig=')).toBe(
      true,
    );
  });

  it('refuses an unknown kind, an empty workflow ID and params that would override its own', () => {
    expect(() => signer.url('video' as never, 'w')).toThrow(/kind: must be one of tune, prompt, pack-prompts/);
    expect(() => signer.url('tune', '')).toThrow(/workflowId: must be a non-empty string/);
    expect(() => signer.url('tune', 'w', { sig: 'x' })).toThrow(/params\.sig: is set by the signer/);
    expect(() => signer.url('tune', 'w', { workflowId: 'other' })).toThrow(/params\.workflowId: is set by the signer/);
  });
});

describe('CallbackSigner.verify', () => {
  const sig = sigOf(signer.url('prompt', 'job-1', { key: 'p1' }));

  it('accepts the signature it made', () => {
    expect(signer.verify('prompt', 'job-1', sig)).toBe(true);
  });

  it('accepts the signature in upper-case hex', () => {
    expect(signer.verify('prompt', 'job-1', sig.toUpperCase())).toBe(true);
  });

  it('refuses a tampered signature', () => {
    const flipped = (sig[0] === '0' ? '1' : '0') + sig.slice(1);
    expect(signer.verify('prompt', 'job-1', flipped)).toBe(false);
    const lastFlipped = sig.slice(0, -1) + (sig.endsWith('f') ? 'e' : 'f');
    expect(signer.verify('prompt', 'job-1', lastFlipped)).toBe(false);
  });

  it('refuses the signature of another workflow', () => {
    expect(signer.verify('prompt', 'job-2', sig)).toBe(false);
    expect(signer.verify('prompt', 'job-1 ', sig)).toBe(false);
  });

  it('refuses the signature of another kind', () => {
    expect(signer.verify('tune', 'job-1', sig)).toBe(false);
    expect(signer.verify('pack-prompts', 'job-1', sig)).toBe(false);
  });

  it('refuses a kind that is not a callback kind, even one built to shift the boundary', () => {
    // "tune\nA" + "\n" + "B" would equal "tune" + "\n" + "A\nB" without the kind check.
    const shifted = sigOf(signer.url('tune', 'A\nB'));
    expect(signer.verify('tune', 'A\nB', shifted)).toBe(true);
    expect(signer.verify('tune\nA', 'B', shifted)).toBe(false);
    expect(signer.verify('video', 'job-1', sig)).toBe(false);
  });

  it('refuses signatures of the wrong length, non-hex and empty ones', () => {
    expect(signer.verify('prompt', 'job-1', sig.slice(0, 62))).toBe(false);
    expect(signer.verify('prompt', 'job-1', sig + '00')).toBe(false);
    expect(signer.verify('prompt', 'job-1', '')).toBe(false);
    expect(signer.verify('prompt', 'job-1', 'z' + sig.slice(1))).toBe(false);
    expect(signer.verify('prompt', 'job-1', sig.slice(0, 63) + 'g')).toBe(false);
    expect(signer.verify('prompt', 'job-1', 'x'.repeat(64))).toBe(false);
  });

  it('refuses a signature made with another secret', () => {
    const other = new CallbackSigner({ baseUrl: 'https://hooks.example.com', secret: 'another-secret-0123' });
    expect(signer.verify('prompt', 'job-1', sigOf(other.url('prompt', 'job-1')))).toBe(false);
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
    const sig = new URL(maker.url('tune', 'job-7')).searchParams.get('sig')!;
    expect(checker.verify('tune', 'job-7', sig)).toBe(true);
    expect(checker.verify('tune', 'job-8', sig)).toBe(false);
    expect(() => checker.url('tune', 'job-7')).toThrow('needs the baseUrl option');
  });
});
