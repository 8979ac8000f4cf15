/**
 * Serving one stored file: headers from the catalog (strong ETag and RFC 9530 digests from the
 * recorded sha256), one Range (206/416), If-None-Match/If-Modified-Since (304), If-Range, HEAD,
 * and the body streamed with backpressure in 1 MiB reads. The file is opened and fstat'ed before
 * anything is answered; a file that no longer matches its catalog size is a 500, and a file that
 * comes up short while streaming destroys the connection instead of ending a short body (see
 * `body.ts` for how the bytes are written).
 *
 * It does not decide which file: the route resolves `{file}` through the catalog and hands over
 * the record and its absolute path.
 */
import type { FileHandle } from 'node:fs/promises';
import type { FileRecord } from '../catalog/types.js';
import type { DownloadAnswer } from './answer.js';
import { openStoredFile, readFully, StoredFileError } from './body.js';

/** Where a front proxy should take the body from instead of us (config `download.offload`). */
export interface Offload {
  header: 'X-Sendfile' | 'X-Accel-Redirect';
  /** X-Accel-Redirect only: the internal location mapped onto the storage root, e.g. `/_storage`. */
  prefix?: string;
}

/** The parts of a request a file download depends on (header names lower-case, as node gives them). */
export interface FileRequest {
  method: string;
  headers: {
    'if-none-match'?: string | undefined;
    'if-modified-since'?: string | undefined;
    'if-range'?: string | undefined;
    range?: string | undefined;
  };
}

export interface StoredFile {
  /** Absolute path, resolved from the catalog record (never from a request string). */
  absPath: string;
  record: FileRecord;
  /** Path relative to the storage root (`ab/cd/ef/<bag_id>/data/a.wav`); needed for X-Accel-Redirect. */
  storageRelativePath?: string;
}

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  txt: 'text/plain',
  md: 'text/markdown',
  csv: 'text/csv',
  tsv: 'text/tab-separated-values',
  xml: 'application/xml',
  json: 'application/json',
  yaml: 'application/yaml',
  yml: 'application/yaml',
  html: 'text/html',
  htm: 'text/html',
  pdf: 'application/pdf',
  epub: 'application/epub+zip',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  png: 'image/png',
  tif: 'image/tiff',
  tiff: 'image/tiff',
  gif: 'image/gif',
  jp2: 'image/jp2',
  webp: 'image/webp',
  svg: 'image/svg+xml',
  wav: 'audio/wav',
  mp3: 'audio/mpeg',
  flac: 'audio/flac',
  ogg: 'audio/ogg',
  m4a: 'audio/mp4',
  aif: 'audio/aiff',
  aiff: 'audio/aiff',
  mov: 'video/quicktime',
  mp4: 'video/mp4',
  mkv: 'video/x-matroska',
  avi: 'video/x-msvideo',
  mxf: 'application/mxf',
  zip: 'application/zip',
  gz: 'application/gzip',
  tar: 'application/x-tar',
};

/** Content-Type from the file name's extension; unknown ones are plain bytes. */
export function contentTypeFor(path: string): string {
  const name = path.slice(path.lastIndexOf('/') + 1);
  const dot = name.lastIndexOf('.');
  if (dot <= 0) return 'application/octet-stream';
  return CONTENT_TYPES[name.slice(dot + 1).toLowerCase()] ?? 'application/octet-stream';
}

/**
 * `attachment; filename="…"`, plus RFC 6266 `filename*=UTF-8''…` when the name is not printable
 * ASCII; the plain `filename` then carries an ASCII stand-in for old clients.
 */
