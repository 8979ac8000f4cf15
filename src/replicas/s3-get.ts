/**
 * Reading objects of an S3 bucket over plain HTTP: the SDK signs each GET (a presigned URL,
 * `@aws-sdk/s3-request-presigner`, valid for a few minutes) and node:http fetches it on a
 * keep-alive agent, so the bytes come straight from the socket, without the SDK's middleware
 * and stream wrappers between them and the hash (why: docs/performance.md, "Replication").
 *
 * Read-backs and audits only hash an object: `digest` does that as the bytes arrive, over a bare
 * HTTP/1.1 connection (http-digest.ts), plain or TLS as the endpoint says. Streams (ranges,
 * downloads, repairs) come through node:http or node:https, the same code for both.
 *
 * An answer is a stream (200, or 206 for a Range), `undefined` for a missing object (404), an
 * ObjectRefused for any other answer of the gateway about the object (403, 416, …), and a
 * ReplicaDown when there is no answer at all, a 5xx, or a connection that stalls. It does not
 * compare what it read with the catalog; s3.ts does.
 */
import { GetObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { digestOf } from './hashing.js';
import { bareGetDigest } from './http-digest.js';
import { BufferPool, describeNetworkError, s3ErrorCode, type BareConnection } from './bare-http.js';
import { ReplicaDown } from './target.js';

/** How long a signed URL stays valid: long enough to start the request, which it only needs to. */
export const URL_LIFETIME_SECONDS = 300;
/** A connection not made by then: the replica is down (the SDK's connectionTimeout, the same). */
const CONNECT_TIMEOUT_MS = 5000;
/** No byte for this long while a GET runs: the replica is down (the SDK's requestTimeout, the same). */
const IDLE_TIMEOUT_MS = 120_000;
/** An error answer's body is read for its S3 error code up to this many bytes. */
const ERROR_BODY_BYTES = 4096;

/** The gateway answered, and it is a no about the object (not 404, not a failure of the service). */
export class ObjectRefused extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
  ) {
    super(`${code}, HTTP ${status}`);
    this.name = 'ObjectRefused';
  }
}

export class PresignedReader {
  private readonly agent: http.Agent;
  private readonly transport: typeof http | typeof https;
  /** What bare GETs read into, one per GET in flight, kept for the next ones. */
  private readonly buffers = new BufferPool(256 * 1024, 8);

  constructor(
    private readonly client: S3Client,
    private readonly bucket: string,
    private readonly replica: string,
    endpoint: string,
    private readonly ca: string[] | undefined,
  ) {
    this.transport = new URL(endpoint).protocol === 'https:' ? https : http;
    this.agent = new this.transport.Agent({ keepAlive: true, scheduling: 'lifo', ...(ca ? { ca } : {}) });
  }

  /**
   * Size and sha256 of the whole object, or undefined when it does not exist: hashed as it
   * arrives (http-digest.ts), or, when the gateway answers in a way that cannot take (chunked),
   * from get()'s stream.
   */
  async digest(
    Key: string,
    opts: { signal?: AbortSignal | undefined; bytesPerSec?: number | undefined },
  ): Promise<{ size: number; sha256: string } | undefined> {
    const url = new URL(await this.sign(Key, undefined));
    let got;
    try {
      got = await bareGetDigest(url.pathname + url.search, {
        ...bareConnectionTo(url, opts.signal, this.ca, this.buffers),
        ...opts,
      });
    } catch (err) {
      opts.signal?.throwIfAborted();
      throw new ReplicaDown(this.replica, (err as Error).message, { cause: err });
    }
    if (got.kind === 'body') return { size: got.size, sha256: got.sha256 };
    if (got.kind === 'status') {
      if (got.status === 404) return undefined;
      throw refusal(this.replica, got.status, got.code);
    }
    const body = await this.get(Key, undefined, opts.signal);
    if (body === undefined) return undefined;
    try {
      return await digestOf(body, opts);
    } catch (err) {
      opts.signal?.throwIfAborted();
      // The body broke off (a reset, the gateway killed): no answer about the object.
      throw new ReplicaDown(this.replica, (err as Error).message, { cause: err });
    } finally {
      body.destroy();
    }
  }

