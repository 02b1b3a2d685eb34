/**
 * The demo's live page in a real browser: headless Chromium (the build @sparticuz/chromium ships inside its npm
 * package, so `npm ci` brings it; driven by playwright-core) opens the page `tuneflow demo --keep` prints, and sees
 * what a person sees: at least three phases in order, each with its time, the images loaded (decoded, not only
 * linked), and the end. The README's screenshot of the page is made from this run (TUNEFLOW_SCREENSHOTS=1 writes it).
 * Then the app's own page of examples/progress-page/server.mjs, started by the README's command under "A live page
 * for your end users" (its port a free one) against the demo's Temporal server, shows the same job in the same browser.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { chromium as playwright, type Browser, type Page } from 'playwright-core';
import { blocksUnder, commandsOf } from '../readme-blocks';
import { startDemo, type Demo } from './demo-process';
import { devServerTest } from './environment';
import { lineOf, runInShell, stopGroup } from './shell-process';

jest.setTimeout(240_000);

const ROOT = path.resolve(__dirname, '../..');
const ORDER = ['creating-tune', 'training', 'creating-prompts', 'generating', 'completed'];
const SCREENSHOT = path.join(ROOT, 'docs', 'screenshots', 'live-page.png');

/** Chromium from its npm package, with the flags this machine's closed network needs (no background calls home). */
async function launchChromium(): Promise<Browser> {
  const packaged = (await import('@sparticuz/chromium')).default;
  return playwright.launch({
    executablePath: await packaged.executablePath(),
    headless: true,
    args: [
      ...packaged.args,
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

interface Seen {
  status: string;
  end: string;
  phases: Array<{ phase: string; since: string; time: string }>;
}

let out: string;
let demo: Demo | undefined;
let browser: Browser | undefined;
beforeAll(() => {
  out = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-live-'));
});
afterAll(async () => {
  await browser?.close();
  if (demo) {
    demo.child.kill('SIGINT');
    await demo.exited;
  }
  fs.rmSync(out, { recursive: true, force: true });
});

/** A new page of the shared browser, launched on first use. */
async function newPage(): Promise<Page> {
  browser ??= await launchChromium();
  return browser.newPage({ viewport: { width: 1000, height: 720 } });
}

devServerTest(
  'the demo live page shows the phases in order with their times, the images loaded, and the end',
  async () => {
    demo = startDemo(out, ['--keep']);
    const [, url] = await demo.line(/^live: {6}(http:\/\/127\.0\.0\.1:\d+\/)$/);
    const page = await newPage();
    await page.goto(url);
    // The end, as the page shows it once the stream's last event came.
    await page.locator('#end:not([hidden])').waitFor({ timeout: 180_000 });
    // Read in the page (a string: the test's own types know no DOM).
    const seen = await page.evaluate<Seen>(`({
      status: document.getElementById('status').textContent,
      end: document.getElementById('end').textContent,
      phases: [...document.querySelectorAll('#phases li')].map((li) => ({
        phase: li.dataset.phase,
        since: li.dataset.since,
        time: li.querySelector('.time').textContent,
      })),
    })`);
    expect(seen.status).toBe('completed');
    expect(seen.end).toMatch(/^Done: 3 images, \$0\.00$/);
    expectPhasesInOrder(seen.phases.map((p) => p.phase));
    for (const [i, p] of seen.phases.entries()) {
      // A clock time, and how long the phase took for every phase but the last.
      expect(p.time).toMatch(i < seen.phases.length - 1 ? /^\d\d:\d\d:\d\d( [AP]M)? · \d+s$/ : /^\d\d:\d\d:\d\d/);
      if (i > 0) expect(Date.parse(p.since)).toBeGreaterThanOrEqual(Date.parse(seen.phases[i - 1]!.since));
    }
    // Every image decoded by the browser: loaded from the worker's stored copies the page serves.
    const images = await loadedImages(page);
    expect(images).toHaveLength(3);
    for (const image of images) {
      expect(image.src).toMatch(/^\/images\/.+\.png$/);
      expect(image.width).toBeGreaterThan(0);
    }
    const shot = process.env.TUNEFLOW_SCREENSHOTS === '1' ? SCREENSHOT : path.join(out, 'live-page.png');
    await page.screenshot({ path: shot, fullPage: true });
    expect(fs.statSync(shot).size).toBeGreaterThan(10_000);
  },
);

devServerTest(
  "the README's example app, started as printed (the demo's Temporal address and a free port in place of the " +
    'printed ones), shows the same job on its own page: the phases in order, the images loaded, the end, and no ' +
    'token in what it prints',
  async () => {
    expect(demo).toBeDefined();
    const [, port] = await demo!.line(/^Temporal: {2}dev server .* at 127\.0\.0\.1:(\d+)$/);
    const [, workflowId] = await demo!.line(/^started: {3}trainThenGenerate (demo-\S+)$/);
    const [command] = commandsOf(blocksUnder('### A live page for your end users', 'sh')[0]!);
    expect(command).toMatch(/ node examples\/progress-page\/server\.mjs$/);
    // As printed, but the demo's server and a free port of the app's (its own: 0, printed as it listens).
    const app = runInShell(command.replace('localhost:7233', `127.0.0.1:${port}`), {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      PORT: '0',
    });
    try {
      const [, listening] = await lineOf(app, /^listening: (http:\/\/127\.0\.0\.1:\d+)\/jobs\/<key>$/);
      const page = await newPage();
      await page.goto(`${listening}/jobs/${encodeURIComponent(workflowId!)}`);
      await page.locator('#end:not([hidden])').waitFor({ timeout: 180_000 });
      const seen = await page.evaluate<{
        status: string;
        end: string;
        phases: Array<{ phase: string; text: string }>;
      }>(`({
        status: document.getElementById('status').textContent,
        end: document.getElementById('end').textContent,
        phases: [...document.querySelectorAll('#phases li')].map((li) => ({ phase: li.dataset.phase, text: li.textContent })),
      })`);
      expect(seen.status).toBe('completed');
      expect(seen.end).toBe('Done: 3 images');
      expectPhasesInOrder(seen.phases.map((p) => p.phase));
      for (const p of seen.phases) expect(p.text).toMatch(/ since \d\d?:\d\d:\d\d/);
      // No storedImageUrl in the example: the service's (the demo's mock's) images, decoded by the browser.
      const images = await loadedImages(page);
      expect(images).toHaveLength(3);
      for (const image of images) expect(image.width).toBeGreaterThan(0);
      // What the app prints holds no token (each page's is minted per load, never logged).
      expect(app.output()).not.toMatch(/token|v1\./);
    } finally {
      // Its whole process group (bash and node), and no orphan left should SIGINT not end it.
      const stopped = stopGroup(app, 'SIGINT');
      const timer = setTimeout(() => void stopGroup(app, 'SIGKILL'), 5_000);
      await stopped;
      clearTimeout(timer);
    }
  },
);

/** At least three phases, in the job's order, the last `completed`. */
function expectPhasesInOrder(names: string[]): void {
  expect(names.length).toBeGreaterThanOrEqual(3);
  expect(names).toEqual([...names].sort((a, b) => ORDER.indexOf(a) - ORDER.indexOf(b)));
  expect(names.at(-1)).toBe('completed');
}

/** The page's images once the browser decoded each: their path and natural width. */
async function loadedImages(page: Page): Promise<Array<{ src: string; width: number }>> {
  await page.waitForFunction('[...document.images].every((img) => img.complete)', undefined, { timeout: 30_000 });
  return page.evaluate<Array<{ src: string; width: number }>>(
    '[...document.images].map((img) => ({ src: new URL(img.src).pathname, width: img.naturalWidth }))',
  );
}
