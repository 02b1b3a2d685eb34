/**
 * The demo as a new user runs it, a real child process: no Temporal setting at all, so it provisions the dev server
 * itself (from the cache global-setup.ts filled), runs the job with the mock service, the receiver and a worker in its
 * own process, prints the run's Web UI link (which answers while the run goes on), saves the images with a gallery
 * page (index.html, checked by parsing it and the PNGs' IHDR) and exits 0.
 * Ctrl-C stops it and everything it started.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { Client, Connection } from '@temporalio/client';
import { request } from 'undici';
import { devServerTest } from './environment';

jest.setTimeout(240_000);

const ROOT = path.resolve(__dirname, '../..');
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

interface Demo {
  child: ChildProcessWithoutNullStreams;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
  /** Resolves with the first stdout line matching `pattern`. */
  line(pattern: RegExp): Promise<RegExpExecArray>;
}

/** `tuneflow demo` with only PATH and the cache's home: no TEMPORAL_* variable. */
function startDemo(out: string): Demo {
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, XDG_CACHE_HOME: process.env.XDG_CACHE_HOME };
  const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'tuneflow.js'), 'demo', '--out', out], {
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
    expect(stdout).toMatch(/^Temporal: {2}dev server \S+ \(from \w+\) at 127\.0\.0\.1:\d+$/m);
    expect(stdout).toMatch(/^started: {3}trainThenGenerate demo-/m);
    expect(stdout).toMatch(/^tune \d+ "demo-[\w-]+" trained at /m);
    const printed = [...stdout.matchAll(/^prompt (\d+): (http:\/\/127\.0\.0\.1:\d+\/images\/\S+\.png)$/gm)];
    expect(printed).toHaveLength(3);
    expect(stdout).toMatch(/^saved 3 images to /m);
    expect(stdout).toMatch(/completed/); // the progress line reached the end

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
    expect(html).toContain('<dt>job cost</dt><dd>0 mc ($0.00)</dd>');
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
      expect(images).toEqual([`prompt-${id}-0.png`]);
      const png = fs.readFileSync(path.join(path.dirname(gallery), images[0]));
      expect(png.subarray(0, 8)).toEqual(PNG_SIGNATURE);
      // IHDR, the first chunk: width and height.
      expect(png.toString('latin1', 12, 16)).toBe('IHDR');
      expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual(sizes[i]);
    });

    const files = fs.readdirSync(out, { recursive: true, withFileTypes: true }).filter((f) => f.isFile());
    expect(files.filter((f) => f.name.endsWith('.png'))).toHaveLength(3);
    expect(files.map((f) => f.name).sort()).toEqual(
      [...sections.map(([, id]) => `prompt-${id}-0.png`), 'index.html'].sort(),
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
  expect(await demo.exited).toBe(1);
  expect(demo.stdout()).toMatch(/^stopped by SIGINT: stopping what the demo started$/m);
  expect(await portAnswers(Number(port))).toBe(false);
  expect(await portAnswers(Number(uiPort))).toBe(false);
});
