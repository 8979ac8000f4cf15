/**
 * Copies of stored packages on replicas: one record per (package, replica), the durable work of
 * replication. A copy is `pending` until every file has been written and read back, `verified`
 * after, `failed` when a copy came out wrong (or an audit found it damaged). While a copy is being
 * made, the files already verified are kept, so a restart goes on where it was. Counts per
 * replica and status are kept beside the records (metrics and `preservd replicas` without a
 * scan); every change of a copy and of the counts is one transaction, and the `replication`
 * event of a verified copy is added in the transaction that marks it, so it is never written
 * twice.
 */
import type { Database, RootDatabase } from 'lmdb';
import type { Transactor } from './transaction.js';
import type { PreservationEvent, ReplicaCopy, ReplicaCopyStatus } from './types.js';

/** Per replica: copies by status, and the bytes of the verified ones. */
export interface ReplicaCounts {
  pending: number;
  verified: number;
  failed: number;
  verifiedBytes: number;
}

type CountKey = ReplicaCopyStatus | 'verifiedBytes';

export class ReplicationStore {
  /** [bag_id, replica] → the copy. */
  private readonly copies: Database<ReplicaCopy, [string, string]>;
  /** [bag_id, replica] of every copy not verified: the replicator's work list. */
  private readonly open: Database<null, [string, string]>;
  /** [replica, bag_id, path] of files verified in a copy still pending. */
  private readonly progress: Database<null, [string, string, string]>;
  private readonly counts: Database<number, [string, CountKey]>;
  /** Replica names whose copies of every stored package have been enqueued. */
  private readonly known: Database<number, string>;

  constructor(
    root: RootDatabase,
    private readonly catalog: Transactor,
  ) {
    this.copies = root.openDB({ name: 'replicaCopies' });
    this.open = root.openDB({ name: 'replicaCopiesOpen' });
    this.progress = root.openDB({ name: 'replicaProgress' });
    this.counts = root.openDB({ name: 'replicaCounts' });
    this.known = root.openDB({ name: 'replicasKnown' });
  }

  get(bagId: string, replica: string): ReplicaCopy | undefined {
    return this.copies.get([bagId, replica]);
  }

  /** The copy as stored, undecoded (a copy of the bytes): what a held show compares (http/kept-shows.ts). */
  copyBytes(bagId: string, replica: string): Buffer | undefined {
    return this.copies.getBinary([bagId, replica]);
  }

  /** The copies of one package, by replica name. */
  forPackage(bagId: string): ReplicaCopy[] {
    return [...this.copies.getRange({ start: [bagId], end: [bagId, '\uffff'] })].map((e) => e.value);
  }

  /** Every copy not yet verified (pending or failed), in bag_id order. */
  *unverified(): Generator<ReplicaCopy> {
    for (const key of this.open.getKeys()) {
      const copy = this.copies.get(key);
      if (copy !== undefined) yield copy;
    }
  }

  countsOf(replica: string): ReplicaCounts {
    const n = (k: CountKey) => this.counts.get([replica, k]) ?? 0;
    return {
      pending: n('pending'),
      verified: n('verified'),
      failed: n('failed'),
      verifiedBytes: n('verifiedBytes'),
    };
  }

  isKnown(replica: string): boolean {
    return this.known.get(replica) !== undefined;
  }

  markKnown(replica: string): void {
    this.catalog.transaction(() => {
      if (this.known.get(replica) === undefined) this.known.putSync(replica, Date.now());
    });
  }

  /** A pending copy of the package on each replica that has none yet. */
  enqueue(bagId: string, replicas: readonly string[], bytes: number): void {
    this.catalog.transaction(() => {
      const now = Date.now();
      for (const replica of replicas) {
        if (this.copies.get([bagId, replica]) !== undefined) continue;
        this.put(
          {
            bagId,
            replica,
            status: 'pending',
            bytes,
            attempts: 0,
            nextAttemptAt: now,
            createdAt: now,
            updatedAt: now,
          },
          undefined,
        );
      }
    });
  }

  /**
   * A stored package got a new version: every copy is owed again (what it holds already is found
   * there and not sent; its root inventory and sidecar, this daemon's own, may be replaced).
   */
  revised(bagId: string, replicas: readonly string[], bytes: number): void {
    this.catalog.transaction(() => {
      const now = Date.now();
      for (const replica of replicas) {
        const current = this.copies.get([bagId, replica]);
        if (current === undefined) continue;
        const { error: _error, damaged: _damaged, lastReason: _reason, ...rest } = current;
        const own = new Set([...(current.ownWrongCopies ?? []), 'inventory.json', 'inventory.json.sha256']);
        this.put(
          {
            ...rest,
            status: 'pending',
            bytes,
            attempts: 0,
            nextAttemptAt: now,
            updatedAt: now,
            ownWrongCopies: [...own],
          },
          current,
        );
      }
    });
    this.enqueue(bagId, replicas, bytes);
  }

  /** Paths already verified in a copy still being made. */
  verifiedFiles(replica: string, bagId: string): Set<string> {
    const out = new Set<string>();
    for (const key of this.progress.getKeys({
      start: [replica, bagId],
      end: [replica, bagId, '\uffff'],
    }))
      out.add(key[2]);
    return out;
  }

  /** Records files verified in a copy being made (so a restart does not copy them again). */
  filesVerified(replica: string, bagId: string, paths: readonly string[]): void {
    this.catalog.transaction(() => {
      for (const path of paths) this.progress.putSync([replica, bagId, path], null);
    });
  }

