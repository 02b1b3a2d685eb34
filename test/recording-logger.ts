import type { LogLevel, LogMetadata, Logger } from '@temporalio/common';

/** One line a logger was given. */
export interface LogEntry {
  level: LogLevel;
  message: string;
  meta?: LogMetadata;
}

/** A logger that keeps every line (in `lines`, or the array given), for what a worker or the receiver says. */
export function recordingLogger(lines: LogEntry[] = []): Logger & { lines: LogEntry[] } {
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
