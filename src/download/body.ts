/**
 * Putting stored bytes on the wire: opening a stored file against its catalog record, reading it
 * exactly, and writing a response body of promised length through a small ring of reused 1 MiB
 * buffers. Used by both the single-file and the zip download.
 *
 * Why a ring and not a stream handed to fastify: a stream allocates a fresh 1 MiB buffer per read, and
 * the garbage collection that follows cost fastify more CPU than a bare node:http server piping the
 * same file, more as the heap grows (docs/performance.md, "Downloads"). Reusing three
 * buffers, each handed back when the socket has taken its bytes, brings it under the floor. The
 * ring is also the backpressure: no more than three chunks are ever in flight.
 *
 * What it guarantees: the body is exactly the promised length or the connection is destroyed
 * (also when nothing has gone out yet: the status and length are promised once this starts, so
 * callers check what they can, like opening and fstat'ing a file, before calling it); a client
 * that goes away stops the reading and the source is closed.
 */
import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import type { FileRecord } from '../catalog/types.js';

/** Read size for every download: fewer, larger reads serve faster (docs/performance.md, "Downloads"). */
export const READ_CHUNK = 1 << 20;
/** Buffers per response: one being filled while up to two drain to the socket. */
const RING_SIZE = 3;

/** A stored file that cannot be served as the catalog describes it. The message holds no server path. */
export class StoredFileError extends Error {
  readonly statusCode = 500;
  constructor(
    readonly code: 'unreadable' | 'not-a-file' | 'size-mismatch' | 'short-read',
    /** Path relative to the bag root, as in the catalog. */
    readonly path: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'StoredFileError';
  }
}

/**
 * How stored files are opened: never through a symlink, and never waiting on a FIFO put in a
 * file's place (the fstat that follows refuses it), which would hang the thread that opens it.
 */
const OPEN_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

function unreadable(record: FileRecord, err: unknown): StoredFileError {
  return new StoredFileError('unreadable', record.path, `stored file ${record.path} cannot be read`, {
    cause: err,
  });
}

/** Throws unless `stats` are of a regular file of the size the catalog records. */
function checkStats(stats: Stats, record: FileRecord): void {
  if (!stats.isFile())
    throw new StoredFileError('not-a-file', record.path, `stored file ${record.path} is not a regular file`);
  if (stats.size !== record.size) {
    throw new StoredFileError(
      'size-mismatch',
      record.path,
      `stored file ${record.path} does not match the catalog (${stats.size} bytes on disk, ${record.size} recorded)`,
    );
  }
}

/**
 * Opens a stored file (not following a symlink) and checks it is a regular file of the size the
 * catalog records. The caller owns the handle.
 */
export async function openStoredFile(
  absPath: string,
  record: FileRecord,
): Promise<{ handle: FileHandle; mtime: Date }> {
  let handle: FileHandle;
  try {
    handle = await open(absPath, OPEN_FLAGS);
  } catch (err) {
    throw unreadable(record, err);
  }
  try {
    const stats = await handle.stat();
    checkStats(stats, record);
    return { handle, mtime: stats.mtime };
  } catch (err) {
    closeQuietly(handle);
    throw err instanceof StoredFileError ? err : unreadable(record, err);
  }
}

/**
 * The whole of a small stored file into `buf` at `offset`, checked as `openStoredFile` checks it,
 * in four system calls on the calling thread; returns its modification time (epoch ms). For files
 * whose thread-pool round trips would cost more than their bytes (docs/performance.md,
 * "Downloads"); the caller bounds how long it spends here.
 */
export function readSmallStoredFile(
  absPath: string,
  record: FileRecord,
  buf: Buffer,
  offset: number,
): number {
  let fd: number;
  try {
    fd = openSync(absPath, OPEN_FLAGS);
  } catch (err) {
    throw unreadable(record, err);
  }
  try {
    const stats = fstatSync(fd);
    checkStats(stats, record);
    for (let done = 0; done < record.size;) {
      const n = readSync(fd, buf, offset + done, record.size - done, done);
      if (n === 0)
        throw new StoredFileError(
          'short-read',
          record.path,
          `stored file ${record.path} ended after ${done} bytes while being sent`,
        );
      done += n;
    }
    return stats.mtimeMs;
  } catch (err) {
    throw err instanceof StoredFileError ? err : unreadable(record, err);
  } finally {
    try {
      closeSync(fd);
    } catch {
      // Nothing was written through it: a failed close loses nothing.
    }
  }
}

