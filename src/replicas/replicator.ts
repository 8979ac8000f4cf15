/**
 * The replicator: makes the copies the catalog says are owed (catalog/replication.ts), one
 * package at a time per replica, replicas side by side. A copy is verified file by file
 * (copy.ts); the files verified are kept as it goes, so after a stop or a kill the copy goes on
 * where it was, and the `replication` event is added with the `verified` mark in one
 * transaction, so it is never written twice. Multipart uploads a killed run left behind are
 * aborted before a copy starts again.
 *
 * A replica that is unavailable (ReplicaDown) is left alone for a back-off that doubles from
 * 2 s up to 5 min, its copy staying `pending`; a copy that came out wrong is `failed` and tried
 * again on the same back-off. Ingest goes first: while one runs, a copy moves one file at a time.
 * Copies an audit found damaged are left for repair (repair.ts): replication never overwrites.
 */
import type { Catalog } from '../catalog/catalog.js';
import type { ReplicaCopy } from '../catalog/types.js';
import type { Logger } from '../logger.js';
import { ServiceLoop, type Service } from '../service/service.js';
import type { Storage } from '../storage/storage.js';
import { copyPackage, type CopyOutcome } from './copy.js';
import { objectPrefix } from './keys.js';
import { describeReplicationProblem } from './problems.js';
import { ReplicaDown, type ReplicaTarget } from './target.js';

/** The executor named in replication events: the daemon itself. */
export const REPLICATION_EXECUTOR = 'preservd';
const FIRST_RETRY_MS = 2000;
const LONGEST_RETRY_MS = 5 * 60_000;
/** Files copied at once within a package, when no ingest runs. */
const LANES = 4;
/** Verified files are recorded at least this often while a copy is made. */
const PROGRESS_EVERY_MS = 1000;

export interface ReplicatorOptions {
  catalog: Catalog;
  storage: Storage;
  targets: readonly ReplicaTarget[];
  logger: Logger;
  /** Told of the bytes of every file verified on a replica (metrics). */
  onBytes?: (replica: string, bytes: number) => void;
}

/** Delay before attempt number `attempts + 1`. */
function backoff(attempts: number): number {
  return Math.min(LONGEST_RETRY_MS, FIRST_RETRY_MS * 2 ** Math.min(20, Math.max(0, attempts - 1)));
}

export class Replicator implements Service {
  private readonly catalog: Catalog;
  private readonly storage: Storage;
  private readonly targets: readonly ReplicaTarget[];
  private readonly logger: Logger;
  private readonly opts: ReplicatorOptions;
  /** Replica name → the copy being made there now. */
  private readonly active = new Map<string, Promise<void>>();
  /** Replica name → the package whose copy is being made there now. */
  private readonly copying = new Map<string, string>();
  /** Replica name → not before this time (it was unavailable). */
  private readonly resting = new Map<string, { until: number; failures: number }>();
  /** Ingests running now, as the ingest worker says (copies then go one file at a time). */
  private ingests = 0;
  private readonly loop: ServiceLoop;

  constructor(opts: ReplicatorOptions) {
    this.opts = opts;
    this.catalog = opts.catalog;
    this.storage = opts.storage;
    this.targets = opts.targets;
    this.logger = opts.logger;
    this.loop = new ServiceLoop(
      'the replicator',
      async (signal) => this.startDueCopies(signal),
      (err: unknown) => this.logger.error({ err }, 'the replicator could not look for copies to make'),
    );
  }

  get names(): string[] {
    return this.targets.map((t) => t.name);
  }

  /**
   * Owes a copy of a package just stored to every replica. Call it inside the transaction that
   * marks the package stored, so a crash cannot leave it stored and owed nothing.
   */
  packageStored(bagId: string): void {
    if (this.targets.length === 0) return;
    this.catalog.replication.enqueue(bagId, this.names, this.catalog.files.bytes(bagId));
    setImmediate(() => this.wake());
  }

  /** A stored package got a new version (a revision): its copies are owed again. */
  packageRevised(bagId: string): void {
    if (this.targets.length === 0) return;
    this.catalog.replication.revised(bagId, this.names, this.catalog.files.bytes(bagId));
    setImmediate(() => this.wake());
  }

  /** Told by the ingest worker how many ingests run: while any does, a copy moves one file at a time. */
  ingestsRunning(count: number): void {
    this.ingests = count;
  }

  /**
   * Starts working. A replica configured for the first time is owed a copy of every package
   * already stored (in batches, one transaction each).
   */
  start(signal?: AbortSignal): void {
    if (this.loop.running) return;
    for (const name of this.names) {
      if (this.catalog.replication.isKnown(name)) continue;
      let batch: string[] = [];
      const flush = () => {
        const bagIds = batch;
        batch = [];
        this.catalog.transaction(() => {
          for (const bagId of bagIds)
            this.catalog.replication.enqueue(bagId, [name], this.catalog.files.bytes(bagId));
        });
      };
      for (const pkg of this.catalog.packages.list({ stored: true })) {
        batch.push(pkg.bagId);
        if (batch.length >= 1000) flush();
      }
      flush();
      this.catalog.replication.markKnown(name);
    }
    this.loop.start(signal);
  }

  /** Whether a copy of the package is being made now, on any replica (a deaccession's removal waits for it). */
  isCopying(bagId: string): boolean {
    return [...this.copying.values()].includes(bagId);
  }

  /** Looks for due copies now. */
  wake(): void {
    this.loop.wake();
  }

