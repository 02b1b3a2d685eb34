// An app's own page for one job, live: its server mints a read token for the job the user may watch and mounts
// tuneflow's progress stream; the page reads the stream with an EventSource and draws the phases, the images and the
// end. node:http and no framework: an Express, Fastify, Hono or Next.js app does the same in its own routes.
//
//   PROGRESS_SECRET=... TEMPORAL_ADDRESS=localhost:7233 node examples/progress-page/server.mjs
//   open http://127.0.0.1:3000/jobs/<the job's key>
import { createServer } from 'node:http';
import { Client, Connection } from '@temporalio/client';
import { mintProgressToken, progressStream } from 'tuneflow-temporal';

const secret = process.env.PROGRESS_SECRET; // the app's own key for its tokens: 16 characters at least
const connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS ?? 'localhost:7233' });
const client = new Client({ connection, namespace: process.env.TEMPORAL_NAMESPACE ?? 'default' });
const stream = progressStream({ client, secret });

const server = createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://app.invalid');
  if (url.pathname === '/progress') return stream.node(req, res);
  const key = keyOf(url.pathname);
  if (key && req.method === 'GET') {
    if (!mayWatch(req, key)) return res.writeHead(403, { 'content-type': 'text/plain' }).end('not yours\n');
    const token = mintProgressToken({ secret, workflowId: key, ttl: '15 minutes' });
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    return res.end(page(`/progress?token=${encodeURIComponent(token)}`));
  }
  res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
});
server.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
  console.log(`listening: http://127.0.0.1:${server.address().port}/jobs/<key>`);
});
process.once('SIGINT', () => {
  stream.close();
  server.closeAllConnections();
  server.close(() => connection.close().catch(() => undefined));
});

/**
 * Whether the request's signed-in user may watch job `key`: the app's own check (its session, its orders table). The
 * token minted after it reads this job and no other, so this is the only place a user is matched to a job.
 */
function mayWatch(_req, _key) {
  return true; // this example has no users: replace with the app's own check
}

/** The job's key in `/jobs/<key>`, or undefined (no such path, or not a URI component). */
function keyOf(pathname) {
  const match = /^\/jobs\/([^/]{1,1000})$/.exec(pathname);
  try {
    return match ? decodeURIComponent(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** The page: each event of the stream is the job's whole state, so drawing it again is all a page does. */
function page(streamUrl) {
  return `<!doctype html>
<meta charset="utf-8">
<meta name="referrer" content="no-referrer">
<title>Your photos are training</title>
<h1>Your photos are training</h1>
<p id="status">connecting</p>
<ol id="phases"></ol>
<div id="images"></div>
<p id="end" hidden></p>
<script>
  const $ = (id) => document.getElementById(id);
  function draw(view) {
    $('status').textContent = view.status === 'running' ? (view.waitingFor ?? view.phase ?? 'starting') : view.status;
    $('phases').replaceChildren(...view.phases.map(({ phase, since }) => {
      const li = document.createElement('li');
      li.dataset.phase = phase;
      li.textContent = phase + ' since ' + new Date(since).toLocaleTimeString();
      return li;
    }));
    $('images').replaceChildren(...view.images.map((image) => {
      const img = document.createElement('img');
      img.src = image.src;
      img.width = 160;
      return img;
    }));
  }
  const source = new EventSource(${JSON.stringify(streamUrl)});
  source.addEventListener('progress', (event) => draw(JSON.parse(event.data)));
  source.addEventListener('end', (event) => {
    const view = JSON.parse(event.data);
    draw(view);
    source.close();
    $('end').hidden = false;
    $('end').textContent = view.status === 'completed' ? 'Done: ' + view.images.length + ' images' : 'Ended ' + view.status;
  });
</script>
`;
}
