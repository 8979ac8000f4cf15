/**
 * The little of HTTP/1.1 that the bare GET (http-digest.ts) and PUT (http-put.ts) share: the
 * head of an answer taken apart, and a socket's error put into words. Nothing here touches a
 * socket.
 */

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
