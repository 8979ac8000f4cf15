/**
 * PREMIS-style events per package, in date order, optionally linked to an audit. Indexed by
 * package, by audit, and by the package's owner and content type, so that a page of the events
 * a caller may see reads only theirs.
 */
import type { Database, RootDatabase } from 'lmdb';
import { EVERYTHING, indexRange, keysInScope, MAX_PAGE, takePage, type Page, type Scope } from './scan.js';
import type { Transactor } from './transaction.js';
import type { PreservationEvent } from './types.js';

/** Who may see a package's records: its owner, and grantees of its content type. */
export type Audience = (bagId: string) => { user: string; contentType: string } | undefined;

export class EventStore {
  private readonly events: Database<PreservationEvent, number>;
  private readonly byPackage: Database<null, [string, number]>;
  private readonly byAudit: Database<null, [number, number]>;
  private readonly byOwner: Database<null, [string, number]>;
  private readonly byContentType: Database<null, [string, number]>;

  constructor(root: RootDatabase, private readonly catalog: Transactor, private readonly nextId: () => number, private readonly audience: Audience) {
    this.events = root.openDB({ name: 'events' });
    this.byPackage = root.openDB({ name: 'eventsByPackage' });
    this.byAudit = root.openDB({ name: 'eventsByAudit' });
    this.byOwner = root.openDB({ name: 'eventsByOwner' });
    this.byContentType = root.openDB({ name: 'eventsByContentType' });
  }

  add(fields: Omit<PreservationEvent, 'id' | 'date'> & { date?: number }): PreservationEvent {
    return this.catalog.transaction(() => {
      const event: PreservationEvent = { ...fields, id: this.nextId(), date: fields.date ?? Date.now() };
      if (event.auditId === undefined) delete event.auditId;
      this.events.put(event.id, event);
      this.byPackage.put([event.bagId, event.id], null);
      if (event.auditId !== undefined) this.byAudit.put([event.auditId, event.id], null);
      this.putIndexes(event);
      return event;
    });
  }

  /** The owner and content-type index entries of an event (also rebuilt by the migration). */
  putIndexes(event: PreservationEvent): void {
    const audience = this.audience(event.bagId);
    if (audience === undefined) return;
    this.byOwner.put([audience.user, event.id], null);
    this.byContentType.put([audience.contentType, event.id], null);
  }

  /**
   * One page of events in date order after the event id `after`: of one package, or of every
   * package `scope` may see (the owner and content-type indexes, never the whole log).
   */
  page(query: { scope?: Scope; bagId?: string | undefined; after?: number | undefined; limit?: number }): Page<PreservationEvent> {
    const after = query.after ?? 0;
    const limit = Math.min(query.limit ?? MAX_PAGE, MAX_PAGE);
    const bagId = query.bagId;
    const keys =
      bagId !== undefined
        ? indexRange(this.byPackage, bagId, { after })
        : keysInScope(query.scope ?? EVERYTHING, { byOwner: this.byOwner, byContentType: this.byContentType }, (a) => this.events.getKeys({ start: a + 1 }), after);
    return takePage(keys, limit, (id) => this.events.get(id));
  }

  /** Every event, oldest first, `batch` at a time after `after` (the migration's walk). */
  everyRecord(after: number, batch: number): PreservationEvent[] {
    return [...this.events.getRange({ start: after + 1, limit: batch })].map((e) => e.value);
  }

  get(id: number): PreservationEvent | undefined {
    return this.events.get(id);
  }

  /** The newest event of a package of this type, if any. */
  latestOf(bagId: string, type: PreservationEvent['type']): PreservationEvent | undefined {
    for (const key of this.byPackage.getKeys({ start: [bagId, Infinity], end: [bagId, 0], reverse: true })) {
      const event = this.events.get(key[1]);
      if (event?.type === type) return event;
    }
    return undefined;
  }

  /** Ids grow with time, so id order is date order. */
  *forPackage(bagId: string): Generator<PreservationEvent> {
    for (const { key } of this.byPackage.getRange({ start: [bagId], end: [bagId, Infinity] })) {
      const event = this.events.get(key[1]);
      if (event !== undefined) yield event;
    }
  }

  *forAudit(auditId: number): Generator<PreservationEvent> {
    for (const { key } of this.byAudit.getRange({ start: [auditId], end: [auditId, Infinity] })) {
      const event = this.events.get(key[1]);
      if (event !== undefined) yield event;
    }
  }

  *list(): Generator<PreservationEvent> {
    for (const { value } of this.events.getRange()) yield value;
  }
}
