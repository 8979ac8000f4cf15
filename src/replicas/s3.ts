/**
 * A replica in an S3-compatible bucket (Ceph RGW, MinIO, AWS S3). Object bytes go one way
 * whatever the endpoint's scheme (`http:` or `https:`) and the object's size: written by
 * s3-put.ts (one PUT, or a multipart upload for a large object, from presigned URLs over a bare
 * HTTP/1.1 connection, hashed on the way: an upload whose source turns out not to match the
 * catalog never completes), read by s3-get.ts (presigned GETs). Everything else (the start-up
 * check, HEAD, listings, Object Lock, the multipart create/complete/abort) goes through the AWS
 * SDK v3. An `https:` endpoint is trusted through Node's CAs and the replica's `caFile`. With
 * `retention`, every object is written under S3 Object Lock in that mode until that date (set
 * again on the finished version after a multipart upload, which RGW 16.2 would leave unlocked).
 *
 * Settings for RGW 16.2 (../shared/research/ceph-rgw.md §5): checksums only when required (it
 * answers the SDK's default aws-chunked uploads with 411), path-style addressing; its empty
 * ETag after CompleteMultipartUpload does not matter, since every copy is verified by reading
 * it back. Objects are deleted only by `removeOld` (`preservd migrate`) and `removeObject` (a
 * deaccession, s3-remove.ts).
 */
import { readFileSync } from 'node:fs';
import { Agent } from 'node:https';
import type { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectLockConfigurationCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  PutObjectRetentionCommand,
  S3Client,
  UploadPartCommand,
  type PutObjectCommandInput,
} from '@aws-sdk/client-s3';
import type { S3ReplicaConfig } from '../config/replicas.js';
import { trustedCAs } from './bare-http.js';
import { ObjectRefused, PresignedReader } from './s3-get.js';
import { removeEveryVersion } from './s3-remove.js';
import { PresignedWriter, SINGLE_PUT_BYTES } from './s3-put.js';
import {
  isFile,
  ReplicaDown,
  ReplicaUnusable,
  type ExpectedFile,
  type ReadBack,
  type ReplicaTarget,
  type WriteOptions,
  type WriteSource,
} from './target.js';

/**
 * The start-up write check's key, under the prefix: a multipart upload begun, one part sent and
 * aborted, so that no object ever appears in the OCFL root (and none is kept under retention).
 */
const WRITE_CHECK_KEY = '.preservd-write-check';

interface S3Failure {
  name?: string;
  code?: string;
  $metadata?: { httpStatusCode?: number };
}

const statusOf = (err: unknown): number | undefined => (err as S3Failure | null)?.$metadata?.httpStatusCode;

const reasonOf = (err: unknown): string => {
  const e = err as S3Failure & { message?: string };
  const status = statusOf(err);
  return (
    [e.name ?? e.code ?? 'error', status === undefined ? undefined : `HTTP ${status}`]
      .filter(Boolean)
      .join(', ') + (e.message && e.message !== e.name ? `: ${e.message}` : '')
  );
};

/** Not about the object: no answer at all, or the service failing (5xx). */
const isDown = (err: unknown): boolean => {
  const status = statusOf(err);
  return status === undefined || status >= 500;
};

const isMissing = (err: unknown): boolean => {
  const e = err as S3Failure;
  return statusOf(err) === 404 || e.name === 'NoSuchKey' || e.name === 'NotFound';
};

export class S3Target implements ReplicaTarget {
  readonly kind = 's3';
  readonly name: string;
  readonly where: string;
  private readonly client: S3Client;
  /** Object bytes are read from presigned URLs (s3-get.ts)... */
  private readonly reader: PresignedReader;
  /** ...and written to them (s3-put.ts). */
  private readonly writer: PresignedWriter;

  constructor(
    private readonly config: S3ReplicaConfig,
    env: NodeJS.ProcessEnv = process.env,
  ) {
    this.name = config.name;
    this.where = `bucket ${config.bucket} at ${config.endpoint}`;
    const accessKeyId = config.accessKeyId ?? env.AWS_ACCESS_KEY_ID;
    const secretAccessKey = config.secretAccessKey ?? env.AWS_SECRET_ACCESS_KEY;
    const ca = trustedCAs(config.caFile === undefined ? undefined : readFileSync(config.caFile, 'utf8'));
    this.client = new S3Client({
      endpoint: config.endpoint,
      region: config.region,
      forcePathStyle: config.forcePathStyle,
      ...(accessKeyId !== undefined && secretAccessKey !== undefined
        ? { credentials: { accessKeyId, secretAccessKey } }
        : {}),
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      // The replicator retries with its own back-off; the SDK's retries only hide a dead endpoint.
      maxAttempts: 2,
      // An Agent, not its options: with options the SDK drops them for a request with Expect: 100-continue.
      requestHandler: {
        connectionTimeout: 5000,
        requestTimeout: 120_000,
        ...(ca ? { httpsAgent: new Agent({ keepAlive: true, maxSockets: 50, ca }) } : {}),
      },
    });
    this.reader = new PresignedReader(this.client, config.bucket, config.name, config.endpoint, ca);
    this.writer = new PresignedWriter(this.client, config.name, ca);
  }