export function contentDisposition(fileName: string): string {
  const plain = /^[\x20-\x7e]*$/.test(fileName);
  const fallback = fileName.replace(/[^\x20-\x7e]/gu, '_').replace(/["\\]/g, '\\$&');
  if (plain) return `attachment; filename="${fallback}"`;
  // encodeURIComponent leaves ' ( ) * unescaped; RFC 8187 attr-char does not allow them.
  const encoded = encodeURIComponent(fileName).replace(
    /['()*]/g,
    (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase(),
  );
  return `attachment; filename="${fallback}"; filename*=UTF-8''${encoded}`;
}

/** RFC 9530 field value (`sha-256=:…:, sha-512=:…:`) from the recorded hex digests, or undefined. */
export function digestField(record: FileRecord): string | undefined {
  const parts: string[] = [];
  if (record.digests.sha256 !== undefined)
    parts.push(`sha-256=:${Buffer.from(record.digests.sha256, 'hex').toString('base64')}:`);
  if (record.digests.sha512 !== undefined)
    parts.push(`sha-512=:${Buffer.from(record.digests.sha512, 'hex').toString('base64')}:`);
  return parts.length === 0 ? undefined : parts.join(', ');
}

export type RangeRequest =
  { kind: 'none' } | { kind: 'unsatisfiable' } | { kind: 'range'; start: number; end: number };

/**
 * One `bytes=` range against a representation of `size` bytes (RFC 9110 §14). A malformed
 * header, another unit or several ranges are answered with the whole body (the server may
 * ignore Range): we do not build multipart/byteranges, and a client asking for several ranges
 * gets a 200 it can cut itself.
 */
export function parseRange(header: string | undefined, size: number): RangeRequest {
  if (header === undefined) return { kind: 'none' };
  const m = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header);
  if (m === null) return { kind: 'none' };
  const [, first, last] = m as unknown as [string, string, string];
  if (first === '' && last === '') return { kind: 'none' };
  if (first === '') {
    const suffix = Number(last);
    if (suffix === 0 || size === 0) return { kind: 'unsatisfiable' };
    return { kind: 'range', start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(first);
  if (!Number.isSafeInteger(start)) return { kind: 'none' };
  const end = last === '' ? size - 1 : Number(last);
  if (last !== '' && end < start) return { kind: 'none' };
  if (start >= size) return { kind: 'unsatisfiable' };
  return { kind: 'range', start, end: Math.min(end, size - 1) };
}

/** Whether an If-None-Match list names `etag` (weak comparison, as RFC 9110 §13.1.2 asks). */
function noneMatchHits(header: string, etag: string): boolean {
  if (header.trim() === '*') return true;
  const opaque = etag.replace(/^W\//, '');
  return header.split(',').some((tag) => tag.trim().replace(/^W\//, '') === opaque);
}

/** If-None-Match (before If-Modified-Since, RFC 9110 §13.2.2) says the client's copy is current. */
function notModified(headers: FileRequest['headers'], etag: string | undefined, mtime: Date): boolean {
  const { 'if-none-match': ifNoneMatch, 'if-modified-since': ifModifiedSince } = headers;
  if (ifNoneMatch !== undefined) return etag !== undefined && noneMatchHits(ifNoneMatch, etag);
  return (
    ifModifiedSince !== undefined && Math.floor(mtime.getTime() / 1000) * 1000 <= Date.parse(ifModifiedSince)
  );
}

/** If-Range (RFC 9110 §13.1.5): a strong ETag equal to ours, or exactly our Last-Modified. */
function ifRangeHolds(header: string, etag: string | undefined, lastModified: string): boolean {
  const value = header.trim();
  if (value.startsWith('"') || value.startsWith('W/')) return etag !== undefined && value === etag;
  const date = Date.parse(value);
  return !Number.isNaN(date) && date === Date.parse(lastModified);
}

/**
 * The answer to GET or HEAD for one stored file. See the module comment for what is honoured;
 * Range is applied to GET only (RFC 9110 §14.2), and with `offload` the proxy serves the body
 * (and any Range) itself while we keep the validators and digests. A body answer holds the open
 * file: send it (which closes it) or close its source.
 */
export async function answerFile(
  file: StoredFile,
  request: FileRequest,
  opts: { offload?: Offload | undefined } = {},
): Promise<DownloadAnswer> {
  const { record } = file;
  const context = { file: file.absPath, path: record.path };
  let opened: { handle: FileHandle; mtime: Date };
  try {
    opened = await openStoredFile(file.absPath, record);
  } catch (err) {
    const message =
      err instanceof StoredFileError ? err.message : `stored file ${record.path} cannot be read`;
    return { kind: 'error', status: 500, headers: {}, message, cause: err, context };
  }
  const { handle } = opened;
  let handedOver = false;
  try {
    const size = record.size;
    const etag = record.digests.sha256 === undefined ? undefined : `"${record.digests.sha256}"`;
    const lastModified = opened.mtime.toUTCString();
    const reprDigest = digestField(record);
    const validators: Record<string, string> = { 'last-modified': lastModified };
    if (etag !== undefined) validators.etag = etag;

    if (notModified(request.headers, etag, opened.mtime))
      return { kind: 'headers', status: 304, headers: validators };

    const representation: Record<string, string> = {
      'content-type': contentTypeFor(record.path),
      'content-disposition': contentDisposition(record.path.slice(record.path.lastIndexOf('/') + 1)),
      'accept-ranges': 'bytes',
      'x-content-type-options': 'nosniff',
      ...validators,
    };
    if (reprDigest !== undefined) representation['repr-digest'] = reprDigest;
    if (opts.offload !== undefined)
      return { kind: 'offload', headers: { ...representation, ...offloadHeaders(file, opts.offload) } };

    let range: RangeRequest = { kind: 'none' };
    const ifRange = request.headers['if-range'];
    if (request.method === 'GET' && (ifRange === undefined || ifRangeHolds(ifRange, etag, lastModified))) {
      range = parseRange(request.headers.range, size);
    }
    if (range.kind === 'unsatisfiable') {
      return {
        kind: 'error',
        status: 416,
        headers: { ...validators, 'accept-ranges': 'bytes', 'content-range': `bytes */${size}` },
        message: `range not satisfiable: ${record.path} has ${size} bytes`,
        context,
      };
    }
    const [start, end] = range.kind === 'range' ? [range.start, range.end] : [0, size - 1];
    const headers = { ...representation };
    if (range.kind === 'range') headers['content-range'] = `bytes ${start}-${end}/${size}`;
    else if (reprDigest !== undefined) headers['content-digest'] = reprDigest;
    headers['content-length'] = String(end - start + 1);
    const status = range.kind === 'range' ? 206 : 200;
    if (request.method === 'HEAD') return { kind: 'headers', status, headers };

    handedOver = true;
    let position = start;
    const source = {
      fill: async (buf: Buffer) => {
        const n = Math.min(buf.length, end + 1 - position);
        if (n <= 0) return 0;
        await readFully(handle, buf, 0, n, position, record.path);
        position += n;
        return n;
      },
      close: () => handle.close(),
    };
    return { kind: 'body', status, headers, length: end - start + 1, source, context };
  } finally {
    if (!handedOver) await handle.close().catch(() => {});
  }
}

/**
 * X-Sendfile carries the absolute path (Apache mod_xsendfile, lighttpd ≥ 1.4.40); X-Accel-Redirect
 * a URI under `prefix`. Both percent-encoded per segment: nginx ≥ 1.5.9 expects an escaped URI,
 * mod_xsendfile (XSendFileUnescape, on by default) and lighttpd decode X-Sendfile, and a newline or
 * other control character in a name could not be put in a header at all.
 */
function offloadHeaders(file: StoredFile, offload: Offload): Record<string, string> {
  const escaped = (path: string) => path.split('/').map(encodeURIComponent).join('/');
  if (offload.header === 'X-Sendfile') return { 'x-sendfile': escaped(file.absPath) };
  if (file.storageRelativePath === undefined)
    throw new Error('X-Accel-Redirect needs the file path relative to the storage root');
  const prefix = (offload.prefix ?? '').replace(/\/+$/, '');
  return { 'x-accel-redirect': `${prefix}/${escaped(file.storageRelativePath)}` };
}
