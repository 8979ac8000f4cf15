/**
 * PREMIS-style events per package, in date order, optionally linked to an audit. Indexed by
 * package, by audit, and by the package's owner and content type, so that a page of the events
 * a caller may see reads only theirs.
 */
import type { Database, RootDatabase } from 'lmdb';
import { PackageLog, type Audience, type LogQuery } from './package-log.js';
import type { Page } from './scan.js';
import type { Transactor } from './transaction.js';
import type { PreservationEvent } from './types.js';

export class EventStore {
  private readonly events: Database<PreservationEvent, number>;
  private readonly byAudit: Database<null, [number, number]>;
  /** By package, owner and content type. */
  private readonly log: PackageLog<PreservationEvent>;

  constructor(
    root: RootDatabase,
    private readonly catalog: Transactor,
    private readonly nextId: () => number,
    audience: Audience,
    /** Called inside the transaction that adds an event: the package's record in storage is behind. */
    private readonly recorded: (bagId: string) => void,
  ) {
    this.events = root.openDB({ name: 'events' });
    this.byAudit = root.openDB({ name: 'eventsByAudit' });
    this.log = new PackageLog(root, 'events', this.events, audience);
  }

  add(fields: Omit<PreservationEvent, 'id' | 'date'> & { date?: number }): PreservationEvent {
    return this.catalog.transaction(() => {
      const event: PreservationEvent = { ...fields, id: this.nextId(), date: fields.date ?? Date.now() };
      if (event.auditId === undefined) delete event.auditId;
      this.events.putSync(event.id, event);
      if (event.auditId !== undefined) this.byAudit.putSync([event.auditId, event.id], null);
      this.log.index(event);
      this.recorded(event.bagId);
      return event;
    });
  }

  /** The owner and content-type index entries of an event (also rebuilt by the migration). */
  putIndexes(event: PreservationEvent): void {
    this.log.indexAudience(event);
  }

  /**
   * One page of events in date order after the event id `after`: of one package, or of every
   * package `scope` may see (the owner and content-type indexes, never the whole log).
   */
  page(query: LogQuery): Page<PreservationEvent> {
    return this.log.page(query);
  }

  /** Every event, oldest first, `batch` at a time after `after` (the migration's walk). */
  everyRecord(after: number, batch: number): PreservationEvent[] {
    return [...this.events.getRange({ start: after + 1, limit: batch })].map((e) => e.value);
  }

  /** The newest event of a package of this type, if any. */
  latestOf(bagId: string, type: PreservationEvent['type']): PreservationEvent | undefined {
    for (const event of this.log.ofPackage(bagId, 'newest first')) if (event.type === type) return event;
    return undefined;
  }

  /** Ids grow with time, so id order is date order. */
  forPackage(bagId: string): Generator<PreservationEvent> {
    return this.log.ofPackage(bagId);
  }

  *forAudit(auditId: number): Generator<PreservationEvent> {
    for (const key of this.byAudit.getKeys({ start: [auditId], end: [auditId, Infinity] })) {
      const event = this.events.get(key[1]);
      if (event !== undefined) yield event;
    }
  }
}
