/**
 * Listening on a port, as the servers tuneflow starts do (the callback receiver, the mock service): a bind that fails
 * (a taken port) rejects, and the URL a client on this machine reaches the server at.
 */
import type { Server } from 'node:net';

/**
 * Listens on `port` and `host`; an error while binding rejects.
 *
 * @example
 * await listen(server, 0, '127.0.0.1');
 */
export function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/**
 * The URL a local client uses for a server on `host` and `port`: the wildcard addresses become loopback, and an IPv6
 * address gets its brackets.
 *
 * @example
 * localUrl('0.0.0.0', 3001) // 'http://127.0.0.1:3001'
 */
export function localUrl(host: string, port: number): string {
  return `http://${urlHost(host)}:${port}`;
}

function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}