  private key(key: string): string {
    return `${this.config.prefix}${key}`;
  }

  async check(signal?: AbortSignal): Promise<void> {
    const { bucket } = this.config;
    const opts = signal ? { abortSignal: signal } : {};
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: bucket }), opts);
    } catch (err) {
      const status = statusOf(err);
      if (status === 404)
        throw new ReplicaUnusable(
          `replica ${this.name}: bucket ${bucket} does not exist at ${this.config.endpoint}; create it first${this.config.retention ? ' (with Object Lock enabled)' : ''}`,
        );
      if (status === 403)
        throw new ReplicaUnusable(
          `replica ${this.name}: the keys given may not use bucket ${bucket} at ${this.config.endpoint} (HTTP 403)`,
        );
      throw new ReplicaUnusable(`replica ${this.name}: ${this.where} cannot be reached: ${reasonOf(err)}`, {
        cause: err,
      });
    }
    if (this.config.retention !== undefined) {
      const lock = await this.client
        .send(new GetObjectLockConfigurationCommand({ Bucket: bucket }), opts)
        .catch(() => undefined);
      if (lock?.ObjectLockConfiguration?.ObjectLockEnabled !== 'Enabled')
        throw new ReplicaUnusable(
          `replica ${this.name}: retention is configured but bucket ${bucket} has no Object Lock; Object Lock can only be enabled when a bucket is created (see docs/replicas.md)`,
        );
    }
    try {
      const Key = this.key(WRITE_CHECK_KEY);
      const { UploadId } = await this.client.send(
        new CreateMultipartUploadCommand({ Bucket: bucket, Key }),
        opts,
      );
      try {
        await this.client.send(
          new UploadPartCommand({
            Bucket: bucket,
            Key,
            UploadId,
            PartNumber: 1,
            Body: `${new Date().toISOString()}\n`,
          }),
          opts,
        );
      } finally {
        await this.client.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key, UploadId }), opts);
      }
    } catch (err) {
      throw new ReplicaUnusable(`replica ${this.name}: ${this.where} refuses writes: ${reasonOf(err)}`, {
        cause: err,
      });
    }
  }

  private lockParams(): Pick<PutObjectCommandInput, 'ObjectLockMode' | 'ObjectLockRetainUntilDate'> {
    const r = this.config.retention;
    if (r === undefined) return {};
    return { ObjectLockMode: r.mode, ObjectLockRetainUntilDate: new Date(Date.now() + r.days * 86_400_000) };
  }

  async write(
    key: string,
    source: WriteSource,
    expected: ExpectedFile,
    opts: WriteOptions,
  ): Promise<'written' | 'exists'> {
    const Key = this.key(key);
    const signal = opts.signal;
    try {
      if (!opts.replace && opts.absent !== true && (await this.head(Key, signal)) !== undefined) {
        if (!isFile(source)) source.destroy();
        return 'exists';
      }
      await this.writer.put(this.params(Key, expected), source, expected, signal);
      if (this.config.retention !== undefined && expected.size > SINGLE_PUT_BYTES)
        await this.lockAfterMultipart(Key, signal);
      return 'written';
    } catch (err) {
      signal?.throwIfAborted();
      throw this.translate(err);
    } finally {
      if (!isFile(source)) source.destroy();
    }
  }

  private params(Key: string, expected: ExpectedFile) {
    return { Bucket: this.config.bucket, Key, Metadata: { sha256: expected.sha256 }, ...this.lockParams() };
  }

  /**
   * RGW 16.2 ignores the Object Lock headers of CreateMultipartUpload (a single PUT keeps them):
   * the retention is set on the completed version instead. On AWS this restates what is there.
   */
  private async lockAfterMultipart(Key: string, signal: AbortSignal | undefined): Promise<void> {
    const opts = signal ? { abortSignal: signal } : {};
    const head = await this.client.send(new HeadObjectCommand({ Bucket: this.config.bucket, Key }), opts);
    const { ObjectLockMode: Mode, ObjectLockRetainUntilDate: RetainUntilDate } = this.lockParams();
    await this.client.send(
      new PutObjectRetentionCommand({
        Bucket: this.config.bucket,
        Key,
        ...(head.VersionId ? { VersionId: head.VersionId } : {}),
        Retention: { Mode, RetainUntilDate },
      }),
      opts,
    );
  }

  /** S3 failures that are not about this object become ReplicaDown; the rest pass as they are. */
  private translate(err: unknown): unknown {
    if (err instanceof ObjectRefused || err instanceof ReplicaDown) return err;
    if (err instanceof Error && (err.name === 'SourceChanged' || err.name === 'AbortError')) return err;
    if (isDown(err)) return new ReplicaDown(this.name, reasonOf(err), { cause: err });
    return err;
  }

  private async head(Key: string, signal?: AbortSignal): Promise<{ size: number } | undefined> {
    try {
      const head = await this.client.send(
        new HeadObjectCommand({ Bucket: this.config.bucket, Key }),
        signal ? { abortSignal: signal } : {},
      );
      return { size: head.ContentLength ?? 0 };
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
  }

  async removeOld(key: string, signal?: AbortSignal): Promise<{ retainedUntil?: Date }> {
    const Key = this.key(key);
    const opts = signal ? { abortSignal: signal } : {};
    try {
      const head = await this.client
        .send(new HeadObjectCommand({ Bucket: this.config.bucket, Key }), opts)
        .catch((err: unknown) => {
          if (isMissing(err)) return undefined;
          throw err;
        });
      if (head === undefined) return {};
      const until = head.ObjectLockRetainUntilDate;
      if (until !== undefined && until.getTime() > Date.now()) return { retainedUntil: until };
      // Its version by id, so that a versioned bucket (Object Lock) keeps no copy behind a delete marker.
      const VersionId = head.VersionId;
      await this.client.send(
        new DeleteObjectCommand({ Bucket: this.config.bucket, Key, ...(VersionId ? { VersionId } : {}) }),
        opts,
      );
      return {};
    } catch (err) {
      throw this.translate(err);
    }
  }

  async readBack(
    key: string,
    expected: ExpectedFile,
    opts: { signal?: AbortSignal | undefined; bytesPerSec?: number },
  ): Promise<ReadBack> {
    try {
      const found = await this.reader.digest(this.key(key), opts);
      if (found === undefined) return { kind: 'missing' };
      return found.size === expected.size && found.sha256 === expected.sha256.toLowerCase()
        ? { kind: 'match' }
        : { kind: 'differs', ...found };
    } catch (err) {
      opts.signal?.throwIfAborted();
      if (err instanceof ObjectRefused) return { kind: 'unreadable', reason: err.message };
      throw err;
    }
  }

  async open(
    key: string,
    range?: { start: number; end: number },
    signal?: AbortSignal,
  ): Promise<Readable | undefined> {
    return this.reader.get(this.key(key), range, signal);
  }

  async *list(prefix: string, signal?: AbortSignal): AsyncIterable<{ key: string; size: number }> {
    let ContinuationToken: string | undefined;
    const strip = this.config.prefix.length;
    do {
      let page;
      try {
        page = await this.client.send(
          new ListObjectsV2Command({
            Bucket: this.config.bucket,
            Prefix: this.key(prefix),
            ...(ContinuationToken ? { ContinuationToken } : {}),
          }),
          signal ? { abortSignal: signal } : {},
        );
      } catch (err) {
        throw this.translate(err);
      }
      for (const object of page.Contents ?? [])
        if (object.Key !== undefined) yield { key: object.Key.slice(strip), size: object.Size ?? 0 };
      ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (ContinuationToken !== undefined);
  }

  async removeObject(prefix: string, signal?: AbortSignal): Promise<{ retainedUntil?: Date }> {
    try {
      return await removeEveryVersion(this.client, this.config.bucket, this.key(prefix), signal);
    } catch (err) {
      throw this.translate(err);
    }
  }

  async abandonUnfinished(prefix: string, signal?: AbortSignal): Promise<number> {
    const opts = signal ? { abortSignal: signal } : {};
    let aborted = 0;
    try {
      const page = await this.client.send(
        new ListMultipartUploadsCommand({ Bucket: this.config.bucket, Prefix: this.key(prefix) }),
        opts,
      );
      for (const upload of page.Uploads ?? []) {
        if (upload.Key === undefined || upload.UploadId === undefined) continue;
        await this.client.send(
          new AbortMultipartUploadCommand({
            Bucket: this.config.bucket,
            Key: upload.Key,
            UploadId: upload.UploadId,
          }),
          opts,
        );
        aborted++;
      }
    } catch (err) {
      throw this.translate(err);
    }
    return aborted;
  }

  close(): void {
    this.reader.close();
    this.client.destroy();
  }
}
