/**
 * What a replica is to the rest of preservd: a place that holds a second copy of every stored
 * bag, file by file, under the storage layout (`ab/cd/ef/<bag_id>/<path in the bag>`). Two kinds
 * implement it: `s3` (s3.ts) and `dir` (dir.ts). A target only moves and reads bytes; deciding
 * what to copy, when, and what a mismatch means is the replicator's (replicator.ts) and the
 * audit's job. A target deletes only for `preservd migrate` (`removeOld`) and a deaccession
 * (`removeObject`).
 */
import type { FileHandle } from 'node:fs/promises';
import { Readable } from 'node:stream';

/** What the catalog says one file must be. */
export interface ExpectedFile {
  size: number;
  /** Lower-case hex. */
  sha256: string;
}

/** What reading an object back found. */
export type ReadBack =
  | { kind: 'match' }
  | { kind: 'missing' }
  | { kind: 'differs'; size: number; sha256: string }
  | { kind: 'unreadable'; reason: string };

/**
 * What is written: a stream, or an open file, which a target may read in ranges (an S3 multipart
 * upload sends its parts side by side, each read straight from the file). The caller closes a file.
 */
export type WriteSource = Readable | FileHandle;

/** The whole of a source as one stream (a file is not closed by it). */
export function streamOf(source: WriteSource, size?: number): Readable {
  return isFile(source) ? rangeOf(source, 0, size ?? Number.MAX_SAFE_INTEGER) : source;
}

/**
 * Bytes `start` up to `end` (exclusive, or the end of the file) of an open file, by positional
 * reads of 512 KiB: several of these may read one file side by side (fs streams on one FileHandle
 * may not, they close one another).
 */
function rangeOf(file: FileHandle, start: number, end: number): Readable {
  return Readable.from(
    (async function* () {
      for (let position = start; position < end;) {
        const buf = Buffer.allocUnsafe(Math.min(1 << 19, end - position));
        const { bytesRead } = await file.read(buf, 0, buf.length, position);
        if (bytesRead === 0) return;
        position += bytesRead;
        yield bytesRead === buf.length ? buf : buf.subarray(0, bytesRead);
      }
    })(),
    { objectMode: false },
  );
}

export function isFile(source: WriteSource): source is FileHandle {
  return typeof (source as FileHandle).fd === 'number' && typeof (source as FileHandle).stat === 'function';
}

export interface WriteOptions {
  /**
   * May an object already at the key be replaced? Without it an existing object is left alone
   * and `write` answers 'exists' (replication never overwrites silently; repair may replace).
   */
  replace: boolean;
  /** The caller listed the package's objects just before and this key was not among them: no need to look again. */
  absent?: boolean;
  signal?: AbortSignal | undefined;
}

export interface ReplicaTarget {
  readonly name: string;
  readonly kind: 's3' | 'dir';
  /** Where it is, for people (bucket and endpoint, or folder); never a secret. */
  readonly where: string;
  /** Throws a ReplicaUnusable saying what is wrong when the bucket or folder is missing or refuses writes. */
  check(signal?: AbortSignal): Promise<void>;
  /**
   * Writes one object from `source`, hashing it on the way: if the bytes read are not `expected`
   * (the primary changed since ingest), a SourceChanged is thrown and nothing lands at the key.
   * 'exists': an object was already there and `replace` was false; nothing was written.
   */
  write(
    key: string,
    source: WriteSource,
    expected: ExpectedFile,
    opts: WriteOptions,
  ): Promise<'written' | 'exists'>;
  /** Reads the object back, whole, and compares it with `expected`. Throws only for an abort. */
  readBack(
    key: string,
    expected: ExpectedFile,
    opts: { signal?: AbortSignal | undefined; bytesPerSec?: number },
  ): Promise<ReadBack>;
  /** The object's bytes (from `start` to `end` inclusive when given), or undefined when it is missing. */
  open(
    key: string,
    range?: { start: number; end: number },
    signal?: AbortSignal,
  ): Promise<Readable | undefined>;
  /** Every object whose key starts with `prefix`, with its size, keys relative like `prefix`'s. */
  list(prefix: string, signal?: AbortSignal): AsyncIterable<{ key: string; size: number }>;
  /**
   * Deletes one object of the layout before OCFL, and the folders it leaves empty (`preservd
   * migrate` only, once the package's OCFL object on this replica verified): `retainedUntil`
   * when S3 Object Lock retention keeps it (it stays).
   */
  removeOld(key: string, signal?: AbortSignal): Promise<{ retainedUntil?: Date }>;
  /**
   * Removes every object under `prefix` (a deaccessioned package's OCFL object; every version
   * of each, where the store keeps versions), and the folders it leaves empty. What S3 Object
   * Lock retention keeps is hidden behind a delete marker and left: `retainedUntil` says until
   * when (the latest date), and a later call removes it. Idempotent.
   */
  removeObject(prefix: string, signal?: AbortSignal): Promise<{ retainedUntil?: Date }>;
  /** Drops writes left unfinished under `prefix` by an earlier run (S3 multipart uploads); their number. */
  abandonUnfinished(prefix: string, signal?: AbortSignal): Promise<number>;
  close(): void;
}

/** The bucket or folder cannot be used; the message says what to fix. */
export class ReplicaUnusable extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ReplicaUnusable';
  }
}

/** The file read from the primary is not what the catalog records: it is not copied. */
export class SourceChanged extends Error {
  constructor(
    readonly size: number,
    readonly sha256: string,
  ) {
    super(`the primary copy no longer matches the catalog (read ${size} bytes, sha256 ${sha256})`);
    this.name = 'SourceChanged';
  }
}

/** The replica could not be reached or refused to work (connection refused, 5xx, I/O error): try again later. */
export class ReplicaDown extends Error {
  constructor(
    readonly replica: string,
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(`replica ${replica} is unavailable: ${reason}`, options);
    this.name = 'ReplicaDown';
  }
}
