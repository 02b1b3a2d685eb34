import type { LogLevel, LogMetadata, Logger } from '@temporalio/common';

/** A logger that keeps every line, for what a worker says at start. */
export function recordingLogger(): Logger & { lines: Array<{ level: LogLevel; message: string; meta?: LogMetadata }> } {
  const lines: Array<{ level: LogLevel; message: string; meta?: LogMetadata }> = [];
  const log = (level: LogLevel, message: string, meta?: LogMetadata) => void lines.push({ level, message, meta });
  return {
    lines,
    log,
    trace: (m, meta) => log('TRACE', m, meta),
    debug: (m, meta) => log('DEBUG', m, meta),
    info: (m, meta) => log('INFO', m, meta),
    warn: (m, meta) => log('WARN', m, meta),
    error: (m, meta) => log('ERROR', m, meta),
  };
}