  /** Starts every copy due now; a wake is set for the next one due later. */
  private startDueCopies(signal: AbortSignal): void {
    const now = Date.now();
    let nextDue = Infinity;
    const busy = new Set(this.active.keys());
    for (const copy of this.catalog.replication.unverified()) {
      if (copy.damaged === true || busy.has(copy.replica)) continue;
      const target = this.targets.find((t) => t.name === copy.replica);
      if (target === undefined) continue; // a replica no longer configured
      const due = Math.max(copy.nextAttemptAt, this.resting.get(copy.replica)?.until ?? 0);
      if (due > now) {
        nextDue = Math.min(nextDue, due);
        continue;
      }
      busy.add(copy.replica);
      this.copying.set(copy.replica, copy.bagId);
      const work = this.makeCopy(target, copy, signal).finally(() => {
        this.active.delete(copy.replica);
        this.copying.delete(copy.replica);
        this.wake();
      });
      this.active.set(copy.replica, this.loop.hold(work));
    }
    if (nextDue !== Infinity) this.loop.wakeIn(Math.max(10, nextDue - now));
  }

  /** Stops: copies in flight are abandoned (their verified files are kept) and resume at the next start. */
  stop(): Promise<void> {
    return this.loop.stop();
  }

  private async makeCopy(target: ReplicaTarget, copy: ReplicaCopy, signal: AbortSignal): Promise<void> {
    const { bagId, replica } = copy;
    const pkg = this.catalog.packages.get(bagId);
    const replication = this.catalog.replication;
    if (pkg?.storagePath === undefined) {
      // Cannot happen (a copy is owed only once stored); retrying at once would spin.
      replication.fail(bagId, replica, {
        error: `package ${bagId} is not recorded as stored in the catalog`,
        nextAttemptAt: Date.now() + backoff(copy.attempts + 1),
      });
      return;
    }
    // A revised package's object holds every version's content: all of it is owed.
    const current = this.catalog.files.list(bagId);
    const files = (pkg.head ?? 1) > 1 ? this.catalog.revisions.contentFiles(bagId, current) : current;
    const skip = replication.verifiedFiles(replica, bagId);
    let unrecorded: string[] = [];
    let recordedAt = Date.now();
    const record = () => {
      if (unrecorded.length === 0) return;
      replication.filesVerified(replica, bagId, unrecorded);
      unrecorded = [];
      recordedAt = Date.now();
    };
    try {
      const abandoned = await target.abandonUnfinished(objectPrefix(bagId), signal);
      if (abandoned > 0)
        this.logger.info(
          { bagId, replica, abandoned },
          `replica ${replica}: aborted ${abandoned} unfinished upload(s) of ${bagId} left by an earlier run`,
        );
      const outcome = await copyPackage(target, bagId, this.storage, files, {
        skip,
        replaceable: new Set(copy.ownWrongCopies ?? []),
        lanes: () => (this.ingests > 0 ? 1 : LANES),
        signal,
        onVerified: (path, bytes) => {
          this.opts.onBytes?.(replica, bytes);
          unrecorded.push(path);
          if (Date.now() - recordedAt >= PROGRESS_EVERY_MS) record();
        },
      });
      record();
      this.resting.delete(replica);
      this.settle(target, copy, outcome);
    } catch (err) {
      record();
      if (!signal.aborted) this.postpone(bagId, replica, err);
    }
  }

  /** Records how a copy ended: verified (an event, once), or failed with its problem. */
  private settle(target: ReplicaTarget, copy: ReplicaCopy, outcome: CopyOutcome): void {
    const { bagId, replica } = copy;
    const replication = this.catalog.replication;
    if (outcome.kind === 'verified') {
      const detail = `copied to replica ${replica} (${target.kind}, ${target.where}) and read back: ${outcome.files} files, ${outcome.bytes} bytes, sizes and sha256 as in the catalog`;
      const event = replication.verified(bagId, replica, () =>
        this.catalog.events.add({
          bagId,
          type: 'replication',
          executor: REPLICATION_EXECUTOR,
          outcome: 'success',
          detail,
        }),
      );
      if (event !== undefined)
        this.logger.info(
          { bagId, replica, files: outcome.files, bytes: outcome.bytes },
          `replica ${replica}: ${bagId} verified`,
        );
      return;
    }
    const { problem } = outcome;
    const error = describeReplicationProblem(problem);
    const own =
      problem.code === 'copy-differs' || problem.code === 'copy-unreadable' ? problem.path : undefined;
    replication.fail(
      bagId,
      replica,
      { error, nextAttemptAt: Date.now() + backoff(copy.attempts + 1), ownWrongCopy: own },
      () =>
        this.catalog.events.add({
          bagId,
          type: 'replication',
          executor: REPLICATION_EXECUTOR,
          outcome: 'failure',
          detail: error,
        }),
    );
    this.logger.warn(
      { bagId, replica, code: problem.code, path: problem.path },
      `replica ${replica}: copy of ${bagId} failed: ${error}`,
    );
  }

  /** The replica could not be used: it rests (backing off) and the copy waits for it. */
  private postpone(bagId: string, replica: string, err: unknown): void {
    const replication = this.catalog.replication;
    const reason = err instanceof ReplicaDown ? err.reason : (err as Error).message;
    const rest = this.resting.get(replica) ?? { until: 0, failures: 0 };
    rest.failures++;
    rest.until = Date.now() + backoff(rest.failures);
    this.resting.set(replica, rest);
    replication.postpone(bagId, replica, reason, rest.until);
    this.logger.warn(
      { bagId, replica, reason, retryInMs: rest.until - Date.now() },
      `replica ${replica} unavailable (${reason}); copy of ${bagId} postponed`,
    );
  }
}
