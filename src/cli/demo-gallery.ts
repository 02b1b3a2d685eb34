/**
 * The demo's gallery: the run's images saved beside an `index.html` that shows the tune and, per prompt, its text,
 * settings and images (or its error), says when the images are the mock service's, and links the run's history in
 * the Web UI. A static page with relative image links: open it from disk, or copy the folder.
 */
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ResultPrompt, ResultTune } from '../contract/results';
import type { Cost } from '../contract/cost';

/** One image saved to disk. */
export interface SavedImage {
  promptId: number;
  index: number;
  /** The file's absolute path. */
  file: string;
  url: string;
  /** The worker's stored copy (checked by its SHA-256), not a download of the demo's. */
  stored?: boolean;
}

/** A prompt the gallery shows. */
export type GalleryPrompt = ResultPrompt & { w?: unknown; h?: unknown; seed?: unknown };

/** What the gallery shows: the run and its result. */
export interface GalleryRun {
  workflowId: string;
  tune: ResultTune;
  /** The result's prompts; a size and seed are shown when the prompt carries them (a whole service object does). */
  prompts: readonly GalleryPrompt[];
  /** What the job cost, when the result says. */
  cost?: Cost;
  /** The images are the mock service's drawings, not a model's. */
  mockImages?: boolean;
  /** The run's page in the Temporal Web UI, when the demo started one. */
  history?: string;
  /** The Web UI stays up after the demo (`--keep`): the history link keeps working. */
  keptUp?: boolean;
}

/**
 * Saves every image of the prompts under `dir` as `prompt-<id>-<index>.<ext>`; returns the files written.
 * @example const saved = await saveImages(result.prompts, 'out/demo-1');
 */
export async function saveImages(prompts: readonly ResultPrompt[], dir: string): Promise<SavedImage[]> {
  await fs.mkdir(dir, { recursive: true });
  const saved: SavedImage[] = [];
  for (const prompt of prompts) {
    for (const [index, url] of (prompt.images ?? []).entries()) {
      // The worker's copy where it made one (its storage, a folder): the gallery shows it, and downloads nothing.
      const stored = prompt.stored_images?.[index]?.location;
      if (stored?.startsWith('file:')) {
        saved.push({ promptId: prompt.id, index, file: fileURLToPath(stored), url, stored: true });
        continue;
      }
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
    const settings = facts([
      [
        'size',
        prompt.w !== undefined && prompt.h !== undefined ? `${String(prompt.w)} x ${String(prompt.h)}` : undefined,
      ],
      ['seed', prompt.seed],
      ['images', prompt.num_images],
      ['created', prompt.created_at],
      ['settled', prompt.trained_at],
    ]);
    const body = prompt.user_error
      ? `<p class="error">failed: ${text(prompt.user_error)}</p>`
      : `<div class="images">${images.join('') || '<p>no images</p>'}</div>`;
    return `<section class="prompt" id="prompt-${prompt.id}">
<h2>prompt ${prompt.id}</h2>
<blockquote>${text(prompt.text)}</blockquote>
${settings}
${body}
</section>`;
  });
  const tuneFacts = facts([
    ['id', tune.id],
    ['title', tune.title],
    ['class', tune.name],
    ['branch', tune.branch],
    ['model type', tune.model_type ?? (tune.model_type === null ? 'checkpoint' : undefined)],
    ['trained at', tune.trained_at],
    ['job cost', run.cost ? `${run.cost.mc} mc ($${run.cost.usd.toFixed(2)})` : undefined],
  ]);
  const notes: string[] = [];
  if (run.mockImages)
    notes.push(
      `<p class="note mock">These images are the mock service's: coloured patterns with the prompt's id, seed and size
written in, drawn in place of a model's pictures. With <code>TUNEFLOW_API_KEY</code> set, the demo runs on the real
service instead.</p>`,
    );
  if (run.history)
    notes.push(
      `<p class="note">The run's history, event by event: <a href="${attr(run.history)}">${text(run.history)}</a>${
        run.keptUp
          ? ' (the demo keeps its Temporal server up until Ctrl-C).'
          : ' (answers only while the demo runs: <code>tuneflow demo --keep</code> keeps it up).'
      }</p>`,
    );
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>tuneflow ${text(run.workflowId)}</title>
<style>
body { font: 15px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 70rem; padding: 0 1rem; color: #222; background: #fafafa; }
h1 { font-size: 1.4rem; margin-bottom: .4rem; } h2 { font-size: 1.1rem; margin: 0 0 .4rem; }
.note { background: #fff8e1; border: 1px solid #f0d98c; border-radius: 6px; padding: .6rem .8rem; margin: .6rem 0; }
.note:not(.mock) { background: #eef4fb; border-color: #c4d7ee; }
table.facts { border-collapse: collapse; margin: .4rem 0 .8rem; }
table.facts th { text-align: left; font-weight: normal; color: #666; padding: .1rem 1.2rem .1rem 0; white-space: nowrap; vertical-align: top; }
table.facts td { padding: .1rem 0; font-variant-numeric: tabular-nums; }
section { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 1rem 1.2rem; margin: 1rem 0; }
blockquote { font-style: italic; margin: .2rem 0 .4rem; padding-left: .8rem; border-left: 3px solid #ccc; }
.images { display: flex; flex-wrap: wrap; gap: .6rem; }
.images img { height: 220px; border: 1px solid #ccc; }
.error { color: #a00; }
</style>
</head>
<body>
<h1>tuneflow run ${text(run.workflowId)}</h1>
${notes.join('\n')}
<section class="tune"><h2>tune ${tune.id}</h2>${tuneFacts}</section>
${prompts.join('\n')}
</body>
</html>
`;
}

/** Labels in one column, values in the next; rows without a value are left out. */
function facts(rows: Array<[string, unknown]>): string {
  const shown = rows.filter(([, value]) => value !== undefined && value !== null && value !== '');
  return `<table class="facts">${shown
    .map(([label, value]) => `<tr><th>${text(label)}</th><td>${text(String(value))}</td></tr>`)
    .join('')}</table>`;
}

function text(value: string): string {
  return value.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function attr(value: string): string {
  return text(value).replace(/"/g, '&quot;');
}
