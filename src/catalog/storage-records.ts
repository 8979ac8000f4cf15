/**
 * What the catalog keeps about the preservd record in storage (ocfl/record.ts): which packages'
 * `logs/` (and whether the repository's own record) are behind the catalog, the repository's
 * identity, and a rebuild in progress.
 *
 * A package is marked in the very transaction that changes what its record holds (an event, its
 * storing), so the set survives a kill -9 with the change; the writer (storage/record-writer.ts)
 * clears a mark only if nothing marked it again while it wrote.
 */
import { randomUUID } from 'node:crypto';
import type { Database, RootDatabase } from 'lmdb';
import type { Transactor } from './transaction.js';

/** The key of the repository's own record in the set: bag ids are UUIDs, never empty. */
const REPOSITORY = '';

/** A rebuild that has begun writing this catalog (commands/rebuild.ts). */
export interface RebuildMarker {
  /** The storage root it reads: `primary` or a replica's name. */
  from: string;
  startedAt: number;
}

export type RecordKey = { kind: 'package'; bagId: string } | { kind: 'repository' };

export class StorageRecordStore {
  /** bag_id (or REPOSITORY) → a generation that each mark raises. */
  private readonly dirty: Database<number, string>;
  private readonly state: Database<unknown, string>;

  constructor(
    root: RootDatabase,
    private readonly catalog: Transactor,
  ) {
    this.dirty = root.openDB({ name: 'storageRecordsDirty' });
    this.state = root.openDB({ name: 'storageRecords' });
  }

  /** The package's record in storage is behind; joins the caller's transaction. */
  markPackage(bagId: string): void {
    this.mark(bagId);
  }

  /** The repository's record (users, grants) is behind; joins the caller's transaction. */
  markRepository(): void {
    this.mark(REPOSITORY);
  }

  private mark(key: string): void {
    this.catalog.transaction(() => this.dirty.putSync(key, (this.dirty.get(key) ?? 0) + 1));
  }

  /**
   * Up to `limit` records behind, the repository's first, each with the generation to clear and
   * the cursor to go on from (`after`).
   */
  pending(limit: number, after?: string): Array<{ key: RecordKey; generation: number; cursor: string }> {
    const range = after === undefined ? { limit } : { start: after, limit: limit + 1 };
    const entries = [...this.dirty.getRange(range)].filter((e) => after === undefined || e.key !== after);
    return entries.slice(0, limit).map(({ key, value }) => ({
      cursor: key,
      key: key === REPOSITORY ? { kind: 'repository' } : { kind: 'package', bagId: key },
      generation: value,
    }));
  }

  /** Whether a package's record in storage is behind the catalog. */
  isBehind(bagId: string): boolean {
    return this.dirty.get(bagId) !== undefined;
  }

  /** How many records are behind. */
  count(): number {
    return (this.dirty.getStats() as { entryCount: number }).entryCount;
  }

  /** The record was written as of `generation`: cleared unless marked again since. */
  written(key: RecordKey, generation: number): void {
    const k = key.kind === 'repository' ? REPOSITORY : key.bagId;
    this.catalog.transaction(() => {
      if (this.dirty.get(k) === generation) this.dirty.removeSync(k);
    });
  }

  /** The repository's UUID, minted on the first call that may write (a read-only catalog may have none). */
  repositoryId(): string | undefined {
    return this.state.get('repositoryId') as string | undefined;
  }

  ensureRepositoryId(): string {
    return this.catalog.transaction(() => {
      const id = this.repositoryId() ?? randomUUID();
      this.state.putSync('repositoryId', id);
      return id;
    });
  }

  /** A rebuild takes the identity of the root it reads. */
  adoptRepositoryId(id: string): void {
    this.catalog.transaction(() => this.state.putSync('repositoryId', id));
  }

  rebuild(): RebuildMarker | undefined {
    return this.state.get('rebuild') as RebuildMarker | undefined;
  }

  startRebuild(marker: RebuildMarker): void {
    this.catalog.transaction(() => this.state.putSync('rebuild', marker));
  }

  finishRebuild(): void {
    this.catalog.transaction(() => this.state.removeSync('rebuild'));
  }
}
