/**
 * One PUT of a body to a presigned URL, `http:` or `https:`, over an HTTP/1.1 connection of its
 * own (`Connection: close`), the counterpart of http-digest.ts's GET: a whole object, or one part
 * of a multipart upload. The body is read from its source (a file, or a stream copied in order)
 * into two buffers of the replica's pool, each one reused once the socket has handed its bytes to
 * the kernel (the write's callback), where a stream into the SDK's PUT allocates a new buffer for
 * every read and leaves it to the garbage collector (docs/performance.md, "Replication").
 *
 * The bytes are hashed as they are read, across the parts of one object, and the object's last
 * chunk is held back until the hash is checked against the catalog's: a source that no longer
 * matches throws a SourceChanged and the connection is cut before the body is complete, so the
 * gateway never stores a wrong object (nor completes a multipart upload of one).
 *
 * It answers with the status, the S3 error code of an error answer and the ETag; no answer, a
 * connection that breaks or stalls: a BarePutFailed. It does not sign anything (the URL and its
 * signed headers come from s3-put.ts), or retry.
 */
import { createHash, type Hash } from 'node:crypto';
import type { FileHandle } from 'node:fs/promises';
import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import {
  connectTo,
  describeNetworkError,
  ERROR_BODY_BYTES,
  HEAD_BYTES,
  parseHead,
  s3ErrorCode,
  type BareConnection,
  type BufferPool,
} from './bare-http.js';
import { SourceChanged, type ExpectedFile } from './target.js';

/** Chunks of one PUT in flight: one being read and hashed while the other goes out. */
const CHUNKS_IN_FLIGHT = 2;

/** Reads up to `length` bytes of the source at `position` into `buf`; fewer only at its end. */
export type ReadAt = (buf: Buffer, length: number, position: number) => Promise<number>;

export const fileReader =
  (file: FileHandle): ReadAt =>
  async (buf, length, position) =>
    (await file.read(buf, 0, length, position)).bytesRead;

/** A stream read in order (positions are not looked at: each read continues the last). */
export function streamReader(stream: Readable): ReadAt {
  const chunks = stream[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  let rest: Buffer = Buffer.alloc(0);
  return async (buf, length) => {
    let n = 0;
    while (n < length) {
      if (rest.length === 0) {
        const next = await chunks.next();
        if (next.done === true) break;
        rest = next.value;
      }
      const copied = rest.copy(buf, n, 0, Math.min(rest.length, length - n));
      rest = rest.subarray(copied);
      n += copied;
    }
    return n;
  };
}

/** The object being written: its expected size and sha256, and the hash of its bytes sent so far (in order). */
export class ObjectCheck {
  readonly hash: Hash = createHash('sha256');
  constructor(readonly expected: ExpectedFile) {}
}

/** Bytes `start` to `end` (exclusive) of the object, read from `read`, hashed into `check`. */
export interface PutBody {
  read: ReadAt;
  start: number;
  end: number;
  check: ObjectCheck;
}

export interface BarePutAnswer {
  status: number;
  /** The S3 error code of an error answer (its HTTP status when it has none); '' for a 2xx. */
  code: string;
  etag: string | undefined;
}

/** The PUT got no whole answer: refused, reset, stalled. */
export class BarePutFailed extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BarePutFailed';
  }
}

export interface BarePutOptions extends BareConnection {
  /** Headers the signature covers besides Host, sent as they were signed. */
  headers: ReadonlyArray<readonly [string, string]>;
}

