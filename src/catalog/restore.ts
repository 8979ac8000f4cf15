/**
 * The rebuild's way into the catalog (commands/rebuild.ts): records put back as storage kept
 * them, with their own ids and dates, where the stores' own writes would mint new ones. It opens
 * the stores' databases by their names and writes exactly what each store writes for a record,
 * its indexes included (through the stores' own `putIndexes` where they have one).
 *
 * It decides nothing: what to restore, and whether it is sound, is the rebuild's.
 */
import type { Database, RootDatabase } from 'lmdb';
import type { FixityStore } from './fixity.js';
import { PackageLog, type Audience } from './package-log.js';
import type { PackageStore } from './packages.js';
import type { Revision } from './revisions.js';
import type { Transactor } from './transaction.js';
import type { Grant, Package, PreservationEvent, QueueItem, User } from './types.js';

export class CatalogRestore {
  private readonly packageRecords: Database<Package & { seq: number }, string>;
  private readonly byExternalId: Database<string, string>;
  private readonly order: Database<string, number>;
  private readonly byCapability: Database<string, string>;
  private readonly events: Database<PreservationEvent, number>;
  private readonly eventLog: PackageLog<PreservationEvent>;
  private readonly queue: Database<QueueItem, number>;
  private readonly queueLog: PackageLog<QueueItem>;
  private readonly users: Database<User, string>;
  private readonly grants: Database<Grant, [string, string, string]>;
  private readonly revisions: Database<Revision, [string, number]>;

  constructor(
    root: RootDatabase,
    private readonly catalog: Transactor,
    private readonly packages: PackageStore,
    private readonly fixity: FixityStore,
    audience: Audience,
  ) {
    this.packageRecords = root.openDB({ name: 'packages' });
    this.byExternalId = root.openDB({ name: 'packagesByExternalId' });
    this.order = root.openDB({ name: 'packageOrder' });
    this.byCapability = root.openDB({ name: 'packagesByCapability' });
    this.events = root.openDB({ name: 'events' });
    this.eventLog = new PackageLog(root, 'events', this.events, audience);
    this.queue = root.openDB({ name: 'queue' });
    this.queueLog = new PackageLog(root, 'queue', this.queue, audience);
    this.users = root.openDB({ name: 'users' });
    this.grants = root.openDB({ name: 'grants' });
    this.revisions = root.openDB({ name: 'revisions' });
  }

  /**
   * A stored package at position `seq` of the packages' order (its files already staged with
   * `packages.stageBatch` and `filesStaged`), verified when `verifiedAt` says. Joins the caller's
   * transaction.
   */
  package(pkg: Package, seq: number, verifiedAt: number): void {
    this.catalog.transaction(() => {
      const record = { ...pkg, seq };
      this.packageRecords.putSync(pkg.bagId, record);
      this.byExternalId.putSync(pkg.externalId, pkg.bagId);
      this.order.putSync(seq, pkg.bagId);
      this.byCapability.putSync(pkg.capability, pkg.bagId);
      this.packages.putIndexes(record);
      this.fixity.put(pkg.bagId, { verifiedAt });
    });
  }

  /** An event as it was (after its package, whose audience indexes it). */
  event(event: PreservationEvent): void {
    this.catalog.transaction(() => {
      this.events.putSync(event.id, event);
      this.eventLog.index(event);
      if (event.type === 'fixity check') this.fixity.checked(event.bagId, event.date, event.outcome);
    });
  }

  /** A finished queue item as it was (after its package). */
  queueItem(item: QueueItem): void {
    this.catalog.transaction(() => {
      this.queue.putSync(item.id, item);
      this.queueLog.index(item);
    });
  }

  /** A user, with no token: the admin issues new ones. */
  user(user: User): void {
    this.catalog.transaction(() => this.users.putSync(user.name, user));
  }

  /** A stored revision as it was (never one in flight: its upload did not outlive the catalog). */
  revision(revision: Revision): void {
    this.catalog.transaction(() => this.revisions.putSync([revision.bagId, revision.version], revision));
  }

  grant(grant: Grant): void {
    this.catalog.transaction(() => this.grants.putSync([grant.user, grant.scope, grant.role], grant));
  }
}
