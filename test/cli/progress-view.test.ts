/**
 * The progress line on a terminal and elsewhere: what a person sees, replayed through a small terminal model (carriage
 * return, erase line, newline, and a width past which a line wraps). Log lines printed while the line shows never
 * end up glued to it, and at 80 columns no redraw leaves half of an older line behind. Plus the words of a wait, the
 * log formats, and a failure said once.
 */
import { Writable } from 'node:stream';
import { WorkflowFailedError } from '@temporalio/client';
import { ActivityFailure, ApplicationFailure } from '@temporalio/common';
import { describeFailure } from '../../src/cli/command-line';
import { describeInspection, describeWait, LiveLine, renderProgress, type RunView } from '../../src/cli/progress-view';
import { msToTs } from '@temporalio/common/lib/time';
import { retryingCall } from '../../src/retrying-call';
import { formatDuration } from '../../src/cli/run-watch';
import { createHumanLogger, createLogger } from '../../src/logging';
import type { Progress } from '../../src/contract/messages';
import { Terminal } from './terminal';

const progress = (over: Partial<Progress> = {}): Progress => ({
  phase: 'training',
  tuneId: 1504963,
  prompts: { total: 3, settled: 0, failed: 0 },
  cost: { mc: 0, usd: 0 },
  counts: { apiCalls: 1, polls: 0, callbacks: 0 },
  ...over,
});

const now = Date.parse('2026-01-01T00:00:00Z');
const view = (over: Partial<RunView> = {}): RunView => ({
  progress: progress(),
  elapsedMs: 12_000,
  taskQueue: 'tuneflow',
  now,
  workers: { polling: true },
  ...over,
});

describe('the live line', () => {
  test('on an 80-column terminal: redrawn in place, cut to fit, never wrapped, no half line left', () => {
    const terminal = new Terminal(80);
    const line = new LiveLine(terminal);
    line.draw(renderProgress(view({ callbacks: true, timer: { firesAt: new Date(now + 112_000), deadline: false } })));
    line.draw(renderProgress(view({ elapsedMs: 13_000 })));
    line.draw('completed  elapsed 14s');
    line.end();
    expect(terminal.lines).toEqual(['completed  elapsed 14s', '']);
  });

  test("a retry's reason the cut would hide is said whole above the line, once, and wraps rather than being cut", () => {
    const terminal = new Terminal(80);
    const line = new LiveLine(terminal);
    const cause = 'GET /tunes/1504963 could not reach the service at http://127.0.0.1:8080: connect ECONNREFUSED';
    const whole = `retrieveTune failed (attempt 4 next): ${cause}`;
    const retrying = { activity: 'retrieveTune', attempt: 4, cause, nextAt: new Date(now + 118_000) };
    line.draw(renderProgress(view({ retrying })), 'a', whole);
    line.draw(renderProgress(view({ retrying, now: now + 1_000 })), 'a', whole);
    const shown = terminal.lines.join('');
    // Above the live line, every word of the reason, wrapped by the terminal; said once, however often redrawn.
    expect(shown.split(cause)).toHaveLength(2);
    expect(terminal.lines.slice(0, -1).join('')).toBe(whole);
    expect(terminal.lines[terminal.lines.length - 1]).toMatch(/^training {2}elapsed 12s {2}retrieveTune failed .*…$/);
    // On a terminal wide enough for the whole line, nothing is said above it.
    const wide = new Terminal(400);
    new LiveLine(wide).draw(renderProgress(view({ retrying })), 'a', whole);
    expect(wide.lines).toHaveLength(1);
  });

  test('a cut line ends in an ellipsis, one column short of the width', () => {
    const terminal = new Terminal(40);
    const line = new LiveLine(terminal);
    line.draw('x'.repeat(100));
    expect(terminal.lines).toEqual([`${'x'.repeat(38)}…`]);
  });

  test('log lines print above the line, each on its own, and the line comes back under them', () => {
    const terminal = new Terminal(80);
    const line = new LiveLine(terminal);
    const logger = createLogger(line.sink(terminal), 'INFO');
    line.draw('training  elapsed 1s  waiting for the training callback');
    logger.info('callback delivered', { kind: 'tune', ids: [1504963] });
    logger.info('callback delivered', { kind: 'prompt', ids: [1504964] });
    line.draw('generating  elapsed 2s');
    line.end();
    expect(terminal.lines).toEqual([
      expect.stringMatching(/^\d\d:\d\d:\d\d INFO callback delivered kind=tune ids=\[1504963\]$/),
      expect.stringMatching(/^\d\d:\d\d:\d\d INFO callback delivered kind=prompt ids=\[1504964\]$/),
      'generating  elapsed 2s',
      '',
    ]);
  });

  test('elsewhere (a file, a pipe): a line per change, not per tick of its clocks; no escape codes', () => {
    let written = '';
    const out = new Writable({
      write(chunk: Buffer, _e, done) {
        written += chunk.toString();
        done();
      },
    });
    const line = new LiveLine(out);
    const timer = { firesAt: new Date(now + 112_000), deadline: false };
    for (const tick of [0, 1_000, 2_000]) {
      const v = view({ elapsedMs: 12_000 + tick, now: now + tick, timer });
      line.draw(renderProgress(v), JSON.stringify([v.progress, v.timer]));
    }
    line.draw('completed');
    line.end();
    expect(written.split('\n')).toEqual([expect.stringMatching(/^training {2}elapsed 12s {2}/), 'completed', '']);
    expect(written).not.toContain('\x1b');
  });
});

