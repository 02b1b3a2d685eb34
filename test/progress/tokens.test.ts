/**
 * Progress read tokens: one job, a short while, checked in constant time. A token for one job reads no other, an
 * expired one reads nothing, a forged one (another secret, a changed job or expiry, a callback signature) neither.
 */
import { createHmac } from 'node:crypto';
import { checkProgressToken, mintProgressToken } from '../../src/progress/tokens';

const SECRET = 'progress-test-secret-0123456789';
const NOW = Date.parse('2026-12-03T12:00:00Z');

describe('progress tokens', () => {
  test('a token opens its one job until it expires', () => {
    const token = mintProgressToken({ secret: SECRET, workflowId: 'order-1', ttl: '10 minutes', now: NOW });
    expect(checkProgressToken(SECRET, token, NOW)).toEqual({ workflowId: 'order-1', expires: NOW / 1000 + 600 });
    expect(checkProgressToken(SECRET, token, NOW + 599_000)).toMatchObject({ workflowId: 'order-1' });
    expect(checkProgressToken(SECRET, token, NOW + 600_000)).toEqual({ refused: 'expired' });
  });

  test("a token with another job's ID or a later expiry in it is forged; so is one of another secret", () => {
    const token = mintProgressToken({ secret: SECRET, workflowId: 'order-1', now: NOW });
    const [version, , expires, mac] = token.split('.');
    const otherJob = [version, Buffer.from('order-2').toString('base64url'), expires, mac].join('.');
    expect(checkProgressToken(SECRET, otherJob, NOW)).toEqual({ refused: 'forged' });
    const later = [version, token.split('.')[1], Number(expires) + 3600, mac].join('.');
    expect(checkProgressToken(SECRET, later, NOW)).toEqual({ refused: 'forged' });
    const stranger = mintProgressToken({ secret: 'another-secret-0123456789', workflowId: 'order-1', now: NOW });
    expect(checkProgressToken(SECRET, stranger, NOW)).toEqual({ refused: 'forged' });
    // A callback URL's HMAC with the same secret is not a token: the token's MAC has a label of its own.
    const callbackMac = createHmac('sha256', SECRET).update(`order-1\n${expires}`).digest('base64url');
    expect(checkProgressToken(SECRET, [version, token.split('.')[1], expires, callbackMac].join('.'), NOW)).toEqual({
      refused: 'forged',
    });
  });

  test.each([
    ['an empty token', '', 'missing'],
    ['no token', undefined, 'missing'],
    ['two parts', 'v1.abc', 'malformed'],
    ['another version', 'v2.b3JkZXItMQ.1796310000.xyz', 'malformed'],
    ['an expiry that is no number', 'v1.b3JkZXItMQ.soon.xyz', 'malformed'],
    ['a token of 3,000 characters', `v1.${'a'.repeat(3000)}.1796310000.xyz`, 'malformed'],
  ])('%s reads nothing: %s', (_label, token, refused) => {
    expect(checkProgressToken(SECRET, token, NOW)).toEqual({ refused });
  });

  test('minting checks its options, naming the option and the rule (never the secret)', () => {
    expect(() => mintProgressToken({ secret: 'short', workflowId: 'a' })).toThrow(
      'mintProgressToken: secret must be a string of at least 16 characters',
    );
    expect(() => mintProgressToken({ secret: SECRET, workflowId: '' })).toThrow(/workflowId must be a non-empty/);
    expect(() => mintProgressToken({ secret: SECRET, workflowId: 'a', ttl: '2 days' })).toThrow(
      'mintProgressToken: ttl must be more than 0 and at most 24 hours',
    );
    expect(() => mintProgressToken({ secret: SECRET, workflowId: 'a', ttl: 0 })).toThrow(/ttl must be more than 0/);
  });
});
