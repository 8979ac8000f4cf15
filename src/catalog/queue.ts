/**
 * The ingest queue: one item per completion attempt. A PENDING or DONE item blocks a new
 * attempt for the same package; a FAILED one does not (API.md).
 */
import type { Database, RootDatabase } from 'lmdb';
import type { Transactor } from './transaction.js';
import type { IngestStage, StoredProblem, QueueItem } from './types.js';

export type EnqueueResult = { created: QueueItem } | { existing: QueueItem };

export class QueueStore {
  private readonly items: Database<QueueItem, number>;
  private readonly byPackage: Database<null, [string, number]>;

  constructor(root: RootDatabase, private readonly catalog: Transactor, private readonly nextId: () => number) {
    this.items = root.openDB({ name: 'queue' });
    this.byPackage = root.openDB({ name: 'queueByPackage' });
  }

  get(id: number): QueueItem | undefined {
    return this.items.get(id);
  }

  forPackage(bagId: string): QueueItem[] {
    const out: QueueItem[] = [];
    for (const { key } of this.byPackage.getRange({ start: [bagId], end: [bagId, Infinity] })) {
      const item = this.items.get(key[1]);
      if (item !== undefined) out.push(item);
    }
    return out;
  }

  /** A new PENDING item, unless a PENDING or DONE one exists: check and insert in one transaction. */
  enqueue(bagId: string, user: string): EnqueueResult {
    return this.catalog.transaction(() => {
      const blocking = this.forPackage(bagId).find((i) => i.status !== 'FAILED');
      if (blocking !== undefined) return { existing: blocking };
      const now = Date.now();
      const item: QueueItem = { id: this.nextId(), bagId, status: 'PENDING', stage: 'waiting', user, createdAt: now, updatedAt: now };
      this.items.put(item.id, item);
      this.byPackage.put([bagId, item.id], null);
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
      this.items.put(id, next);
      return next;
    });
  }

  /** Every item, oldest first, optionally only those of some packages. */
  *list(filter: { bagIds?: Set<string> | undefined; status?: QueueItem['status'] } = {}): Generator<QueueItem> {
    for (const { value } of this.items.getRange()) {
      if (filter.bagIds !== undefined && !filter.bagIds.has(value.bagId)) continue;
      if (filter.status !== undefined && value.status !== filter.status) continue;
      yield value;
    }
  }

  pending(): QueueItem[] {
    return [...this.list({ status: 'PENDING' })];
  }

  depth(): number {
    return this.pending().length;
  }
}
