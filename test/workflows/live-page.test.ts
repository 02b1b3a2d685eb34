/**
 * The demo's live page in a real browser: headless Chromium (the build @sparticuz/chromium ships inside its npm
 * package, so `npm ci` brings it; driven by playwright-core) opens the page `tuneflow demo --keep` prints, and sees
 * what a person sees: at least three phases in order, each with its time, the images loaded (decoded, not only
 * linked), and the end. The README's screenshot of the page is made from this run (TUNEFLOW_SCREENSHOTS=1 writes it).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { chromium as playwright, type Browser } from 'playwright-core';
import { startDemo } from './demo-process';
import { devServerTest } from './environment';

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
beforeEach(() => (out = fs.mkdtempSync(path.join(os.tmpdir(), 'tuneflow-live-'))));
afterEach(() => fs.rmSync(out, { recursive: true, force: true }));

devServerTest(
  'the demo live page shows the phases in order with their times, the images loaded, and the end',
  async () => {
    const demo = startDemo(out, ['--keep']);
    let browser: Browser | undefined;
    try {
      const [, url] = await demo.line(/^live: {6}(http:\/\/127\.0\.0\.1:\d+\/)$/);
      browser = await launchChromium();
      const page = await browser.newPage({ viewport: { width: 1000, height: 720 } });
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
      const names = seen.phases.map((p) => p.phase);
      expect(names.length).toBeGreaterThanOrEqual(3);
      expect(names).toEqual([...names].sort((a, b) => ORDER.indexOf(a) - ORDER.indexOf(b)));
      expect(names.at(-1)).toBe('completed');
      for (const [i, p] of seen.phases.entries()) {
        // A clock time, and how long the phase took for every phase but the last.
        expect(p.time).toMatch(i < seen.phases.length - 1 ? /^\d\d:\d\d:\d\d( [AP]M)? · \d+s$/ : /^\d\d:\d\d:\d\d/);
        if (i > 0) expect(Date.parse(p.since)).toBeGreaterThanOrEqual(Date.parse(seen.phases[i - 1]!.since));
      }
      // Every image decoded by the browser: loaded from the worker's stored copies the page serves.
      await page.waitForFunction('[...document.images].every((img) => img.complete)', undefined, { timeout: 30_000 });
      const images = await page.evaluate<Array<{ src: string; width: number }>>(
        '[...document.images].map((img) => ({ src: new URL(img.src).pathname, width: img.naturalWidth }))',
      );
      expect(images).toHaveLength(3);
      for (const image of images) {
        expect(image.src).toMatch(/^\/images\/.+\.png$/);
        expect(image.width).toBeGreaterThan(0);
      }
      const shot = process.env.TUNEFLOW_SCREENSHOTS === '1' ? SCREENSHOT : path.join(out, 'live-page.png');
      await page.screenshot({ path: shot, fullPage: true });
      expect(fs.statSync(shot).size).toBeGreaterThan(10_000);
    } finally {
      await browser?.close();
      demo.child.kill('SIGINT');
      await demo.exited;
    }
  },
);
