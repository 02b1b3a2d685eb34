/**
 * The jest environment of both projects (jest.config.js): what a test prints through console is held while it runs
 * and printed after it only if it fails, so a passing run shows no warning or stack of a failure a test expects, and a
 * failing test shows everything it logged. In the tests the SDK's runtime logger writes through console
 * (installQuietRuntime in test/workflows/global-setup.ts): its "Workflow failed" and "Activity failed" warnings are
 * held with the rest.
 *
 * console.error's lines (the SDK's ERROR among them) print even when the test passes: no test expects one.
 * TUNEFLOW_TEST_LOGS=all prints every test's output, passing or not (the timings some tests show).
 */
import { Console } from 'node:console';
import { Writable } from 'node:stream';
import type { Circus } from '@jest/types';
import { TestEnvironment } from 'jest-environment-node';

/** Set in the test's realm by installQuietRuntime (test/workflows/global-setup.ts): flushes the SDK's held logs. */
const FLUSH_TEST_LOGS = Symbol.for('tuneflow.flush-test-logs');

interface HeldLine {
  text: string;
  /** Printed even when the test passes. */
  always: boolean;
}

export default class QuietEnvironment extends TestEnvironment {
  private held: HeldLine[] = [];
  /** A test or hook of this file failed: what its afterAll printed is shown too. */
  private failed = false;

  override async setup(): Promise<void> {
    await super.setup();
    // Jest has set its own console by now; the test's modules are loaded after setup, so they see this one.
    this.global.console = this.holdingConsole();
  }

  // Output between two tests (beforeAll, a worker still shutting down) is held with the next.
  handleTestEvent(event: Circus.Event): void {
    if (event.name === 'hook_failure') this.failed = true;
    if (event.name !== 'test_done') return;
    this.flushTestLogs();
    const failed = event.test.errors.length > 0;
    this.failed ||= failed;
    this.release(testName(event.test), failed);
  }

  override async teardown(): Promise<void> {
    this.flushTestLogs();
    this.release('after the last test', this.failed);
    await super.teardown();
  }

  private flushTestLogs(): void {
    (this.global as unknown as Record<symbol, (() => void) | undefined>)[FLUSH_TEST_LOGS]?.();
  }

  /** A console whose lines are held; console.error's are marked to print even when the test passes. */
  private holdingConsole(): Console {
    const into = (always: boolean) =>
      new Writable({
        write: (chunk: Buffer, _encoding, done) => {
          this.held.push({ text: chunk.toString(), always });
          done();
        },
      });
    const console = new Console({ stdout: into(false), stderr: into(false) });
    console.error = new Console({ stdout: into(true), stderr: into(true) }).error;
    return console;
  }

  /** Prints what `name` held (all of it if it failed, else its errors only) and forgets it. */
  private release(name: string, failed: boolean): void {
    const everything = failed || process.env.TUNEFLOW_TEST_LOGS === 'all';
    const shown = this.held.filter((line) => everything || line.always);
    this.held = [];
    if (!shown.length) return;
    const what = failed ? 'what it printed' : everything ? 'what it printed (it passed)' : 'its errors (it passed)';
    const text = shown.map((line) => line.text.replace(/^(?=.)/gm, '    ')).join('');
    process.stderr.write(`\n  ● ${name}: ${what}\n\n${text}`);
  }
}

/** The test's name as jest reports it: its describe blocks' names, then its own. */
function testName(test: Circus.TestEntry): string {
  const names: string[] = [];
  for (let entry: Circus.TestEntry | Circus.DescribeBlock | undefined = test; entry?.parent; entry = entry.parent)
    names.unshift(entry.name);
  return names.join(' › ');
}
