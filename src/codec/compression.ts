/**
 * tuneflow's compressing payload codec. Activity payloads (the requests a run makes of the service and the service's
 * answers) are read by tuneflow's workers alone, and were most of a job's history bytes: each is the Payload proto deflated with
 * a preset dictionary of the service's field names, so even a 200-byte answer shrinks (a bare deflate gains little on
 * payloads that small). Workflow payloads (inputs, results, signals, queries, failures) stay as they are: Nexus
 * callers, other languages and the Web UI read them as stored. Decoding takes any payload: one the codec did not
 * encode passes through, so a worker that decodes can run beside one that does not encode, and histories recorded
 * before replay as they are.
 *
 * @example
 * const codec = new CompressionCodec({ compress: true });
 * await Worker.create({ ..., dataConverter: { payloadCodecs: [codec] } }); // TuneflowPlugin does this itself
 */
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import type { Payload, PayloadCodec, SerializationContext } from '@temporalio/common';
import { temporal } from '@temporalio/proto';

/** The encoding of a payload this codec wrote. `v1` names the dictionary below, which never changes under it. */
export const COMPRESSED_ENCODING = 'binary/tuneflow-deflate-v1';

/**
 * What a payload's data starts with to be compressed: JSON objects and arrays (tuneflow's activity arguments and
 * answers). A string (an activity's summary in its user metadata, which the Web UI shows) stays plain.
 */
const JSON_OBJECT = new Set(['{'.charCodeAt(0), '['.charCodeAt(0)]);

/** Below this many bytes of data a payload stays as it is: deflate's own few bytes would eat what it saves. */
export const MIN_COMPRESSED_BYTES = 64;

/**
 * The most a compressed payload may inflate to: twice Temporal's default 2 MB payload limit. Compressed payloads come
 * from the history, which a starter writes too (a workflow input); one that would inflate past this, or is not
 * deflate, passes through undecoded, and the run refuses its encoding instead of a worker running out of memory.
 */
export const MAX_DECOMPRESSED_BYTES = 4 * 1024 * 1024;

/**
 * The preset dictionary of `binary/tuneflow-deflate-v1`: the Payload proto's own prefix, the service's field names
 * and values, most frequent last (deflate reaches the dictionary's end cheapest). Frozen: a payload written with it
 * is read with it for the namespace's retention; another dictionary is another encoding (`-v2`).
 */
const DICTIONARY_V1 = Buffer.concat([
  Buffer.from(
    [
      '"characteristics":{"age":"","ethnicity":"","eye_color":"","hair_color":""},"flags":[],"verdict":"',
      '"reservations":[],"openReservations":,"ceilingMc":,"committedMc":,"reservedMc":,"releasedMc":,',
      '"reservedTotalMc":,"overMc":,"priceMc":,"costMc":,"window":"","spend":{},"owned":true,"preset":"',
      '"tenant":"","workflowId":"","runId":"","claimRunId":"","packId":,"promptIds":[],"onePage":true,',
      '"image_urls":["https://"],"image":"https://","url":"https://","field":"","key":"","path":"',
      '"prompt":{"text":"","num_images":},"tune":{"title":"","name":"","branch":"","model_type":"',
      '"base_tune_id":null,"token":"ohwx","expires_at":null,"eta":null,"model_type":null,"branch":"fast",',
      '"name":"man","title":"","user_error":null,"tune_id":,"images":[],"tuneId":,"num_images":4,',
      '"text":"ohwx man","brief":true,"cost_mc":null,"pack_id":null,"callback":"http://127.0.0.1:/callbacks/',
      '"started_training_at":null,"updated_at":"2026-","created_at":"2026-","trained_at":null,{"id":',
    ].join(''),
    'utf8',
  ),
  // Every payload's first bytes: metadata { encoding: "json/plain" }, then the data's tag.
  Buffer.from('0a160a08656e636f64696e67120a6a736f6e2f706c61696e12', 'hex'),
]);

export interface CompressionCodecOptions {
  /**
   * Compress activity payloads: every activity's, as a payload's context names no activity type, so on a worker
   * whose own workflows call activities of workers without this codec (another language, another queue), leave it
   * off. Off, the codec only decodes: every worker of a namespace is given the decoding codec before any one of
   * them compresses.
   * @default false
   */
  compress?: boolean;
}

/** The codec: compresses activity payloads (when `compress`), decodes every payload it wrote. */
export class CompressionCodec implements PayloadCodec {
  readonly #compress: boolean;

  constructor({ compress = false }: CompressionCodecOptions = {}) {
    this.#compress = compress;
  }

  /** Each activity payload compressed where that makes it smaller; every other payload as it is. */
  encode(payloads: Payload[], context?: SerializationContext): Promise<Payload[]> {
    if (!this.#compress || context?.type !== 'activity') return Promise.resolve(payloads);
    return Promise.resolve(payloads.map(compressed));
  }

  /** Each payload this codec wrote, as it was; every other payload as it is. */
  decode(payloads: Payload[]): Promise<Payload[]> {
    return Promise.resolve(payloads.map(decompressed));
  }
}

/**
 * The payload compressed, when it is JSON of an object or array, at least MIN_COMPRESSED_BYTES, and smaller so;
 * otherwise the payload itself.
 *
 * @example compressed(defaultPayloadConverter.toPayload({ id: 1, trained_at: null /* ... *\/ }))
 */
export function compressed(payload: Payload): Payload {
  const data = payload.data;
  if (!data || data.length < MIN_COMPRESSED_BYTES || !JSON_OBJECT.has(data[0]!)) return payload;
  if (encodingOf(payload) !== 'json/plain') return payload;
  const whole = temporal.api.common.v1.Payload.encode(payload).finish();
  // One the reader would refuse to inflate stays plain: the server's own payload limit then says no, as before.
  if (whole.length > MAX_DECOMPRESSED_BYTES) return payload;
  const deflated = deflateRawSync(whole, { dictionary: DICTIONARY_V1 });
  const written: Payload = { metadata: { encoding: Buffer.from(COMPRESSED_ENCODING) }, data: deflated };
  return encodedSize(written) < whole.length ? written : payload;
}

/**
 * The payload as it was before `compressed`, or the payload itself when the codec did not write it or it does not
 * inflate within MAX_DECOMPRESSED_BYTES. Synchronous: the readers of a fetched history (`tuneflow status`) use it
 * before the payload converter, as the SDK's codec runner does on a worker.
 *
 * @example defaultPayloadConverter.fromPayload(decompressed(event.activityTaskCompletedEventAttributes.result.payloads[0]))
 */
export function decompressed(payload: Payload): Payload {
  if (encodingOf(payload) !== COMPRESSED_ENCODING || !payload.data) return payload;
  try {
    const whole = inflateRawSync(payload.data, { dictionary: DICTIONARY_V1, maxOutputLength: MAX_DECOMPRESSED_BYTES });
    const decoded = temporal.api.common.v1.Payload.decode(whole);
    return { metadata: decoded.metadata ?? {}, data: decoded.data };
  } catch {
    return payload;
  }
}

/** Whether a payload is one this codec wrote. */
export function isCompressed(payload: Payload): boolean {
  return encodingOf(payload) === COMPRESSED_ENCODING;
}

function encodingOf(payload: Payload): string | undefined {
  const encoding = payload.metadata?.encoding;
  return encoding ? Buffer.from(encoding).toString('utf8') : undefined;
}

function encodedSize(payload: Payload): number {
  return temporal.api.common.v1.Payload.encode(payload).finish().length;
}
