/**
 * Deaccessions (API.md, "Deaccession"): requests to take a package out, decided by a second
 * admin, and the removals an approval leaves to do. The approval is one transaction: the package
 * becomes a tombstone (its payload list empty, out of audits and replication), a `deaccession`
 * event is added, and one removal per copy (`primary` and each replica) is recorded. Storage is
 * then emptied by the remover (replicas/removals.ts), which clears each removal once its copy is
 * gone, whatever crash came between: the catalog says what the package will be, storage follows.
 *
 * Who may ask and decide is the routes' (auth/access.ts); this store refuses only what no caller
 * may do (a decision on a decided request, the requester deciding their own).
 */
import type { Database, RootDatabase } from 'lmdb';
import type { EventStore } from './events.js';
import type { FileStore } from './files.js';
import type { FixityStore } from './fixity.js';
import type { PackageStore } from './packages.js';
import type { ReplicationStore } from './replication.js';
import type { Transactor } from './transaction.js';
import type { Deaccession } from './types.js';

/** A removal still to do: one package's object on one copy. */
export interface Removal {
  bagId: string;
  /** `primary`, or a replica's name. */
  copy: string;
  /** S3 Object Lock keeps the copy until then (epoch ms); the remover tries again after it. */
  retainedUntil?: number;
  /** Why the last attempt did not finish, while it is retried. */
  lastError?: string;
  createdAt: number;
}

/**
 * A removal given up: the replica it was owed to is no longer configured, so whether that copy of
 * the package's content is gone is unknown (never claimed removed).
 */
export interface AbandonedRemoval {
  bagId: string;
  copy: string;
  reason: string;
  at: number;
}

/** Why a removal is abandoned when its replica left the configuration. */
export const NO_LONGER_CONFIGURED = 'not removed: replica no longer configured';

export type RequestResult = { created: Deaccession } | { existing: Deaccession } | { refused: string };

export type DecisionResult = { decided: Deaccession } | { refused: 'not-requested' | 'own-request' };

/** What a store holding work on a package says when it is busy (a revision in flight): a sentence, or undefined. */
export type BusyCheck = (bagId: string) => string | undefined;

export class DeaccessionStore {
  private readonly records: Database<Deaccession, number>;
  /** `[bag_id, id]` of every request on a package. */
  private readonly byPackage: Database<null, [string, number]>;
  /** bag_id → the id of its request still `requested` (at most one). */
  private readonly requested: Database<number, string>;
  /** `[bag_id, copy]` → a removal still to do. */
  private readonly removals: Database<Removal, [string, string]>;
  /** `[bag_id, copy]` → a removal abandoned (its replica left the configuration). */
  private readonly abandoned: Database<AbandonedRemoval, [string, string]>;
  /** Other work that makes a request wait (a revision in flight); wired by whoever owns it. */
  otherWorkOn: BusyCheck = () => undefined;

  constructor(
    root: RootDatabase,
    private readonly catalog: Transactor,
    private readonly nextId: () => number,
    private readonly stores: {
      packages: PackageStore;
      files: FileStore;
      fixity: FixityStore;
      replication: ReplicationStore;
      events: EventStore;
    },
  ) {
    this.records = root.openDB({ name: 'deaccessions' });
    this.byPackage = root.openDB({ name: 'deaccessionsByPackage' });
    this.requested = root.openDB({ name: 'deaccessionsRequested' });
    this.removals = root.openDB({ name: 'deaccessionRemovals' });
    this.abandoned = root.openDB({ name: 'deaccessionRemovalsAbandoned' });
  }

  get(id: number): Deaccession | undefined {
    return this.records.get(id);
  }

  /**
   * The deaccession in flight on a package: its request still `requested`. A revision must
   * answer 409 while there is one (API.md); a tombstone takes no revision at all.
   */
  inFlight(bagId: string): Deaccession | undefined {
    const id = this.requested.get(bagId.toLowerCase());
    return id === undefined ? undefined : this.records.get(id);
  }

  /** Every request, oldest first, after the id `after`, at most `limit`, those `keep` lets through. */
  page(
    after: number,
    limit: number,
    keep: (d: Deaccession) => boolean,
  ): { items: Deaccession[]; next: number | undefined } {
    const items: Deaccession[] = [];
    for (const { value } of this.records.getRange({ start: after + 1 })) {
      if (!keep(value)) continue;
      if (items.length === limit) return { items, next: items.at(-1)!.id };
      items.push(value);
    }
    return { items, next: undefined };
  }

