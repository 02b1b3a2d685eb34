/**
 * listenForStop in a process of its own, signalled as a terminal and npx signal it: one Ctrl-C that comes twice (the
 * terminal's, and npm's copy forwarded to its child) stops the command once and lets it finish stopping; a Ctrl-C
 * pressed again after REPEAT_WINDOW_MS ends a stop that hangs, as Node's default does.
 */
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { REPEAT_WINDOW_MS } from '../../src/cli/stop-signal';

jest.setTimeout(30_000);

const ROOT = resolve(__dirname, '../..');

/** A command that takes `stopTakesMs` to stop once told to, then exits 0. */
function command(stopTakesMs: number) {
  const script = `
    const stop = require('./src/cli/stop-signal').listenForStop();
    // Alive until stopped, as a command's server keeps it: a signal listener alone does not, and a late SIGINT on a
    // loaded machine found the process gone (exit 0 after 'ready').
    const serving = setInterval(() => undefined, 60_000);
    process.stdout.write('ready\\n');
    stop.stopped.then((signal) => {
      clearInterval(serving);
      process.stdout.write('stopping on ' + signal + '\\n');
      setTimeout(() => process.stdout.write('stopped\\n'), ${stopTakesMs});
    });`;
  const child = spawn(process.execPath, ['-r', 'tsx/cjs', '-e', script], { cwd: ROOT });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c));
  child.stderr.on('data', (c: Buffer) => (output += c));
  // 'close', not 'exit': the exit can come before the last of stdout is read (a loaded machine lost 'stopped' so).
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
    child.on('close', (code, signal) => done({ code, signal })),
  );
  const lines = createInterface({ input: child.stdout });
  const line = (text: string) => new Promise<void>((done) => lines.on('line', (l) => l === text && done()));
  return { child, exited, output: () => output, line };
}

test('a Ctrl-C that comes twice at once (npx forwards a copy) stops the command once, and it finishes stopping', async () => {
  const { child, exited, output, line } = command(REPEAT_WINDOW_MS + 500);
  await line('ready');
  child.kill('SIGINT');
  await sleep(20);
  child.kill('SIGINT');
  expect(await exited).toEqual({ code: 0, signal: null });
  expect(output()).toBe('ready\nstopping on SIGINT\nstopped\n');
});

test('a Ctrl-C pressed again after the window ends a stop that hangs', async () => {
  const { child, exited, output, line } = command(60_000);
  await line('ready');
  child.kill('SIGINT');
  await line('stopping on SIGINT');
  // Well past the window, even on a busy machine.
  await sleep(REPEAT_WINDOW_MS * 3);
  child.kill('SIGINT');
  expect(await exited).toEqual({ code: null, signal: 'SIGINT' });
  expect(output()).toBe('ready\nstopping on SIGINT\n');
});