/** PUTs `body` to `pathAndQuery`; at the object's end the whole is checked against `body.check`. */
/* eslint-disable max-lines-per-function -- one PUT's state machine (head, body, answer, abort) over one socket's callbacks */
export function barePut(pathAndQuery: string, body: PutBody, opts: BarePutOptions): Promise<BarePutAnswer> {
  const { signal } = opts;
  signal?.throwIfAborted();
  return new Promise<BarePutAnswer>((resolve, reject) => {
    let done = false;
    let head: Buffer | undefined = Buffer.alloc(0);
    let answer: BarePutAnswer | undefined;
    let length = -1;
    let received = 0;
    let errorBody = '';
    const ring = new ChunkRing(opts.buffers);

    const finish = (outcome: { ok: BarePutAnswer } | { err: unknown }) => {
      if (done) return;
      done = true;
      ring.close();
      signal?.removeEventListener('abort', onAbort);
      socket.destroy();
      if ('ok' in outcome) resolve(outcome.ok);
      else reject(outcome.err);
    };
    const fail = (message: string, cause?: unknown) =>
      finish({
        err: signal?.aborted
          ? signal.reason
          : new BarePutFailed(message, cause === undefined ? undefined : { cause }),
      });
    const answered = () => {
      const a = answer!;
      finish({
        ok:
          a.status >= 200 && a.status < 300
            ? a
            : { ...a, code: s3ErrorCode(errorBody) ?? `HTTP ${a.status}` },
      });
    };
    const bytes = (chunk: Buffer) => {
      if (done) return;
      if (head !== undefined) {
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) {
          if (head.length > HEAD_BYTES) fail(`an answer whose head is over ${HEAD_BYTES} bytes`);
          return;
        }
        const parsed = parseHead(head.subarray(0, end).toString('latin1'));
        chunk = head.subarray(end + 4);
        head = undefined;
        if (typeof parsed === 'string') return fail(parsed);
        // 100 Continue (not asked for, but allowed): the real answer follows.
        if (parsed.status === 100) {
          head = Buffer.alloc(0);
          return bytes(chunk);
        }
        const contentLength = parsed.headers.get('content-length');
        length =
          contentLength === undefined || parsed.headers.has('transfer-encoding') ? -1 : Number(contentLength);
        answer = { status: parsed.status, code: '', etag: parsed.headers.get('etag') };
        // An answer before the whole body went (an early refusal): nothing more is sent.
        ring.close();
      }
      received += chunk.length;
      if (errorBody.length < ERROR_BODY_BYTES && answer!.status >= 300) errorBody += chunk.toString('utf8');
      // Without a length the answer ends with the connection (asked for with Connection: close).
      if (length >= 0 && received >= length) answered();
    };

    const request = () => {
      const fields = opts.headers.map(([name, value]) => `${name}: ${value}\r\n`).join('');
      socket.write(
        `PUT ${pathAndQuery} HTTP/1.1\r\nHost: ${opts.hostHeader}\r\nContent-Length: ${body.end - body.start}\r\n${fields}Connection: close\r\n\r\n`,
      );
      // A SourceChanged, or the source's own read error as it is (the primary's problem, not the replica's).
      writeBody(socket, body, ring).catch((err: unknown) => finish({ err }));
    };
    const socket = connectTo(opts, request, fail);
    const onAbort = () => finish({ err: signal?.reason });
    signal?.addEventListener('abort', onAbort, { once: true });
    socket.setTimeout(opts.idleTimeoutMs, () => fail(`no progress for ${opts.idleTimeoutMs / 1000} s`));
    socket.on('data', bytes);
    socket.on('error', (err) => fail(describeNetworkError(err), err));
    socket.on('close', () => {
      if (answer !== undefined && length < 0) answered();
      else
        fail(
          answer === undefined
            ? 'the connection closed before an answer'
            : `the connection closed after ${received} of ${length} bytes of the answer`,
        );
    });
  });
}
/* eslint-enable max-lines-per-function */

/**
 * Writes the body's bytes, each chunk from a buffer of `ring` that goes back to it once the
 * socket is done with it. Stops early when the ring is closed (an answer came, or a failure).
 */
async function writeBody(socket: Socket, body: PutBody, ring: ChunkRing): Promise<void> {
  const { read, end, check } = body;
  const { size, sha256: expected } = check.expected;
  let position = body.start;
  for (;;) {
    const buf = await ring.take();
    if (buf === undefined) return;
    let bytesRead = 0;
    try {
      if (position < end) bytesRead = await read(buf, Math.min(buf.length, end - position), position);
      check.hash.update(buf.subarray(0, bytesRead));
      position += bytesRead;
      const short = bytesRead === 0 && position < end;
      const last = short || position >= end;
      if (last && (short || end === size)) {
        // At the object's end one byte more is asked for: a source that grew is not the catalog's.
        if (!short) position += await read(Buffer.alloc(1), 1, position);
        // The object's last chunk goes out only once the whole proved to be the catalog's.
        const sha256 = check.hash.digest('hex');
        if (position !== size || sha256 !== expected.toLowerCase()) throw new SourceChanged(position, sha256);
      }
      if (ring.closed || bytesRead === 0) ring.give(buf);
      else socket.write(buf.subarray(0, bytesRead), () => ring.give(buf));
      if (last) return;
    } catch (err) {
      ring.give(buf);
      throw err;
    }
  }
}

/** The buffers of one PUT: CHUNKS_IN_FLIGHT at most, taken from (and given back to) the replica's pool. */
class ChunkRing {
  private lent = 0;
  private waiter: (() => void) | undefined;
  closed = false;

  constructor(private readonly pool: BufferPool) {}

  /** A buffer, once one is free; undefined once the ring is closed. */
  async take(): Promise<Buffer | undefined> {
    while (this.lent >= CHUNKS_IN_FLIGHT && !this.closed)
      await new Promise<void>((resolve) => (this.waiter = resolve));
    if (this.closed) return undefined;
    this.lent++;
    return this.pool.take();
  }

  /** Called once nothing uses `buf` any more (the socket's write callback, also after close). */
  give(buf: Buffer): void {
    this.lent--;
    this.pool.give(buf);
    this.wake();
  }
  close(): void {
    this.closed = true;
    this.wake();
  }

  private wake(): void {
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.();
  }
}
