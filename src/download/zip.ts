/**
 * The whole bag as one zip (RFC 8493 serialization: every tag and payload file under
 * `<bag_id>/`), stored, not deflated, streamed with a Content-Length known before the first byte
 * and memory flat whatever the size: entries are opened lazily (at most four ahead of the one
 * being sent, which saves ~10 % on a bag of 20 000 small files) and read in 1 MiB chunks into the
 * response's reused buffers (`body.ts`).
 *
 * Why our own writer and not yazl: yazl 3.3.1 pipes every streamed entry through its
 * `Crc32Watcher` (buffer-crc32, pure JS, ~300-490 MB/s here, the download's bottleneck) and offers
 * no way to hand it a known CRC; it also writes data descriptors after each entry. The catalog
 * already holds each file's CRC-32 and size, so every header can be written in full before the
 * entry's bytes (no data descriptor), the CRC is never recomputed, and the bytes go from disk to
 * socket untouched (bench/download.ts: ~2 GB/s, faster than a bare node:http server piping one
 * file, where yazl tops out near 320 MB/s). If the disk no longer holds what the catalog says,
 * the client's unzip sees the CRC mismatch: the catalog's values were verified at ingest.
 *
 * ZIP64 (APPNOTE 6.3.x §4.3.9, 4.4, 4.5.3) is used per entry when its size or its local header
 * offset does not fit 32 bits, and for the end records when the entry count, the central
 * directory size or its offset do not fit.
 */
import type { FileHandle } from 'node:fs/promises';
import type { FileRecord } from '../catalog/types.js';
import { Storage } from '../storage/storage.js';
import type { DownloadAnswer } from './answer.js';
import { closeQuietly, openStoredFile, readFully, type BodySource } from './body.js';
import { contentDisposition } from './file.js';

const U16_MAX = 0xffff;
/** Sizes and offsets at or above this need ZIP64 (0xffffffff itself is the "see zip64" marker). */
const U32_MAX = 0xffffffff;

const LOCAL_HEADER = 30;
const CENTRAL_HEADER = 46;
const END_RECORD = 22;
const ZIP64_END_RECORD = 56;
const ZIP64_END_LOCATOR = 20;
/** Extended-timestamp extra field (0x5455) with the modification time only: 4 + 5 bytes. */
const TIMESTAMP_EXTRA = 9;
/** ZIP64 extra field in a local header: both sizes, always (APPNOTE §4.5.3). */
const LOCAL_ZIP64_EXTRA = 4 + 16;

const VERSION_DEFAULT = 20;
const VERSION_ZIP64 = 45;
/** Made by: 3 = Unix (so the mode in the external attributes counts), spec version 4.5. */
const VERSION_MADE_BY = (3 << 8) | 45;
/** General purpose flag bit 11: names are UTF-8. Bit 3 (data descriptor) is never needed. */
const FLAG_UTF8 = 1 << 11;
/** Regular file, rw-r--r--, in the high half of the external attributes. */
const EXTERNAL_ATTRIBUTES = (0o100644 << 16) >>> 0;

export interface ZipEntryPlan {
  record: FileRecord;
  /** `<top folder>/<path>` in UTF-8. */
  name: Buffer;
  crc32: number;
  /** Offset of the entry's local header in the archive. */
  offset: number;
  /** The size does not fit 32 bits: ZIP64 sizes in the local and central headers. */
  zip64Size: boolean;
  /** The local header offset does not fit 32 bits: ZIP64 offset in the central header. */
  zip64Offset: boolean;
}

export interface ZipPlan {
  /** Total archive length in bytes: the Content-Length. */
  size: number;
  entries: ZipEntryPlan[];
  centralDirectoryOffset: number;
  centralDirectorySize: number;
  /** ZIP64 end of central directory record and locator are written. */
  zip64End: boolean;
}

