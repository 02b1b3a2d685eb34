import { Writable } from 'node:stream';
import { createJsonLogger } from '../src/logging';

function sink(): { stream: Writable; lines: () => Array<Record<string, unknown>> } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  return {
    stream,
    lines: () =>
      text
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

describe('createJsonLogger', () => {
  it('writes one JSON object per line: time, level, message, meta', () => {
    const { stream, lines } = sink();
    const logger = createJsonLogger(stream);
    logger.info('callback delivered', { kind: 'prompt', workflowId: 'job-1', status: 200 });
    logger.log('WARN', 'callback refused', { status: 403 });
    expect(lines()).toEqual([
      {
        time: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/),
        level: 'INFO',
        message: 'callback delivered',
        meta: { kind: 'prompt', workflowId: 'job-1', status: 200 },
      },
      { time: expect.any(String), level: 'WARN', message: 'callback refused', meta: { status: 403 } },
    ]);
  });

  it('drops entries below the minimum level', () => {
    const { stream, lines } = sink();
    const logger = createJsonLogger(stream, 'WARN');
    logger.trace('t');
    logger.debug('d');
    logger.info('i');
    logger.warn('w');
    logger.error('e');
    expect(lines().map((l) => l.level)).toEqual(['WARN', 'ERROR']);
  });

  it('writes errors as name and message, bigints as strings, and survives a cyclic meta', () => {
    const { stream, lines } = sink();
    const logger = createJsonLogger(stream, 'TRACE');
    logger.error('failed', { error: new RangeError('boom'), big: 10n });
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    logger.debug('cyclic', cyclic);
    const [first, second] = lines();
    expect(first.meta).toEqual({ error: { name: 'RangeError', message: 'boom' }, big: '10' });
    expect(second).toMatchObject({ level: 'DEBUG', message: 'cyclic', meta: '[unserializable]' });
  });

  it('refuses an unknown minimum level', () => {
    expect(() => createJsonLogger(process.stderr, 'LOUD' as never)).toThrow(/minLevel: must be one of TRACE/);
  });
});
