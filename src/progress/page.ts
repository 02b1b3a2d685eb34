/**
 * The live page: one job's progress as a person watches it, from the progress stream (an EventSource, no framework):
 * the phases in order, each with the time it began and how long it took, what the job waits for, the images as their
 * prompts settle, and the end. One self-contained HTML document; the demo serves it, and an app may too.
 */

export interface ProgressPageOptions {
  /** The stream's URL as the page's browser reaches it, token included (`/progress?token=...`). */
  streamUrl: string;
  /** The page's heading. */
  title?: string;
  /** A line under the heading (the demo says its images are the mock's drawings). */
  note?: string;
}

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/**
 * The page's HTML.
 *
 * @example
 * res.end(progressPageHtml({ streamUrl: `/progress?token=${encodeURIComponent(token)}` }));
 */
export function progressPageHtml(options: ProgressPageOptions): string {
  const title = escapeHtml(options.title ?? 'Your tune');
  // In a script element: JSON with "<" escaped cannot end it.
  const stream = JSON.stringify(options.streamUrl).replace(/</g, '\\u003c');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${title}</title>
<style>
  body { font: 15px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 60rem; padding: 0 1rem; color: #1d232a; }
  h1 { font-size: 1.5rem; margin-bottom: .2rem; }
  .note, .muted { color: #5b6672; }
  #status { display: inline-block; padding: .1rem .55rem; border-radius: 1rem; background: #e8eef5; font-weight: 600; }
  #status[data-status="completed"] { background: #d9f2df; color: #1c6b33; }
  #status[data-status="failed"], #status[data-status="terminated"], #status[data-status="timed-out"] {
    background: #fbe0e0; color: #8c1d1d; }
  ol#phases { padding-left: 1.3rem; }
  ol#phases li { margin: .15rem 0; }
  ol#phases li.current { font-weight: 600; }
  .time { font-variant-numeric: tabular-nums; color: #5b6672; margin-left: .4rem; }
  #images { display: grid; grid-template-columns: repeat(auto-fill, minmax(11rem, 1fr)); gap: .8rem; margin-top: 1rem; }
  #images figure { margin: 0; }
  #images img { width: 100%; aspect-ratio: 1; object-fit: contain; border-radius: .4rem; background: #eef1f4; }
  #images figcaption { font-size: .8rem; color: #5b6672; }
  #end { margin-top: 1.2rem; font-weight: 600; }
</style>
</head>
<body>
<h1>${title}</h1>
${options.note ? `<p class="note">${escapeHtml(options.note)}</p>` : ''}
<p><span id="status" data-status="connecting">connecting</span> <span id="waiting" class="muted"></span></p>
<ol id="phases"></ol>
<p id="counts" class="muted"></p>
<div id="images"></div>
<p id="end" hidden></p>
<script>
(() => {
  const $ = (id) => document.getElementById(id);
  const clock = (iso) => new Date(iso).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
  const took = (ms) => {
    const s = Math.max(0, Math.round(ms / 1000));
    return s < 60 ? s + 's' : Math.floor(s / 60) + 'm' + String(s % 60).padStart(2, '0') + 's';
  };
  const shown = new Map();
  function render(view) {
    const status = $('status');
    status.dataset.status = view.status;
    status.textContent = view.status === 'running' ? (view.phase || 'starting') : view.status;
    $('waiting').textContent = view.waitingFor ? 'waiting for ' + view.waitingFor : '';
    const phases = $('phases');
    phases.replaceChildren(...view.phases.map((entry, i) => {
      const li = document.createElement('li');
      li.dataset.phase = entry.phase;
      li.dataset.since = entry.since;
      const next = view.phases[i + 1];
      const last = i === view.phases.length - 1;
      if (last && view.status === 'running') li.className = 'current';
      const time = document.createElement('span');
      time.className = 'time';
      time.textContent = clock(entry.since) + (next ? ' · ' + took(Date.parse(next.since) - Date.parse(entry.since)) : '');
      li.append(entry.phase, time);
      return li;
    }));
    if (view.prompts) {
      const p = view.prompts;
      const cost = view.cost && typeof view.cost.usd === 'number' ? ' · $' + view.cost.usd.toFixed(2) : '';
      $('counts').textContent = p.settled + ' of ' + p.total + ' prompts settled' + (p.failed ? ', ' + p.failed + ' failed' : '') + cost;
    }
    for (const image of view.images) {
      const key = image.promptId + '/' + image.index;
      const had = shown.get(key);
      if (had) {
        // The stored copy once the worker made it: the same image, from the app's storage.
        if (had.img.getAttribute('src') !== image.src) had.img.src = image.src;
        if (image.stored) had.caption.textContent = 'prompt ' + image.promptId + ' · stored';
        continue;
      }
      const figure = document.createElement('figure');
      const img = document.createElement('img');
      img.src = image.src;
      img.alt = 'prompt ' + image.promptId + ', image ' + (image.index + 1);
      img.loading = 'eager';
      const caption = document.createElement('figcaption');
      caption.textContent = 'prompt ' + image.promptId + (image.stored ? ' · stored' : '');
      figure.append(img, caption);
      shown.set(key, { img, caption });
      $('images').append(figure);
    }
  }
  const source = new EventSource(${stream});
  source.addEventListener('progress', (event) => render(JSON.parse(event.data)));
  source.addEventListener('end', (event) => {
    const view = JSON.parse(event.data);
    render(view);
    source.close();
    const end = $('end');
    end.hidden = false;
    end.dataset.status = view.status;
    end.textContent = view.status === 'completed'
      ? 'Done: ' + view.images.length + ' images' + (view.cost && typeof view.cost.usd === 'number' ? ', $' + view.cost.usd.toFixed(2) : '')
      : 'Ended ' + view.status + (view.failure ? ': ' + view.failure.message : '');
  });
  source.onerror = () => {
    if (source.readyState === EventSource.CLOSED) $('waiting').textContent = 'the stream is closed: reload to try again';
  };
})();
</script>
</body>
</html>
`;
}
