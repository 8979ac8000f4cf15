/**
 * What the bare GET (http-digest.ts) and PUT (http-put.ts) share: a connection of their own to
 * where a presigned URL points, plain for `http:` and TLS (node:tls, the replica's CA bundle
 * added to Node's) for `https:`, with its timeouts; the buffers a replica's connections reuse;
 * the head of an answer taken apart; the S3 error code of an error answer; a socket's error put
 * into words.
 */
import { connect as plainConnect, type Socket } from 'node:net';
import { connect as tlsConnect, rootCertificates } from 'node:tls';

/** An answer's head must fit in this. */
export const HEAD_BYTES = 16 * 1024;
/** An error answer's body is kept up to this many bytes, for its code. */
export const ERROR_BODY_BYTES = 4096;

/** Where a bare request connects, the Host its URL was signed for, and how long it waits. */
export interface BareConnection {
  host: string;
  port: number;
  hostHeader: string;
  /** TLS (an `https:` URL), trusting these CAs (Node's own when absent). */
  tls?: { ca?: string[] | undefined } | undefined;
  connectTimeoutMs: number;
  /** No progress for this long: failed. */
  idleTimeoutMs: number;
  signal?: AbortSignal | undefined;
  /** Where its buffers come from and go back to (one pool per replica). */
  buffers: BufferPool;
}

/** The CAs a replica trusts: Node's, and the PEM certificates of its own bundle when it has one. */
export function trustedCAs(bundle: string | undefined): string[] | undefined {
  return bundle === undefined ? undefined : [...rootCertificates, bundle];
}

/**
 * A connection to `to`, plain or TLS; `ready` runs once it can carry a request (after the TLS
 * handshake), or the connect timeout fails it through `fail`. With `onread`, every read lands in
 * that one buffer (node:net's and node:tls's `onread`) instead of a new one per read.
 */
export function connectTo(
  to: BareConnection,
  ready: () => void,
  fail: (message: string) => void,
  onread?: { buffer: Buffer; callback: (n: number) => boolean },
): Socket {
  const where = { host: to.host, port: to.port, ...(onread ? { onread } : {}) };
  const socket = to.tls
    ? tlsConnect({
        ...where,
        ...(to.tls.ca ? { ca: to.tls.ca } : {}),
        ...(isIp(to.host) ? {} : { servername: to.host }),
      })
    : plainConnect(where);
  const timer = setTimeout(
    () => fail(`no connection to ${to.host}:${to.port} within ${to.connectTimeoutMs / 1000} s`),
    to.connectTimeoutMs,
  );
  socket.once(to.tls ? 'secureConnect' : 'connect', () => {
    clearTimeout(timer);
    ready();
  });
  socket.once('close', () => clearTimeout(timer));
  socket.setNoDelay(true);
  return socket;
}

const isIp = (host: string) => /^[\d.]+$|:/.test(host);

/** Buffers of one size, kept for the next request once one is done with them (at most `kept`). */
export class BufferPool {
  private readonly free: Buffer[] = [];
  constructor(
    readonly size: number,
    private readonly kept: number,
  ) {}

  take(): Buffer {
    return this.free.pop() ?? Buffer.allocUnsafeSlow(this.size);
  }

  give(buf: Buffer): void {
    if (this.free.length < this.kept) this.free.push(buf);
  }
}

/** The S3 error code in an error answer's body (`<Code>AccessDenied</Code>`), if it has one. */
export function s3ErrorCode(body: string): string | undefined {
  return /<Code>([^<]{1,100})<\/Code>/.exec(body)?.[1];
}

/** Status and header fields (names in lower case) of an answer's head, or why it is not one. */
export function parseHead(text: string): { status: number; headers: Map<string, string> } | string {
  const [line = '', ...fields] = text.split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(line);
  if (m === null) return `not an HTTP/1.x answer: ${line.slice(0, 80)}`;
  const headers = new Map<string, string>();
  for (const field of fields) {
    const colon = field.indexOf(':');
    if (colon > 0) headers.set(field.slice(0, colon).trim().toLowerCase(), field.slice(colon + 1).trim());
  }
  return { status: Number(m[1]), headers };
}

/** A socket's error for people: its code and message. */
export function describeNetworkError(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  return e.code === undefined ? e.message : `${e.code}: ${e.message}`;
}
