/**
 * The catalog: one LMDB environment under `<dataDir>/catalog/` holding users, tokens, grants,
 * browser sessions, packages and their files, the ingest queue, events, audits, and the hashing
 * checkpoints of ingests in progress. It is the truth for what is stored; the disk is checked against it.
 * Every state change is one `transaction()`: stores may be combined inside one, and a throw rolls
 * all of it back.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { open, type Database, type RootDatabase } from 'lmdb';
import { AuditStore } from './audits.js';
import { CheckpointStore } from './checkpoints.js';
import { DeaccessionStore } from './deaccessions.js';
import { CatalogError } from './errors.js';
import { EventStore } from './events.js';
import { GrantStore } from './grants.js';
import { LandedHashStore } from './landed-hashes.js';
import { FixityStore } from './fixity.js';
import { FileStore } from './files.js';
import { PackageStore } from './packages.js';
import { SpaceClaim, type WriteKind } from './space.js';
import type { DataLayout } from '../storage/layout.js';
import { QueueStore } from './queue.js';
import { ReplicationStore } from './replication.js';
import { CatalogRestore } from './restore.js';
import { RevisionStore } from './revisions.js';
import { RotationStore } from './rotations.js';
import { SessionStore } from './sessions.js';
import { StorageRecordStore } from './storage-records.js';
import type { Transactor } from './transaction.js';
import { UserStore } from './users.js';

/**
 * Bumped whenever the stored shapes change; `migrate()` brings older catalogs forward.
 * 2: indexes by owner, content type and state (packages, events, queue), payload lists kept as
 * JSON, and each stored package's verification state (fixity.ts).
 * 3: an index of FAILED queue items (the overview counts them without reading the queue).
 * 4: open requests by owner (a user's open requests are capped: `upload.openRequestsPerUser`).
 */
export const SCHEMA_VERSION = 4;

/** The meta key of `authGeneration()`. */
const AUTH_GENERATION = 'authGeneration';

/** Records migrated per transaction: a big catalog is carried forward in bounded steps. */
const MIGRATION_BATCH = 5_000;

export class Catalog implements Transactor {
  readonly users: UserStore;
  readonly grants: GrantStore;
  readonly sessions: SessionStore;
  readonly packages: PackageStore;
  readonly files: FileStore;
  readonly queue: QueueStore;
  readonly events: EventStore;
  readonly audits: AuditStore;
  readonly checkpoints: CheckpointStore;
  readonly landedHashes: LandedHashStore;
  readonly replication: ReplicationStore;
  readonly rotations: RotationStore;
  /** Revisions of stored packages, and every stored version's record and superseded files. */
  readonly revisions: RevisionStore;
  readonly fixity: FixityStore;
  readonly deaccessions: DeaccessionStore;
  /** Which records in storage are behind the catalog (ocfl/record.ts), and the repository's identity. */
  readonly records: StorageRecordStore;
  /** Records put back with their own ids and dates: the rebuild's only. */
  readonly restore: CatalogRestore;
  private readonly meta: Database<unknown, string>;
  /** 1 inside transaction(); nested calls run in the outer one. */
  private depth = 0;
  /** What a nested call threw, so that the outer transaction rolls back even if it was caught. */
  private nestedFailure: { err: unknown } | undefined;
  /** Whose room reserve() may use: the kind of the transaction under way (space.ts). */
  private kind: WriteKind = 'normal';

  private constructor(
    private readonly root: RootDatabase,
    /** Undefined for a read-only catalog. */
    readonly space: SpaceClaim | undefined,
  ) {
    this.meta = root.openDB({ name: 'meta' });
    const seq = (name: string) => () => this.nextSequence(name);
    this.records = new StorageRecordStore(root, this);
    const identitiesChanged = () => {
      this.meta.putSync(AUTH_GENERATION, this.authGeneration() + 1);
      this.records.markRepository();
    };
    this.users = new UserStore(root, this, identitiesChanged);
    this.grants = new GrantStore(root, this, (name) => this.users.get(name) !== undefined, identitiesChanged);
    this.sessions = new SessionStore(root, this, (digest) => this.users.isLive(digest));
    this.fixity = new FixityStore(root, this);
    this.packages = new PackageStore(root, this, seq('package'), this.fixity);
    this.files = new FileStore(root, this, (bagId) => this.packages.bumpVersion(bagId));
    const audience = (bagId: string) => this.packages.audienceOf(bagId);
    this.queue = new QueueStore(root, this, seq('queue'), audience);
    this.events = new EventStore(root, this, seq('event'), audience, (bagId) =>
      this.records.markPackage(bagId),
    );
    this.audits = new AuditStore(root, this, seq('audit'));
    this.checkpoints = new CheckpointStore(root, this);
    this.landedHashes = new LandedHashStore(root, this);
    this.replication = new ReplicationStore(root, this);
    this.revisions = new RevisionStore(root, this);
    this.rotations = new RotationStore(
      root,
      this,
      this.packages,
      (bagId) => this.revisions.open(bagId) !== undefined,
    );
    this.deaccessions = new DeaccessionStore(root, this, seq('deaccession'), {
      packages: this.packages,
      files: this.files,
      fixity: this.fixity,
      replication: this.replication,
      events: this.events,
    });
    // One change in flight per package (API.md): a deaccession is asked for only without an open revision.
    this.deaccessions.otherWorkOn = (bagId) =>
      this.revisions.open(bagId) === undefined
        ? undefined
        : `package ${bagId} has an open revision: abandon or complete it first`;
    this.restore = new CatalogRestore(root, this, this.packages, this.fixity, audience);
  }

