/** The shapes callers of the fixity pool see. */
import type { Stats } from 'node:fs';
import type { Algorithm } from './algorithms.js';

export interface FileDigests {
  /** Bytes actually read, which is what the digests cover. */
  size: number;
  /** CRC-32 (the zip/zlib one) as 8 lower-case hex digits, when asked for. */
  crc32?: string;
  /** Lower-case hex, one per requested algorithm. */
  digests: Partial<Record<Algorithm, string>>;
}

/**
 * Where a resumable job keeps its checkpoint between runs of the process. The bytes are opaque;
 * they record the file's size, mtime and inode, the offset reached and every hasher's state.
 *
 * A checkpoint belongs to ONE hashing run: resuming skips re-reading the bytes before its offset.
 * Scope a store to a run (an audit id plus the file, say) and drop it when the run is over, or
 * give it `clear`, which the pool calls once the file hashed completely.
 */
export interface ResumeStore {
  load(): Promise<Uint8Array | undefined>;
  save(state: Uint8Array): Promise<void>;
  /** Called after the last byte was hashed, before the job resolves. */
  clear?(): Promise<void>;
  /**
   * Told once the worker has opened the file and looked at the checkpoint: the offset hashing
   * goes on from (0: the start), and whether a loaded checkpoint was refused because it does
   * not fit (the file changed since, other digests were asked for, or it would not load).
   */
  started?(from: { offset: number; refused: boolean }): void;
  /** Checkpoint interval in bytes; default 256 MiB. */
  everyBytes?: number;
}

export type Priority = 'ingest' | 'audit';

export interface HashOptions {
  /** Also compute the CRC-32 (for the zip download). */
  crc32?: boolean;
  /** Queued ingest jobs always start before queued audit jobs; default 'ingest'. */
  priority?: Priority;
  /** Aborts a queued or running job; it rejects with an AbortError (code 'ABORT_ERR'). */
  signal?: AbortSignal;
  /** Makes the job resumable across restarts (hash-wasm hashers, slower than node:crypto). */
  resume?: ResumeStore;
}

export interface FixityPoolOptions {
  /** Worker threads; default os.availableParallelism(). */
  workers?: number;
  /** Bytes per read, one reused buffer per job; default 1 MiB, at least 64 KiB. */
  readSize?: number;
  /**
   * Most files open at once. A worker holds one, two while an ingest job runs inside an audit job;
   * a lower cap means fewer workers, and under 2 per worker, no ingest jobs inside audit jobs.
   * Default: no cap beyond that.
   */
  maxOpenFiles?: number;
  /** Total read rate of 'audit' jobs over all workers; 0 (default) = unlimited. Ingest is never throttled. */
  auditRateLimitBytesPerSec?: number;
}

export interface FixityStats {
  /** Bytes read and hashed so far, counted as they are read. */
  bytesHashed: number;
  /** Jobs that resolved. */
  filesHashed: number;
  /** Jobs waiting for a worker. */
  queued: number;
  /** Jobs handed to a worker and not yet finished, including those waiting in its local queue. */
  running: number;
}

/** What a folder entry is, as FixityPool.listTree reports it (from lstat, links not followed). */
export type EntryKind =
  'file' | 'directory' | 'symlink' | 'fifo' | 'socket' | 'block device' | 'character device' | 'unknown';

/** The kind of a Dirent or lstat result. */
export function kindOf(
  entry: Pick<
    Stats,
    | 'isFile'
    | 'isDirectory'
    | 'isSymbolicLink'
    | 'isFIFO'
    | 'isSocket'
    | 'isBlockDevice'
    | 'isCharacterDevice'
  >,
): EntryKind {
  if (entry.isFile()) return 'file';
  if (entry.isDirectory()) return 'directory';
  if (entry.isSymbolicLink()) return 'symlink';
  if (entry.isFIFO()) return 'fifo';
  if (entry.isSocket()) return 'socket';
  if (entry.isBlockDevice()) return 'block device';
  if (entry.isCharacterDevice()) return 'character device';
  return 'unknown';
}

export { errorCode } from '../fs/errors.js';

/**
 * A folder's entries as FixityPool.listTree sends them: the names joined by '/' (which no name
 * holds) and one letter per entry for its kind. Two strings a folder instead of a pair per entry:
 * a folder of 200,000 files crosses from the worker, and is held, as two strings, not 200,000
 * small arrays (see docs/decisions.md, "The audit of a bag of many files"). Read it with `entriesOf`.
 */
export interface FolderEntries {
  names: string;
  kinds: string;
}

const KIND_LETTERS: Record<EntryKind, string> = {
  file: 'f',
  directory: 'd',
  symlink: 'l',
  fifo: 'p',
  socket: 's',
  'block device': 'b',
  'character device': 'c',
  unknown: '?',
};
const KIND_OF_LETTER = new Map(
  Object.entries(KIND_LETTERS).map(([kind, letter]) => [letter, kind as EntryKind]),
);

/** Builds a folder's FolderEntries one entry at a time. */
export class FolderEntriesBuilder {
  private readonly names: string[] = [];
  private kinds = '';

  add(name: string, kind: EntryKind): void {
    this.names.push(name);
    this.kinds += KIND_LETTERS[kind];
  }

  build(): FolderEntries {
    return { names: this.names.join('/'), kinds: this.kinds };
  }
}

/** A folder's entries, one `[name, kind]` at a time (each made as it is read, never all at once). */
export function* entriesOf(folder: FolderEntries): Generator<[name: string, kind: EntryKind]> {
  let at = 0;
  for (let i = 0; i < folder.kinds.length; i++) {
    const end = folder.names.indexOf('/', at);
    const name = end < 0 ? folder.names.slice(at) : folder.names.slice(at, end);
    at = end + 1;
    yield [name, KIND_OF_LETTER.get(folder.kinds[i]!) ?? 'unknown'];
  }
}

/**
 * A folder tree as FixityPool.listTree found it, links not followed. `root`: the folder itself,
 * an error code (ENOENT, EACCES, ...) when lstat failed, or its kind when it is not a folder.
 * `dirs`: every folder listed, parents before children, each with its entries or the error code
 * of its readdir (the root's included, as '').
 */
export interface Tree {
  root: { ok: true } | { code: string } | { kind: EntryKind };
  dirs: Array<[rel: string, entries: FolderEntries | string]>;
}
