/**
 * The whole bag as one zip (RFC 8493 serialization: every tag and payload file under
 * `<bag_id>/`), stored, not deflated, streamed with a Content-Length known before the first byte
 * and memory flat whatever the size: entries are opened lazily (at most four ahead of the one
 * being sent, so their opens overlap the sending) and read in 1 MiB chunks into the response's
 * reused buffers (`body.ts`). Small files are read whole on the daemon's thread, each straight after
 * its header: four thread-pool round trips per file cost more than their bytes (docs/performance.md,
 * "Downloads"). That work is sliced so the event loop turns every few milliseconds, and a download
 * whose small files prove slow to read (not in the page cache) goes back to the thread pool.
 *
 * Why our own writer and not yazl: yazl 3.3.1 pipes every streamed entry through its
 * `Crc32Watcher` (buffer-crc32, pure JS, the download's bottleneck) and offers no way to hand it
 * a known CRC; it also writes data descriptors after each entry. The catalog already holds each
 * file's CRC-32 and size, so every header can be written in full before the entry's bytes (no
 * data descriptor), the CRC is never recomputed, and the bytes go from disk to socket untouched
 * (the figures against yazl: docs/performance.md, "Downloads"). If the disk no longer holds what
 * the catalog says, the client's unzip sees the CRC mismatch: the catalog's values were verified
 * at ingest.
 *
 * The files are walked three times in catalog order, never held: once to lay the archive out
 * (its length), once for the entries, once for the central directory; each walk makes every
 * entry's plan again, so a bag of 200,000 files costs one entry's state at a time (and 8 bytes
 * per file for modification times when the archive does not fix them).
 *
 * ZIP64 (APPNOTE 6.3.x §4.3.9, 4.4, 4.5.3) is used per entry when its size or its local header
 * offset does not fit 32 bits, and for the end records when the entry count, the central
 * directory size or its offset do not fit. The records themselves are `zip-records.ts`.
 */
import type { FileHandle } from 'node:fs/promises';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { FileRecord } from '../catalog/types.js';
import type { DownloadAnswer } from './answer.js';
import { closeQuietly, openStoredFile, readFully, readSmallStoredFile, type BodySource } from './body.js';
import { contentDisposition } from './file.js';
import {
  centralHeaderLength,
  endRecords,
  layOutZip,
  localHeaderLength,
  walkEntries,
  writeCentralHeader,
  writeLocalHeader,
  type ZipEntryPlan,
  type ZipLayout,
} from './zip-records.js';
export interface ZipSource {
  bagId: string;
  /** Absolute package folder (for the log). */
  dir: string;
  /** Where a file of the package is on disk (`Storage.storedFilePath`). */
  pathOf: (file: FileRecord) => string;
  /**
   * The package's files in catalog order (sorted by path), walked once per pass: an array, or a
   * view whose every iteration reads them afresh (`PackageStore.files`).
   */
  files: Iterable<FileRecord>;
  /**
   * Modification time given to every entry (when the package was stored, epoch ms or a Date), for
   * an archive that is byte-for-byte the same on every download. Without it each entry gets its
   * stored file's mtime, read by the fstat that checks it anyway.
   */
  storedAt?: number | Date;
}

/** An entry opened and checked against the catalog, with its local header ready. */
interface OpenedEntry {
  entry: ZipEntryPlan;
  handle: FileHandle;
  header: Buffer;
  mtimeMs: number;
}

/** An entry waiting its turn: a file opened (and fstat'ed) ahead, or a small one read when it comes. */
interface QueuedEntry {
  entry: ZipEntryPlan;
  opening: Promise<OpenedEntry> | undefined;
}

/** How many entries are queued (the larger ones opened) ahead of the one being sent. */
const OPEN_AHEAD = 4;
/** Files up to this size are read whole on the daemon's thread (`readSmallStoredFile`). */
const SMALL_FILE = 64 * 1024;
/** Reading small files gives the event loop a turn after this much of it. */
const SYNC_SLICE_MS = 2;
/** A small file that took longer than this came from the disk (or the thread lost its core)... */
const SLOW_READ_MS = 5;
/**
 * ...and once at least this many were, and one in `SLOW_SHARE` or more, the download's remaining
 * small files go through the thread pool. A loaded machine makes a few reads slow, a cold disk most.
 */
const SLOW_READS = 3;
const SLOW_SHARE = 16;
/** Central directory headers are made in batches of about this many bytes. */
const CENTRAL_BATCH = 64 * 1024;

const ignore = () => {};

/**
 * The archive as a body source: each `fill` packs the next bytes into a 1 MiB buffer (headers,
 * file bytes read straight into it, the central directory, the end records), so small files share
 * writes. Entries are opened a few ahead while earlier ones are read; each file is opened and
 * checked against the catalog before any of its bytes go out.
 */
