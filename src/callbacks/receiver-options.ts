/**
 * The callback receiver's options (each with its default) and what they resolve to: every option checked, and named
 * when wrong, before anything listens.
 */
import type { Logger } from '@temporalio/common';
import type { CallbackOutcome } from '../metrics';
import { isPort } from '../config';
import { type Duration, durationToMs } from '../duration';
import { createJsonLogger } from '../logging';
import { RefusalTally } from './answers';
import { BufferedBytes, Connections, DEFAULT_RECEIVER_LIMITS, type ReceiverLimits } from './receiver-limits';
import type { Signaler } from './signaler';
import type { CallbackSigner } from './signing';
import { CALLBACK_ROUTES, type CallbackRoute } from './unwrap';
import { WakeUpGate } from './wake-up-gate';

export interface CallbackReceiverOptions {
  /**
   * Port to listen on; 0 picks a free one (read it from the returned `url`).
   * @default 0
   */
  port?: number;
  /**
   * Interface to listen on. All interfaces, because the service (or the proxy in front of the receiver) must reach
   * it; every callback is authenticated by its signature. Use '127.0.0.1' to keep it local.
   * @default '0.0.0.0'
   */
  host?: string;
  /** Checks the signature of every callback URL. */
  signer: CallbackSigner;
  /** Wakes the runs. */
  signaler: Signaler;
  /**
   * Largest body accepted, for every kind; larger ones are answered 413 without being read into memory.
   * @default 64 KiB for a tune or a prompt, 512 KiB for a pack's prompts (a real callback is a few KB)
   */
  maxBodyBytes?: number;
  /**
   * A callback that repeats one (same objects, same body) that woke its run within this time is answered 200 without
   * a signal.
   * @default '10 seconds'
   */
  coalesceWindow?: Duration;
  /**
   * Signals one run may be sent: `burst` at once, then `perMinute` more each minute; past it, 200 and no signal (the
   * service never retries: a callback is never made to fail for what others spent).
   * @default { burst: 256, perMinute: 2 }
   */
  runBudget?: { burst: number; perMinute: number };
  /**
   * How long a client may take to send its headers, and its whole request; a slower one is answered 408 and closed,
   * so slow clients hold no connection for long.
   * @default { headers: '10 seconds', request: '30 seconds' }
   */
  clientTimeouts?: { headers: Duration; request: Duration };
  /**
   * What the receiver holds for all clients together: connections in all and per address, idle time, and the body
   * bytes of requests being read (receiver-limits.ts).
   * @default DEFAULT_RECEIVER_LIMITS: 1000 connections, 256 per address, 8 MiB of bodies, 5 seconds idle
   */
  limits?: ReceiverLimits;
  /**
   * Refused requests are logged as counts, one line per interval, never a line each (nor their URLs).
   * @default '1 minute'
   */
  refusalLogInterval?: Duration;
  /**
   * Where the structured log lines go (never signatures or the secret).
   * @default createJsonLogger(process.stderr, 'INFO')
   */
  logger?: Logger;
  /**
   * Told what became of each request (src/metrics.ts `callbackCounter`: the worker's metrics).
   * @default none
   */
  countCallback?: (outcome: CallbackOutcome) => void;
}

/** What the receiver runs with: every option checked, and named when wrong, before anything listens. */
export interface ReceiverSettings {
  signer: CallbackSigner;
  signaler: Signaler;
  port: number;
  host: string;
  logger: Logger;
  countCallback: (outcome: CallbackOutcome) => void;
  /** The largest body of a route: the option for every kind, or the route's own. */
  limitOf(route: CallbackRoute): number;
  gate: WakeUpGate;
  refusals: RefusalTally;
  headersTimeout: number;
  requestTimeout: number;
  idleTimeout: number;
  connections: Connections;
  buffered: BufferedBytes;
}

/** The largest body any route takes: one run's share of the buffered bytes holds at least one. */
const LARGEST_BODY_BYTES = Math.max(...[...CALLBACK_ROUTES.values()].map((route) => route.maxBodyBytes));

/**
 * The settings of `options`, checked.
 *
 * @example
 * const settings = receiverSettings({ signer, signaler, port: 3001 }); // settings.limitOf(route): that route's largest body
 */
export function receiverSettings(options: CallbackReceiverOptions): ReceiverSettings {
  const { signer, signaler } = options;
  const port = options.port ?? 0;
  const maxBodyBytes = options.maxBodyBytes;
  if (!signer || typeof signer.verify !== 'function') throw new TypeError('signer: must be a CallbackSigner');
  if (!signaler || typeof signaler.signal !== 'function') throw new TypeError('signaler: must be a Signaler');
  if (!isPort(port)) throw new TypeError('port: must be an integer from 0 to 65535');
  if (maxBodyBytes !== undefined && !(Number.isInteger(maxBodyBytes) && maxBodyBytes >= 1))
    throw new TypeError('maxBodyBytes: must be a positive integer');
  const budget = options.runBudget;
  if (budget !== undefined && !(Number.isInteger(budget.burst) && budget.burst >= 1 && budget.perMinute >= 0))
    throw new TypeError('runBudget: burst must be a positive integer and perMinute a number of 0 or more');
  const coalesceMs = durationToMs(options.coalesceWindow ?? '10 seconds', 'coalesceWindow');
  const refusalLogMs = durationToMs(options.refusalLogInterval ?? '1 minute', 'refusalLogInterval');
  const headersTimeout = durationToMs(options.clientTimeouts?.headers ?? '10 seconds', 'clientTimeouts.headers');
  const requestTimeout = durationToMs(options.clientTimeouts?.request ?? '30 seconds', 'clientTimeouts.request');
  if (!(headersTimeout >= 1 && requestTimeout >= headersTimeout))
    throw new TypeError('clientTimeouts: headers must be positive and request at least as long as headers');
  const limits = { ...DEFAULT_RECEIVER_LIMITS, ...options.limits };
  for (const name of ['maxConnections', 'maxConnectionsPerPeer', 'maxBufferedBytes'] as const)
    if (!(Number.isInteger(limits[name]) && limits[name] >= 1))
      throw new TypeError(`limits.${name}: must be a positive integer`);
  const idleTimeout = durationToMs(limits.idleTimeout, 'limits.idleTimeout');
  const logger = options.logger ?? createJsonLogger();
  const countCallback = options.countCallback ?? (() => undefined);
  return {
    countCallback,
    signer,
    signaler,
    port,
    host: options.host ?? '0.0.0.0',
    logger,
    limitOf: (route) => maxBodyBytes ?? route.maxBodyBytes,
    gate: new WakeUpGate({ coalesceMs, ...budget }),
    refusals: new RefusalTally(logger, refusalLogMs, countCallback),
    headersTimeout,
    requestTimeout,
    idleTimeout,
    connections: new Connections(limits.maxConnections, limits.maxConnectionsPerPeer),
    buffered: new BufferedBytes(
      limits.maxBufferedBytes,
      Math.max(Math.floor(limits.maxBufferedBytes / 4), maxBodyBytes ?? LARGEST_BODY_BYTES),
    ),
  };
}
