/**
 * Size and sha256 of an object fetched by a plain `http:` GET (a presigned URL), hashed as its
 * bytes arrive. It speaks just enough HTTP/1.1 for that: one GET at a time per connection, an
 * answer with a Content-Length, keep-alive. Each connection reads into one buffer of its own that
 * is reused for every read (`net.connect`'s `onread`), where node:http and undici allocate a new
 * buffer per read; that allocation, not the hashing, was most of a read-back's CPU
 * (docs/performance.md, "Replication"; docs/decisions.md says why this is not a library).
 *
 * An answer that is not a 2xx comes back with its status and the S3 error code of its body; an
 * answer it cannot take (chunked, no length) comes back as 'unsupported', for the caller to read
 * another way. No answer, a connection that breaks or stalls: it throws a BareGetFailed. It does
 * not speak TLS (`https:` endpoints are read through node:http by s3-get.ts), decide what an
 * answer means for a copy, or retry anything but a kept-alive connection the server had closed.
 */
import { createHash } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/** The buffer each connection reads into. */
const READ_BYTES = 256 * 1024;
/** An answer's head must fit in this. */
const HEAD_BYTES = 16 * 1024;
/** An error answer's body is kept up to this many bytes, for its code. */
const ERROR_BODY_BYTES = 4096;
/** Idle connections kept per endpoint. */
const IDLE_KEPT = 8;

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

export interface BareGetOptions {
  signal?: AbortSignal | undefined;
  /** Read no faster than this (bytes per second); 0 or absent: no limit. */
  bytesPerSec?: number | undefined;
}

/** What a connection's reads go to: the GET that uses it now. */
interface Connection {
  socket: Socket;
  onBytes: (bytes: Buffer) => void;
  onEnd: (err?: Error) => void;
}

export class BareHttpGetter {
  private readonly idle: Connection[] = [];

  constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly timeouts: { connectMs: number; idleMs: number },
  ) {}

  /** GETs `pathAndQuery`; a kept-alive connection that turns out closed is replaced once. */
  async get(pathAndQuery: string, hostHeader: string, opts: BareGetOptions = {}): Promise<BareGet> {
    opts.signal?.throwIfAborted();
    const reused = this.idle.pop();
    if (reused !== undefined) {
      const got = await this.exchange(reused, true, pathAndQuery, hostHeader, opts).catch((err: unknown) => {
        if (err instanceof StaleConnection) return undefined;
        throw err;
      });
      if (got !== undefined) return got;
    }
    return this.exchange(await this.open(opts.signal), false, pathAndQuery, hostHeader, opts);
  }

  close(): void {
    for (const c of this.idle.splice(0)) c.socket.destroy();
  }

  private open(signal: AbortSignal | undefined): Promise<Connection> {
    return new Promise((resolve, reject) => {
      const buffer = Buffer.allocUnsafe(READ_BYTES);
      const socket = connect({
        host: this.host,
        port: this.port,
        onread: {
          buffer,
          callback: (n) => {
            conn.onBytes(buffer.subarray(0, n));
            return true; // false would pause the socket; pausing is exchange()'s, by socket.pause()
          },
        },
      });
      const conn: Connection = { socket, onBytes: () => undefined, onEnd: () => undefined };
      socket.setNoDelay(true);
      const timer = setTimeout(() => socket.destroy(new BareGetFailed(`no connection to ${this.host}:${this.port} within ${this.timeouts.connectMs / 1000} s`)), this.timeouts.connectMs);
      const onAbort = () => socket.destroy(signal?.reason as Error);
      signal?.addEventListener('abort', onAbort, { once: true });
      const failed = (err: Error) => {
        settle();
        reject(signal?.aborted ? signal.reason : err instanceof BareGetFailed ? err : new BareGetFailed(describe(err), { cause: err }));
      };
      const settle = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        socket.off('error', failed);
      };
      socket.once('error', failed);
      socket.once('connect', () => {
        settle();
        socket.setTimeout(this.timeouts.idleMs);
        // From now on the GET using the connection hears of its end; an idle one just leaves.
        socket.on('error', (err) => conn.onEnd(err));
        socket.on('close', () => {
          const i = this.idle.indexOf(conn);
          if (i >= 0) this.idle.splice(i, 1);
          conn.onEnd();
        });
        socket.on('timeout', () => socket.destroy(new BareGetFailed(`no answer for ${this.timeouts.idleMs / 1000} s`)));
        resolve(conn);
      });
    });
  }

  /** One request and its answer on `conn`; the connection goes back to the idle ones if it may. */
  private exchange(conn: Connection, reused: boolean, pathAndQuery: string, hostHeader: string, opts: BareGetOptions): Promise<BareGet> {
    const { socket } = conn;
    const signal = opts.signal;
    const rate = opts.bytesPerSec ?? 0;
    return new Promise<BareGet>((resolve, reject) => {
      let head: Buffer | undefined = Buffer.alloc(0);
      let status = 0;
      let length = 0;
      let keepAlive = false;
      let received = 0;
      let anything = false;
      let errorBody = '';
      const hash = createHash('sha256');
      const started = performance.now();
      let done = false;
      const finish = (outcome: { ok: BareGet } | { err: unknown }) => {
        if (done) return;
        done = true;
        signal?.removeEventListener('abort', onAbort);
        conn.onBytes = () => undefined;
        conn.onEnd = () => undefined;
        if ('ok' in outcome) {
          if (keepAlive && received === length && socket.readyState === 'open' && this.idle.length < IDLE_KEPT) {
            if (socket.isPaused()) socket.resume();
            this.idle.push(conn);
          } else socket.destroy();
          resolve(outcome.ok);
        } else {
          socket.destroy();
          reject(outcome.err);
        }
      };
      const onAbort = () => finish({ err: signal?.reason });
      signal?.addEventListener('abort', onAbort, { once: true });
      const body = (bytes: Buffer) => {
        if (bytes.length === 0) return;
        received += bytes.length;
        if (status >= 200 && status < 300) hash.update(bytes);
        else if (errorBody.length < ERROR_BODY_BYTES) errorBody += bytes.toString('utf8');
        if (received > length) return finish({ err: new BareGetFailed(`the answer ran past its Content-Length of ${length}`) });
        if (received === length) return finish({ ok: answer() });
        if (rate > 0) {
          const due = started + (received / rate) * 1000 - performance.now();
          if (due > 1) {
            socket.pause();
            sleep(due).then(() => done || socket.resume(), () => undefined);
          }
        }
      };
      const answer = (): BareGet =>
        status >= 200 && status < 300
          ? { kind: 'body', size: received, sha256: hash.digest('hex') }
          : { kind: 'status', status, code: /<Code>([^<]{1,100})<\/Code>/.exec(errorBody)?.[1] ?? `HTTP ${status}` };
      conn.onBytes = (bytes) => {
        anything = true;
        if (head === undefined) return body(bytes);
        head = Buffer.concat([head, bytes]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) {
          if (head.length > HEAD_BYTES) finish({ err: new BareGetFailed(`an answer whose head is over ${HEAD_BYTES} bytes`) });
          return;
        }
        const parsed = parseHead(head.subarray(0, end).toString('latin1'));
        const rest = head.subarray(end + 4);
        head = undefined;
        if (typeof parsed === 'string') return finish({ ok: { kind: 'unsupported', reason: parsed } });
        ({ status, length, keepAlive } = parsed);
        if (length === 0) return finish({ ok: answer() });
        body(rest);
      };
      conn.onEnd = (err) => {
        // A kept-alive connection the server had closed, found so before any answer: not this GET's failure.
        if (reused && !anything && (err === undefined || isReset(err))) return finish({ err: new StaleConnection() });
        finish({ err: signal?.aborted ? signal.reason : new BareGetFailed(err === undefined ? `the connection closed after ${received} of ${length} bytes` : describe(err), { cause: err }) });
      };
      socket.write(`GET ${pathAndQuery} HTTP/1.1\r\nHost: ${hostHeader}\r\n\r\n`);
    });
  }
}

/** Status, length and keep-alive of an answer's head, or why it cannot be taken. */
function parseHead(text: string): { status: number; length: number; keepAlive: boolean } | string {
  const [line = '', ...fields] = text.split('\r\n');
  const m = /^HTTP\/1\.([01]) (\d{3})/.exec(line);
  if (m === null) return `not an HTTP/1.x answer: ${line.slice(0, 80)}`;
  const headers = new Map<string, string>();
  for (const field of fields) {
    const colon = field.indexOf(':');
    if (colon > 0) headers.set(field.slice(0, colon).trim().toLowerCase(), field.slice(colon + 1).trim());
  }
  if (headers.has('transfer-encoding')) return `a ${headers.get('transfer-encoding')} answer`;
  const length = Number(headers.get('content-length'));
  if (!headers.has('content-length') || !Number.isSafeInteger(length) || length < 0) return 'an answer without a Content-Length';
  const connection = headers.get('connection')?.toLowerCase();
  return { status: Number(m[2]), length, keepAlive: m[1] === '1' ? connection !== 'close' : connection === 'keep-alive' };
}

/** The server closed a kept-alive connection before this GET's answer: use a new one. */
class StaleConnection extends Error {}

const isReset = (err: Error | undefined): boolean => (err as NodeJS.ErrnoException | undefined)?.code === 'ECONNRESET' || (err as NodeJS.ErrnoException | undefined)?.code === 'EPIPE';

function describe(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  return e.code === undefined ? e.message : `${e.code}: ${e.message}`;
}