class ZipBody implements BodySource {
  /** Each entry's modification time, when the source does not fix one for all. */
  private readonly mtimes: Float64Array | undefined;
  private readonly fixedMs: number | undefined;
  /** The entries in order, for sending them (the first walk after the layout's). */
  private readonly toOpen: Iterator<ZipEntryPlan>;
  /** The entries again, for the central directory. */
  private readonly toList: Iterator<ZipEntryPlan>;
  /** Entries `sending + 1 …` in order, the larger ones being opened. */
  private readonly ahead: QueuedEntry[] = [];
  private nextToOpen = 0;
  /** Entry whose header or bytes are going out. */
  private sending = -1;
  /** Bytes in memory to copy out first (a local header, central headers, the end records). */
  private memory: Buffer | undefined;
  private memoryAt = 0;
  private file: { handle: FileHandle; size: number; at: number; path: string } | undefined;
  private nextCentral = 0;
  /** The central walk's next entry, looked at before it is taken. */
  private peeked: ZipEntryPlan | undefined;
  private endWritten = false;
  private offset = 0;
  /** Milliseconds spent reading small files since the event loop last had a turn. */
  private syncMs = 0;
  private wholeReads = 0;
  private slowReads = 0;
  /** Small files are read on the thread pool from now on. */
  private cold = false;

  constructor(
    private readonly plan: ZipLayout,
    private readonly source: ZipSource,
  ) {
    this.fixedMs = source.storedAt === undefined ? undefined : new Date(source.storedAt).getTime();
    this.mtimes = this.fixedMs === undefined ? new Float64Array(plan.count) : undefined;
    this.toOpen = walkEntries(source.bagId, source.files);
    this.toList = walkEntries(source.bagId, source.files);
  }

  /** The next entry of a walk; the files must still be the ones laid out. */
  private static next(walk: Iterator<ZipEntryPlan>, index: number): ZipEntryPlan {
    const step = walk.next();
    if (step.done === true)
      throw new Error(`zip layout error: the package has fewer files than the ${index + 1} planned`);
    return step.value;
  }

  private openAhead(): void {
    while (this.ahead.length < OPEN_AHEAD && this.nextToOpen < this.plan.count) {
      const entry = ZipBody.next(this.toOpen, this.nextToOpen++);
      this.ahead.push({ entry, opening: this.readsWhole(entry) ? undefined : this.open(entry) });
    }
  }

  private readsWhole(entry: ZipEntryPlan): boolean {
    return entry.record.size <= SMALL_FILE && !this.cold;
  }

  private open(entry: ZipEntryPlan): Promise<OpenedEntry> {
    const opening = openStoredFile(this.source.pathOf(entry.record), entry.record).then(
      ({ handle, mtime }) => {
        const mtimeMs = this.fixedMs ?? mtime.getTime();
        const header = Buffer.allocUnsafe(localHeaderLength(entry));
        writeLocalHeader(header, 0, entry, mtimeMs);
        return { entry, handle, header, mtimeMs };
      },
    );
    opening.catch(ignore); // awaited in turn; this only marks an early rejection as handled
    return opening;
  }

  /** Takes the next entry to send (its index becomes `sending`), checking it comes where planned. */
  private takeNext(): QueuedEntry {
    const queued = this.ahead.shift()!;
    this.sending++;
    if (this.offset !== queued.entry.offset)
      throw new Error(
        `zip layout error: entry ${queued.entry.record.path} at ${this.offset}, planned ${queued.entry.offset}`,
      );
    return queued;
  }

  /** Moves on to the next entry: its header becomes the pending memory, its file the pending bytes. */
  private async startNextEntry(): Promise<void> {
    const { entry, opening } = this.takeNext();
    const index = this.sending;
    const opened = await (opening ?? this.open(entry));
    if (this.mtimes !== undefined) this.mtimes[index] = opened.mtimeMs;
    this.memory = opened.header;
    this.memoryAt = 0;
    this.file = { handle: opened.handle, size: entry.record.size, at: 0, path: entry.record.path };
    this.openAhead();
  }

  /** The next entry, a small file, header and bytes into `buf` at `at`; returns where they end. */
  private sendWhole(buf: Buffer, at: number): number {
    const { entry } = this.takeNext();
    const headerLength = localHeaderLength(entry);
    const started = performance.now();
    const mtime = readSmallStoredFile(this.source.pathOf(entry.record), entry.record, buf, at + headerLength);
    const took = performance.now() - started;
    this.syncMs += took;
    this.wholeReads++;
    if (took > SLOW_READ_MS) this.slowReads++;
    this.cold = this.slowReads >= SLOW_READS && this.slowReads * SLOW_SHARE >= this.wholeReads;
    const mtimeMs = this.fixedMs ?? mtime;
    if (this.mtimes !== undefined) this.mtimes[this.sending] = mtimeMs;
    writeLocalHeader(buf, at, entry, mtimeMs);
    this.offset += headerLength + entry.record.size;
    return at + headerLength + entry.record.size;
  }

