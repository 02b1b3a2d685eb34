/**
 * The demo's gallery: the run's images saved beside an `index.html` that shows the tune and, per prompt, its text,
 * settings and images (or its error). A static page with relative links: open it from disk, or copy the folder.
 */
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import type { Prompt, Tune } from './api/schemas';
import type { Cost } from './workflows/cost';

/** One image saved to disk. */
export interface SavedImage {
  promptId: number;
  index: number;
  /** The file's absolute path. */
  file: string;
  url: string;
}

/** What the gallery shows: the run and its result. */
export interface GalleryRun {
  workflowId: string;
  tune: Tune;
  prompts: readonly Prompt[];
  /** What the job cost, when the result says. */
  cost?: Cost;
}

/**
 * Saves every image of the prompts under `dir` as `prompt-<id>-<index>.<ext>`; returns the files written.
 * @example const saved = await saveImages(result.prompts, 'out/demo-1');
 */
export async function saveImages(prompts: readonly Prompt[], dir: string): Promise<SavedImage[]> {
  await fs.mkdir(dir, { recursive: true });
  const saved: SavedImage[] = [];
  for (const prompt of prompts) {
    for (const [index, url] of (prompt.images ?? []).entries()) {
      // fetch follows the redirects a CDN may answer with.
      const response = await fetch(url);
      if (!response.ok) throw new Error(`downloading ${url} answered ${response.status}`);
      const ext = path.extname(new URL(url).pathname) || '.png';
      const file = path.join(dir, `prompt-${prompt.id}-${index}${ext}`);
      await fs.writeFile(file, Buffer.from(await response.arrayBuffer()));
      saved.push({ promptId: prompt.id, index, file, url });
    }
  }
  return saved;
}

/**
 * Writes `index.html` in `dir` (where the images were saved) and returns its path.
 * @example const page = await writeGallery({ workflowId, tune, prompts }, saved, dir);
 */
export async function writeGallery(run: GalleryRun, saved: readonly SavedImage[], dir: string): Promise<string> {
  const file = path.join(dir, 'index.html');
  await fs.writeFile(file, galleryHtml(run, saved, dir));
  return file;
}

/** The gallery page; image links are relative to `dir`. */
export function galleryHtml(run: GalleryRun, saved: readonly SavedImage[], dir: string): string {
  const { tune } = run;
  const prompts = run.prompts.map((prompt) => {
    const images = saved
      .filter((s) => s.promptId === prompt.id)
      .map((s) => {
        const href = encodeURI(path.relative(dir, s.file).split(path.sep).join('/'));
        const alt = `prompt ${prompt.id}, image ${s.index}`;
        return `<a href="${attr(href)}"><img src="${attr(href)}" alt="${attr(alt)}" loading="lazy"></a>`;
      });
    const settings = [
      setting(
        'size',
        prompt.w !== undefined && prompt.h !== undefined ? `${String(prompt.w)} x ${String(prompt.h)}` : undefined,
      ),
      setting('seed', prompt.seed),
      setting('images', prompt.num_images),
      setting('created', prompt.created_at),
      setting('settled', prompt.trained_at),
    ].join('');
    const body = prompt.user_error
      ? `<p class="error">failed: ${text(prompt.user_error)}</p>`
      : `<div class="images">${images.join('') || '<p>no images</p>'}</div>`;
    return `<section class="prompt" id="prompt-${prompt.id}">
<h2>prompt ${prompt.id}</h2>
<p class="text">${text(prompt.text)}</p>
<dl>${settings}</dl>
${body}
</section>`;
  });
  const tuneFacts = [
    setting('id', tune.id),
    setting('title', tune.title),
    setting('class', tune.name),
    setting('branch', tune.branch),
    setting('model type', tune.model_type ?? (tune.model_type === null ? 'checkpoint' : undefined)),
    setting('trained at', tune.trained_at),
    setting('job cost', run.cost ? `${run.cost.mc} mc ($${run.cost.usd.toFixed(2)})` : undefined),
  ].join('');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>tuneflow ${text(run.workflowId)}</title>
<style>
body { font: 15px/1.4 system-ui, sans-serif; margin: 2rem; color: #222; background: #fafafa; }
h1 { font-size: 1.4rem; } h2 { font-size: 1.1rem; margin: 0 0 .3rem; }
dl { display: flex; flex-wrap: wrap; gap: .2rem 1.2rem; margin: .3rem 0; }
dt { color: #777; } dt::after { content: ':'; } dd { margin: 0 0 0 .3rem; }
.prompt { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 1rem; margin: 1rem 0; }
.text { font-style: italic; margin: .2rem 0; }
.images { display: flex; flex-wrap: wrap; gap: .6rem; }
.images img { height: 220px; border: 1px solid #ccc; }
.error { color: #a00; }
</style>
</head>
<body>
<h1>tuneflow run ${text(run.workflowId)}</h1>
<section class="tune"><h2>tune ${tune.id}</h2><dl>${tuneFacts}</dl></section>
${prompts.join('\n')}
</body>
</html>
`;
}

function setting(name: string, value: unknown): string {
  return value === undefined || value === null || value === ''
    ? ''
    : `<dt>${text(name)}</dt><dd>${text(String(value))}</dd>`;
}

function text(value: string): string {
  return value.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function attr(value: string): string {
  return text(value).replace(/"/g, '&quot;');
}
