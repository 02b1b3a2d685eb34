/**
 * `tuneflow demo` as a child process, as a new user runs it: its stdout line by line, its stderr, its exit. Shared by the
 * demo's tests and the live page's browser test.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import * as path from 'node:path';
import { createInterface } from 'node:readline';

const ROOT = path.resolve(__dirname, '../..');

export interface Demo {
  child: ChildProcessWithoutNullStreams;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
  /** Resolves with the first stdout line matching `pattern`. */
  line(pattern: RegExp): Promise<RegExpExecArray>;
}

/** `tuneflow demo` with only PATH and the cache's home (and `more`): no TEMPORAL_* variable. */
export function startDemo(out: string, flags: string[] = [], more: Record<string, string> = {}): Demo {
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, XDG_CACHE_HOME: process.env.XDG_CACHE_HOME, ...more };
  const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'tuneflow.js'), 'demo', '--out', out, ...flags], {
    cwd: ROOT,
    env,
  });
  const lines: string[] = [];
  let stderr = '';
  const waiting: Array<{ pattern: RegExp; resolve: (m: RegExpExecArray) => void }> = [];
  createInterface({ input: child.stdout }).on('line', (text) => {
    lines.push(text);
    for (const w of [...waiting]) {
      const match = w.pattern.exec(text);
      if (match) {
        waiting.splice(waiting.indexOf(w), 1);
        w.resolve(match);
      }
    }
  });
  child.stderr.on('data', (c: Buffer) => (stderr += c));
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  return {
    child,
    stdout: () => lines.map((l) => `${l}\n`).join(''),
    stderr: () => stderr,
    exited,
    line: (pattern) =>
      Promise.race([
        new Promise<RegExpExecArray>((resolve) => {
          const seen = lines.map((l) => pattern.exec(l)).find(Boolean);
          if (seen) resolve(seen);
          else waiting.push({ pattern, resolve });
        }),
        exited.then((code): never => {
          throw new Error(`the demo exited ${code} before printing ${pattern}:\n${lines.join('\n')}\n${stderr}`);
        }),
      ]),
  };
}
