/**
 * Size and sha256 of an object fetched by a GET of a presigned URL, `http:` or `https:`, hashed
 * as its bytes arrive. It speaks just enough HTTP/1.1 for that: one GET on a connection of its
 * own (`Connection: close`), an answer with a Content-Length. The connection reads into one
 * buffer that is reused for every read (node:net's and node:tls's `onread`), where node:http and
 * undici allocate a new buffer per read; that allocation, not the hashing, was most of a
 * read-back's CPU. A new connection per object (its buffer goes back to the replica's pool),
 * because a kept-alive one waits for the delayed ACK on every small object. Figures:
 * docs/performance.md, "Replication"; why not a library: docs/decisions.md.
 *
 * An answer that is not a 2xx comes back with its status and the S3 error code of its body; an
 * answer it cannot take (chunked, no length) comes back as 'unsupported', for the caller to read
 * another way. No answer, a connection that breaks or stalls: it throws a BareGetFailed. It does
 * not decide what an answer means for a copy, or retry.
 */
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  connectTo,
  describeNetworkError,
  ERROR_BODY_BYTES,
  HEAD_BYTES,
  parseHead,
  s3ErrorCode,
  type BareConnection,
} from './bare-http.js';

export type BareGet =
  | { kind: 'body'; size: number; sha256: string }
  | { kind: 'status'; status: number; code: string }
  | { kind: 'unsupported'; reason: string };

/** The GET got no whole answer: refused, reset, stalled, cut short. */
export class BareGetFailed extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BareGetFailed';
  }
}

export interface BareGetOptions extends BareConnection {
  /** Read no faster than this (bytes per second); 0 or absent: no limit. */
  bytesPerSec?: number | undefined;
}

/** GETs `pathAndQuery` and hashes the answer's body as it arrives. */
/* eslint-disable max-lines-per-function -- one GET's state machine (head, body, pacing, abort) over one socket's callbacks */
export function bareGetDigest(pathAndQuery: string, opts: BareGetOptions): Promise<BareGet> {
  const { signal } = opts;
  signal?.throwIfAborted();
  const rate = opts.bytesPerSec ?? 0;
  return new Promise<BareGet>((resolve, reject) => {
    const buffer = opts.buffers.take();
    let head: Buffer | undefined = Buffer.alloc(0);
    let status = 0;
    let length = 0;
    let received = 0;
    let errorBody = '';
    const hash = createHash('sha256');
    let started = 0;
    let paused = false;
    let done = false;

    const finish = (outcome: { ok: BareGet } | { err: unknown }) => {
      if (done) return;
      done = true;
      signal?.removeEventListener('abort', onAbort);
      socket.destroy();
      if ('ok' in outcome) resolve(outcome.ok);
      else reject(outcome.err);
    };
    const fail = (message: string, cause?: unknown) =>
      finish({
        err: signal?.aborted
          ? signal.reason
          : new BareGetFailed(message, cause === undefined ? undefined : { cause }),
      });
    const answer = (): BareGet =>
      status >= 200 && status < 300
        ? { kind: 'body', size: received, sha256: hash.digest('hex') }
        : { kind: 'status', status, code: s3ErrorCode(errorBody) ?? `HTTP ${status}` };

    const body = (bytes: Buffer) => {
      if (bytes.length === 0) return;
      received += bytes.length;
      if (received > length) return fail(`the answer ran past its Content-Length of ${length}`);
      if (status >= 200 && status < 300) hash.update(bytes);
      else if (errorBody.length < ERROR_BODY_BYTES) errorBody += bytes.toString('utf8');
      if (received === length) return finish({ ok: answer() });
      // Over TLS a few records may still come after a pause: counted, and the next pause waits for them.
      if (rate > 0 && !paused) {
        const due = started + (received / rate) * 1000 - performance.now();
        if (due > 1) {
          paused = true;
          sleep(due).then(
            () => {
              paused = false;
              if (!done) socket.resume();
            },
            () => undefined,
          );
        }
      }
    };
    const bytes = (chunk: Buffer) => {
      if (done) return;
      if (head === undefined) return body(chunk);
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > HEAD_BYTES) fail(`an answer whose head is over ${HEAD_BYTES} bytes`);
        return;
      }
      const parsed = statusAndLength(head.subarray(0, end).toString('latin1'));
      const rest = head.subarray(end + 4);
      head = undefined;
      if (typeof parsed === 'string') return finish({ ok: { kind: 'unsupported', reason: parsed } });
      ({ status, length } = parsed);
      started = performance.now();
      if (length === 0) return finish({ ok: answer() });
      body(rest);
    };

    const request = () =>
      socket.write(`GET ${pathAndQuery} HTTP/1.1\r\nHost: ${opts.hostHeader}\r\nConnection: close\r\n\r\n`);
    const socket = connectTo(opts, request, fail, {
      buffer,
      callback: (n) => {
        bytes(buffer.subarray(0, n));
        // false pauses the socket until resume(): over TLS, socket.pause() would not stop the reads.
        return !paused;
      },
    });
    const onAbort = () => finish({ err: signal?.reason });
    signal?.addEventListener('abort', onAbort, { once: true });
    socket.setTimeout(opts.idleTimeoutMs, () => fail(`no answer for ${opts.idleTimeoutMs / 1000} s`));
    socket.on('error', (err) => fail(describeNetworkError(err), err));
    socket.on('close', () => {
      // Closed: nothing reads into the buffer any more.
      opts.buffers.give(buffer);
      fail(
        head === undefined
          ? `the connection closed after ${received} of ${length} bytes`
          : 'the connection closed before an answer',
      );
    });
  });
}
/* eslint-enable max-lines-per-function */

/** Status and length of an answer's head, or why it cannot be taken. */
function statusAndLength(text: string): { status: number; length: number } | string {
  const parsed = parseHead(text);
  if (typeof parsed === 'string') return parsed;
  const { headers } = parsed;
  if (headers.has('transfer-encoding')) return `a ${headers.get('transfer-encoding')} answer`;
  const length = Number(headers.get('content-length'));
  if (!headers.has('content-length') || !Number.isSafeInteger(length) || length < 0)
    return 'an answer without a Content-Length';
  return { status: parsed.status, length };
}