describe('what a wait says', () => {
  test('a call that is retrying: which, the attempt to come and when, and why, before what the phase waits for', () => {
    const raw = {
      pendingActivities: [
        { activityType: { name: 'listPrompts' }, attempt: 1 },
        {
          activityType: { name: 'createTune' },
          attempt: 3,
          lastFailure: {
            message: 'POST /tunes could not reach the service at http://127.0.0.1:1: connect ECONNREFUSED 127.0.0.1:1',
            applicationFailureInfo: { type: 'ConnectionFailure' },
          },
          lastAttemptCompleteTime: msToTs(now - 35_000),
          nextAttemptScheduleTime: msToTs(now + 25_000),
        },
      ],
    };
    const retrying = retryingCall({ raw });
    expect(retrying).toStrictEqual({
      activity: 'createTune',
      attempt: 3,
      cause: 'POST /tunes could not reach the service at http://127.0.0.1:1: connect ECONNREFUSED 127.0.0.1:1',
      type: 'ConnectionFailure',
      failedAt: new Date(now - 35_000),
      nextAt: new Date(now + 25_000),
    });
    expect(describeWait(view({ callbacks: true, retrying }))).toMatch(
      /^createTune failed \(attempt 3 next, in 2[45]s\): POST \/tunes could not reach the service at http:\/\/127\.0\.0\.1:1: connect ECONNREFUSED/,
    );
    expect(retryingCall({ raw: { pendingActivities: [raw.pendingActivities[0]] } })).toBeUndefined();
    expect(retryingCall({ raw: {} })).toBeUndefined();
  });

  test('with callbacks, poll-only, and before it is known', () => {
    const timer = { firesAt: new Date(now + 112_000), deadline: false };
    expect(describeWait(view({ callbacks: true, timer }))).toBe(
      'waiting for the training callback, next poll in 1m52s',
    );
    expect(describeWait(view({ callbacks: false, timer }))).toBe(
      'waiting for training (polling only), next poll in 1m52s',
    );
    expect(describeWait(view({ timer }))).toBe('waiting for training, next poll in 1m52s');
  });

  test("prompts, the deadline; a timer's own summary is the Web UI's, not the progress line's", () => {
    const generating = progress({ phase: 'generating', prompts: { total: 3, settled: 1, failed: 0 } });
    expect(
      describeWait(
        view({ progress: generating, callbacks: true, timer: { firesAt: new Date(now + 4_000), deadline: false } }),
      ),
    ).toBe("waiting for 2 prompts' callbacks, next poll in 4s");
    expect(
      describeWait(view({ callbacks: false, timer: { firesAt: new Date(now + 6 * 3_600_000), deadline: true } })),
    ).toBe('waiting for training (polling only), deadline in 6h00m');
    const summarized = { firesAt: new Date(now + 3_000), deadline: false, summary: 'training poll at eta + 1 s' };
    expect(describeWait(view({ callbacks: false, timer: summarized }))).toBe(
      'waiting for training (polling only), next poll in 3s',
    );
  });

  test('inspecting the training images, and what inspection found, one line an image', () => {
    const inspecting = progress({ phase: 'inspecting', tuneId: null });
    expect(renderProgress(view({ progress: inspecting }))).toMatch(
      /^inspecting {2}elapsed 12s {2}inspecting the training images {2}0\/3 prompts {2}no tune yet /,
    );
    expect(
      describeInspection([
        {
          field: 'tune.image_urls[0]',
          image: 'https://example.com/1.jpg',
          flags: [],
          characteristics: { age: '25-34', ethnicity: null, eye_color: 'brown eyes' },
        },
        { field: 'tune.images[1]', image: 'order-1/2.jpg', flags: ['blurry', 'selfie'], characteristics: {} },
      ]),
    ).toEqual([
      'tune.image_urls[0] https://example.com/1.jpg: no flag (age 25-34, eye_color brown eyes)',
      'tune.images[1] order-1/2.jpg: blurry, selfie',
    ]);
    expect(describeInspection(undefined)).toEqual([]);
  });

  test('no worker on the task queue comes first; no answer yet says so', () => {
    expect(describeWait(view({ workers: { polling: false } }))).toBe('no worker polls task queue tuneflow');
    expect(describeWait(view({ progress: undefined }))).toBe('waiting for a worker to take the run');
  });

  test('the line: phase, elapsed, the wait, prompts, tune, cost, counts', () => {
    expect(renderProgress(view({ callbacks: true }))).toBe(
      'training  elapsed 12s  waiting for the training callback  0/3 prompts  tune 1504963  cost $0.00  callbacks 0  polls 0  api calls 1',
    );
  });

  test.each([
    [0, '0s'],
    [42_400, '42s'],
    [112_000, '1m52s'],
    [3_600_000 + 5 * 60_000, '1h05m'],
  ])('formatDuration(%d) is %s', (ms, text) => expect(formatDuration(ms)).toBe(text));
});