  /**
   * Opens (creating if needed) the catalog of a data directory. `readOnly` opens an existing
   * catalog for inspection (checks, tests) without writing anything, not even a migration.
   */
  static open(layout: Pick<DataLayout, 'catalog'>, options: { readOnly?: boolean } = {}): Catalog {
    const path = layout.catalog;
    const readOnly = options.readOnly === true;
    if (!readOnly) mkdirSync(path, { recursive: true });
    // No dot in the last path component: lmdb-js would take it for a single-file database.
    const root = open({ path, maxDbs: 64, compression: false, readOnly });
    const catalog = new Catalog(root, readOnly ? undefined : new SpaceClaim(join(path, 'data.mdb')));
    if (readOnly) {
      if (catalog.schemaVersion !== SCHEMA_VERSION)
        throw new CatalogError(
          `the catalog has schema ${catalog.schemaVersion}; this preservd reads ${SCHEMA_VERSION} only (open it read-write to migrate)`,
        );
    } else {
      catalog.migrate();
      catalog.sessions.indexOlderSessions();
      catalog.records.ensureRepositoryId();
    }
    return catalog;
  }

  /**
   * Runs `fn` as one all-or-nothing write transaction. A nested call joins the outer transaction
   * (no LMDB child transaction: each would cost a native begin and commit, and an audit records
   * three per package); a throw inside a nested call fails the whole outer transaction, even if
   * the outer `fn` caught it, so nothing is ever committed half-done.
   */
  transaction<T>(fn: () => T): T {
    return this.run(fn, 'normal');
  }

  /**
   * A transaction that records that work ended (an ingest DONE or FAILED, an upload given back
   * under a new link): on a full disk it may use the room kept back from every other write
   * (space.ts), so that what ends is not left waiting for space.
   */
  outcomeTransaction<T>(fn: () => T): T {
    return this.run(fn, 'outcome');
  }

  /**
   * A transaction that only saves work later (files hashed as they land): on a filling disk it
   * is refused first, while every other write still has room (space.ts).
   */
  backgroundTransaction<T>(fn: () => T): T {
    return this.run(fn, 'background');
  }

  private run<T>(fn: () => T, kind: WriteKind): T {
    if (this.depth > 0) {
      try {
        return fn();
      } catch (err) {
        this.nestedFailure ??= { err };
        throw err;
      }
    }
    // Before LMDB writes anything: it must never be the one to find the disk full (space.ts).
    this.space?.ensure(0, kind);
    this.depth = 1;
    this.kind = kind;
    this.nestedFailure = undefined;
    try {
      return this.root.transactionSync(() => {
        const result = fn();
        if (this.nestedFailure !== undefined) throw this.nestedFailure.err;
        return result;
      });
    } finally {
      this.depth = 0;
      this.nestedFailure = undefined;
      this.kind = 'normal';
    }
  }

  reserve(bytes: number): void {
    this.space?.ensure(bytes, this.kind);
  }

  /**
   * A number that changes, in the same transaction, with every write to users, tokens or grants,
   * whichever process makes it (the daemon, or `preservd token revoke` beside it). What was read
   * of them at one generation holds while the generation is the same: http/auth.ts keeps the
   * callers it authenticated on that condition. A catalog from before it reads 0.
   */
  authGeneration(): number {
    return (this.meta.get(AUTH_GENERATION) as number | undefined) ?? 0;
  }

  get schemaVersion(): number {
    return (this.meta.get('schemaVersion') as number | undefined) ?? 0;
  }

  private migrate(): void {
    const found = this.schemaVersion;
    if (found > SCHEMA_VERSION)
      throw new CatalogError(
        `the catalog was written by a newer preservd (schema ${found}; this one knows ${SCHEMA_VERSION}); upgrade preservd`,
      );
    if (found === SCHEMA_VERSION) return;
    // Version 0 is an empty catalog: nothing to carry forward. From 1, the indexes are built in
    // batches; the version is written last, so an interrupted migration simply runs again.
    if (found === 1) this.buildIndexes();
    else if (found === 2) this.indexQueue();
    if (found === 2 || found === 3) this.indexOpenRequests();
    this.transaction(() => {
      this.meta.putSync('schemaVersion', SCHEMA_VERSION);
      if (this.meta.get('createdAt') === undefined) this.meta.putSync('createdAt', Date.now());
    });
  }