  /** The requests on one package, oldest first. */
  forPackage(bagId: string): Deaccession[] {
    return [...this.byPackage.getKeys({ start: [bagId], end: [bagId, Infinity] })]
      .map((key) => this.records.get(key[1]))
      .filter((d): d is Deaccession => d !== undefined);
  }

  /**
   * A new request on a stored package, unless one is already `requested` (returned as
   * `existing`), or the package cannot take one now (`refused`, a sentence). One transaction.
   */
  request(bagId: string, user: string, reason: string): RequestResult {
    return this.catalog.transaction(() => {
      const pkg = this.stores.packages.get(bagId);
      if (pkg === undefined || !pkg.stored) return { refused: `package ${bagId} is not stored` };
      if (pkg.deaccessioned !== undefined)
        return { refused: `package ${pkg.bagId} was deaccessioned already` };
      const existing = this.inFlight(pkg.bagId);
      if (existing !== undefined) return { existing };
      const busy = this.otherWorkOn(pkg.bagId);
      if (busy !== undefined) return { refused: busy };
      const record: Deaccession = {
        id: this.nextId(),
        bagId: pkg.bagId,
        status: 'requested',
        reason,
        requestedBy: user,
        requestedAt: Date.now(),
      };
      this.records.putSync(record.id, record);
      this.byPackage.putSync([pkg.bagId, record.id], null);
      this.requested.putSync(pkg.bagId, record.id);
      return { created: record };
    });
  }

  /** Rejects a request (`reason` required by the route); the package stays as it is. */
  reject(id: number, user: string, reason: string): DecisionResult {
    return this.catalog.transaction(() => {
      const refusal = this.refusalOf(id, user);
      if (refusal !== undefined) return { refused: refusal };
      return { decided: this.decide(id, 'rejected', user, reason) };
    });
  }

  /**
   * Approves a request: in one transaction the package becomes a tombstone, its `deaccession`
   * event is added, and a removal is recorded for each of `copies` (the primary and every
   * replica). Nothing in storage is touched here.
   */
  approve(id: number, user: string, reason: string | undefined, copies: readonly string[]): DecisionResult {
    return this.catalog.transaction(() => {
      const refusal = this.refusalOf(id, user);
      if (refusal !== undefined) return { refused: refusal };
      const decided = this.decide(id, 'approved', user, reason);
      const { bagId } = decided;
      const at = decided.decidedAt!;
      this.stores.packages.markDeaccessioned(bagId, {
        at,
        reason: decided.reason,
        requestedBy: decided.requestedBy,
        approvedBy: user,
        requestId: id,
        requestedAt: decided.requestedAt,
      });
      this.stores.files.emptyPayloadList(bagId);
      this.stores.fixity.forget(bagId);
      this.stores.replication.forget(bagId);
      for (const copy of copies) this.removals.putSync([bagId, copy], { bagId, copy, createdAt: at });
      this.stores.events.add({
        bagId,
        type: 'deaccession',
        executor: user,
        outcome: 'success',
        detail: `requested by ${decided.requestedBy}: ${decided.reason}; approved by ${user}${reason === undefined ? '' : `: ${reason}`}; its content is removed from ${copies.join(', ')}`,
        date: at,
      });
      return { decided };
    });
  }

  private refusalOf(id: number, user: string): 'not-requested' | 'own-request' | undefined {
    const record = this.records.get(id);
    if (record === undefined || record.status !== 'requested') return 'not-requested';
    if (record.requestedBy === user) return 'own-request';
    return undefined;
  }

  private decide(
    id: number,
    status: 'approved' | 'rejected',
    user: string,
    reason: string | undefined,
  ): Deaccession {
    const record = this.records.get(id)!;
    const decided: Deaccession = { ...record, status, decidedBy: user, decidedAt: Date.now() };
    if (reason !== undefined) decided.decisionReason = reason;
    this.records.putSync(id, decided);
    this.requested.removeSync(record.bagId);
    return decided;
  }

