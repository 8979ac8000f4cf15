/**
 * Writing an object to an S3 bucket, `http:` or `https:`, whatever its size and source: the SDK
 * signs each request (a presigned URL, as s3-get.ts does for reads) and http-put.ts sends the
 * bytes from the replica's reused buffers on a connection of its own. An object up to
 * SINGLE_PUT_BYTES goes in one PUT; a larger one in a multipart upload of PART_BYTES parts, one
 * after another (the create, complete and abort through the SDK), completed only when the whole
 * object hashed to the catalog's. Why not the SDK's PUT or lib-storage: docs/decisions.md.
 *
 * The object's metadata and Object Lock headers are signed as headers, not moved into the query
 * (`unhoistableHeaders`), and sent exactly as the SDK serialised them, so the gateway stores them
 * as it does for the SDK's own PUT. A 2xx is done; 404, 403 and the like are an ObjectRefused,
 * a 5xx or no answer a ReplicaDown. It does not check a copy after writing it (the read-back does).
 */
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  PutObjectCommand,
  UploadPartCommand,
  type PutObjectCommandInput,
  type S3Client,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { BufferPool } from './bare-http.js';
import { barePut, fileReader, ObjectCheck, streamReader, type PutBody } from './http-put.js';
import { bareConnectionTo, refusal, URL_LIFETIME_SECONDS } from './s3-get.js';
import { isFile, ReplicaDown, type ExpectedFile, type WriteSource } from './target.js';

/** Objects up to this size go in one PUT; larger ones in a multipart upload. */
export const SINGLE_PUT_BYTES = 64 * 1024 * 1024;
/** Part size of multipart uploads. */
const PART_BYTES = 16 * 1024 * 1024;
/** Headers that stay headers in the signed request (the presigner would move x-amz-* into the query). */
const KEPT_AS_HEADERS = new Set([
  'x-amz-meta-sha256',
  'x-amz-object-lock-mode',
  'x-amz-object-lock-retain-until-date',
]);

export type PutParams = Pick<
  PutObjectCommandInput,
  'Bucket' | 'Key' | 'Metadata' | 'ObjectLockMode' | 'ObjectLockRetainUntilDate'
>;

export class PresignedWriter {
  /** Two per PUT in flight, kept for the next PUTs of this replica. */
  private readonly buffers = new BufferPool(512 * 1024, 8);

  constructor(
    private readonly client: S3Client,
    private readonly replica: string,
    private readonly ca: string[] | undefined,
    private readonly sizes = { singlePut: SINGLE_PUT_BYTES, part: PART_BYTES },
  ) {}

  /** Writes the whole source as `params` says; a SourceChanged (nothing stored) when it is not `expected`. */
  async put(
    params: PutParams,
    source: WriteSource,
    expected: ExpectedFile,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    const read = isFile(source) ? fileReader(source) : streamReader(source);
    const check = new ObjectCheck(expected);
    if (expected.size <= this.sizes.singlePut) {
      await this.send(new PutObjectCommand(params), { read, start: 0, end: expected.size, check }, signal);
      return;
    }
    const opts = signal ? { abortSignal: signal } : {};
    const { Bucket, Key } = params;
    const { UploadId } = await this.client.send(new CreateMultipartUploadCommand(params), opts);
    try {
      const Parts: Array<{ PartNumber: number; ETag: string }> = [];
      for (let start = 0; start < expected.size; start += this.sizes.part) {
        const PartNumber = Parts.length + 1;
        const etag = await this.send(
          new UploadPartCommand({ Bucket, Key, UploadId, PartNumber }),
          { read, start, end: Math.min(expected.size, start + this.sizes.part), check },
          signal,
        );
        Parts.push({ PartNumber, ETag: etag ?? '' });
      }
      await this.client.send(
        new CompleteMultipartUploadCommand({ Bucket, Key, UploadId, MultipartUpload: { Parts } }),
        opts,
      );
    } catch (err) {
      await this.client
        .send(new AbortMultipartUploadCommand({ Bucket, Key, UploadId }))
        .catch(() => undefined);
      throw err;
    }
  }

  /** One signed PUT of `body`: its ETag, or the refusal. */
  private async send(
    command: PutObjectCommand | UploadPartCommand,
    body: PutBody,
    signal: AbortSignal | undefined,
  ): Promise<string | undefined> {
    const { url, headers } = await this.sign(command);
    let answer;
    try {
      answer = await barePut(url.pathname + url.search, body, {
        ...bareConnectionTo(url, signal, this.ca, this.buffers),
        headers,
      });
    } catch (err) {
      signal?.throwIfAborted();
      if ((err as Error).name === 'BarePutFailed')
        throw new ReplicaDown(this.replica, (err as Error).message, { cause: err });
      throw err; // SourceChanged, or the source's own read error
    }
    if (answer.status >= 200 && answer.status < 300) return answer.etag;
    throw refusal(this.replica, answer.status, answer.code);
  }

  /** The presigned URL and the headers it was signed with (besides Host), in the SDK's own serialisation. */
  private async sign(
    request: PutObjectCommand | UploadPartCommand,
  ): Promise<{ url: URL; headers: Array<[string, string]> }> {
    // Both are PUTs of a body the SDK does not see; their middleware stacks differ only in types.
    const command = request as PutObjectCommand;
    let serialised: Record<string, string> = {};
    command.middlewareStack.add(
      (next) => (args) => {
        serialised = { ...(args.request as { headers: Record<string, string> }).headers };
        return next(args);
      },
      { step: 'build', priority: 'low', name: 'preservdKeepSignedHeaders' },
    );
    let url: URL;
    try {
      url = new URL(
        await getSignedUrl(this.client, command, {
          expiresIn: URL_LIFETIME_SECONDS,
          unhoistableHeaders: KEPT_AS_HEADERS,
        }),
      );
    } catch (err) {
      // Signing fails only without credentials or endpoint: nothing about the object.
      throw new ReplicaDown(this.replica, `cannot sign a request: ${(err as Error).message}`, { cause: err });
    }
    const byName = new Map(Object.entries(serialised).map(([name, value]) => [name.toLowerCase(), value]));
    const signed = (url.searchParams.get('X-Amz-SignedHeaders') ?? 'host')
      .split(';')
      .filter((name) => name !== 'host');
    const headers = signed.map((name): [string, string] => {
      const value = byName.get(name);
      if (value === undefined)
        throw new ReplicaDown(this.replica, `cannot sign a request: the signed header ${name} has no value`);
      return [name, value];
    });
    return { url, headers };
  }
}
