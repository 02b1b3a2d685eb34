/**
 * The soak's storage (`--storage folder|s3`): every worker copies each image to one store, a folder or a SeaweedFS
 * bucket with versioning (src/s3-server); the judge then holds every completed job's images to it: each stored, with
 * its SHA-256 (none lost), and each written once (no second object or version for an image).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ListObjectVersionsCommand, S3Client } from '@aws-sdk/client-s3';
import { startS3Server, type S3Server } from '../../src/s3-server';
import { checkStoredImages, FolderStore, S3Store, type ImageStore } from '../../src/storage';
import type { JobOutcome } from './judge';

export interface StorageFigures {
  kind: 'folder' | 's3';
  /** Images the completed jobs' results name. */
  images: number;
  /** Of them, in storage with their SHA-256. */
  stored: number;
  lost: number;
  /** Objects (a folder's files, a bucket's versions) beyond one per image. */
  storedTwice: number;
  objects: number;
}

export class SoakStorage {
  private constructor(
    readonly kind: 'folder' | 's3',
    /** The workers' variables. */
    readonly env: Record<string, string>,
    private readonly store: ImageStore,
    private readonly where: { folder?: string; s3?: S3Server; prefix?: string },
  ) {}

  static async start(kind: 'folder' | 's3', dir: string, runId: string): Promise<SoakStorage> {
    if (kind === 'folder') {
      const folder = path.join(dir, 'images');
      fs.mkdirSync(folder, { recursive: true });
      return new SoakStorage(kind, { TUNEFLOW_STORAGE: folder }, new FolderStore(folder), { folder });
    }
    const s3 = await startS3Server();
    const prefix = `soak-${runId}`;
    const env = {
      TUNEFLOW_STORAGE: `s3://${s3.bucket}/${prefix}`,
      TUNEFLOW_STORAGE_ENDPOINT: s3.endpoint,
      AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey,
      AWS_REGION: 'us-east-1',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    };
    const store = new S3Store({ bucket: s3.bucket, prefix, endpoint: s3.endpoint, credentials: s3.credentials });
    return new SoakStorage(kind, env, store, { s3, prefix });
  }

  /** Every completed job's images held to the store; a violation for each lost or twice-stored image. */
  async judge(outcomes: readonly JobOutcome[]): Promise<{ figures: StorageFigures; violations: string[] }> {
    const jobs = outcomes
      .filter((o) => o.status === 'completed' && o.resultPromptList)
      .map((o) => ({ workflowId: o.job.workflowId, prompts: o.resultPromptList! }));
    const check = await checkStoredImages(this.store, jobs, { concurrency: 16 });
    const objects = await this.objects();
    const figures: StorageFigures = {
      kind: this.kind,
      images: check.images,
      stored: check.stored,
      lost: check.problems.length,
      storedTwice: Math.max(0, objects - check.images),
      objects,
    };
    const violations = check.problems
      .slice(0, 20)
      .map((p) => `${p.workflowId}: prompt ${p.promptId} image ${p.index} ${p.problem} in storage`);
    if (figures.storedTwice) violations.push(`${figures.storedTwice} objects in storage beyond one per image`);
    return { figures, violations };
  }

  /** A folder's files (a killed write's `.partial` aside), or every version under the bucket's prefix. */
  private async objects(): Promise<number> {
    if (this.where.folder)
      return fs
        .readdirSync(this.where.folder, { recursive: true, withFileTypes: true })
        .filter((f) => f.isFile() && !f.name.endsWith('.partial')).length;
    const s3 = this.where.s3!;
    const client = new S3Client({
      region: 'us-east-1',
      endpoint: s3.endpoint,
      forcePathStyle: true,
      credentials: s3.credentials,
    });
    try {
      let count = 0;
      let KeyMarker: string | undefined;
      let VersionIdMarker: string | undefined;
      for (;;) {
        const page = await client.send(
          new ListObjectVersionsCommand({
            Bucket: s3.bucket,
            Prefix: `${this.where.prefix}/`,
            KeyMarker,
            VersionIdMarker,
          }),
        );
        count += page.Versions?.length ?? 0;
        if (!page.IsTruncated) return count;
        [KeyMarker, VersionIdMarker] = [page.NextKeyMarker, page.NextVersionIdMarker];
      }
    } finally {
      client.destroy();
    }
  }

  async close(): Promise<void> {
    this.store.close?.();
    await this.where.s3?.close();
  }
}
