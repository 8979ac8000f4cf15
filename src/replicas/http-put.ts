/**
 * One PUT of a file's bytes to a presigned URL over a bare HTTP/1.1 connection of its own
 * (`Connection: close`), the counterpart of http-digest.ts's GET. The body is read from the
 * file into a few buffers that are reused: each one goes back to the pool when the socket has
 * handed its bytes to the kernel (the write's callback), where a stream into the SDK's PUT
 * allocates a new buffer for every read and leaves it to the garbage collector (tens of MB of
 * the daemon's RSS while a package went up; docs/performance.md, "Replication").
 *
 * The bytes are hashed as they are read and the last chunk is held back until the hash is
 * checked against the catalog's: a file that no longer matches throws a SourceChanged and the
 * connection is cut before the body is complete, so the gateway never stores a wrong object.
 *
 * It answers with the status, the S3 error code of an error answer and the ETag; no answer, a
 * connection that breaks or stalls: a BarePutFailed. It does not speak TLS, sign anything (the
 * URL and its signed headers come from s3-put.ts), or retry.
 */
import { createHash } from 'node:crypto';
import type { FileHandle } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { describeNetworkError, ERROR_BODY_BYTES, HEAD_BYTES, parseHead, s3ErrorCode, type BareConnection } from './http-head.js';
import { SourceChanged, type ExpectedFile } from './target.js';

/** Bytes read from the file at a time. */
const CHUNK_BYTES = 512 * 1024;
/** Chunks of one PUT in flight: one being read and hashed while the other goes out. */
const CHUNKS_IN_FLIGHT = 2;
/** Chunk buffers of finished PUTs, kept for the next ones (at most this many). */
const CHUNKS_KEPT = 8;
const freeChunks: Buffer[] = [];

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

/** PUTs the whole of `file` (`expected.size` bytes, checked against `expected.sha256`) to `pathAndQuery`. */
export function barePutFile(pathAndQuery: string, file: FileHandle, expected: ExpectedFile, opts: BarePutOptions): Promise<BarePutAnswer> {
  const { signal } = opts;
  signal?.throwIfAborted();
  return new Promise<BarePutAnswer>((resolve, reject) => {
    let done = false;
    let head: Buffer | undefined = Buffer.alloc(0);
    let answer: BarePutAnswer | undefined;
    let length = -1;
    let received = 0;
    let errorBody = '';
    const ring = new ChunkRing();

    const finish = (outcome: { ok: BarePutAnswer } | { err: unknown }) => {
      if (done) return;
      done = true;
      ring.close();
      clearTimeout(connectTimer);
      signal?.removeEventListener('abort', onAbort);
      socket.destroy();
      if ('ok' in outcome) resolve(outcome.ok);
      else reject(outcome.err);
    };
    const fail = (message: string, cause?: unknown) => finish({ err: signal?.aborted ? signal.reason : new BarePutFailed(message, cause === undefined ? undefined : { cause }) });
    const answered = () => {
      const a = answer!;
      finish({ ok: a.status >= 200 && a.status < 300 ? a : { ...a, code: s3ErrorCode(errorBody) ?? `HTTP ${a.status}` } });
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
        length = contentLength === undefined || parsed.headers.has('transfer-encoding') ? -1 : Number(contentLength);
        answer = { status: parsed.status, code: '', etag: parsed.headers.get('etag') };
        // An answer before the whole body went (an early refusal): nothing more is sent.
        ring.close();
      }
      received += chunk.length;
      if (errorBody.length < ERROR_BODY_BYTES && answer!.status >= 300) errorBody += chunk.toString('utf8');
      // Without a length the answer ends with the connection (asked for with Connection: close).
      if (length >= 0 && received >= length) answered();
    };

    const socket = connect({ host: opts.host, port: opts.port });
    const connectTimer = setTimeout(() => fail(`no connection to ${opts.host}:${opts.port} within ${opts.connectTimeoutMs / 1000} s`), opts.connectTimeoutMs);
    const onAbort = () => finish({ err: signal?.reason });
    signal?.addEventListener('abort', onAbort, { once: true });
    socket.setNoDelay(true);
    socket.setTimeout(opts.idleTimeoutMs, () => fail(`no progress for ${opts.idleTimeoutMs / 1000} s`));
    socket.on('data', bytes);
    socket.on('error', (err) => fail(describeNetworkError(err), err));
    socket.on('close', () => {
      if (answer !== undefined && length < 0) answered();
      else fail(answer === undefined ? 'the connection closed before an answer' : `the connection closed after ${received} of ${length} bytes of the answer`);
    });
    socket.once('connect', () => {
      clearTimeout(connectTimer);
      const fields = opts.headers.map(([name, value]) => `${name}: ${value}\r\n`).join('');
      socket.write(`PUT ${pathAndQuery} HTTP/1.1\r\nHost: ${opts.hostHeader}\r\nContent-Length: ${expected.size}\r\n${fields}Connection: close\r\n\r\n`);
      // A SourceChanged, or the file's read error as it is (the primary's problem, not the replica's).
      writeBody(socket, file, expected, ring).catch((err: unknown) => finish({ err }));
    });
  });
}

/**
 * Writes the file's bytes, each chunk from a buffer of `ring` that goes back to it once the
 * socket is done with it. Stops early when the ring is closed (an answer came, or a failure).
 */
async function writeBody(socket: Socket, file: FileHandle, expected: ExpectedFile, ring: ChunkRing): Promise<void> {
  const hash = createHash('sha256');
  let position = 0;
  for (;;) {
    const buf = await ring.take();
    if (buf === undefined) return;
    let bytesRead: number;
    try {
      // At the expected end one byte more is asked for: a file that grew is not the catalog's.
      ({ bytesRead } = await file.read(buf, 0, Math.max(1, Math.min(CHUNK_BYTES, expected.size - position)), position));
    } catch (err) {
      ring.give(buf);
      throw err;
    }
    const chunk = buf.subarray(0, bytesRead);
    hash.update(chunk);
    position += bytesRead;
    const last = bytesRead === 0 || position >= expected.size;
    if (last) {
      if (position === expected.size && bytesRead > 0) {
        const { bytesRead: extra } = await file.read(Buffer.alloc(1), 0, 1, position);
        position += extra;
      }
      // The last chunk goes out only once the whole file proved to be the catalog's.
      const sha256 = hash.digest('hex');
      if (position !== expected.size || sha256 !== expected.sha256.toLowerCase()) {
        ring.give(buf);
        throw new SourceChanged(position, sha256);
      }
    }
    if (ring.closed || chunk.length === 0) ring.give(buf);
    else socket.write(chunk, () => ring.give(buf));
    if (last) return;
  }
}

/** The buffers of one PUT: CHUNKS_IN_FLIGHT at most, taken from (and given back to) the kept ones. */
class ChunkRing {
  private lent = 0;
  private waiter: (() => void) | undefined;
  closed = false;

  /** A buffer, once one is free; undefined once the ring is closed. */
  async take(): Promise<Buffer | undefined> {
    while (this.lent >= CHUNKS_IN_FLIGHT && !this.closed) await new Promise<void>((resolve) => (this.waiter = resolve));
    if (this.closed) return undefined;
    this.lent++;
    return freeChunks.pop() ?? Buffer.allocUnsafeSlow(CHUNK_BYTES);
  }

  /** Called once nothing uses `buf` any more (the socket's write callback, also after close). */
  give(buf: Buffer): void {
    this.lent--;
    if (freeChunks.length < CHUNKS_KEPT) freeChunks.push(buf);
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