function localHeaderLength(entry: ZipEntryPlan): number {
  return LOCAL_HEADER + entry.name.length + TIMESTAMP_EXTRA + (entry.zip64Size ? LOCAL_ZIP64_EXTRA : 0);
}

/** Fields the central header's ZIP64 extra carries: both sizes and/or the offset. */
function centralZip64Fields(entry: ZipEntryPlan): number {
  return (entry.zip64Size ? 2 : 0) + (entry.zip64Offset ? 1 : 0);
}

function centralHeaderLength(entry: ZipEntryPlan): number {
  const fields = centralZip64Fields(entry);
  return CENTRAL_HEADER + entry.name.length + TIMESTAMP_EXTRA + (fields > 0 ? 4 + 8 * fields : 0);
}

/**
 * Lays out the archive: each entry's offset and ZIP64 needs, the central directory, the total
 * size. Pure: it reads no file. Entries keep the order of `files` (the catalog's, sorted by path).
 */
export function planZip(topFolder: string, files: FileRecord[]): ZipPlan {
  if (topFolder === '' || topFolder.includes('/') || topFolder.includes('\\')) throw new Error(`unusable zip top folder ${JSON.stringify(topFolder)}`);
  const seen = new Set<string>();
  const entries: ZipEntryPlan[] = [];
  let offset = 0;
  for (const record of files) {
    if (seen.has(record.path)) throw new Error(`${record.path} is listed twice`);
    seen.add(record.path);
    if (!/^[0-9a-f]{8}$/i.test(record.crc32)) throw new Error(`${record.path} has no usable CRC-32 in the catalog (${JSON.stringify(record.crc32)})`);
    if (!Number.isSafeInteger(record.size) || record.size < 0) throw new Error(`${record.path} has an impossible size ${record.size}`);
    const name = Buffer.from(`${topFolder}/${record.path}`, 'utf8');
    if (name.length > U16_MAX) throw new Error(`${record.path} is too long a name for a zip entry`);
    const entry: ZipEntryPlan = {
      record,
      name,
      crc32: parseInt(record.crc32, 16),
      offset,
      zip64Size: record.size >= U32_MAX,
      zip64Offset: offset >= U32_MAX,
    };
    entries.push(entry);
    offset += localHeaderLength(entry) + record.size;
  }
  const centralDirectoryOffset = offset;
  let centralDirectorySize = 0;
  for (const entry of entries) centralDirectorySize += centralHeaderLength(entry);
  const zip64End = entries.length >= U16_MAX || centralDirectorySize >= U32_MAX || centralDirectoryOffset >= U32_MAX;
  const size = centralDirectoryOffset + centralDirectorySize + (zip64End ? ZIP64_END_RECORD + ZIP64_END_LOCATOR : 0) + END_RECORD;
  return { size, entries, centralDirectoryOffset, centralDirectorySize, zip64End };
}

/** MS-DOS date and time in the server's local time, as zip tools write them; clamped to 1980-2107. */
function dosDateTime(ms: number): { date: number; time: number } {
  const d = new Date(ms);
  const year = d.getFullYear();
  if (Number.isNaN(year) || year < 1980) return { date: (1 << 5) | 1, time: 0 };
  if (year > 2107) return { date: (127 << 9) | (12 << 5) | 31, time: (23 << 11) | (59 << 5) | 29 };
  return {
    date: ((year - 1980) << 9) | ((d.getMonth() + 1) << 5) | d.getDate(),
    time: (d.getHours() << 11) | (d.getMinutes() << 5) | (d.getSeconds() >> 1),
  };
}

/** Unix seconds for the extended-timestamp field (signed 32 bits). */
function unixSeconds(ms: number): number {
  return Math.min(0x7fffffff, Math.max(0, Math.floor(ms / 1000)));
}

