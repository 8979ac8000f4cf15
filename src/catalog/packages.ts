/**
 * Requests/packages: one record, two names. Packages are
 * listed oldest first by their sequence number, through indexes that make a page cost the same
 * whatever the catalog's size: the order itself, `[owner, seq]`, `[content type, seq]` and
 * `[stored, seq]`; open requests also by `[owner, seq]`, to count them. Their files are
 * `FileStore`'s (files.ts).
 */
import type { Database, RootDatabase } from 'lmdb';
import type { FixityStore } from './fixity.js';
import { fitsKey, isUuid } from './keys.js';
import {
  EVERYTHING,
  indexRange,
  keysInScope,
  keysInScopeNewestFirst,
  MAX_PAGE,
  takePage,
  type Page,
  type Scope,
} from './scan.js';
import type { Transactor } from './transaction.js';
import type { Deaccessioned, Package } from './types.js';

/** What a page of packages is asked for: the caller's scope, filters, and where to start. */
export interface PackageQuery {
  scope?: Scope;
  contentType?: string | undefined;
  stored?: boolean | undefined;
  /** The order key (sequence number) of the last package of the previous page. */
  after?: number | undefined;
  limit?: number;
}

type StoredPackage = Package & { seq: number };

/**
 * `[state, seq]` keys of the state index: 0 open request, 1 stored package, 2 tombstone (a
 * deaccessioned package: stored once, its content gone, in neither `stored` filter).
 */
const OPEN = 0;
const STORED = 1;
const TOMBSTONE = 2;
const stateOf = (pkg: Pick<Package, 'stored' | 'deaccessioned'>) =>
  pkg.deaccessioned !== undefined ? TOMBSTONE : pkg.stored ? STORED : OPEN;
/** Whether a package passes the `stored` filter: a tombstone passes neither. */
const passes = (pkg: Package, stored: boolean) => pkg.deaccessioned === undefined && pkg.stored === stored;

export type CreateResult = { created: Package } | { existing: Package } | { overLimit: number };

export class PackageStore {
  private readonly packages: Database<StoredPackage, string>;
  private readonly byExternalId: Database<string, string>;
  private readonly order: Database<string, number>;
  private readonly byCapability: Database<string, string>;
  private readonly byOwner: Database<string, [string, number]>;
  private readonly byContentType: Database<string, [string, number]>;
  private readonly byState: Database<string, [number, number]>;
  private readonly openByOwner: Database<null, [string, number]>;

  constructor(
    root: RootDatabase,
    private readonly catalog: Transactor,
    private readonly nextSeq: () => number,
    private readonly fixity: FixityStore,
  ) {
    this.packages = root.openDB({ name: 'packages' });
    this.byExternalId = root.openDB({ name: 'packagesByExternalId' });
    this.order = root.openDB({ name: 'packageOrder' });
    this.byCapability = root.openDB({ name: 'packagesByCapability' });
    this.byOwner = root.openDB({ name: 'packagesByOwner' });
    this.byContentType = root.openDB({ name: 'packagesByContentType' });
    this.byState = root.openDB({ name: 'packagesByState' });
    this.openByOwner = root.openDB({ name: 'openPackagesByOwner' });
  }

  get(bagId: string): Package | undefined {
    return strip(this.packages.get(bagId.toLowerCase()));
  }

  /** By bag_id first, then by external_id (chipmunk accepts either in paths). */
  find(idOrExternalId: string): Package | undefined {
    if (!fitsKey(idOrExternalId)) return undefined;
    if (isUuid(idOrExternalId)) {
      const byId = this.get(idOrExternalId);
      if (byId !== undefined) return byId;
    }
    return this.withExternalId(idOrExternalId);
  }

  /**
   * The record of a package (by bag_id or external_id, as `find`) as stored, undecoded, with its
   * bag_id: the held show compares these bytes instead of decoding them (http/kept-shows.ts).
   * The bytes are a view of lmdb's own buffer, overwritten by the next read of the catalog.
   */
  recordBytes(idOrExternalId: string): { bagId: string; bytes: Buffer } | undefined {
    if (!fitsKey(idOrExternalId)) return undefined;
    if (isUuid(idOrExternalId)) {
      const bagId = idOrExternalId.toLowerCase();
      const bytes = this.packages.getBinaryFast(bagId);
      if (bytes !== undefined) return { bagId, bytes: exactly(bytes) };
    }
    const bagId = this.byExternalId.get(idOrExternalId);
    const bytes = bagId === undefined ? undefined : this.packages.getBinaryFast(bagId);
    return bytes === undefined ? undefined : { bagId: bagId!, bytes: exactly(bytes) };
  }

  /** By external_id only: a new request's must be free whatever bag_ids exist. */
  private withExternalId(externalId: string): Package | undefined {
    const bagId = fitsKey(externalId) ? this.byExternalId.get(externalId) : undefined;
    return bagId === undefined ? undefined : this.get(bagId);
  }