  /** Every removal still to do, by package and copy. */
  pendingRemovals(): Removal[] {
    return [...this.removals.getRange()].map((e) => e.value);
  }

  /** The removals still to do of one package (what its page and the audit show). */
  removalsOf(bagId: string): Removal[] {
    return [...this.removals.getRange({ start: [bagId], end: [bagId, '\uffff'] })].map((e) => e.value);
  }

  /** The removals of one package given up (their replica left the configuration). */
  abandonedOf(bagId: string): AbandonedRemoval[] {
    return [...this.abandoned.getRange({ start: [bagId], end: [bagId, '\uffff'] })].map((e) => e.value);
  }

  /**
   * At start-up, with the replicas configured now, in one transaction: a removal owed to a
   * replica no longer configured is abandoned, with a `deaccession` failure event naming it (that
   * copy may still hold the content); one abandoned earlier whose replica is configured again is
   * owed again, with an event saying so. The packages left with no removal to do are returned.
   */
  settleRemovals(configured: readonly string[], primary: string): { abandoned: Removal[]; done: string[] } {
    const known = new Set([primary, ...configured]);
    return this.catalog.transaction(() => {
      const abandoned = this.pendingRemovals().filter((r) => !known.has(r.copy));
      const at = Date.now();
      for (const { bagId, copy } of abandoned) {
        this.removals.removeSync([bagId, copy]);
        this.abandoned.putSync([bagId, copy], { bagId, copy, reason: NO_LONGER_CONFIGURED, at });
        this.stores.events.add({
          bagId,
          type: 'deaccession',
          executor: 'preservd',
          outcome: 'failure',
          detail: `its content on replica ${copy} was not removed and never will be: replica ${copy} is no longer configured; whether that copy is gone is unknown`,
          date: at,
        });
      }
      for (const { value } of [...this.abandoned.getRange()])
        if (configured.includes(value.copy)) {
          this.abandoned.removeSync([value.bagId, value.copy]);
          this.removals.putSync([value.bagId, value.copy], {
            bagId: value.bagId,
            copy: value.copy,
            createdAt: at,
          });
          this.stores.events.add({
            bagId: value.bagId,
            type: 'deaccession',
            executor: 'preservd',
            outcome: 'success',
            detail: `replica ${value.copy} is configured again: its content there is to be removed`,
            date: at,
          });
        }
      const done = [...new Set(abandoned.map((r) => r.bagId))].filter((b) => this.removalsOf(b).length === 0);
      return { abandoned, done };
    });
  }

  /** A copy's removal did not finish: retained by Object Lock until a date, or failed for now. */
  postpone(bagId: string, copy: string, why: { retainedUntil?: number; lastError?: string }): void {
    this.catalog.transaction(() => {
      const removal = this.removals.get([bagId, copy]);
      if (removal === undefined) return;
      const next: Removal = { bagId, copy, createdAt: removal.createdAt };
      if (why.retainedUntil !== undefined) next.retainedUntil = why.retainedUntil;
      if (why.lastError !== undefined) next.lastError = why.lastError;
      this.removals.putSync([bagId, copy], next);
    });
  }

  /** A copy is gone: its removal is done. True when it was the package's last. */
  removed(bagId: string, copy: string): boolean {
    return this.catalog.transaction(() => {
      this.removals.removeSync([bagId, copy]);
      return this.removalsOf(bagId).length === 0;
    });
  }

  /** An audit found content of a tombstone on these copies: their removals are to do again. */
  removeAgain(bagId: string, copies: readonly string[]): void {
    this.catalog.transaction(() => {
      for (const copy of copies)
        if (this.removals.get([bagId, copy]) === undefined)
          this.removals.putSync([bagId, copy], { bagId, copy, createdAt: Date.now() });
    });
  }

  /**
   * A tombstone put back by a rebuild, with its approved request and a removal per copy (an
   * object the rebuild found may still hold its content). Joins the caller's transaction.
   */
  restore(record: Deaccession, copies: readonly string[]): void {
    this.catalog.transaction(() => {
      this.records.putSync(record.id, record);
      this.byPackage.putSync([record.bagId, record.id], null);
      const at = record.decidedAt ?? Date.now();
      for (const copy of copies)
        this.removals.putSync([record.bagId, copy], { bagId: record.bagId, copy, createdAt: at });
    });
  }
}