  /** As many central directory headers as fit in one batch (at least one). */
  private centralBatch(): Buffer {
    if (this.nextCentral === 0 && this.offset !== this.plan.centralDirectoryOffset) {
      throw new Error(
        `zip layout error: central directory at ${this.offset}, planned ${this.plan.centralDirectoryOffset}`,
      );
    }
    const headers: Array<{ entry: ZipEntryPlan; mtimeMs: number }> = [];
    let length = 0;
    while (
      this.nextCentral < this.plan.count &&
      (length === 0 || length + centralHeaderLength(this.peekCentral()) <= CENTRAL_BATCH)
    ) {
      const entry = this.takeCentral();
      length += centralHeaderLength(entry);
      headers.push({ entry, mtimeMs: this.fixedMs ?? this.mtimes![this.nextCentral]! });
      this.nextCentral++;
    }
    const buf = Buffer.allocUnsafe(length);
    let at = 0;
    for (const { entry, mtimeMs } of headers) at = writeCentralHeader(buf, at, entry, mtimeMs);
    return buf;
  }

  private peekCentral(): ZipEntryPlan {
    this.peeked ??= ZipBody.next(this.toList, this.nextCentral);
    return this.peeked;
  }

  private takeCentral(): ZipEntryPlan {
    const entry = this.peekCentral();
    this.peeked = undefined;
    return entry;
  }

  async fill(buf: Buffer): Promise<number> {
    let used = 0;
    while (used < buf.length) {
      if (this.memory !== undefined) {
        const copied = this.memory.copy(buf, used, this.memoryAt);
        used += copied;
        this.memoryAt += copied;
        this.offset += copied;
        if (this.memoryAt === this.memory.length) this.memory = undefined;
      } else if (this.file !== undefined) {
        const file = this.file;
        const n = Math.min(buf.length - used, file.size - file.at);
        if (n > 0) await readFully(file.handle, buf, used, n, file.at, file.path);
        used += n;
        file.at += n;
        this.offset += n;
        if (file.at === file.size) {
          this.file = undefined;
          closeQuietly(file.handle);
        }
      } else if (this.sending + 1 < this.plan.count) {
        this.openAhead();
        const { entry, opening } = this.ahead[0]!;
        if (opening !== undefined || !this.readsWhole(entry)) await this.startNextEntry();
        else if (localHeaderLength(entry) + entry.record.size > buf.length - used) break;
        else {
          if (this.syncMs > SYNC_SLICE_MS) {
            await nextTurn();
            this.syncMs = 0;
          }
          used = this.sendWhole(buf, used);
        }
      } else if (this.nextCentral < this.plan.count) {
        this.memory = this.centralBatch();
        this.memoryAt = 0;
      } else if (!this.endWritten) {
        this.memory = endRecords(this.plan);
        this.memoryAt = 0;
        this.endWritten = true;
      } else {
        break;
      }
    }
    return used;
  }

  async close(): Promise<void> {
    if (this.file !== undefined) closeQuietly(this.file.handle);
    this.file = undefined;
    // Entries opened ahead and never sent (an error, or the client went away).
    const opened = this.ahead.splice(0).flatMap(({ opening }) => (opening === undefined ? [] : [opening]));
    await Promise.all(opened.map((opening) => opening.then((entry) => closeQuietly(entry.handle), ignore)));
  }
}

/**
 * The answer to GET or HEAD with the package as a stored zip. A file that cannot be read, or
 * whose size no longer matches the catalog, aborts the connection wherever it comes (the length
 * was promised: the client sees a reset, never an archive that ends cleanly); a client that goes
 * away stops the reading. Files are opened only as the body is sent.
 */
export function answerZip(pkg: ZipSource, method: string): DownloadAnswer {
  const plan = layOutZip(pkg.bagId, pkg.files);
  const headers = {
    'content-type': 'application/zip',
    'content-length': String(plan.size),
    'content-disposition': contentDisposition(`${pkg.bagId}.zip`),
    'x-content-type-options': 'nosniff',
  };
  if (method === 'HEAD') return { kind: 'headers', status: 200, headers };
  return {
    kind: 'body',
    status: 200,
    headers,
    length: plan.size,
    source: new ZipBody(plan, pkg),
    context: { bagId: pkg.bagId, dir: pkg.dir },
  };
}
