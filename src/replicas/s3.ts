/**
 * A replica in an S3-compatible bucket (Ceph RGW, MinIO, AWS S3) through the AWS SDK v3. Files
 * go up streamed from disk: one PUT for a file up to SINGLE_PUT_BYTES (over plain HTTP from
 * reused buffers, s3-put.ts, when the endpoint is `http:`), a multipart upload of
 * PART_BYTES parts, QUEUE at a time, each read straight from its range of the file, for a larger
 * one (nothing of the file is buffered). The bytes are hashed on the way and an upload whose
 * source turns out not to match the catalog never completes. A large object that comes as a
 * stream (a repair from another replica) goes through lib-storage's `Upload`. With
 * `retention`, every object is written under S3 Object Lock in that mode until that date (set
 * again on the finished version after a multipart upload, which RGW 16.2 would leave unlocked).
 * Objects are read (read-backs, audits, repairs, downloads) over plain HTTP from presigned URLs
 * (s3-get.ts); everything but those reads and the single PUTs goes through the SDK.
 *
 * Settings for RGW 16.2 (../shared/research/ceph-rgw.md §5): checksums only when required (it
 * answers the SDK's default aws-chunked uploads with 411), path-style addressing; its empty
 * ETag after CompleteMultipartUpload does not matter, since every copy is verified by reading
 * it back. Nothing here deletes an object.
 */
import type { FileHandle } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  GetObjectLockConfigurationCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  PutObjectRetentionCommand,
  S3Client,
  UploadPartCommand,
  type PutObjectCommandInput,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import type { S3ReplicaConfig } from '../config/replicas.js';
import { CheckedPassThrough, digestOf } from './hashing.js';
import { ObjectRefused, PresignedReader } from './s3-get.js';
import { PresignedWriter } from './s3-put.js';
import { isFile, rangeOf, ReplicaDown, ReplicaUnusable, SourceChanged, streamOf, type ExpectedFile, type ReadBack, type ReplicaTarget, type WriteOptions, type WriteSource } from './target.js';

/** Files up to this size go in one streamed PUT; larger ones in a multipart upload. */
const SINGLE_PUT_BYTES = 64 * 1024 * 1024;
/** Part size of multipart uploads. */
const PART_BYTES = 16 * 1024 * 1024;
/** Parts of one file in flight at once. */
const QUEUE = 2;
/** Where the start-up check writes (and keeps: nothing is deleted) a small object. */
const WRITE_CHECK_KEY = '.preservd/write-check';

interface S3Failure {
  name?: string;
  code?: string;
  $metadata?: { httpStatusCode?: number };
}

const statusOf = (err: unknown): number | undefined => (err as S3Failure | null)?.$metadata?.httpStatusCode;