function writeTimestampExtra(buf: Buffer, at: number, ms: number): number {
  buf.writeUInt16LE(0x5455, at);
  buf.writeUInt16LE(5, at + 2);
  buf.writeUInt8(1, at + 4); // flags: modification time present
  buf.writeInt32LE(unixSeconds(ms), at + 5);
  return at + TIMESTAMP_EXTRA;
}

/** Writes the local file header of `entry` at `buf[0]`; returns its length. */
function writeLocalHeader(buf: Buffer, entry: ZipEntryPlan, mtimeMs: number): number {
  const { date, time } = dosDateTime(mtimeMs);
  const size = entry.record.size;
  const extraLength = TIMESTAMP_EXTRA + (entry.zip64Size ? LOCAL_ZIP64_EXTRA : 0);
  buf.writeUInt32LE(0x04034b50, 0);
  buf.writeUInt16LE(entry.zip64Size ? VERSION_ZIP64 : VERSION_DEFAULT, 4);
  buf.writeUInt16LE(FLAG_UTF8, 6);
  buf.writeUInt16LE(0, 8); // stored
  buf.writeUInt16LE(time, 10);
  buf.writeUInt16LE(date, 12);
  buf.writeUInt32LE(entry.crc32, 14);
  buf.writeUInt32LE(entry.zip64Size ? U32_MAX : size, 18);
  buf.writeUInt32LE(entry.zip64Size ? U32_MAX : size, 22);
  buf.writeUInt16LE(entry.name.length, 26);
  buf.writeUInt16LE(extraLength, 28);
  let at = LOCAL_HEADER + entry.name.copy(buf, LOCAL_HEADER);
  if (entry.zip64Size) {
    buf.writeUInt16LE(0x0001, at);
    buf.writeUInt16LE(16, at + 2);
    buf.writeBigUInt64LE(BigInt(size), at + 4);
    buf.writeBigUInt64LE(BigInt(size), at + 12);
    at += LOCAL_ZIP64_EXTRA;
  }
  return writeTimestampExtra(buf, at, mtimeMs);
}

/** Writes the central directory header of `entry` at `buf[start]`; returns the end offset. */
function writeCentralHeader(buf: Buffer, start: number, entry: ZipEntryPlan, mtimeMs: number): number {
  const { date, time } = dosDateTime(mtimeMs);
  const size = entry.record.size;
  const fields = centralZip64Fields(entry);
  const zip64Length = fields > 0 ? 4 + 8 * fields : 0;
  buf.writeUInt32LE(0x02014b50, start);
  buf.writeUInt16LE(VERSION_MADE_BY, start + 4);
  buf.writeUInt16LE(fields > 0 ? VERSION_ZIP64 : VERSION_DEFAULT, start + 6);
  buf.writeUInt16LE(FLAG_UTF8, start + 8);
  buf.writeUInt16LE(0, start + 10);
  buf.writeUInt16LE(time, start + 12);
  buf.writeUInt16LE(date, start + 14);
  buf.writeUInt32LE(entry.crc32, start + 16);
  buf.writeUInt32LE(entry.zip64Size ? U32_MAX : size, start + 20);
  buf.writeUInt32LE(entry.zip64Size ? U32_MAX : size, start + 24);
  buf.writeUInt16LE(entry.name.length, start + 28);
  buf.writeUInt16LE(zip64Length + TIMESTAMP_EXTRA, start + 30);
  buf.writeUInt16LE(0, start + 32); // comment length
  buf.writeUInt16LE(0, start + 34); // disk number
  buf.writeUInt16LE(0, start + 36); // internal attributes
  buf.writeUInt32LE(EXTERNAL_ATTRIBUTES, start + 38);
  buf.writeUInt32LE(entry.zip64Offset ? U32_MAX : entry.offset, start + 42);
  let at = start + CENTRAL_HEADER + entry.name.copy(buf, start + CENTRAL_HEADER);
  if (fields > 0) {
    buf.writeUInt16LE(0x0001, at);
    buf.writeUInt16LE(8 * fields, at + 2);
    at += 4;
    if (entry.zip64Size) {
      buf.writeBigUInt64LE(BigInt(size), at);
      buf.writeBigUInt64LE(BigInt(size), at + 8);
      at += 16;
    }
    if (entry.zip64Offset) {
      buf.writeBigUInt64LE(BigInt(entry.offset), at);
      at += 8;
    }
  }
  return writeTimestampExtra(buf, at, mtimeMs);
}

