/**
 * The little of HTTP/1.1 that the bare GET (http-digest.ts) and PUT (http-put.ts) share: where
 * they connect and how long they wait, the head of an answer taken apart, the S3 error code of
 * an error answer, and a socket's error put into words. Nothing here touches a socket.
 */

/** An answer's head must fit in this. */
export const HEAD_BYTES = 16 * 1024;
/** An error answer's body is kept up to this many bytes, for its code. */
export const ERROR_BODY_BYTES = 4096;

/** Where a bare request connects, the Host its URL was signed for, and how long it waits. */
export interface BareConnection {
  host: string;
  port: number;
  hostHeader: string;
  connectTimeoutMs: number;
  /** No progress for this long: failed. */
  idleTimeoutMs: number;
  signal?: AbortSignal | undefined;
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