const reasonOf = (err: unknown): string => {
  const e = err as S3Failure & { message?: string };
  const status = statusOf(err);
  return [e.name ?? e.code ?? 'error', status === undefined ? undefined : `HTTP ${status}`].filter(Boolean).join(', ') + (e.message && e.message !== e.name ? `: ${e.message}` : '');
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
  /** Objects are read over plain HTTP (s3-get.ts). */
  private readonly reader: PresignedReader;
  /** Files up to SINGLE_PUT_BYTES go up over plain HTTP from reused buffers (s3-put.ts); `http:` endpoints only. */
  private readonly writer: PresignedWriter | undefined;

  constructor(private readonly config: S3ReplicaConfig, env: NodeJS.ProcessEnv = process.env) {
    this.name = config.name;
    this.where = `bucket ${config.bucket} at ${config.endpoint}`;
    const accessKeyId = config.accessKeyId ?? env.AWS_ACCESS_KEY_ID;
    const secretAccessKey = config.secretAccessKey ?? env.AWS_SECRET_ACCESS_KEY;
    this.client = new S3Client({
      endpoint: config.endpoint,
      region: config.region,
      forcePathStyle: config.forcePathStyle,
      ...(accessKeyId !== undefined && secretAccessKey !== undefined ? { credentials: { accessKeyId, secretAccessKey } } : {}),
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      // The replicator retries with its own back-off; the SDK's retries only hide a dead endpoint.
      maxAttempts: 2,
      requestHandler: { connectionTimeout: 5000, requestTimeout: 120_000 },
    });
    this.reader = new PresignedReader(this.client, config.bucket, config.name, config.endpoint);
    this.writer = new URL(config.endpoint).protocol === 'http:' ? new PresignedWriter(this.client, config.name) : undefined;
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
      if (status === 404) throw new ReplicaUnusable(`replica ${this.name}: bucket ${bucket} does not exist at ${this.config.endpoint}; create it first${this.config.retention ? ' (with Object Lock enabled)' : ''}`);
      if (status === 403) throw new ReplicaUnusable(`replica ${this.name}: the keys given may not use bucket ${bucket} at ${this.config.endpoint} (HTTP 403)`);
      throw new ReplicaUnusable(`replica ${this.name}: ${this.where} cannot be reached: ${reasonOf(err)}`, { cause: err });
    }
    if (this.config.retention !== undefined) {
      const lock = await this.client.send(new GetObjectLockConfigurationCommand({ Bucket: bucket }), opts).catch(() => undefined);
      if (lock?.ObjectLockConfiguration?.ObjectLockEnabled !== 'Enabled')
        throw new ReplicaUnusable(`replica ${this.name}: retention is configured but bucket ${bucket} has no Object Lock; Object Lock can only be enabled when a bucket is created (see docs/replicas.md)`);
    }
    try {
      await this.client.send(new PutObjectCommand({ Bucket: bucket, Key: this.key(WRITE_CHECK_KEY), Body: `${new Date().toISOString()}\n`, ...this.lockParams() }), opts);
    } catch (err) {
      throw new ReplicaUnusable(`replica ${this.name}: ${this.where} refuses writes: ${reasonOf(err)}`, { cause: err });
    }
  }

  private lockParams(): Pick<PutObjectCommandInput, 'ObjectLockMode' | 'ObjectLockRetainUntilDate'> {
    const r = this.config.retention;
    if (r === undefined) return {};
    return { ObjectLockMode: r.mode, ObjectLockRetainUntilDate: new Date(Date.now() + r.days * 86_400_000) };
  }

  async write(key: string, source: WriteSource, expected: ExpectedFile, opts: WriteOptions): Promise<'written' | 'exists'> {
    const Key = this.key(key);
    const signal = opts.signal;
    try {
      if (!opts.replace && opts.absent !== true && (await this.head(Key, signal)) !== undefined) {
        if (!isFile(source)) source.destroy();
        return 'exists';
      }
      if (expected.size <= SINGLE_PUT_BYTES && isFile(source) && this.writer !== undefined) await this.writer.putFile(this.params(Key, expected), source, expected, signal);
      else if (expected.size <= SINGLE_PUT_BYTES) await this.put(Key, streamOf(source, expected.size + 1), expected, signal);
      else if (isFile(source)) await this.putInParts(Key, source, expected, signal);
      else await this.putStreamInParts(Key, source, expected, signal);
      if (this.config.retention !== undefined && expected.size > SINGLE_PUT_BYTES) await this.lockAfterMultipart(Key, signal);
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

  /** One PUT of known length, streamed; the check holds the last bytes back, so a wrong body never completes. */
  private async put(Key: string, stream: Readable, expected: ExpectedFile, signal: AbortSignal | undefined): Promise<void> {
    const body = stream.pipe(new CheckedPassThrough(expected));
    stream.once('error', (err) => body.destroy(err));
    try {
      await this.sendBody(body, signal, (abortSignal) => this.client.send(new PutObjectCommand({ ...this.params(Key, expected), Body: body, ContentLength: expected.size }), { abortSignal }));
    } finally {
      stream.destroy();
    }
  }

  /**
   * Sends a request whose body is a stream. The SDK pipes the stream into the request and does not
   * hear of its errors (the request would wait for the rest of the body): an error of the body
   * aborts the request, and is what this rejects with.
   */
  private async sendBody<O>(body: Readable, signal: AbortSignal | undefined, send: (abortSignal: AbortSignal) => Promise<O>): Promise<O> {
    const controller = new AbortController();
    let failure: { err: unknown } | undefined;
    const onError = (err: unknown) => {
      failure ??= { err };
      controller.abort();
    };
    const onAbort = () => controller.abort();
    body.on('error', onError);
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      return await send(controller.signal);
    } catch (err) {
      throw failure === undefined ? err : failure.err;
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /**
   * A multipart upload read straight from the file: PART_BYTES parts, QUEUE at once, each its own
   * range of the file (nothing buffered here), while one more read hashes the file in order; the
   * upload is completed only if that hash is the catalog's, and aborted otherwise.
   */
  private async putInParts(Key: string, file: FileHandle, expected: ExpectedFile, signal: AbortSignal | undefined): Promise<void> {
    const opts = signal ? { abortSignal: signal } : {};
    const Bucket = this.config.bucket;
    const { UploadId } = await this.client.send(new CreateMultipartUploadCommand(this.params(Key, expected)), opts);
    try {
      const hashed = digestOf(rangeOf(file, 0, Number.MAX_SAFE_INTEGER), { signal });
      const count = Math.ceil(expected.size / PART_BYTES);
      const parts: Array<{ PartNumber: number; ETag: string }> = [];
      let next = 0;
      const lane = async (): Promise<void> => {
        while (next < count) {
          const i = next++;
          const start = i * PART_BYTES;
          const length = Math.min(PART_BYTES, expected.size - start);
          const Body = rangeOf(file, start, start + length);
          try {
            const part = await this.sendBody(Body, signal, (abortSignal) => this.client.send(new UploadPartCommand({ Bucket, Key, UploadId, PartNumber: i + 1, Body, ContentLength: length }), { abortSignal }));
            parts.push({ PartNumber: i + 1, ETag: part.ETag ?? '' });
          } finally {
            Body.destroy();
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(QUEUE, count) }, lane));
      const found = await hashed;
      if (found.size !== expected.size || found.sha256 !== expected.sha256.toLowerCase()) throw new SourceChanged(found.size, found.sha256);
      parts.sort((a, b) => a.PartNumber - b.PartNumber);
      await this.client.send(new CompleteMultipartUploadCommand({ Bucket, Key, UploadId, MultipartUpload: { Parts: parts } }), opts);
    } catch (err) {
      await this.client.send(new AbortMultipartUploadCommand({ Bucket, Key, UploadId })).catch(() => undefined);
      throw err;
    }
  }

  /** A large object from a stream (repair from another replica): lib-storage's Upload, which buffers its parts. */
  private async putStreamInParts(Key: string, stream: Readable, expected: ExpectedFile, signal: AbortSignal | undefined): Promise<void> {
    const body = stream.pipe(new CheckedPassThrough(expected));
    stream.once('error', (err) => body.destroy(err));
    const controller = new AbortController();
    const onAbort = () => controller.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const upload = new Upload({ client: this.client, partSize: PART_BYTES, queueSize: 2, abortController: controller, params: { ...this.params(Key, expected), Body: body, ContentLength: expected.size } });
      await upload.done();
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /**
   * RGW 16.2 ignores the Object Lock headers of CreateMultipartUpload (a single PUT keeps them):
   * the retention is set on the completed version instead. On AWS this restates what is there.
   */
  private async lockAfterMultipart(Key: string, signal: AbortSignal | undefined): Promise<void> {
    const opts = signal ? { abortSignal: signal } : {};
    const head = await this.client.send(new HeadObjectCommand({ Bucket: this.config.bucket, Key }), opts);
    const { ObjectLockMode: Mode, ObjectLockRetainUntilDate: RetainUntilDate } = this.lockParams();
    await this.client.send(new PutObjectRetentionCommand({ Bucket: this.config.bucket, Key, ...(head.VersionId ? { VersionId: head.VersionId } : {}), Retention: { Mode, RetainUntilDate } }), opts);
  }

  /** S3 failures that are not about this object become ReplicaDown; the rest pass as they are. */
  private translate(err: unknown): unknown {
    if (err instanceof Error && (err.name === 'SourceChanged' || err.name === 'AbortError')) return err;
    if (isDown(err)) return new ReplicaDown(this.name, reasonOf(err), { cause: err });
    return err;
  }

  private async head(Key: string, signal?: AbortSignal): Promise<{ size: number } | undefined> {
    try {
      const head = await this.client.send(new HeadObjectCommand({ Bucket: this.config.bucket, Key }), signal ? { abortSignal: signal } : {});
      return { size: head.ContentLength ?? 0 };
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
  }

  async readBack(key: string, expected: ExpectedFile, opts: { signal?: AbortSignal | undefined; bytesPerSec?: number }): Promise<ReadBack> {
    try {
      const found = await this.reader.digest(this.key(key), opts);
      if (found === undefined) return { kind: 'missing' };
      return found.size === expected.size && found.sha256 === expected.sha256.toLowerCase() ? { kind: 'match' } : { kind: 'differs', ...found };
    } catch (err) {
      opts.signal?.throwIfAborted();
      if (err instanceof ObjectRefused) return { kind: 'unreadable', reason: err.message };
      throw err;
    }
  }

  async open(key: string, range?: { start: number; end: number }, signal?: AbortSignal): Promise<Readable | undefined> {
    return this.reader.get(this.key(key), range, signal);
  }

  async *list(prefix: string, signal?: AbortSignal): AsyncIterable<{ key: string; size: number }> {
    let ContinuationToken: string | undefined;
    const strip = this.config.prefix.length;
    do {
      let page;
      try {
        page = await this.client.send(
          new ListObjectsV2Command({ Bucket: this.config.bucket, Prefix: this.key(prefix), ...(ContinuationToken ? { ContinuationToken } : {}) }),
          signal ? { abortSignal: signal } : {},
        );
      } catch (err) {
        throw this.translate(err);
      }
      for (const object of page.Contents ?? []) if (object.Key !== undefined) yield { key: object.Key.slice(strip), size: object.Size ?? 0 };
      ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (ContinuationToken !== undefined);
  }

  async abandonUnfinished(prefix: string, signal?: AbortSignal): Promise<number> {
    const opts = signal ? { abortSignal: signal } : {};
    let aborted = 0;
    try {
      const page = await this.client.send(new ListMultipartUploadsCommand({ Bucket: this.config.bucket, Prefix: this.key(prefix) }), opts);
      for (const upload of page.Uploads ?? []) {
        if (upload.Key === undefined || upload.UploadId === undefined) continue;
        await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.config.bucket, Key: upload.Key, UploadId: upload.UploadId }), opts);
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
