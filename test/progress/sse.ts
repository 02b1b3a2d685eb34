/**
 * A viewer of the progress stream as a browser's EventSource reads it, over real HTTP (undici): the events in order
 * (id, event name, data), for the tests and the benchmark. No reconnection: a test asks for that itself.
 */
import { Agent, request } from 'undici';

export interface SseEvent {
  id?: string;
  event: string;
  data: string;
  /** When it arrived (ms since the epoch). */
  at: number;
}

export interface Viewer {
  status: number;
  events: SseEvent[];
  /** Resolves when the stream ends (the server closed it), with its events. */
  ended: Promise<SseEvent[]>;
  /** The first event that satisfies `predicate` (already come or to come). */
  until(predicate: (event: SseEvent) => boolean, timeoutMs?: number): Promise<SseEvent>;
  close(): void;
  /** The answer's body, when it was not a stream. */
  body?: string;
}

/**
 * Opens `url` as an EventSource would (Accept: text/event-stream, Last-Event-ID when given).
 *
 * @example
 * const viewer = await watch(`${base}/progress?token=${token}`); await viewer.ended;
 */
export async function watch(
  url: string,
  options: { lastEventId?: string; headers?: Record<string, string>; dispatcher?: Agent } = {},
): Promise<Viewer> {
  const abort = new AbortController();
  const response = await request(url, {
    headers: {
      accept: 'text/event-stream',
      ...(options.lastEventId !== undefined && { 'last-event-id': options.lastEventId }),
      ...options.headers,
    },
    signal: abort.signal,
    dispatcher: options.dispatcher,
  });
  const events: SseEvent[] = [];
  const waiters: Array<{ predicate: (e: SseEvent) => boolean; resolve: (e: SseEvent) => void }> = [];
  if (response.statusCode !== 200) {
    const body = await response.body.text();
    return {
      status: response.statusCode,
      events,
      body,
      ended: Promise.resolve(events),
      until: () => Promise.reject(new Error(`no stream: ${response.statusCode} ${body}`)),
      close: () => undefined,
    };
  }
  const ended = (async () => {
    let buffer = '';
    try {
      for await (const chunk of response.body) {
        buffer += chunk.toString();
        let cut: number;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const event: SseEvent = { event: 'message', data: '', at: Date.now() };
          let hasData = false;
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) continue;
            const [field, ...rest] = line.split(':');
            const value = rest.join(':').replace(/^ /, '');
            if (field === 'id') event.id = value;
            if (field === 'event') event.event = value;
            if (field === 'data') {
              event.data += (hasData ? '\n' : '') + value;
              hasData = true;
            }
          }
          if (!hasData) continue;
          events.push(event);
          for (const w of [...waiters])
            if (w.predicate(event)) {
              waiters.splice(waiters.indexOf(w), 1);
              w.resolve(event);
            }
        }
      }
    } catch {
      // closed by the viewer
    }
    return events;
  })();
  return {
    status: 200,
    events,
    ended,
    until(predicate, timeoutMs = 30_000) {
      const found = events.find(predicate);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no such event within ${timeoutMs} ms`)), timeoutMs);
        waiters.push({
          predicate,
          resolve: (e) => {
            clearTimeout(timer);
            resolve(e);
          },
        });
      });
    },
    close: () => abort.abort(),
  };
}
