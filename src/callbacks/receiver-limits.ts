/**
 * What the receiver holds for all its clients together: open connections (in all, and per address) and the body
 * bytes of requests being read. Each request is bounded on its own (receiver.ts); these bound their sum, so a crowd
 * with no URL at all, or a URL holder with many connections, cannot take the memory or the file descriptors the
 * service's genuine callbacks need. When a bound is reached the newcomer is refused at once (closed, or 503 with
 * Retry-After), and the longest-idle connection is closed to make room for a new one: a genuine callback is served
 * again as soon as room frees.
 */
import type { Socket } from 'node:net';
import type { Duration } from '../duration';

export interface ReceiverLimits {
  /**
   * Connections open at once. At the limit a new connection closes the longest-idle one (no request under way), or
   * is itself closed when every one is busy. Keep it below the process's file descriptor limit.
   * @default 1000
   */
  maxConnections?: number;
  /**
   * Connections open at once from one address. A proxy or ingress in front of the receiver is one address: raise this
   * to `maxConnections` there.
   * @default 256
   */
  maxConnectionsPerPeer?: number;
  /**
   * Body bytes held across every request being read; a request that would pass it is answered 503 (Retry-After: 1)
   * and its connection closed. One run's requests hold at most a quarter of it (or one body of the largest size a
   * route takes, if more), so one signed URL cannot hold it all.
   * @default 8 MiB
   */
  maxBufferedBytes?: number;
  /**
   * How long a connection stays open with no request under way (keep-alive).
   * @default '5 seconds'
   */
  idleTimeout?: Duration;
}

export const DEFAULT_RECEIVER_LIMITS = {
  maxConnections: 1000,
  maxConnectionsPerPeer: 256,
  maxBufferedBytes: 8 * 1024 * 1024,
  idleTimeout: '5 seconds',
} as const satisfies Required<ReceiverLimits>;

/**
 * The open connections, each idle or busy, by address. Idle ones are kept oldest first, so the one to close for room
 * is found at once.
 *
 * @example
 * server.on('connection', (socket) => connections.admit(socket));
 */
export class Connections {
  /** Idle sockets, in the order they became idle. */
  private readonly idle = new Set<Socket>();
  private readonly byPeer = new Map<string, Set<Socket>>();
  private open = 0;
  /** Connections closed to make room, or refused. */
  shed = 0;

  constructor(
    private readonly max: number,
    private readonly maxPerPeer: number,
  ) {}

  /** A new connection: admitted (making room if needed), or closed. */
  admit(socket: Socket): void {
    const peer = socket.remoteAddress ?? '';
    const mine = this.byPeer.get(peer) ?? new Set<Socket>();
    if (mine.size >= this.maxPerPeer && !this.evict(mine)) return this.refuse(socket);
    if (this.open >= this.max && !this.evict(this.idle)) return this.refuse(socket);
    this.open++;
    mine.add(socket);
    this.byPeer.set(peer, mine);
    this.idle.add(socket);
    socket.once('close', () => {
      this.open--;
      this.idle.delete(socket);
      mine.delete(socket);
      if (mine.size === 0 && this.byPeer.get(peer) === mine) this.byPeer.delete(peer);
    });
  }

  /** A request started on the socket. */
  busy(socket: Socket): void {
    this.idle.delete(socket);
  }

  /** The socket's request was answered: idle again, the newest idle. */
  rest(socket: Socket): void {
    if (!socket.destroyed) this.idle.add(socket);
  }

  /** Closes the longest-idle connection among `sockets`; false when none is idle. */
  private evict(sockets: Set<Socket>): boolean {
    for (const socket of sockets)
      if (this.idle.has(socket)) {
        this.shed++;
        this.idle.delete(socket);
        socket.destroy();
        return true;
      }
    return false;
  }

  private refuse(socket: Socket): void {
    this.shed++;
    socket.destroy();
  }
}

/**
 * The body bytes held across requests: taken as each chunk arrives, given back when the request ends either way. One
 * run's requests (one signed URL's holder) hold at most `perRun` of them, so a leaked URL's stalled bodies cannot
 * take the room every other run's callbacks need: past its share a run's request is answered 503 as at the limit.
 *
 * @example
 * if (!buffered.take(run, chunk.length)) return busy(res);
 */
export class BufferedBytes {
  private held = 0;
  private readonly byRun = new Map<string, number>();

  constructor(
    private readonly max: number,
    private readonly perRun: number = max,
  ) {}

  /** Takes `bytes` of the budget for `run`; false (and nothing taken) when they would pass it or the run's share. */
  take(run: string, bytes: number): boolean {
    if (!this.fits(run, bytes)) return false;
    this.held += bytes;
    this.byRun.set(run, (this.byRun.get(run) ?? 0) + bytes);
    return true;
  }

  /** Whether `bytes` more for `run` would fit now. */
  fits(run: string, bytes: number): boolean {
    return this.held + bytes <= this.max && (this.byRun.get(run) ?? 0) + bytes <= this.perRun;
  }

  give(run: string, bytes: number): void {
    this.held -= bytes;
    const left = (this.byRun.get(run) ?? 0) - bytes;
    if (left > 0) this.byRun.set(run, left);
    else this.byRun.delete(run);
  }

  get bytes(): number {
    return this.held;
  }
}
