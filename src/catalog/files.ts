/**
 * The files of packages: one record per file keyed `[bag_id, path]`, each package's total size,
 * and a stored package's payload list kept as JSON (it never changes), so a show reads one value.
 * A bag of any size is recorded in bounded transactions (`unstage`, `stageBatch`, `staged`).
 */
import type { Database, RootDatabase } from 'lmdb';
import { fitsKey } from './keys.js';
import type { Transactor } from './transaction.js';
import type { FileRecord } from './types.js';

/** File records written per transaction when a package's files are staged, and paths per slice of its list. */
const FILE_BATCH = 5_000;
/** Records read per catalog read when the files of a package are walked (`iterate`). */
const WALK_BATCH = 256;

/** A package's files: walked in path order (afresh each time), or asked about one path. */
export interface FileView extends Iterable<FileRecord> {
  has(path: string): boolean;
  /** Whether some recorded file's path starts with `folder/`. */
  holdsUnder(folder: string): boolean;
}

export class FileStore {
  private readonly files: Database<FileRecord, [string, string]>;
  /** bag_id → the total size of its files, kept by `staged` (bytes without reading every record). */
  private readonly fileBytes: Database<number, string>;
  /** bag_id → its payload paths as a UTF-8 JSON array, the `files` field as sent. */
  private readonly payloadLists: Database<Buffer, string>;

  /** `listChanged`: called inside the transaction that changes a package's file list (its show changes). */
  constructor(
    root: RootDatabase,
    private readonly catalog: Transactor,
    private readonly listChanged: (bagId: string) => void,
  ) {
    this.files = root.openDB({ name: 'files' });
    this.fileBytes = root.openDB({ name: 'packageFileBytes' });
    this.payloadLists = root.openDB({ name: 'payloadLists', encoding: 'binary' });
  }

  /**
   * Records the files of a package about to be stored, in one transaction (or the caller's).
   * The ingest stages a bag of any size in bounded transactions instead: `unstage`, then
   * `stageBatch` for each batch, then `staged` with the intent.
   */
  put(bagId: string, files: Iterable<FileRecord>): void {
    this.catalog.transaction(() => {
      this.unstage(bagId);
      this.staged(bagId, this.stageBatch(bagId, [...files]));
    });
  }

  /** Drops the file records an earlier attempt staged, `FILE_BATCH` to a transaction. */
  unstage(bagId: string): void {
    while (this.catalog.transaction(() => this.removeFiles(bagId, FILE_BATCH)) === FILE_BATCH);
  }

  /**
   * Writes a batch of file records of a package about to be stored (the ingest's intent, before
   * the bag is moved) in one transaction; returns their total size. Files of an unstored package
   * are never served, so records written before a crash are harmless: the next attempt replaces
   * them. `staged`, in the transaction that records the intent, completes them.
   */
  stageBatch(bagId: string, files: readonly FileRecord[]): number {
    // The path is in the key and the record; B-tree pages are partly empty: about twice the bytes.
    let bytes = 0;
    let total = 0;
    for (const file of files) {
      bytes += 2 * (2 * Buffer.byteLength(file.path) + 150);
      total += file.size;
    }
    this.catalog.reserve(bytes);
    this.catalog.transaction(() => {
      for (const file of files) this.files.putSync([bagId, file.path], file);
    });
    return total;
  }

  /** The staged files' total size and payload list, kept for the package (inside the intent's transaction). */
  staged(bagId: string, totalBytes: number): void {
    this.catalog.transaction(() => {
      this.fileBytes.putSync(bagId, totalBytes);
      this.keepPayloadList(bagId);
      // Its show lists them: a new version of the record, as for a write to the record itself.
      this.listChanged(bagId);
    });
  }

  /**
   * A tombstone's `files`: an empty list, and no bytes (catalog/deaccessions.ts, inside the
   * approval's transaction); its file records go once its content is gone (`unstage`).
   */
  emptyPayloadList(bagId: string): void {
    this.catalog.transaction(() => {
      this.payloadLists.putSync(bagId, Buffer.from('[]'));
      this.fileBytes.putSync(bagId, 0);
      this.listChanged(bagId);
    });
  }