  /** The object's bytes (`start` to `end` inclusive when given), or undefined when it does not exist. */
  async get(
    Key: string,
    range: { start: number; end: number } | undefined,
    signal: AbortSignal | undefined,
  ): Promise<IncomingMessage | undefined> {
    const url = await this.sign(Key, range);
    const res = await this.request(url, range, signal);
    const status = res.statusCode ?? 0;
    if (status === (range ? 206 : 200)) return res;
    const code = await errorCodeOf(res);
    if (status === 404) return undefined;
    throw refusal(this.replica, status, status === 200 ? 'the Range asked for was not honoured' : code);
  }

  private async sign(Key: string, range: { start: number; end: number } | undefined): Promise<string> {
    try {
      // A Range is signed as a header, and sent as one (request()).
      return await getSignedUrl(
        this.client,
        new GetObjectCommand({ Bucket: this.bucket, Key, ...(range ? { Range: rangeHeader(range) } : {}) }),
        { expiresIn: URL_LIFETIME_SECONDS },
      );
    } catch (err) {
      // Signing fails only without credentials or endpoint: nothing about the object.
      throw new ReplicaDown(this.replica, `cannot sign a request: ${(err as Error).message}`, { cause: err });
    }
  }

  private request(
    url: string,
    range: { start: number; end: number } | undefined,
    signal: AbortSignal | undefined,
  ): Promise<IncomingMessage> {
    signal?.throwIfAborted();
    return new Promise((resolve, reject) => {
      const req = this.transport.get(url, {
        agent: this.agent,
        timeout: IDLE_TIMEOUT_MS,
        ...(range ? { headers: { range: rangeHeader(range) } } : {}),
        ...(signal ? { signal } : {}),
      });
      const down = (reason: string, cause?: unknown) =>
        req.destroy(new ReplicaDown(this.replica, reason, { cause }));
      req.once('socket', (socket) => {
        if (!socket.connecting) return;
        const timer = setTimeout(
          () => down(`no connection to ${new URL(url).host} within ${CONNECT_TIMEOUT_MS / 1000} s`),
          CONNECT_TIMEOUT_MS,
        );
        socket.once('connect', () => clearTimeout(timer));
        socket.once('close', () => clearTimeout(timer));
      });
      req.once('timeout', () => down(`no answer for ${IDLE_TIMEOUT_MS / 1000} s`));
      req.once('response', (res) => {
        // An error before the caller reads (a reset) must not be an uncaught one; the caller's read sees it.
        res.once('error', () => undefined);
        resolve(res);
      });
      req.once('error', (err) => {
        if (signal?.aborted) reject(signal.reason);
        else if (err instanceof ReplicaDown) reject(err);
        else reject(new ReplicaDown(this.replica, describeNetworkError(err), { cause: err }));
      });
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

const rangeHeader = (range: { start: number; end: number }) => `bytes=${range.start}-${range.end}`;

/** Where a bare request to a presigned URL connects, with this replica's timeouts, CAs and buffers. */
export function bareConnectionTo(
  url: URL,
  signal: AbortSignal | undefined,
  ca: string[] | undefined,
  buffers: BufferPool,
): BareConnection {
  const secure = url.protocol === 'https:';
  return {
    host: url.hostname.replace(/^\[|\]$/g, ''),
    port: Number(url.port || (secure ? 443 : 80)),
    hostHeader: url.host,
    tls: secure ? { ca } : undefined,
    buffers,
    connectTimeoutMs: CONNECT_TIMEOUT_MS,
    idleTimeoutMs: IDLE_TIMEOUT_MS,
    signal,
  };
}

/** What an answer that is not the one asked for means: a 5xx the replica down, anything else a no about the object. */
export function refusal(replica: string, status: number, code: string): ReplicaDown | ObjectRefused {
  return status >= 500
    ? new ReplicaDown(replica, `${code}, HTTP ${status}`)
    : new ObjectRefused(status, code);
}

/** The S3 error code of an error answer (`<Code>AccessDenied</Code>`), or its HTTP status text. */
async function errorCodeOf(res: IncomingMessage): Promise<string> {
  let text = '';
  try {
    for await (const chunk of res) {
      if (text.length < ERROR_BODY_BYTES) text += (chunk as Buffer).toString('utf8');
    }
  } catch {
    // the body of an error answer is a courtesy
  }
  return s3ErrorCode(text) ?? res.statusMessage ?? 'error';
}