  /** Schema 2 → 3: the queue's indexes again, the FAILED one with them (each put is idempotent). */
  private indexQueue(): void {
    for (let after = 0, done = false; !done;) {
      done = this.transaction(() => {
        const batch = this.queue.everyRecord(after, MIGRATION_BATCH);
        for (const item of batch) this.queue.putIndexes(item);
        after = batch.at(-1)?.id ?? after;
        return batch.length < MIGRATION_BATCH;
      });
    }
  }

  /** Schema 2 or 3 → 4: the packages' indexes again, the owner index of open requests with them (each put is idempotent). */
  private indexOpenRequests(): void {
    for (let after = 0, done = false; !done;) {
      done = this.transaction(() => {
        const batch = [...this.packages.everyRecord(after, MIGRATION_BATCH)];
        for (const pkg of batch) this.packages.putIndexes(pkg);
        after = batch.at(-1)?.seq ?? after;
        return batch.length < MIGRATION_BATCH;
      });
    }
  }

  /** Schema 1 → 4: every index, payload list and verification state from the records. */
  private buildIndexes(): void {
    for (let after = 0, done = false; !done;) {
      done = this.transaction(() => {
        const batch = [...this.packages.everyRecord(after, MIGRATION_BATCH)];
        for (const pkg of batch) {
          this.packages.putIndexes(pkg);
          if (!pkg.stored) continue;
          this.files.keepPayloadList(pkg.bagId);
          const check = this.events.latestOf(pkg.bagId, 'fixity check');
          this.fixity.put(
            pkg.bagId,
            check === undefined
              ? { verifiedAt: pkg.updatedAt }
              : { verifiedAt: check.date, checkedAt: check.date, outcome: check.outcome },
          );
        }
        after = batch.at(-1)?.seq ?? after;
        return batch.length < MIGRATION_BATCH;
      });
    }
    for (const store of [this.events, this.queue] as const) {
      for (let after = 0, done = false; !done;) {
        done = this.transaction(() => {
          const batch = store.everyRecord(after, MIGRATION_BATCH);
          for (const record of batch) (store.putIndexes as (r: typeof record) => void)(record);
          after = batch.at(-1)?.id ?? after;
          return batch.length < MIGRATION_BATCH;
        });
      }
    }
  }

  /** Raises a sequence to at least `atLeast` (a rebuild puts records back with their own ids). */
  raiseSequence(name: 'event' | 'queue' | 'package' | 'deaccession', atLeast: number): void {
    this.transaction(() => {
      const key = `seq:${name}`;
      if (((this.meta.get(key) as number | undefined) ?? 0) < atLeast) this.meta.putSync(key, atLeast);
    });
  }

  private nextSequence(name: string): number {
    return this.transaction(() => {
      const key = `seq:${name}`;
      const next = ((this.meta.get(key) as number | undefined) ?? 0) + 1;
      this.meta.putSync(key, next);
      return next;
    });
  }

  /**
   * The processes that have the catalog of `layout` open (the daemon, a command beside it),
   * other than this one: LMDB's reader table, after the slots of processes that died (a kill -9)
   * are cleared. Opened read-only and without the schema check, so an older daemon is seen too.
   */
  static otherProcesses(layout: Pick<DataLayout, 'catalog'>): number[] {
    const root = open({ path: layout.catalog, maxDbs: 64, compression: false, readOnly: true });
    try {
      root.readerCheck();
      const pids = new Set<number>();
      for (const line of String(root.readerList()).split('\n')) {
        const pid = Number(/^\s*(\d+)\s/.exec(line)?.[1]);
        if (Number.isSafeInteger(pid) && pid !== process.pid) pids.add(pid);
      }
      return [...pids];
    } finally {
      void root.close();
    }
  }

  /** Size of the LMDB data file, for metrics. */
  sizeBytes(): number {
    const stats = this.root.getStats() as { treeDepth?: number; pageSize?: number; lastPageNumber?: number };
    return (stats.pageSize ?? 4096) * ((stats.lastPageNumber ?? 0) + 1);
  }

  /**
   * A consistent, compacted copy of the whole catalog as of one read transaction, written to
   * the catalog folder of another (new) data directory while this one goes on writing.
   */
  async backup(layout: Pick<DataLayout, 'catalog'>): Promise<void> {
    const path = layout.catalog;
    mkdirSync(path, { recursive: true });
    await this.root.backup(path, true);
  }

  async close(): Promise<void> {
    await this.root.close();
  }
}
