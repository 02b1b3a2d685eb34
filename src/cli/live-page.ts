/**
 * The demo's live page: a loopback server that is the demo's "app". `/` is the page (src/progress/page.ts) with a
 * token minted for the demo's one job in it, `/progress` the progress stream, and `/images/...` the worker's stored
 * copies (the storage folder), so the page shows the copies the job made as their prompts settle.
 */
import { randomBytes } from 'node:crypto';
import { constants as fsConstants, promises as fs } from 'node:fs';
import { createServer, type Server } from 'node:http';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Client } from '@temporalio/client';
import { imageTypeOf } from '../contract/storage';
import { listen, localUrl } from '../listening';
import { progressPageHtml } from '../progress/page';
import { progressStream } from '../progress/stream';
import { mintProgressToken } from '../progress/tokens';

export interface LivePage {
  /** The page's URL (no token in it: the page carries its own). */
  url: string;
  close(): Promise<void>;
}

/**
 * Serves the live page of `workflowId` on loopback.
 *
 * @example
 * const page = await startLivePage({ client, workflowId, images: 'out/images' }); say(`live: ${page.url}`);
 */
export async function startLivePage(options: {
  client: Client;
  workflowId: string;
  /** The worker's storage folder: stored copies under it are served at /images/. */
  images: string;
  note?: string;
  port?: number;
}): Promise<LivePage> {
  const secret = randomBytes(32).toString('base64url');
  const folder = path.resolve(options.images);
  const stream = progressStream({
    client: options.client,
    secret,
    storedImageUrl: (location) => {
      if (!location.startsWith('file:')) return undefined;
      const relative = path.relative(folder, fileURLToPath(location));
      if (relative.startsWith('..') || path.isAbsolute(relative)) return undefined;
      return `/images/${relative.split(path.sep).map(encodeURIComponent).join('/')}`;
    },
  });
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://demo.invalid');
    if (url.pathname === '/progress') return stream.node(req, res);
    if (url.pathname === '/' && req.method === 'GET') {
      // A new token for each load: the page may stay open longer than one lives, and a reload gets a fresh one.
      const token = mintProgressToken({ secret, workflowId: options.workflowId, ttl: '1 hour' });
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
      return res.end(
        progressPageHtml({
          streamUrl: `/progress?token=${encodeURIComponent(token)}`,
          title: `tuneflow demo ${options.workflowId}`,
          note: options.note,
        }),
      );
    }
    if (url.pathname.startsWith('/images/') && req.method === 'GET') return void serveImage(folder, url, res);
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
  });
  await listen(server, options.port ?? 0, '127.0.0.1');
  const port = (server.address() as { port: number }).port;
  return {
    url: `${localUrl('127.0.0.1', port)}/`,
    async close() {
      stream.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A stored copy under `folder`, as an image (by its bytes' signature), or 404: never a file outside it. */
async function serveImage(folder: string, url: URL, res: import('node:http').ServerResponse): Promise<void> {
  const notFound = () => void res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
  let file: string;
  try {
    file = path.resolve(folder, ...url.pathname.slice('/images/'.length).split('/').map(decodeURIComponent));
  } catch {
    return notFound();
  }
  if (path.relative(folder, file).startsWith('..')) return notFound();
  let handle: fs.FileHandle | undefined;
  try {
    // Not through a link: only the files the worker wrote there.
    handle = await fs.open(file, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
    const head = Buffer.alloc(16);
    await handle.read(head, 0, 16, 0);
    const type = imageTypeOf(head)?.type;
    if (!type) throw new Error('not an image');
    res.writeHead(200, { 'content-type': type, 'cache-control': 'max-age=3600' });
    handle
      .createReadStream({ start: 0 })
      .on('error', () => res.destroy())
      .pipe(res);
  } catch {
    await handle?.close().catch(() => undefined);
    notFound();
  }
}