/** ZIP64 end record and locator when needed, then the end of central directory record. */
function endRecords(plan: ZipPlan): Buffer {
  const count = plan.entries.length;
  const buf = Buffer.alloc((plan.zip64End ? ZIP64_END_RECORD + ZIP64_END_LOCATOR : 0) + END_RECORD);
  let at = 0;
  if (plan.zip64End) {
    const recordOffset = plan.centralDirectoryOffset + plan.centralDirectorySize;
    buf.writeUInt32LE(0x06064b50, 0);
    buf.writeBigUInt64LE(BigInt(ZIP64_END_RECORD - 12), 4);
    buf.writeUInt16LE(VERSION_MADE_BY, 12);
    buf.writeUInt16LE(VERSION_ZIP64, 14);
    buf.writeUInt32LE(0, 16); // this disk
    buf.writeUInt32LE(0, 20); // disk with the central directory
    buf.writeBigUInt64LE(BigInt(count), 24);
    buf.writeBigUInt64LE(BigInt(count), 32);
    buf.writeBigUInt64LE(BigInt(plan.centralDirectorySize), 40);
    buf.writeBigUInt64LE(BigInt(plan.centralDirectoryOffset), 48);
    buf.writeUInt32LE(0x07064b50, 56);
    buf.writeUInt32LE(0, 60); // disk with the zip64 end record
    buf.writeBigUInt64LE(BigInt(recordOffset), 64);
    buf.writeUInt32LE(1, 72); // total disks
    at = ZIP64_END_RECORD + ZIP64_END_LOCATOR;
  }
  buf.writeUInt32LE(0x06054b50, at);
  buf.writeUInt16LE(0, at + 4);
  buf.writeUInt16LE(0, at + 6);
  buf.writeUInt16LE(Math.min(count, U16_MAX), at + 8);
  buf.writeUInt16LE(Math.min(count, U16_MAX), at + 10);
  buf.writeUInt32LE(Math.min(plan.centralDirectorySize, U32_MAX), at + 12);
  buf.writeUInt32LE(Math.min(plan.centralDirectoryOffset, U32_MAX), at + 16);
  buf.writeUInt16LE(0, at + 20); // comment length
  return buf;
}

export interface ZipSource {
  bagId: string;
  /** Absolute package folder. */
  dir: string;
  files: FileRecord[];
  /**
   * Modification time given to every entry (when the package was stored, epoch ms or a Date), for
   * an archive that is byte-for-byte the same on every download. Without it each entry gets its
   * stored file's mtime, read by the fstat that checks it anyway.
   */
  storedAt?: number | Date;
}

/** An entry opened and checked against the catalog, with its local header ready. */
interface OpenedEntry {
  handle: FileHandle;
  header: Buffer;
  mtimeMs: number;
}