describe('log formats', () => {
  test('a person gets one line: time, level, message, key=value', () => {
    let written = '';
    const logger = createHumanLogger({ write: (text: string) => (written += text) }, 'INFO');
    logger.debug('dropped');
    logger.warn('callbacks refused', { total: 3, reason: 'bad signature', error: new Error('boom') });
    expect(written).toMatch(/^\d\d:\d\d:\d\d WARN callbacks refused total=3 reason="bad signature" error="boom"\n$/);
  });

  test('a terminal gets lines for a person, anything else JSON', () => {
    let written = '';
    const sink = (isTTY: boolean) => ({ isTTY, write: (text: string) => (written += text) });
    createLogger(sink(false)).info('started', { taskQueue: 'tuneflow' });
    expect(JSON.parse(written)).toMatchObject({ level: 'INFO', message: 'started', meta: { taskQueue: 'tuneflow' } });
    written = '';
    createLogger(sink(true)).info('started', { taskQueue: 'tuneflow' });
    expect(written).toMatch(/^\d\d:\d\d:\d\d INFO started taskQueue=tuneflow\n$/);
  });
});

describe('a failure, said once', () => {
  test("the workflow's failure repeating its activity's is said once, without the SDK's wrapper", () => {
    const invalid = ApplicationFailure.create({
      message: 'tune.images[0]: must be a readable file',
      type: 'InvalidInput',
      nonRetryable: true,
    });
    const activity = new ActivityFailure(
      'Activity task failed',
      'createTune',
      '1',
      'NON_RETRYABLE_FAILURE',
      'w',
      invalid,
    );
    const workflow = ApplicationFailure.create({
      message: 'tune.images[0]: must be a readable file',
      type: 'InvalidInput',
      cause: activity,
    });
    const err = new WorkflowFailedError('Workflow execution failed', workflow, 'NON_RETRYABLE_FAILURE');
    expect(describeFailure(err)).toBe('InvalidInput: tune.images[0]: must be a readable file');
  });
});
