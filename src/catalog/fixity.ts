/**
 * When each stored package was last verified, and the packages in that order: the schedule of
 * continuous audits (audit.everyDays) reads the stalest first and counts the overdue without
 * reading any package record. A package enters when it is stored (its ingest verified every
 * file) and moves to the back each time a fixity check of it is recorded, by a full audit or a
 * continuous one, whatever the outcome (a failure is reported, not retried sooner).
 *
 * It does not decide what to check or when (audit/continuous.ts does).
 */
import type { Database, RootDatabase } from 'lmdb';
import type { Transactor } from './transaction.js';

/** A package's verification state. */
export interface FixityState {
  /** When the package was last verified: its ingest, or its last fixity check (epoch ms). */
  verifiedAt: number;
  /** Its last fixity check by an audit, if any: when, and how it came out. */
  checkedAt?: number;
  outcome?: 'success' | 'failure';
}

/** The continuous audits' share of packages to check, as of a time (audit/continuous.ts). */
export interface FixitySchedule {
  at: number;
  credit: number;
}

export class FixityStore {
  private readonly states: Database<FixityState, string>;
  /** `[verifiedAt, bag_id]`: stalest first. */
  private readonly order: Database<null, [number, string]>;
  private readonly schedules: Database<FixitySchedule, string>;

  constructor(
    root: RootDatabase,
    private readonly catalog: Transactor,
  ) {
    this.states = root.openDB({ name: 'fixityStates' });
    this.order = root.openDB({ name: 'fixityOrder' });
    this.schedules = root.openDB({ name: 'fixitySchedule' });
  }

  /** The continuous audits' saved share, if they ever ran. */
  schedule(): FixitySchedule | undefined {
    return this.schedules.get('continuous');
  }

  saveSchedule(schedule: FixitySchedule): void {
    this.catalog.transaction(() => void this.schedules.put('continuous', schedule));
  }

  get(bagId: string): FixityState | undefined {
    return this.states.get(bagId);
  }

  /** The package's state as stored, undecoded (a copy): what a held show compares (http/kept-shows.ts). */
  stateBytes(bagId: string): Buffer | undefined {
    return this.states.getBinary(bagId);
  }

  /** A package just stored: verified now, by its ingest. Joins the caller's transaction. */
  stored(bagId: string, at: number): void {
    this.catalog.transaction(() => this.put(bagId, { verifiedAt: at }));
  }

  /** Records a fixity check of a stored package; joins the caller's transaction. */
  checked(bagId: string, at: number, outcome: 'success' | 'failure'): void {
    this.catalog.transaction(() => {
      if (this.states.get(bagId) === undefined) return; // not (or no longer) stored
      this.put(bagId, { verifiedAt: at, checkedAt: at, outcome });
    });
  }

  /** Up to `limit` stored packages, least recently verified first. */
  stalest(limit: number): Array<{ bagId: string; verifiedAt: number }> {
    const out: Array<{ bagId: string; verifiedAt: number }> = [];
    for (const key of this.order.getKeys({ limit })) out.push({ bagId: key[1], verifiedAt: key[0] });
    return out;
  }

  /** Stored packages last verified before `before` (epoch ms): a range of keys, no records read. */
  countVerifiedBefore(before: number): number {
    return this.order.getKeysCount({ end: [before] });
  }

  /** Every stored package tracked (the schedule's share per day is a fraction of it). */
  count(): number {
    return (this.states.getStats() as { entryCount: number }).entryCount;
  }

  /** A package no longer stored (deaccessioned): out of the schedule. Joins the caller's transaction. */
  forget(bagId: string): void {
    this.catalog.transaction(() => {
      const previous = this.states.get(bagId);
      if (previous === undefined) return;
      this.order.removeSync([previous.verifiedAt, bagId]);
      this.states.removeSync(bagId);
    });
  }

  /** Sets a package's state as found elsewhere (the migration, from the events); joins the caller's transaction. */
  put(bagId: string, state: FixityState): void {
    const previous = this.states.get(bagId);
    if (previous !== undefined) this.order.removeSync([previous.verifiedAt, bagId]);
    this.states.putSync(bagId, state);
    this.order.putSync([state.verifiedAt, bagId], null);
  }
}
