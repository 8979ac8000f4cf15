/**
 * Serving one stored file from another copy (a verified replica) when the primary cannot be
 * read: the same headers as `answerFile` (type, disposition, strong ETag and digests from the
 * catalog, one Range), with the bytes streamed from whatever `openRange` returns. If-None-Match
 * is honoured; there is no Last-Modified, since the primary file's mtime is not to be had.
 *
 * It knows nothing of replicas: the caller hands over a function that opens the copy's bytes.
 */
import type { Readable } from 'node:stream';
import type { FileRecord } from '../catalog/types.js';
import type { DownloadAnswer } from './answer.js';
import type { BodySource } from './body.js';
import { contentDisposition, contentTypeFor, digestField, parseRange, type FileRequest } from './file.js';

/** Opens bytes `start` to `end` (inclusive) of the copy, or undefined when it has none. */
export type OpenRange = (range: { start: number; end: number }) => Promise<Readable | undefined>;

export async function answerFromCopy(
  record: FileRecord,
  request: FileRequest,
  openRange: OpenRange,
): Promise<DownloadAnswer | undefined> {
  const size = record.size;
  const etag = record.digests.sha256 === undefined ? undefined : `"${record.digests.sha256}"`;
  const ifNoneMatch = request.headers['if-none-match'];
  if (
    etag !== undefined &&
    ifNoneMatch !== undefined &&
    ifNoneMatch.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag)
  )
    return { kind: 'headers', status: 304, headers: { etag } };
  const headers: Record<string, string> = {
    'content-type': contentTypeFor(record.path),
    'content-disposition': contentDisposition(record.path.slice(record.path.lastIndexOf('/') + 1)),
    'accept-ranges': 'bytes',
    'x-content-type-options': 'nosniff',
  };
  if (etag !== undefined) headers.etag = etag;
  const digest = digestField(record);
  if (digest !== undefined) headers['repr-digest'] = digest;
  const ifRange = request.headers['if-range'];
  const range =
    request.method === 'GET' && (ifRange === undefined || ifRange.trim() === etag)
      ? parseRange(request.headers.range, size)
      : { kind: 'none' as const };
  const context = { path: record.path, from: 'replica' };
  if (range.kind === 'unsatisfiable')
    return {
      kind: 'error',
      status: 416,
      headers: { 'accept-ranges': 'bytes', 'content-range': `bytes */${size}` },
      message: `range not satisfiable: ${record.path} has ${size} bytes`,
      context,
    };
  const [start, end] = range.kind === 'range' ? [range.start, range.end] : [0, size - 1];
  if (range.kind === 'range') headers['content-range'] = `bytes ${start}-${end}/${size}`;
  else if (digest !== undefined) headers['content-digest'] = digest;
  headers['content-length'] = String(end - start + 1);
  const status = range.kind === 'range' ? 206 : 200;
  if (request.method === 'HEAD') return { kind: 'headers', status, headers };
  const stream = size === 0 ? undefined : await openRange({ start, end });
  if (size !== 0 && stream === undefined) return undefined;
  return { kind: 'body', status, headers, length: end - start + 1, source: streamSource(stream), context };
}

/** A BodySource reading a stream's chunks into the caller's buffers. */
function streamSource(stream: Readable | undefined): BodySource {
  const chunks = stream?.[Symbol.asyncIterator]();
  let left: Buffer | undefined;
  return {
    fill: async (buf: Buffer) => {
      if (chunks === undefined) return 0;
      let n = 0;
      while (n < buf.length) {
        if (left === undefined || left.length === 0) {
          const next = await chunks.next();
          if (next.done === true) break;
          left = next.value as Buffer;
        }
        const take = Math.min(left.length, buf.length - n);
        left.copy(buf, n, 0, take);
        left = left.subarray(take);
        n += take;
      }
      return n;
    },
    close: async () => {
      stream?.destroy();
    },
  };
}
