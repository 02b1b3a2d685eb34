/**
 * A README command as a terminal runs it: `bash -c command` in a process group of its own (Ctrl-C reaches npx, node
 * and tuneflow alike), its output kept, its lines awaited. Shared by the tests that run the README's commands.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as os from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';

const ROOT = path.resolve(__dirname, '../..');

export interface Running {
  command: string;
  child: ChildProcess;
  /** stdout and stderr so far, together. */
  output: () => string;
  /** The exit status a shell shows: the code, or 128 + the number of the signal that ended it. */
  exited: Promise<number>;
}

/**
 * Runs `command` in the repository with `env` only.
 *
 * @example
 * const app = runInShell('node examples/progress-page/server.mjs', { PATH: process.env.PATH });
 */
export function runInShell(command: string, env: NodeJS.ProcessEnv): Running {
  const child = spawn('bash', ['-c', command], { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (c: Buffer) => (output += c));
  child.stderr!.on('data', (c: Buffer) => (output += c));
  // 'close': npx's own child (tuneflow) holds the pipes until it is done too.
  const exited = new Promise<number>((resolve) =>
    child.on('close', (code, signal) => resolve(code ?? 128 + os.constants.signals[signal!])),
  );
  return { command, child, output: () => output, exited };
}

/** The first line (stdout or stderr) matching `pattern`; rejects, with the output, if the command exits first. */
export async function lineOf(running: Running, pattern: RegExp): Promise<RegExpExecArray> {
  const lines = createInterface({ input: running.child.stdout! });
  const stderr = createInterface({ input: running.child.stderr! });
  return Promise.race([
    new Promise<RegExpExecArray>((resolve) => {
      const check = (line: string) => {
        const match = pattern.exec(line);
        if (match) resolve(match);
      };
      lines.on('line', check);
      stderr.on('line', check);
    }),
    running.exited.then((code): never => {
      throw new Error(`\`${running.command}\` exited ${code} before printing ${pattern}:\n${running.output()}`);
    }),
  ]);
}

/** Sends `signal` to the command's process group unless it ended; its exit status. */
export async function stopGroup(running: Running, signal: NodeJS.Signals): Promise<number> {
  if (running.child.exitCode === null && running.child.signalCode === null) process.kill(-running.child.pid!, signal);
  return running.exited;
}
