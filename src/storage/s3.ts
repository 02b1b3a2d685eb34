/**
 * Any S3-compatible store (AWS S3, R2, GCS's S3 API, SeaweedFS, MinIO, Ceph) through the AWS SDK's S3 client. Each
 * image is one PutObject (no multipart: an image is bounded and held in memory, so a killed worker leaves no upload
 * open) with `If-None-Match: *`, which a store that already has the key refuses (412): the image is written once,
 * whoever writes it. The SDK's own checksums are asked only where an operation requires them, as some S3-compatible
 * stores refuse its newer default ones; the digest that counts is tuneflow's SHA-256 of the bytes read back.
 */
import type { S3Client, S3ClientConfig } from '@aws-sdk/client-s3';
import type * as S3 from '@aws-sdk/client-s3';
import { checkKey, type ImageStore } from './store';

export interface S3StoreOptions {
  bucket: string;
  /** A prefix for every key (no leading or trailing `/`). @default none */
  prefix?: string;
  /** The store's URL, for a store that is not AWS S3 (`http://127.0.0.1:8333`, R2's account URL). @default AWS */
  endpoint?: string;
  /** @default AWS_REGION, else us-east-1 */
  region?: string;
  /** @default the SDK's chain: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile, a role */
  credentials?: S3ClientConfig['credentials'];
  /** Bucket in the path, not the host name: what most self-hosted stores need. @default true with `endpoint` */
  forcePathStyle?: boolean;
}

export class S3Store implements ImageStore {
  readonly name: string;
  readonly #bucket: string;
  readonly #prefix: string;
  readonly #client: S3Client;
  /** The SDK, loaded by the first store made: a worker without S3 storage never loads it. */
  readonly #sdk: typeof S3;

  constructor(options: S3StoreOptions) {
    if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(options.bucket ?? ''))
      throw new TypeError(`S3Store: bucket ${JSON.stringify(options.bucket)} is not an S3 bucket name`);
    const prefix = (options.prefix ?? '').replace(/^\/+|\/+$/g, '');
    if (prefix) checkKey(prefix);
    this.#bucket = options.bucket;
    this.#prefix = prefix ? `${prefix}/` : '';
    this.name = `s3://${this.#bucket}/${this.#prefix}`;
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    this.#sdk = require('@aws-sdk/client-s3') as typeof S3;
    this.#client = new this.#sdk.S3Client({
      region: options.region ?? process.env.AWS_REGION ?? 'us-east-1',
      endpoint: options.endpoint,
      forcePathStyle: options.forcePathStyle ?? options.endpoint !== undefined,
      credentials: options.credentials,
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      // Temporal retries the activity; one attempt is one try per request.
      maxAttempts: 1,
    });
  }

  location(key: string): string {
    return `s3://${this.#bucket}/${this.#keyOf(key)}`;
  }

  async write(
    key: string,
    bytes: Uint8Array,
    meta: { contentType: string; sha256: string },
    signal?: AbortSignal,
  ): Promise<'written' | 'existed'> {
    try {
      await this.#client.send(
        new this.#sdk.PutObjectCommand({
          Bucket: this.#bucket,
          Key: this.#keyOf(key),
          Body: bytes,
          ContentLength: bytes.length,
          ContentType: meta.contentType,
          IfNoneMatch: '*',
          Metadata: { sha256: meta.sha256 },
        }),
        { abortSignal: signal },
      );
      return 'written';
    } catch (err) {
      if (err instanceof this.#sdk.S3ServiceException && err.$metadata.httpStatusCode === 412) return 'existed';
      throw err;
    }
  }

  async read(key: string, signal?: AbortSignal): Promise<Uint8Array | undefined> {
    try {
      const answer = await this.#client.send(
        new this.#sdk.GetObjectCommand({ Bucket: this.#bucket, Key: this.#keyOf(key) }),
        { abortSignal: signal },
      );
      return answer.Body ? await answer.Body.transformToByteArray() : new Uint8Array();
    } catch (err) {
      if (err instanceof this.#sdk.NoSuchKey) return undefined;
      if (err instanceof this.#sdk.S3ServiceException && err.$metadata.httpStatusCode === 404) return undefined;
      throw err;
    }
  }

  close(): void {
    this.#client.destroy();
  }

  #keyOf(key: string): string {
    const full = this.#prefix + checkKey(key);
    if (Buffer.byteLength(full) > 1024)
      throw new TypeError(`storage key ${JSON.stringify(full.slice(0, 80))}...: S3 keys are at most 1024 bytes`);
    return full;
  }
}