export function closeQuietly(handle: FileHandle): void {
  handle.close().catch(() => {});
}

/** Fills `buffer[offset, offset+length)` from `position`, or throws if the file ends first. */
export async function readFully(
  handle: FileHandle,
  buffer: Buffer,
  offset: number,
  length: number,
  position: number,
  path: string,
): Promise<void> {
  let done = 0;
  while (done < length) {
    let bytesRead: number;
    try {
      ({ bytesRead } = await handle.read(buffer, offset + done, length - done, position + done));
    } catch (err) {
      throw new StoredFileError(
        'unreadable',
        path,
        `stored file ${path} could not be read while being sent`,
        { cause: err },
      );
    }
    if (bytesRead === 0) {
      throw new StoredFileError(
        'short-read',
        path,
        `stored file ${path} ended after ${position + done} bytes while being sent`,
      );
    }
    done += bytesRead;
  }
}

/** Where a response body comes from. */
export interface BodySource {
  /** Fills `buf` from its start with the body's next bytes; returns how many, 0 once the body is complete. */
  fill(buf: Buffer): Promise<number>;
  /** Releases whatever the source holds open; called exactly once, however the response ended. */
  close(): Promise<void>;
}

/**
 * Read buffers kept between responses, at most `SPARE_BUFFERS`: a fresh ring per response made
 * V8 count 3 MiB of new external memory each time, and the collections that followed cost the
 * daemon a sixth of a download's CPU (docs/performance.md, "Downloads"). A buffer comes back here
 * only from its write's callback, once the socket no longer holds it.
 */
const spare: Buffer[] = [];
const SPARE_BUFFERS = 2 * RING_SIZE;

/** Reused buffers for one response; `take` waits for one to come back, or gets undefined once closed. */
class BufferRing {
  private readonly free: Buffer[] = [];
  private waiter: ((buf: Buffer | undefined) => void) | undefined;
  private closed = false;

  constructor(count: number, size: number) {
    for (let i = 0; i < count; i++) this.free.push(spare.pop() ?? Buffer.allocUnsafeSlow(size));
  }

  take(): Promise<Buffer | undefined> {
    const buf = this.free.pop();
    if (buf !== undefined || this.closed) return Promise.resolve(buf);
    return new Promise((resolve) => (this.waiter = resolve));
  }

  give(buf: Buffer): void {
    if (this.closed) return keep(buf);
    const waiter = this.waiter;
    this.waiter = undefined;
    if (waiter !== undefined) waiter(buf);
    else this.free.push(buf);
  }

  close(): void {
    this.closed = true;
    for (const buf of this.free.splice(0)) keep(buf);
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.(undefined);
  }
}

function keep(buf: Buffer): void {
  if (spare.length < SPARE_BUFFERS) spare.push(buf);
}

/** How writing a body ended: all of it, the client gone first, or a failure (the connection destroyed). */
export type BodyOutcome =
  | { outcome: 'sent'; sent: number }
  | { outcome: 'client-gone'; sent: number }
  | { outcome: 'failed'; sent: number; err: unknown };

/**
 * Writes `length` bytes from `source` to a response whose status and headers have been written.
 * The body is exactly `length` bytes or the connection is destroyed; the source is closed in
 * every case.
 */
export async function writeBody(
  res: ServerResponse,
  source: BodySource,
  length: number,
): Promise<BodyOutcome> {
  const ring = new BufferRing(RING_SIZE, READ_CHUNK);
  let gone = false;
  const onClose = () => {
    gone = true;
    ring.close();
  };
  res.once('close', onClose);
  let sent = 0;
  try {
    for (;;) {
      const buf = await ring.take();
      if (buf === undefined) break;
      const n = await source.fill(buf);
      if (gone) break;
      if (n === 0) {
        ring.give(buf);
        break;
      }
      sent += n;
      if (sent > length) throw new Error(`body longer than the ${length} bytes promised`);
      res.write(n === buf.length ? buf : buf.subarray(0, n), () => ring.give(buf));
    }
    if (gone) return { outcome: 'client-gone', sent };
    if (sent !== length) throw new Error(`body of ${sent} bytes, ${length} promised`);
    res.end();
    return { outcome: 'sent', sent };
  } catch (err) {
    // Never end a body short of its Content-Length as if it were complete.
    res.destroy();
    return { outcome: 'failed', sent, err };
  } finally {
    res.off('close', onClose);
    ring.close();
    await source.close();
  }
}