  /**
   * Creates the package unless its bag_id or external_id is taken, in which case the package
   * holding it is returned and nothing is written. Check and insert are one transaction.
   */
  create(
    fields: Omit<Package, 'stored' | 'createdAt' | 'updatedAt' | 'version'>,
    limits: { openPerOwner?: number } = {},
  ): CreateResult {
    return this.catalog.transaction(() => {
      const bagId = fields.bagId.toLowerCase();
      const existing = this.get(bagId) ?? this.withExternalId(fields.externalId);
      if (existing !== undefined) return { existing };
      const open = limits.openPerOwner;
      if (open !== undefined && this.openCountOf(fields.user) >= open) return { overLimit: open };
      const now = Date.now();
      const seq = this.nextSeq();
      const pkg: Package = { ...fields, bagId, stored: false, createdAt: now, updatedAt: now, version: 1 };
      this.packages.putSync(bagId, { ...pkg, seq });
      this.byExternalId.putSync(fields.externalId, bagId);
      this.order.putSync(seq, bagId);
      this.byCapability.putSync(fields.capability, bagId);
      this.putIndexes({ ...pkg, seq });
      return { created: pkg };
    });
  }

  /**
   * Gives an open request a new capability (catalog/rotations.ts, inside its transaction). The
   * old one keeps naming the request, so that what arrives for a retired link is still known.
   */
  replaceCapability(bagId: string, fresh: string): Package {
    const current = this.packages.get(bagId)!;
    const updated = { ...current, capability: fresh, updatedAt: Date.now() };
    this.packages.putSync(bagId, updated);
    this.byCapability.putSync(fresh, bagId);
    return strip(updated)!;
  }

  /** The package whose landing folder is named by this capability (a retired one too). */
  byUploadCapability(capability: string): Package | undefined {
    const bagId = this.byCapability.get(capability);
    return bagId === undefined ? undefined : this.get(bagId);
  }

  /**
   * One page of the packages `query.scope` may see, oldest first, after `query.after`. The scan
   * reads one index: the scope's owner and content-type ranges for a regular caller; for an
   * admin the content-type index when filtered by type, the state index when filtered by
   * `stored`, else the order itself. Any other filter is applied per package read.
   */
  page(query: PackageQuery = {}): Page<Package> {
    const scope = query.scope ?? EVERYTHING;
    const after = query.after ?? 0;
    const limit = Math.min(query.limit ?? MAX_PAGE, MAX_PAGE);
    const { contentType, stored } = query;
    let keys: Iterable<number>;
    if (scope.kind === 'all' && contentType !== undefined)
      keys = indexRange(this.byContentType, contentType, { after });
    else if (scope.kind === 'all' && stored !== undefined)
      keys = indexRange(this.byState, stored ? STORED : OPEN, { after });
    else
      keys = keysInScope(
        scope,
        { byOwner: this.byOwner, byContentType: this.byContentType },
        (a) => this.order.getKeys({ start: a + 1 }),
        after,
      );
    return takePage(
      keys,
      limit,
      (seq) => this.bySeq(seq),
      (pkg) =>
        (contentType === undefined || pkg.contentType === contentType) &&
        (stored === undefined || passes(pkg, stored)),
    );
  }

  /** Every package the query selects, oldest first, read a page at a time. */
  *list(query: Omit<PackageQuery, 'after' | 'limit'> = {}): Generator<Package> {
    let after = 0;
    for (;;) {
      const page = this.page({ ...query, after });
      yield* page.items;
      if (page.next === undefined) return;
      after = page.next;
    }
  }

  /**
   * The packages `query.scope` may see, newest first, below the sequence number `before` (the
   * pages' search shows the latest deposits first), each with its sequence number to continue
   * from. Lazy: a caller that stops early reads nothing further.
   */
  *newestFirst(
    query: { scope?: Scope | undefined; contentType?: string | undefined; before?: number | undefined } = {},
  ): Generator<{ seq: number; pkg: Package }> {
    const scope = query.scope ?? EVERYTHING;
    const before = query.before ?? Number.MAX_SAFE_INTEGER;
    const { contentType } = query;
    const keys =
      scope.kind === 'all' && contentType !== undefined
        ? indexRange(this.byContentType, contentType, { before })
        : keysInScopeNewestFirst(
            scope,
            { byOwner: this.byOwner, byContentType: this.byContentType },
            (b) => this.order.getKeys({ start: b - 1, end: 0, reverse: true }),
            before,
          );
    for (const seq of keys) {
      const pkg = this.bySeq(seq);
      if (pkg !== undefined && (contentType === undefined || pkg.contentType === contentType))
        yield { seq, pkg };
    }
  }

  /** How many packages there are, or stored ones (tombstones apart), or open requests: counted in an index. */
  count(filter: { stored?: boolean } = {}): number {
    if (filter.stored === undefined) return (this.order.getStats() as { entryCount: number }).entryCount;
    const state = filter.stored ? STORED : OPEN;
    return this.byState.getKeysCount({ start: [state], end: [state, Infinity] });
  }