  /**
   * The copy's bookkeeping moved to new paths (`preservd migrate`: the replica's keys became an
   * OCFL object's): the files verified in a copy still pending become `verified`, and the paths
   * of its own wrong copies are renamed by `rename`; one transaction.
   */
  movePaths(
    bagId: string,
    replica: string,
    verified: readonly string[],
    rename: (path: string) => string,
  ): void {
    this.catalog.transaction(() => {
      for (const key of this.progress.getKeys({
        start: [replica, bagId],
        end: [replica, bagId, '\uffff'],
      }))
        this.progress.removeSync(key);
      for (const path of verified) this.progress.putSync([replica, bagId, path], null);
      const copy = this.copies.get([bagId, replica]);
      if (copy?.ownWrongCopies !== undefined)
        this.copies.putSync([bagId, replica], { ...copy, ownWrongCopies: copy.ownWrongCopies.map(rename) });
    });
  }

  /**
   * The copy is complete and verified: status, counts and the event in one transaction; the
   * progress kept while copying is dropped. Undefined (nothing written) when it already was.
   */
  verified(bagId: string, replica: string, addEvent: () => PreservationEvent): PreservationEvent | undefined {
    return this.catalog.transaction(() => {
      const copy = this.copies.get([bagId, replica]);
      if (copy === undefined || copy.status === 'verified') return undefined;
      const now = Date.now();
      const { error: _error, damaged: _damaged, ownWrongCopies: _own, ...rest } = copy;
      this.put({ ...rest, status: 'verified', verifiedAt: now, updatedAt: now }, copy);
      for (const key of this.progress.getKeys({
        start: [replica, bagId],
        end: [replica, bagId, '\uffff'],
      }))
        this.progress.removeSync(key);
      return addEvent();
    });
  }

  /** The replica was unavailable: the copy stays pending and is tried again at `nextAttemptAt`. */
  postpone(bagId: string, replica: string, reason: string, nextAttemptAt: number): void {
    this.change(bagId, replica, (copy) => ({
      ...copy,
      attempts: copy.attempts + 1,
      nextAttemptAt,
      lastReason: reason,
    }));
  }

  /**
   * The copy came out wrong (or could not be made for a reason of its own): `failed`, tried again
   * at `nextAttemptAt`. `ownWrongCopy`: a path whose wrong object this daemon wrote itself, which a
   * retry may therefore replace. With `addEvent`, the event is added only on the first failure.
   */
  fail(
    bagId: string,
    replica: string,
    fields: { error: string; nextAttemptAt: number; ownWrongCopy?: string | undefined },
    addEvent?: () => PreservationEvent,
  ): void {
    this.catalog.transaction(() => {
      const copy = this.copies.get([bagId, replica]);
      if (copy === undefined) return;
      const own = new Set(copy.ownWrongCopies ?? []);
      if (fields.ownWrongCopy !== undefined) own.add(fields.ownWrongCopy);
      const wasFailed = copy.status === 'failed';
      this.put(
        {
          ...copy,
          status: 'failed',
          error: fields.error,
          attempts: copy.attempts + 1,
          nextAttemptAt: fields.nextAttemptAt,
          ownWrongCopies: [...own],
          updatedAt: Date.now(),
        },
        copy,
      );
      if (!wasFailed) addEvent?.();
    });
  }

  /**
   * An audit found the copy damaged: `failed` with the finding, and left for repair (the
   * replicator does not touch a damaged copy: replication never overwrites).
   */
  damaged(bagId: string, replica: string, error: string): void {
    this.change(bagId, replica, (copy) => ({ ...copy, status: 'failed', error, damaged: true }));
  }

  /** Repair made the copy whole again: verified, without a `replication` event (repair records `recovery`). */
  repaired(bagId: string, replica: string): void {
    this.change(bagId, replica, (copy) => {
      const { error: _error, damaged: _damaged, ownWrongCopies: _own, ...rest } = copy;
      return { ...rest, status: 'verified', verifiedAt: Date.now() };
    });
  }

  /**
   * A deaccessioned package has no copies to make or keep: its records, work and progress go, and
   * the counts with them. Joins the caller's transaction.
   */
  forget(bagId: string): void {
    this.catalog.transaction(() => {
      for (const copy of this.forPackage(bagId)) {
        const key: [string, string] = [bagId, copy.replica];
        const bump = (k: CountKey, by: number) =>
          this.counts.putSync([copy.replica, k], (this.counts.get([copy.replica, k]) ?? 0) + by);
        bump(copy.status, -1);
        if (copy.status === 'verified') bump('verifiedBytes', -copy.bytes);
        this.copies.removeSync(key);
        this.open.removeSync(key);
        for (const progress of this.progress.getKeys({
          start: [copy.replica, bagId],
          end: [copy.replica, bagId, '\uffff'],
        }))
          this.progress.removeSync(progress);
      }
    });
  }

  private change(bagId: string, replica: string, patch: (copy: ReplicaCopy) => ReplicaCopy): void {
    this.catalog.transaction(() => {
      const copy = this.copies.get([bagId, replica]);
      if (copy !== undefined) this.put({ ...patch(copy), updatedAt: Date.now() }, copy);
    });
  }

  /** Writes a copy and keeps the open list and the counts in step with it. */
  private put(next: ReplicaCopy, before: ReplicaCopy | undefined): void {
    const key: [string, string] = [next.bagId, next.replica];
    this.copies.putSync(key, next);
    if (next.status === 'verified') this.open.removeSync(key);
    else this.open.putSync(key, null);
    if (before?.status === next.status) return;
    const bump = (k: CountKey, by: number) =>
      this.counts.putSync([next.replica, k], (this.counts.get([next.replica, k]) ?? 0) + by);
    if (before !== undefined) bump(before.status, -1);
    bump(next.status, 1);
    if (before?.status === 'verified') bump('verifiedBytes', -before.bytes);
    if (next.status === 'verified') bump('verifiedBytes', next.bytes);
  }
}
