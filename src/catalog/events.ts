/** PREMIS-style events per package, in date order, optionally linked to an audit. */
import type { Database, RootDatabase } from 'lmdb';
import type { Transactor } from './transaction.js';
import type { PreservationEvent } from './types.js';

export class EventStore {
  private readonly events: Database<PreservationEvent, number>;
  private readonly byPackage: Database<null, [string, number]>;
  private readonly byAudit: Database<null, [number, number]>;

  constructor(root: RootDatabase, private readonly catalog: Transactor, private readonly nextId: () => number) {
    this.events = root.openDB({ name: 'events' });
    this.byPackage = root.openDB({ name: 'eventsByPackage' });
    this.byAudit = root.openDB({ name: 'eventsByAudit' });
  }

  add(fields: Omit<PreservationEvent, 'id' | 'date'> & { date?: number }): PreservationEvent {
    return this.catalog.transaction(() => {
      const event: PreservationEvent = { ...fields, id: this.nextId(), date: fields.date ?? Date.now() };
      if (event.auditId === undefined) delete event.auditId;
      this.events.put(event.id, event);
      this.byPackage.put([event.bagId, event.id], null);
      if (event.auditId !== undefined) this.byAudit.put([event.auditId, event.id], null);
      return event;
    });
  }

  get(id: number): PreservationEvent | undefined {
    return this.events.get(id);
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