/** How many entries are opened (and fstat'ed) ahead of the one being sent. */
const OPEN_AHEAD = 4;
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
  private readonly mtimes: Float64Array;
  private readonly fixedMs: number | undefined;
  /** Opens in flight or done, in entry order, for entries `sending + 1 …`. */
  private readonly ahead: Array<Promise<OpenedEntry>> = [];
  private nextToOpen = 0;
  /** Entry whose header or bytes are going out. */
  private sending = -1;
  /** Bytes in memory to copy out first (a local header, central headers, the end records). */
  private memory: Buffer | undefined;
  private memoryAt = 0;
  private file: { handle: FileHandle; size: number; at: number; path: string } | undefined;
  private nextCentral = 0;
  private endWritten = false;
  private offset = 0;

  constructor(
    private readonly plan: ZipPlan,
    private readonly source: ZipSource,
  ) {
    this.mtimes = new Float64Array(plan.entries.length);
    this.fixedMs = source.storedAt === undefined ? undefined : new Date(source.storedAt).getTime();
  }

  private openAhead(): void {
    const { entries } = this.plan;
    while (this.ahead.length < OPEN_AHEAD && this.nextToOpen < entries.length) {
      const entry = entries[this.nextToOpen++]!;
      const opening = openStoredFile(Storage.resolveInside(this.source.dir, entry.record.path), entry.record).then(({ handle, mtime }) => {
        const mtimeMs = this.fixedMs ?? mtime.getTime();
        const header = Buffer.allocUnsafe(localHeaderLength(entry));
        writeLocalHeader(header, entry, mtimeMs);
        return { handle, header, mtimeMs };
      });
      opening.catch(ignore); // awaited in turn; this only marks an early rejection as handled
      this.ahead.push(opening);
    }
  }

  /** Moves on to the next entry: its header becomes the pending memory, its file the pending bytes. */
  private async startNextEntry(): Promise<void> {
    this.openAhead();
    const index = ++this.sending;
    const entry = this.plan.entries[index]!;
    if (this.offset !== entry.offset) throw new Error(`zip layout error: entry ${entry.record.path} at ${this.offset}, planned ${entry.offset}`);
    const opened = await this.ahead.shift()!;
    this.mtimes[index] = opened.mtimeMs;
    this.memory = opened.header;
    this.memoryAt = 0;
    this.file = { handle: opened.handle, size: entry.record.size, at: 0, path: entry.record.path };
    this.openAhead();
  }

  /** As many central directory headers as fit in one batch (at least one). */
  private centralBatch(): Buffer {
    const { entries } = this.plan;
    if (this.nextCentral === 0 && this.offset !== this.plan.centralDirectoryOffset) {
      throw new Error(`zip layout error: central directory at ${this.offset}, planned ${this.plan.centralDirectoryOffset}`);
    }
    let length = 0;
    let last = this.nextCentral;
    while (last < entries.length && (length === 0 || length + centralHeaderLength(entries[last]!) <= CENTRAL_BATCH)) {
      length += centralHeaderLength(entries[last]!);
      last++;
    }
    const buf = Buffer.allocUnsafe(length);
    let at = 0;
    for (; this.nextCentral < last; this.nextCentral++) at = writeCentralHeader(buf, at, entries[this.nextCentral]!, this.mtimes[this.nextCentral]!);
    return buf;
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
      } else if (this.sending + 1 < this.plan.entries.length) {
        await this.startNextEntry();
      } else if (this.nextCentral < this.plan.entries.length) {
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
    const ahead = this.ahead.splice(0);
    await Promise.all(ahead.map((opening) => opening.then((opened) => closeQuietly(opened.handle), ignore)));
  }
}

/**
 * The answer to GET or HEAD with the package as a stored zip. A file that cannot be read, or
 * whose size no longer matches the catalog, aborts the connection wherever it comes (the length
 * was promised: the client sees a reset, never an archive that ends cleanly); a client that goes
 * away stops the reading. Files are opened only as the body is sent.
 */
export function answerZip(pkg: ZipSource, method: string): DownloadAnswer {
  const plan = planZip(pkg.bagId, pkg.files);
  const headers = {
    'content-type': 'application/zip',
    'content-length': String(plan.size),
    'content-disposition': contentDisposition(`${pkg.bagId}.zip`),
    'x-content-type-options': 'nosniff',
  };
  if (method === 'HEAD') return { kind: 'headers', status: 200, headers };
  return { kind: 'body', status: 200, headers, length: plan.size, source: new ZipBody(plan, pkg), context: { bagId: pkg.bagId, dir: pkg.dir } };
}
