/**
 * The removals an approved deaccession leaves (catalog/deaccessions.ts): each copy of the
 * package's object, the primary's and each replica's, is removed, then its removal is cleared in
 * the catalog. Before a root loses the object it must hold the package's tombstone (the record
 * writer's `preservd-tombstones.json`), so a rebuild from any root brings the tombstone back.
 * A package's replicas lose its object only after the primary has. Every step is idempotent,
 * and start-up runs the removals a crash left: storage always ends as
 * the catalog says: the primary's removals before the daemon serves or audits, so the root it
 * serves from is never left half emptied. A copy under S3 Object Lock retention is hidden at once
 * and removed when its date has passed. A removal owed to a replica no longer configured is
 * abandoned at start-up (catalog/deaccessions.ts, `settleRemovals`): nothing could remove it.
 */
import type { Logger } from 'pino';
import type { Catalog } from '../catalog/catalog.js';
import type { Removal } from '../catalog/deaccessions.js';
import { failpoint } from '../failpoints.js';
import { ServiceLoop, type Service } from '../service/service.js';
import { removeObjectFromPrimary } from '../storage/remove-object.js';
import type { Storage } from '../storage/storage.js';
import { objectPrefix } from './keys.js';
import type { ReplicaTarget } from './target.js';

/** The removal of the primary's copy is recorded under this name. */
export const PRIMARY = 'primary';
/** A removal that failed is tried again this much later. */
const RETRY_MS = 60_000;
/** The longest wait between passes while a retention runs (timers cannot wait for weeks). */
const LONGEST_WAIT_MS = 3_600_000;

export interface RemoverOptions {
  catalog: Catalog;
  storage: Storage;
  targets: readonly ReplicaTarget[];
  logger: Logger;
  /** Writes the preservd records that are behind now (the tombstones file among them). */
  writeRecords: () => Promise<void>;
  /**
   * Whether the package is being written now (the replicator copying it, a repair restoring it):
   * its removals wait, so nothing writes into an object, or makes its folders, after it went.
   */
  writing: (bagId: string) => boolean;
}

export class Remover implements Service {
  private readonly loop: ServiceLoop;
  /**
   * When retained copies are looked at again before their date: at each start and hourly, since
   * an owner may shorten a GOVERNANCE retention (or a clock may have been wrong).
   */
  private recheckAfter = 0;

  constructor(private readonly o: RemoverOptions) {
    this.loop = new ServiceLoop(
      'deaccession removals',
      (signal) => this.pass(signal),
      (err) => o.logger.error({ err }, 'removing deaccessioned content failed; trying again'),
    );
  }

  /** Settles the removals owed to replicas no longer configured, finishes the primary's, then runs. */
  async start(signal: AbortSignal): Promise<void> {
    this.abandonUnconfigured();
    for (const removal of this.o.catalog.deaccessions.pendingRemovals())
      if (removal.copy === PRIMARY && !signal.aborted) await this.remove(removal, true, signal);
    this.loop.start(signal);
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** A deaccession was approved: its removals now. */
  wake(): void {
    this.loop.wake();
  }

  /** Runs the removals due now (tests). */
  async flush(): Promise<void> {
    await this.loop.runPass();
  }

  private async pass(signal: AbortSignal): Promise<void> {
    let next = Infinity;
    const recheck = Date.now() >= this.recheckAfter;
    if (recheck) this.recheckAfter = Date.now() + LONGEST_WAIT_MS;
    // The primary's first: it is local and quick, and the root the daemon serves from. A
    // package's replicas only once its primary copy is gone (its wait is in `next` already), so
    // that a replica shown removed means the primary's copy is too.
    const removals = this.o.catalog.deaccessions.pendingRemovals();
    const primaryLeft = new Set<string>();
    for (const removal of [
      ...removals.filter((r) => r.copy === PRIMARY),
      ...removals.filter((r) => r.copy !== PRIMARY),
    ]) {
      if (signal.aborted) return;
      if (primaryLeft.has(removal.bagId)) continue;
      const at = await this.remove(removal, recheck, signal);
      if (removal.copy === PRIMARY && at !== Infinity) primaryLeft.add(removal.bagId);
      next = Math.min(next, at);
    }
    if (next !== Infinity) this.loop.wakeIn(Math.min(LONGEST_WAIT_MS, Math.max(10, next - Date.now())));
  }

  /** One copy's removal; when to look again if it is not done (Infinity: done). */
  private async remove(removal: Removal, recheck: boolean, signal: AbortSignal): Promise<number> {
    const { catalog, logger } = this.o;
    const { bagId, copy } = removal;
    const now = Date.now();
    if (!recheck && removal.retainedUntil !== undefined && removal.retainedUntil > now)
      return removal.retainedUntil;
    if (catalog.records.isBehind(bagId)) await this.o.writeRecords();
    if (catalog.records.isBehind(bagId)) return now + RETRY_MS / 10; // the tombstone is not in every root yet
    if (this.o.writing(bagId)) return now + 1000;
    try {
      if (copy === PRIMARY) await removeObjectFromPrimary(this.o.storage, bagId);
      else {
        const target = this.o.targets.find((t) => t.name === copy);
        if (target === undefined) return Infinity; // abandoned at start-up (abandonUnconfigured)
        const { retainedUntil } = await target.removeObject(objectPrefix(bagId), signal);
        if (retainedUntil !== undefined) {
          const known = removal.retainedUntil === retainedUntil.getTime();
          catalog.deaccessions.postpone(bagId, copy, { retainedUntil: retainedUntil.getTime() });
          if (!known)
            logger.info(
              { bagId, replica: copy, retainedUntil },
              `deaccessioned ${bagId}: replica ${copy} retains its copy until ${retainedUntil.toISOString()} (S3 Object Lock); hidden now, removed then`,
            );
          return retainedUntil.getTime();
        }
      }
      failpoint('deaccession:copy-removed');
      if (catalog.deaccessions.removed(bagId, copy)) catalog.files.unstage(bagId);
      logger.info({ bagId, copy }, `deaccessioned ${bagId}: its content is removed from ${copy}`);
      return Infinity;
    } catch (err) {
      if (signal.aborted) return Infinity;
      const why = (err as Error).message;
      catalog.deaccessions.postpone(bagId, copy, { lastError: why });
      logger.warn(
        { err, bagId, copy },
        `deaccessioned ${bagId}: its content on ${copy} could not be removed yet (${why}); trying again`,
      );
      return now + RETRY_MS;
    }
  }

  /** The removals owed to replicas no longer configured: abandoned, each logged and recorded as an event. */
  private abandonUnconfigured(): void {
    const { catalog, logger, targets } = this.o;
    const { abandoned, done } = catalog.deaccessions.settleRemovals(
      targets.map((t) => t.name),
      PRIMARY,
    );
    for (const { bagId, copy } of abandoned)
      logger.warn(
        { bagId, replica: copy },
        `deaccessioned ${bagId}: replica ${copy} is no longer configured, so its copy of the content was not removed; that removal is abandoned (the copy's state is unknown)`,
      );
    for (const bagId of done) catalog.files.unstage(bagId);
  }
}
