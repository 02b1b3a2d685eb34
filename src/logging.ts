/**
 * Logs behind the `Logger` interface of @temporalio/common, so the same logger can serve tuneflow's servers and a
 * Temporal Runtime: one JSON object per line (`time`, `level`, `message`, `meta`) for machines, or one short line
 * (`23:32:36 INFO callback delivered kind=tune ids=[12]`) for a person at a terminal.
 */
import type { LogLevel, LogMetadata, Logger } from '@temporalio/common';

const LEVEL_RANK: Readonly<Record<LogLevel, number>> = { TRACE: 0, DEBUG: 1, INFO: 2, WARN: 3, ERROR: 4 };

/** Errors would serialize as `{}`; bigints would throw. */
function jsonValue(_key: string, value: unknown): unknown {
  if (value instanceof Error) return { name: value.name, message: value.message };
  if (typeof value === 'bigint') return value.toString();
  return value;
}

/** No meta, or a plain object whose values are all strings, numbers, booleans, null or undefined: JSON as they are. */
function isFlat(meta: LogMetadata | undefined): boolean {
  if (meta === undefined) return true;
  const proto: unknown = Object.getPrototypeOf(meta);
  if (proto !== Object.prototype && proto !== null) return false;
  for (const key in meta) {
    const value = meta[key];
    const type = typeof value;
    if (value !== null && type !== 'string' && type !== 'number' && type !== 'boolean' && type !== 'undefined')
      return false;
  }
  return true;
}

/**
 * A Logger that writes one JSON line per entry to `stream`, dropping entries below `minLevel`.
 *
 * @example
 * const logger = createJsonLogger(process.stderr, 'WARN');
 * logger.warn('callback refused', { kind: 'prompt', workflowId: 'job-42', status: 403 });
 * // {"time":"2025-01-01T00:00:00.000Z","level":"WARN","message":"callback refused","meta":{...}}
 */
export function createJsonLogger(stream: LogSink = process.stderr, minLevel: LogLevel = 'INFO'): Logger {
  return leveled(minLevel, (level, message, meta) => {
    const entry = { time: new Date().toISOString(), level, message, meta };
    let line: string;
    try {
      // A replacer makes JSON.stringify call back for every value: only metas that may need one get it.
      line = isFlat(meta) ? JSON.stringify(entry) : JSON.stringify(entry, jsonValue);
    } catch {
      // A cyclic meta must not lose the message.
      line = JSON.stringify({ time: entry.time, level, message, meta: '[unserializable]' });
    }
    stream.write(line + '\n');
  });
}

/** Where log lines go: a stream, or anything with its `write` (the progress line's, which keeps them apart from it). */
export interface LogSink {
  write(text: string): unknown;
}

/**
 * A Logger for a person: `HH:MM:SS LEVEL message key=value ...` per entry, in the local time of day.
 *
 * @example
 * createHumanLogger(process.stderr).info('callback delivered', { kind: 'tune', ids: [12] });
 * // 23:32:36 INFO callback delivered kind=tune ids=[12]
 */
export function createHumanLogger(stream: LogSink = process.stderr, minLevel: LogLevel = 'INFO'): Logger {
  return leveled(minLevel, (level, message, meta) => {
    const time = new Date().toTimeString().slice(0, 8);
    const fields = Object.entries(meta ?? {})
      .filter(([, value]) => value !== undefined)
      .map(([key, value]) => `${key}=${humanValue(value)}`);
    stream.write(`${[time, level, message, ...fields].join(' ')}\n`);
  });
}

/**
 * Human lines on a terminal, JSON lines otherwise (a file, a pipe, a log collector).
 * @example const logger = createLogger(process.stderr, config.logLevel);
 */
export function createLogger(
  stream: LogSink & { isTTY?: boolean } = process.stderr,
  minLevel: LogLevel = 'INFO',
): Logger {
  return stream.isTTY ? createHumanLogger(stream, minLevel) : createJsonLogger(stream, minLevel);
}

function humanValue(value: unknown): string {
  if (value instanceof Error) return JSON.stringify(value.message);
  if (typeof value === 'string') return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
  try {
    return JSON.stringify(value, jsonValue) ?? String(value);
  } catch {
    return '[unserializable]';
  }
}

function leveled(minLevel: LogLevel, write: (level: LogLevel, message: string, meta?: LogMetadata) => void): Logger {
  const min = LEVEL_RANK[minLevel];
  if (min === undefined) throw new TypeError(`minLevel: must be one of ${Object.keys(LEVEL_RANK).join(', ')}`);
  const log = (level: LogLevel, message: string, meta?: LogMetadata): void => {
    if (LEVEL_RANK[level] >= min) write(level, message, meta);
  };
  return {
    log,
    trace: (message, meta) => log('TRACE', message, meta),
    debug: (message, meta) => log('DEBUG', message, meta),
    info: (message, meta) => log('INFO', message, meta),
    warn: (message, meta) => log('WARN', message, meta),
    error: (message, meta) => log('ERROR', message, meta),
  };
}
