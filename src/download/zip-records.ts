/**
 * The zip format's bytes for a stored (not deflated) archive of known files: the plan (every
 * entry's offsets and the archive's length, computed before the first byte) and the local and
 * central headers and end records written from it, ZIP64 where a size or offset needs it
 * (APPNOTE 6.3.x §4.3.9, 4.4, 4.5.3). No I/O here: `zip.ts` streams the archive.
 */
import type { FileRecord } from '../catalog/types.js';

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

export function localHeaderLength(entry: ZipEntryPlan): number {
  return LOCAL_HEADER + entry.name.length + TIMESTAMP_EXTRA + (entry.zip64Size ? LOCAL_ZIP64_EXTRA : 0);
}

/** Fields the central header's ZIP64 extra carries: both sizes and/or the offset. */
function centralZip64Fields(entry: ZipEntryPlan): number {
  return (entry.zip64Size ? 2 : 0) + (entry.zip64Offset ? 1 : 0);
}

export function centralHeaderLength(entry: ZipEntryPlan): number {
  const fields = centralZip64Fields(entry);
  return CENTRAL_HEADER + entry.name.length + TIMESTAMP_EXTRA + (fields > 0 ? 4 + 8 * fields : 0);
}

/** The archive's shape without its entries: enough to send it, reading the files once more in order. */
export interface ZipLayout {
  /** Total archive length in bytes: the Content-Length. */
  size: number;
  count: number;
  centralDirectoryOffset: number;
  centralDirectorySize: number;
  /** ZIP64 end of central directory record and locator are written. */
  zip64End: boolean;
}

export interface ZipPlan extends ZipLayout {
  entries: ZipEntryPlan[];
}

/** The entry of `record` with its local header at `offset`; throws for a record no zip can hold. */
function planEntry(topFolder: string, record: FileRecord, offset: number): ZipEntryPlan {
  if (!/^[0-9a-f]{8}$/i.test(record.crc32))
    throw new Error(`${record.path} has no usable CRC-32 in the catalog (${JSON.stringify(record.crc32)})`);
  if (!Number.isSafeInteger(record.size) || record.size < 0)
    throw new Error(`${record.path} has an impossible size ${record.size}`);
  const name = Buffer.from(`${topFolder}/${record.path}`, 'utf8');
  if (name.length > U16_MAX) throw new Error(`${record.path} is too long a name for a zip entry`);
  return {
    record,
    name,
    crc32: parseInt(record.crc32, 16),
    offset,
    zip64Size: record.size >= U32_MAX,
    zip64Offset: offset >= U32_MAX,
  };
}

/**
 * Walks `files` in order, one entry at a time: each entry's plan, at its offset. The layout and
 * the body both walk the files this way, so every offset is the same in both. Two records of one
 * path in a row are refused (the catalog yields each path once, sorted).
 */
export function* walkEntries(topFolder: string, files: Iterable<FileRecord>): Generator<ZipEntryPlan> {
  if (topFolder === '' || topFolder.includes('/') || topFolder.includes('\\'))
    throw new Error(`unusable zip top folder ${JSON.stringify(topFolder)}`);
  let offset = 0;
  let previous: string | undefined;
  for (const record of files) {
    if (record.path === previous) throw new Error(`${record.path} is listed twice`);
    previous = record.path;
    const entry = planEntry(topFolder, record, offset);
    yield entry;
    offset += localHeaderLength(entry) + record.size;
  }
}

/**
 * Lays out the archive: its size, where the central directory starts and how long it is. Pure:
 * it reads no file, and holds no entry beyond the one it measures.
 */
export function layOutZip(topFolder: string, files: Iterable<FileRecord>): ZipLayout {
  let count = 0;
  let centralDirectoryOffset = 0;
  let centralDirectorySize = 0;
  for (const entry of walkEntries(topFolder, files)) {
    count++;
    centralDirectoryOffset = entry.offset + localHeaderLength(entry) + entry.record.size;
    centralDirectorySize += centralHeaderLength(entry);
  }
  const zip64End = count >= U16_MAX || centralDirectorySize >= U32_MAX || centralDirectoryOffset >= U32_MAX;
  const size =
    centralDirectoryOffset +
    centralDirectorySize +
    (zip64End ? ZIP64_END_RECORD + ZIP64_END_LOCATOR : 0) +
    END_RECORD;
  return { size, count, centralDirectoryOffset, centralDirectorySize, zip64End };
}

/**
 * The layout with every entry's plan (offsets, ZIP64 needs), for callers that want to look at
 * them; the download itself uses `layOutZip` and walks the entries as it sends them. Entries
 * keep the order of `files`.
 */
export function planZip(topFolder: string, files: readonly FileRecord[]): ZipPlan {
  const seen = new Set<string>();
  for (const record of files) {
    if (seen.has(record.path)) throw new Error(`${record.path} is listed twice`);
    seen.add(record.path);
  }
  return { ...layOutZip(topFolder, files), entries: [...walkEntries(topFolder, files)] };
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

/** Writes the local file header of `entry` at `buf[start]`; returns the end offset. */
export function writeLocalHeader(buf: Buffer, start: number, entry: ZipEntryPlan, mtimeMs: number): number {
  const { date, time } = dosDateTime(mtimeMs);
  const size = entry.record.size;
  const extraLength = TIMESTAMP_EXTRA + (entry.zip64Size ? LOCAL_ZIP64_EXTRA : 0);
  buf.writeUInt32LE(0x04034b50, start);
  buf.writeUInt16LE(entry.zip64Size ? VERSION_ZIP64 : VERSION_DEFAULT, start + 4);
  buf.writeUInt16LE(FLAG_UTF8, start + 6);
  buf.writeUInt16LE(0, start + 8); // stored
  buf.writeUInt16LE(time, start + 10);
  buf.writeUInt16LE(date, start + 12);
  buf.writeUInt32LE(entry.crc32, start + 14);
  buf.writeUInt32LE(entry.zip64Size ? U32_MAX : size, start + 18);
  buf.writeUInt32LE(entry.zip64Size ? U32_MAX : size, start + 22);
  buf.writeUInt16LE(entry.name.length, start + 26);
  buf.writeUInt16LE(extraLength, start + 28);
  let at = start + LOCAL_HEADER + entry.name.copy(buf, start + LOCAL_HEADER);
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
export function writeCentralHeader(buf: Buffer, start: number, entry: ZipEntryPlan, mtimeMs: number): number {
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
export function endRecords(plan: ZipLayout): Buffer {
  const count = plan.count;
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