  /** How many open (not stored) requests `user` owns: counted in an index. */
  openCountOf(user: string): number {
    return this.openByOwner.getKeysCount({ start: [user], end: [user, Infinity] });
  }

  /**
   * The owner and content type of a package: what an event's or queue item's visibility depends
   * on (the events and queue stores index their records by them).
   */
  audienceOf(bagId: string): { user: string; contentType: string } | undefined {
    const pkg = this.packages.get(bagId);
    return pkg === undefined ? undefined : { user: pkg.user, contentType: pkg.contentType };
  }

  /** The indexes of a package (also rebuilt by the catalog's migration). */
  putIndexes(pkg: StoredPackage): void {
    this.byOwner.putSync([pkg.user, pkg.seq], pkg.bagId);
    this.byContentType.putSync([pkg.contentType, pkg.seq], pkg.bagId);
    for (const state of [OPEN, STORED, TOMBSTONE])
      if (state !== stateOf(pkg)) this.byState.removeSync([state, pkg.seq]);
    this.byState.putSync([stateOf(pkg), pkg.seq], pkg.bagId);
    if (pkg.stored) this.openByOwner.removeSync([pkg.user, pkg.seq]);
    else this.openByOwner.putSync([pkg.user, pkg.seq], null);
  }

  /** Every package with its sequence number, oldest first, `batch` at a time (the migration's walk). */
  *everyRecord(after: number, batch: number): Generator<StoredPackage> {
    for (const { value: bagId } of this.order.getRange({ start: after + 1, limit: batch })) {
      const pkg = this.packages.get(bagId);
      if (pkg !== undefined) yield pkg;
    }
  }

  /** Every tombstone (deaccessioned package), oldest first: the state index's range. */
  *tombstones(): Generator<Package> {
    for (const seq of indexRange(this.byState, TOMBSTONE, { after: 0 })) {
      const pkg = this.bySeq(seq);
      if (pkg !== undefined) yield pkg;
    }
  }

  private bySeq(seq: number): Package | undefined {
    const bagId = this.order.get(seq);
    return bagId === undefined ? undefined : this.get(bagId);
  }

  /** A new version of the record without another change (its file list changed: catalog/files.ts). */
  bumpVersion(bagId: string): void {
    const current = this.packages.get(bagId);
    if (current !== undefined) this.packages.putSync(bagId, { ...current, version: nextVersion(current) });
  }

  /**
   * A stored package's folder moved in storage (`preservd migrate`: to its OCFL object): its
   * `storagePath` changes, nothing the API shows does (`updatedAt` kept).
   */
  moveStored(bagId: string, storagePath: string): void {
    this.catalog.transaction(() => {
      const current = this.packages.get(bagId);
      if (current === undefined || !current.stored) throw new Error(`no stored package ${bagId}`);
      this.packages.putSync(bagId, { ...current, storagePath, version: nextVersion(current) });
    });
  }

  /**
   * Makes a stored package a tombstone (catalog/deaccessions.ts, inside the approval's
   * transaction): a new version of the record, out of the state index's stored range.
   */
  markDeaccessioned(bagId: string, deaccessioned: Deaccessioned): void {
    const current = this.packages.get(bagId);
    if (current === undefined || !current.stored) throw new Error(`no stored package ${bagId}`);
    const updated = { ...current, deaccessioned, updatedAt: deaccessioned.at, version: nextVersion(current) };
    this.packages.putSync(bagId, updated);
    this.putIndexes(updated);
  }

  /** A stored package's object has a new head version (a revision stored; its files replaced before). */
  revised(bagId: string, head: number): Package {
    return this.catalog.transaction(() => {
      const current = this.packages.get(bagId);
      if (current === undefined || !current.stored) throw new Error(`no stored package ${bagId}`);
      const updated = { ...current, head, updatedAt: Date.now(), version: nextVersion(current) };
      this.packages.putSync(bagId, updated);
      return strip(updated)!;
    });
  }

  /** Marks a package stored (its files recorded before: FileStore). */
  markStored(bagId: string, storagePath: string): Package {
    return this.catalog.transaction(() => {
      const current = this.packages.get(bagId);
      if (current === undefined) throw new Error(`no package ${bagId}`);
      const updated = {
        ...current,
        stored: true,
        storagePath,
        updatedAt: Date.now(),
        version: nextVersion(current),
      };
      this.packages.putSync(bagId, updated);
      this.putIndexes(updated);
      this.fixity.stored(bagId, updated.updatedAt);
      return strip(updated)!;
    });
  }
}

/** The version of a record's next write (records written before versions were kept have none: 0). */
function nextVersion(current: Package): number {
  return (current.version ?? 0) + 1;
}

/** lmdb's fast buffer with only the value's bytes: it sets `length` on a larger buffer, which `equals` and `Buffer.from` do not read. */
function exactly(bytes: Buffer): Buffer {
  return bytes.subarray(0, bytes.length);
}

function strip(p: (Package & { seq?: number }) | undefined): Package | undefined {
  if (p === undefined) return undefined;
  const { seq: _seq, ...pkg } = p;
  return pkg;
}
