/**
 * Writing a file to an S3 bucket in one PUT over plain HTTP: the SDK signs the PutObject (a
 * presigned URL, as s3-get.ts does for reads) and http-put.ts sends the file's bytes from reused
 * buffers on a connection of its own. Why not the SDK's PUT: docs/performance.md, "Replication"
 * (the daemon's RSS while a package goes up).
 *
 * The object's metadata and Object Lock headers are signed as headers, not moved into the query
 * (`unhoistableHeaders`), and sent exactly as the SDK serialised them, so the gateway stores them
 * as it does for the SDK's own PUT. A 2xx is done; 404, 403 and the like are an ObjectRefused,
 * a 5xx or no answer a ReplicaDown. Only for `http:` endpoints (s3.ts decides); it does not
 * check a copy after writing it (the read-back does).
 */
import { PutObjectCommand, type PutObjectCommandInput, type S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { FileHandle } from 'node:fs/promises';
import { barePutFile } from './http-put.js';
import { bareConnectionTo, refusal, URL_LIFETIME_SECONDS } from './s3-get.js';
import { ReplicaDown, type ExpectedFile } from './target.js';

/** Headers that stay headers in the signed request (the presigner would move x-amz-* into the query). */
const KEPT_AS_HEADERS = new Set(['x-amz-meta-sha256', 'x-amz-object-lock-mode', 'x-amz-object-lock-retain-until-date']);

export type PutParams = Pick<PutObjectCommandInput, 'Bucket' | 'Key' | 'Metadata' | 'ObjectLockMode' | 'ObjectLockRetainUntilDate'>;

export class PresignedWriter {
  constructor(
    private readonly client: S3Client,
    private readonly replica: string,
  ) {}

  /** PUTs the whole file as `params` says; a SourceChanged (nothing stored) when it is not `expected`. */
  async putFile(params: PutParams, file: FileHandle, expected: ExpectedFile, signal: AbortSignal | undefined): Promise<void> {
    const { url, headers } = await this.sign(params);
    let answer;
    try {
      answer = await barePutFile(url.pathname + url.search, file, expected, { ...bareConnectionTo(url, signal), headers });
    } catch (err) {
      signal?.throwIfAborted();
      if ((err as Error).name === 'BarePutFailed') throw new ReplicaDown(this.replica, (err as Error).message, { cause: err });
      throw err; // SourceChanged, or the file's own read error
    }
    if (answer.status >= 200 && answer.status < 300) return;
    throw refusal(this.replica, answer.status, answer.code);
  }

  /** The presigned URL and the headers it was signed with (besides Host), in the SDK's own serialisation. */
  private async sign(params: PutParams): Promise<{ url: URL; headers: Array<[string, string]> }> {
    const command = new PutObjectCommand(params);
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
      url = new URL(await getSignedUrl(this.client, command, { expiresIn: URL_LIFETIME_SECONDS, unhoistableHeaders: KEPT_AS_HEADERS }));
    } catch (err) {
      // Signing fails only without credentials or endpoint: nothing about the object.
      throw new ReplicaDown(this.replica, `cannot sign a request: ${(err as Error).message}`, { cause: err });
    }
    const byName = new Map(Object.entries(serialised).map(([name, value]) => [name.toLowerCase(), value]));
    const signed = (url.searchParams.get('X-Amz-SignedHeaders') ?? 'host').split(';').filter((name) => name !== 'host');
    const headers = signed.map((name): [string, string] => {
      const value = byName.get(name);
      if (value === undefined) throw new ReplicaDown(this.replica, `cannot sign a request: the signed header ${name} has no value`);
      return [name, value];
    });
    return { url, headers };
  }
}