  /** Removes up to `limit` file records of a package; returns how many. */
  private removeFiles(bagId: string, limit: number): number {
    let removed = 0;
    for (const key of this.files.getKeys({ start: [bagId], end: [bagId, '\uffff'], limit })) {
      this.files.removeSync(key);
      removed++;
    }
    return removed;
  }

  /**
   * Serialises the payload list once, as sent (staged, and the migration for older
   * catalogs), a slice of paths at a time rather than from an array of them all.
   */
  keepPayloadList(bagId: string): void {
    this.payloadLists.putSync(bagId, this.serialisePayloadList(bagId));
  }

  /** The `files` field of a stored package, as UTF-8 JSON. */
  payloadListJson(bagId: string): Buffer {
    return this.payloadLists.get(bagId) ?? this.serialisePayloadList(bagId);
  }

  /** The payload paths relative to `data/`, in key order, as JSON in UTF-8, made in slices. */
  private serialisePayloadList(bagId: string): Buffer {
    const parts: Buffer[] = [];
    let slice: string[] = [];
    const flush = (): void => {
      parts.push(Buffer.from(`${parts.length === 0 ? '' : ','}${slice.join(',')}`, 'utf8'));
      slice = [];
    };
    for (const key of this.files.getKeys({ start: [bagId, 'data/'], end: [bagId, 'data0'] })) {
      slice.push(JSON.stringify(key[1].slice(5)));
      if (slice.length === FILE_BATCH) flush();
    }
    if (slice.length > 0 || parts.length === 0) flush();
    return Buffer.concat([Buffer.from('['), ...parts, Buffer.from(']')]);
  }

  /** All files of a stored package, tag files and payload, sorted by path. */
  list(bagId: string): FileRecord[] {
    return [...this.files.getRange({ start: [bagId], end: [bagId, '\uffff'] })].map((e) => e.value);
  }

  /**
   * The files of a package in path order, read `WALK_BATCH` at a time: each batch is read whole,
   * so the walk may pause between records (an await) without holding a catalog read open. Small
   * batches, so that records walked across awaits die young (V8's young generation) instead of
   * piling up in the old one.
   */
  *iterate(bagId: string): Generator<FileRecord> {
    let after: string | undefined;
    for (;;) {
      const start: [string, string] = [bagId, after ?? ''];
      const batch: FileRecord[] = [];
      for (const { value } of this.files.getRange({ start, end: [bagId, '\uffff'], limit: WALK_BATCH + 1 })) {
        if (value.path !== after) batch.push(value);
      }
      yield* batch;
      if (batch.length < WALK_BATCH) return;
      after = batch.at(-1)!.path;
    }
  }

  /**
   * The files of a package as a view: every iteration walks them afresh (`iterate`), and a
   * path can be looked up without walking (for a package of many files, instead of a set of
   * every path).
   */
  view(bagId: string): FileView {
    return {
      [Symbol.iterator]: () => this.iterate(bagId),
      has: (path) => fitsKey(path) && this.files.doesExist([bagId, path]),
      holdsUnder: (folder) => {
        // A folder too long for a key holds no recorded file (every recorded path fits one).
        if (!fitsKey(`${folder}0`)) return false;
        for (const _ of this.files.getKeys({
          start: [bagId, `${folder}/`],
          end: [bagId, `${folder}0`],
          limit: 1,
        }))
          return true;
        return false;
      },
    };
  }

  get(bagId: string, path: string): FileRecord | undefined {
    if (!fitsKey(path)) return undefined;
    return this.files.get([bagId, path]);
  }

  /** Total size of a stored package's files (kept with them by staged; 0 with none). */
  bytes(bagId: string): number {
    return this.fileBytes.get(bagId) ?? 0;
  }
}
