/**
 * The ingest queue: one item per completion attempt. A PENDING or DONE item blocks a new
 * attempt for the same package; a FAILED one does not (API.md).
 */
import type { Database, RootDatabase } from 'lmdb';
import { PackageLog, type Audience, type LogQuery } from './package-log.js';
import { EVERYTHING, type Page, type Scope } from './scan.js';
import type { Transactor } from './transaction.js';
import type { IngestStage, StoredProblem, QueueItem } from './types.js';

export type EnqueueResult = { created: QueueItem } | { existing: QueueItem };

export class QueueStore {
  private readonly items: Database<QueueItem, number>;
  /** By package, owner and content type. */
  private readonly log: PackageLog<QueueItem>;
  /** Ids of PENDING items: the ingest worker's and the metrics' view, without a scan. */
  private readonly pendingIds: Database<null, number>;
  /** Ids of FAILED items: the overview's count and latest failures, without a scan. */
  private readonly failedIds: Database<null, number>;

  constructor(
    root: RootDatabase,
    private readonly catalog: Transactor,
    private readonly nextId: () => number,
    audience: Audience,
  ) {
    this.items = root.openDB({ name: 'queue' });
    this.log = new PackageLog(root, 'queue', this.items, audience);
    this.pendingIds = root.openDB({ name: 'queuePending' });
    this.failedIds = root.openDB({ name: 'queueFailed' });
  }

  get(id: number): QueueItem | undefined {
    return this.items.get(id);
  }

  forPackage(bagId: string): QueueItem[] {
    return [...this.log.ofPackage(bagId)];
  }

  /**
   * A new PENDING item, unless a PENDING or DONE one exists for the same version (1: the first
   * deposit; more: a revision's): check and insert in one transaction.
   */
  enqueue(bagId: string, user: string, version = 1): EnqueueResult {
    return this.catalog.transaction(() => {
      const blocking = this.forPackage(bagId).find(
        (i) => i.status !== 'FAILED' && (i.version ?? 1) === version,
      );
      if (blocking !== undefined) return { existing: blocking };
      const now = Date.now();
      const item: QueueItem = {
        id: this.nextId(),
        bagId,
        status: 'PENDING',
        stage: 'waiting',
        user,
        ...(version > 1 ? { version } : {}),
        createdAt: now,
        updatedAt: now,
      };
      this.items.putSync(item.id, item);
      this.log.index(item);
      this.putStateIndexes(item);
      return { created: item };
    });
  }

  /** Records progress of a PENDING item. */
  advance(id: number, stage: IngestStage): QueueItem {
    return this.update(id, { stage });
  }

  finish(id: number, outcome: { status: 'DONE' } | { status: 'FAILED'; errors: StoredProblem[] }): QueueItem {
    return this.update(id, { ...outcome, stage: 'finished' });
  }

  private update(id: number, patch: Partial<QueueItem>): QueueItem {
    return this.catalog.transaction(() => {
      const current = this.items.get(id);
      if (current === undefined) throw new Error(`no queue item ${id}`);
      const next = { ...current, ...patch, updatedAt: Date.now() };
      this.items.putSync(id, next);
      if (next.status !== 'PENDING') this.pendingIds.removeSync(id);
      if (next.status === 'FAILED') this.failedIds.putSync(id, null);
      return next;
    });
  }

  /** The owner, content-type, PENDING and FAILED index entries of an item (also rebuilt by the migration). */
  putIndexes(item: QueueItem): void {
    this.putStateIndexes(item);
    this.log.indexAudience(item);
  }

  private putStateIndexes(item: QueueItem): void {
    if (item.status === 'PENDING') this.pendingIds.putSync(item.id, null);
    if (item.status === 'FAILED') this.failedIds.putSync(item.id, null);
  }

  /** One page of items, oldest first, after the id `after`: of one package, or of what `scope` may see. */
  page(query: LogQuery): Page<QueueItem> {
    return this.log.page(query);
  }

  /**
   * Every item `scope` may see, oldest first (chipmunk's status report reads them all): for a
   * regular caller only its owner and content-type index ranges.
   */
  *list(scope: Scope = EVERYTHING): Generator<QueueItem> {
    if (scope.kind === 'all') {
      for (const { value } of this.items.getRange()) yield value;
      return;
    }
    for (const id of this.log.idsInScope(scope)) {
      const item = this.items.get(id);
      if (item !== undefined) yield item;
    }
  }

  /** How many items there are in all and in each final state, counted in indexes. */
  counts(): { total: number; pending: number; failed: number } {
    const entries = (db: Database<unknown, number>) => (db.getStats() as { entryCount: number }).entryCount;
    return { total: entries(this.items), pending: entries(this.pendingIds), failed: entries(this.failedIds) };
  }

  /** FAILED items, newest first (by id), read from their index until the caller stops. */
  *failedNewestFirst(): Generator<QueueItem> {
    for (const id of this.failedIds.getKeys({ reverse: true })) {
      const item = this.items.get(id);
      if (item?.status === 'FAILED') yield item;
    }
  }

  /** Every item, oldest first, `batch` at a time after `after` (the migration's walk). */
  everyRecord(after: number, batch: number): QueueItem[] {
    return [...this.items.getRange({ start: after + 1, limit: batch })].map((e) => e.value);
  }

  /** PENDING items, oldest first, from their index. */
  pending(): QueueItem[] {
    const out: QueueItem[] = [];
    for (const id of this.pendingIds.getKeys()) {
      const item = this.items.get(id);
      if (item?.status === 'PENDING') out.push(item);
    }
    return out;
  }

  depth(): number {
    return this.counts().pending;
  }
}
