/**
 * The demo as a new user runs it, a real child process: no Temporal setting at all, so it provisions the dev server
 * itself (from the cache global-setup.ts filled), runs the job with the mock service, the receiver and a worker in its
 * own process, prints the run's Web UI link (which answers while the run goes on), saves the images with a gallery
 * page (index.html, checked by parsing it and the PNGs' IHDR) and exits 0; its output holds no dev-server banner and
 * no log line glued to a progress line, in a pipe and on a terminal (a pseudo-terminal by `script`, 80 columns).
 * Ctrl-C stops it and everything it started, exit 130 and no stack trace; so does its output closed (`| head -2`,
 * exit 141); `--keep` keeps the server, the Web UI and the mock up after the run until Ctrl-C.
 */
import { execFile, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { request } from 'undici';
import { screen } from '../cli/terminal';
import { startDemo } from './demo-process';
import { devServerExecutable, devServerTest } from './environment';

jest.setTimeout(240_000);

const ROOT = path.resolve(__dirname, '../..');
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** The lines of the Temporal CLI's own banner, which the SDK's server process writes to its parent's stdout. */
const BANNER = /^(Temporal CLI |Temporal Server:|Temporal UI:|Temporal Metrics:|Temporal Persistence:)/m;

function portAnswers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

let out: string;
beforeEach(() => (out = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-demo-'))));
afterEach(() => fs.rmSync(out, { recursive: true, force: true }));

devServerTest(
  'tuneflow demo provisions a dev server, links the run in the Web UI, saves the images, exits 0',
  async () => {
    const demo = startDemo(out);
    const [, link] = await demo.line(
      /^history: {3}(http:\/\/127\.0\.0\.1:\d+\/namespaces\/default\/workflows\/demo-\S+)$/,
    );
    // The link is the dev server's Web UI, up while the run goes on.
    const page = await request(link);
    await page.body.dump();
    expect(page.statusCode).toBe(200);
    const code = await demo.exited;

    const stdout = demo.stdout();
    expect({ code, stderr: demo.stderr() }).toEqual({ code: 0, stderr: expect.any(String) });
    // Its own lines only: no banner of the server's, and progress lines whole (the logs are on stderr, one a line).
    expect(stdout).not.toMatch(BANNER);
    expect(stdout).not.toContain('{"time"');
    for (const line of demo.stderr().trim().split('\n').filter(Boolean))
      expect(JSON.parse(line)).toHaveProperty('level');
    expect(stdout).toMatch(/^Temporal: {2}dev server \S+ \(from \w+\) at 127\.0\.0\.1:\d+$/m);
    expect(stdout).toMatch(/^started: {3}trainThenGenerate demo-/m);
    expect(stdout).toMatch(/^tune \d+ "demo-[\w-]+#[\w-]+" trained at /m);
    const printed = [...stdout.matchAll(/^prompt (\d+): (http:\/\/127\.0\.0\.1:\d+\/images\/\S+\.png)$/gm)];
    expect(printed).toHaveLength(3);
    // The worker's storage is out/images: the gallery shows its copies, and the demo downloads nothing.
    expect(stdout).toMatch(/^stored 3 images in \S+ \(the worker's storage, each checked by SHA-256\)$/m);
    expect(stdout).not.toMatch(/^saved /m);
    expect([
      ...stdout.matchAll(/^ {2}stored: file:\/\/\S+\/images\/default\/demo-\S+\/prompt-\d+\/image-0\.png$/gm),
    ]).toHaveLength(3);
    expect(stdout).toMatch(/^completed {2}elapsed \d+s {2}3\/3 prompts /m); // the progress line reached the end
    expect(stdout).toMatch(/^(training|generating) {2}elapsed \d+s {2}waiting for /m);

    // The gallery: out/<run>/index.html, printed, listing the run's tune, prompts and saved images.
    const [, workflowId] = /^started: {3}trainThenGenerate (demo-\S+)$/m.exec(stdout)!;
    const [, tuneId] = /^tune (\d+) /m.exec(stdout)!;
    const [, gallery] = /^gallery: {3}(\S+)$/m.exec(stdout)!;
    expect(gallery).toBe(path.join(out, workflowId, 'index.html'));
    const html = fs.readFileSync(gallery, 'utf8');
    expect(html).toMatch(/^<!doctype html>/);
    expect(html).toContain(`<h1>tuneflow run ${workflowId}</h1>`);
    expect(html).toContain(`<h2>tune ${tuneId}</h2>`);
    // branch fast: the job cost nothing, and says so.
    expect(stdout).toMatch(/^cost: {6}0 mc \(\$0\.00\)$/m);
    expect(html).toContain('<tr><th>job cost</th><td>0 mc ($0.00)</td></tr>');
    // It says the images are the mock's, and links the run's history, saying the link dies with the demo.
    expect(html).toContain("These images are the mock service's");
    expect(html).toContain(`<a href="${link}">`);
    expect(html).toContain('<code>tuneflow demo --keep</code> keeps it up');
    const sections = [...html.matchAll(/<section class="prompt" id="prompt-(\d+)">([\s\S]*?)<\/section>/g)];
    expect(sections.map((m) => m[1])).toEqual(printed.map((m) => m[1]));
    const texts = ['studio portrait', 'astronaut', 'watercolor'];
    // The default prompts' sizes: the images must have them.
    const sizes = [
      [512, 768],
      [768, 512],
      [640, 640],
    ];
    sections.forEach(([, id, section], i) => {
      expect(section).toContain(texts[i]);
      const images = [...section.matchAll(/<img src="([^"]+)"/g)].map((m) => m[1]);
      expect(images).toEqual([`../images/default/${workflowId}/prompt-${id}/image-0.png`]);
      const png = fs.readFileSync(path.join(path.dirname(gallery), images[0]));
      expect(png.subarray(0, 8)).toEqual(PNG_SIGNATURE);
      // IHDR, the first chunk: width and height.
      expect(png.toString('latin1', 12, 16)).toBe('IHDR');
      expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual(sizes[i]);
    });

    const files = fs.readdirSync(out, { recursive: true, withFileTypes: true }).filter((f) => f.isFile());
    expect(files.filter((f) => f.name.endsWith('.png'))).toHaveLength(3);
    expect(files.map((f) => path.relative(out, path.join(f.parentPath, f.name))).sort()).toEqual(
      [
        ...sections.map(([, id]) => `images/default/${workflowId}/prompt-${id}/image-0.png`),
        `${workflowId}/index.html`,
      ].sort(),
    );
  },
);

devServerTest('Ctrl-C stops the demo and the dev server and Web UI it started', async () => {
  const demo = startDemo(out);
  const [, port] = await demo.line(/^Temporal: {2}dev server .* at 127\.0\.0\.1:(\d+)$/);
  const [, uiPort] = await demo.line(/^Web UI: {4}http:\/\/127\.0\.0\.1:(\d+)$/);
  const [, workflowId] = await demo.line(/^started: {3}trainThenGenerate (demo-\S+)$/);
  expect(await portAnswers(Number(port))).toBe(true);
  // Stopped mid-run: the run's history, read from the demo's server, shows it started and not yet closed.
  const connection = await Connection.connect({ address: `127.0.0.1:${port}` });
  try {
    const events = (await new Client({ connection }).workflow.getHandle(workflowId).fetchHistory()).events ?? [];
    expect(events[0].workflowExecutionStartedEventAttributes?.workflowType?.name).toBe('trainThenGenerate');
    expect(
      events.some((e) => e.workflowExecutionCompletedEventAttributes || e.workflowExecutionFailedEventAttributes),
    ).toBe(false);
  } finally {
    await connection.close();
  }
  demo.child.kill('SIGINT');
  expect(await demo.exited).toBe(130);
  expect(demo.stdout()).toMatch(/^stopped by Ctrl-C: stopping what the demo started$/m);
  // Quietly: no stack trace, no error of a connection closed under a call.
  expect(demo.stderr()).not.toMatch(/Error|^\s+at /m);
  expect(await portAnswers(Number(port))).toBe(false);
  expect(await portAnswers(Number(uiPort))).toBe(false);
});

devServerTest('`npm run demo | head -2`: its output closed stops the demo and the dev server it started', async () => {
  // The cached Temporal CLI behind a script that notes the pid of each server it runs (exec keeps the pid).
  const pids = path.join(out, 'pids');
  const cli = path.join(out, 'temporal');
  fs.writeFileSync(cli, `#!/bin/sh\necho $$ >> '${pids}'\nexec '${devServerExecutable()}' "$@"\n`, { mode: 0o755 });
  const env = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    XDG_CACHE_HOME: process.env.XDG_CACHE_HOME,
    TEMPORAL_CLI_PATH: cli,
  };
  const { stdout, stderr } = await promisify(execFile)(
    'bash',
    ['-c', `npm run demo -- --out '${out}' | head -2; echo "demo exit \${PIPESTATUS[0]}" >&2`],
    { cwd: ROOT, env },
  );
  expect(stdout.split('\n').length).toBeLessThanOrEqual(3);
  expect(stderr).toContain('tuneflow demo: its output was closed: stopping what it started');
  expect(stderr).toMatch(/^demo exit 141$/m);
  expect(stderr).not.toMatch(/EPIPE|^\s+at /m);
  // It had started a dev server, and stopped it before it exited: no orphan left running.
  const started = fs.readFileSync(pids, 'utf8').trim().split('\n').map(Number);
  expect(started).toHaveLength(1);
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  expect(started.filter(alive)).toEqual([]);
});

devServerTest(
  'with a key and the service unreachable, the demo gives up after its stated limit: exit 3, servers stopped',
  async () => {
    const probe = net.createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const closed = (probe.address() as net.AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    const demo = startDemo(out, ['--unreachable-limit', '3s'], {
      TUNEFLOW_API_KEY: 'a-key-for-no-service',
      TUNEFLOW_API_URL: `http://127.0.0.1:${closed}`,
      TUNEFLOW_DEMO_IMAGES: 'https://images.example.com/1.png',
    });
    const [, port] = await demo.line(/^Temporal: {2}dev server .* at 127\.0\.0\.1:(\d+)$/);
    expect(await demo.exited).toBe(3);
    expect(demo.stderr()).toMatch(
      /^tuneflow demo: createTune has not reached the service for \d+s: POST \/tunes could not reach the service at [^\n]+ The demo stops, and what it started: /m,
    );
    expect(await portAnswers(Number(port))).toBe(false);
  },
);

devServerTest(
  '--keep keeps the Web UI and the mock service up after the run, until Ctrl-C (then exit 130)',
  async () => {
    const demo = startDemo(out, ['--keep']);
    const [, link] = await demo.line(/^history: {3}(http:\S+)$/);
    const [, image] = await demo.line(/^prompt \d+: (http:\/\/127\.0\.0\.1:\d+\/images\/\S+\.png)$/);
    const [, gallery] = await demo.line(/^gallery: {3}(\S+)$/);
    await demo.line(
      /^kept up until Ctrl-C: the live page, the Web UI \(http:\/\/127\.0\.0\.1:\d+\) and the mock service/,
    );
    // After the run: the history link and the image URLs still answer.
    for (const url of [link, image]) {
      const answer = await request(url);
      await answer.body.dump();
      expect({ url, status: answer.statusCode }).toEqual({ url, status: 200 });
    }
    expect(fs.readFileSync(gallery, 'utf8')).toContain('the demo keeps its Temporal server up until Ctrl-C');
    const [, port] = /^Temporal: {2}dev server .* at 127\.0\.0\.1:(\d+)$/m.exec(demo.stdout())!;
    demo.child.kill('SIGINT');
    expect(await demo.exited).toBe(130);
    expect(await portAnswers(Number(port))).toBe(false);
  },
);

devServerTest(
  'on an 80-column terminal: no banner, log lines apart from the progress line, which fits the width',
  async () => {
    // A pseudo-terminal: `script` runs the demo with stdout and stderr on one, as a person sees it.
    const env = { PATH: process.env.PATH, HOME: process.env.HOME, XDG_CACHE_HOME: process.env.XDG_CACHE_HOME };
    const command = `stty cols 80; exec ${process.execPath} ${path.join(ROOT, 'bin', 'tuneflow.js')} demo --out ${out}`;
    const child = spawn('script', ['-qfec', command, '/dev/null'], { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
    let bytes = '';
    child.stdout.on('data', (c: Buffer) => (bytes += c));
    expect(await new Promise((resolve) => child.on('exit', resolve))).toBe(0);
    // The lines as they stay on screen (wide, so the demo's long lines do not wrap: a terminal wraps those, harmless).
    const lines = (await screen(bytes.replace(/\r\n/g, '\n'), 10_000)).filter(Boolean);
    const kinds = [
      /^(Temporal|Web UI|service|callbacks|started|history|live|cost|gallery): +\S/,
      /^\d\d:\d\d:\d\d INFO callback delivered kind=(tune|prompt) /, // the receiver's log, for a person
      /^completed {2}elapsed \d+s {2}3\/3 prompts/, // the progress line, as last drawn
      /^tune \d+ "demo-/,
      /^prompt \d+: http:/,
      /^ {2}stored: file:/,
      /^stored 3 images in /,
    ];
    for (const line of lines)
      expect({ line, known: kinds.some((kind) => kind.test(line)) }).toEqual({ line, known: true });
    expect(lines.join('\n')).not.toMatch(BANNER);
    expect(lines.filter((line) => line.startsWith('completed '))).toHaveLength(1);
    // Each drawing of the progress line fits in 79 columns: redrawn in place, it never wraps.
    // (a drawing is what a carriage return follows: the next redraw goes over it; a log line ends in a newline)
    const draws = [...bytes.matchAll(/([^\r\n]+)\r(?!\n)/g)].map((m) => m[1].replace(/\x1b\[2K/g, '')).filter(Boolean);
    expect(draws.length).toBeGreaterThan(3);
    for (const draw of draws) expect(draw.length).toBeLessThan(80);
  },
);
