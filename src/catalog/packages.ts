/**
 * Requests/packages (one record, two names) and the files of stored packages. Packages are
 * listed oldest first by their sequence number, through indexes that make a page cost the same
 * whatever the catalog's size: the order itself, `[owner, seq]`, `[content type, seq]` and
 * `[stored, seq]`; open requests also by `[owner, seq]`, to count them. Files are keyed `[bag_id, path]`;
 * a stored package's payload list, which never changes, is kept as JSON, so a show reads one value.
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
import type { FileRecord, Package } from './types.js';

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

/** `[stored, seq]` keys of the state index: 0 open request, 1 stored package. */
const stateOf = (stored: boolean) => (stored ? 1 : 0);

/** File records written per transaction when a package's files are staged, and paths per slice of its list. */
const FILE_BATCH = 5_000;

/** Records read per catalog read when the files of a package are walked (`iterateFiles`). */
const WALK_BATCH = 256;

/** A package's files: walked in path order (afresh each time), or asked about one path. */
export interface FileView extends Iterable<FileRecord> {
  has(path: string): boolean;
  /** Whether some recorded file's path starts with `folder/`. */
  holdsUnder(folder: string): boolean;
}

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
  private readonly files: Database<FileRecord, [string, string]>;
  /** bag_id → the total size of its files, kept by putFiles (storedBytes without reading every record). */
  private readonly fileBytes: Database<number, string>;
  /** bag_id → its payload paths as a UTF-8 JSON array, the `files` field as sent. */
  private readonly payloadLists: Database<Buffer, string>;

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
    this.files = root.openDB({ name: 'files' });
    this.fileBytes = root.openDB({ name: 'packageFileBytes' });
    this.payloadLists = root.openDB({ name: 'payloadLists', encoding: 'binary' });
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
      keys = indexRange(this.byState, stateOf(stored), { after });
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
        (stored === undefined || pkg.stored === stored),
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

  /** How many packages there are, or stored ones, or open requests: counted in an index. */
  count(filter: { stored?: boolean } = {}): number {
    if (filter.stored === undefined) return (this.order.getStats() as { entryCount: number }).entryCount;
    const state = stateOf(filter.stored);
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
    this.byState.removeSync([stateOf(!pkg.stored), pkg.seq]);
    this.byState.putSync([stateOf(pkg.stored), pkg.seq], pkg.bagId);
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

  private bySeq(seq: number): Package | undefined {
    const bagId = this.order.get(seq);
    return bagId === undefined ? undefined : this.get(bagId);
  }

  /**
   * Records the files of a package about to be stored, in one transaction (or the caller's).
   * The ingest stages a bag of any size in bounded transactions instead: `unstageFiles`, then
   * `stageBatch` for each batch, then `filesStaged` with the intent.
   */
  putFiles(bagId: string, files: Iterable<FileRecord>): void {
    this.catalog.transaction(() => {
      this.unstageFiles(bagId);
      this.filesStaged(bagId, this.stageBatch(bagId, [...files]));
    });
  }

  /** Drops the file records an earlier attempt staged, `FILE_BATCH` to a transaction. */
  unstageFiles(bagId: string): void {
    while (this.catalog.transaction(() => this.removeFiles(bagId, FILE_BATCH)) === FILE_BATCH);
  }

  /**
   * Writes a batch of file records of a package about to be stored (the ingest's intent, before
   * the bag is moved) in one transaction; returns their total size. Files of an unstored package
   * are never served, so records written before a crash are harmless: the next attempt replaces
   * them. `filesStaged`, in the transaction that records the intent, completes them.
   */
  stageBatch(bagId: string, files: readonly FileRecord[]): number {
    // The path is in the key and the record; B-tree pages are partly empty: about twice the bytes.
    let bytes = 0;
    let total = 0;
    for (const file of files) {
      bytes += 2 * (2 * Buffer.byteLength(file.path) + 150);
      total += file.size;
    }
    this.catalog.reserve(bytes);
    this.catalog.transaction(() => {
      for (const file of files) this.files.putSync([bagId, file.path], file);
    });
    return total;
  }

  /** The staged files' total size and payload list, kept for the package (inside the intent's transaction). */
  filesStaged(bagId: string, totalBytes: number): void {
    this.catalog.transaction(() => {
      this.fileBytes.putSync(bagId, totalBytes);
      this.keepPayloadList(bagId);
      // Its show lists them: a new version of the record, as for a write to the record itself.
      const current = this.packages.get(bagId);
      if (current !== undefined) this.packages.putSync(bagId, { ...current, version: nextVersion(current) });
    });
  }

  /** Removes up to `limit` file records of a package; returns how many. */
  private removeFiles(bagId: string, limit: number): number {
    let removed = 0;
    for (const { key } of this.files.getRange({ start: [bagId], end: [bagId, '\uffff'], limit })) {
      this.files.removeSync(key);
      removed++;
    }
    return removed;
  }

  /**
   * Serialises the payload list once, as sent (filesStaged, and the migration for older
   * catalogs), a slice of paths at a time rather than from an array of them all.
   */
  keepPayloadList(bagId: string): void {
    this.payloadLists.putSync(bagId, this.serialisePayloadList(bagId));
  }

  /** The `files` field of a stored package, as UTF-8 JSON. */
  payloadListJson(bagId: string): Buffer {
    return this.payloadLists.get(bagId) ?? this.serialisePayloadList(bagId);
  }

  /** The payload paths relative to `data/`, in key order, as JSON in UTF-8, made in slices. */
  private serialisePayloadList(bagId: string): Buffer {
    const parts: Buffer[] = [];
    let slice: string[] = [];
    const flush = (): void => {
      parts.push(Buffer.from(`${parts.length === 0 ? '' : ','}${slice.join(',')}`, 'utf8'));
      slice = [];
    };
    for (const { key } of this.files.getRange({ start: [bagId, 'data/'], end: [bagId, 'data0'] })) {
      slice.push(JSON.stringify(key[1].slice(5)));
      if (slice.length === FILE_BATCH) flush();
    }
    if (slice.length > 0 || parts.length === 0) flush();
    return Buffer.concat([Buffer.from('['), ...parts, Buffer.from(']')]);
  }

  /** Marks a package stored (its files recorded before by putFiles). */
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

  /** All files of a stored package, tag files and payload, sorted by path. */
  listFiles(bagId: string): FileRecord[] {
    return [...this.files.getRange({ start: [bagId], end: [bagId, '\uffff'] })].map((e) => e.value);
  }

  /**
   * The files of a package in path order, read `WALK_BATCH` at a time: each batch is read whole,
   * so the walk may pause between records (an await) without holding a catalog read open. Small
   * batches, so that records walked across awaits die young (V8's young generation) instead of
   * piling up in the old one.
   */
  *iterateFiles(bagId: string): Generator<FileRecord> {
    let after: string | undefined;
    for (;;) {
      const start: [string, string] = [bagId, after ?? ''];
      const batch: FileRecord[] = [];
      for (const { value } of this.files.getRange({ start, end: [bagId, '\uffff'], limit: WALK_BATCH + 1 })) {
        if (value.path !== after) batch.push(value);
      }
      yield* batch;
      if (batch.length < WALK_BATCH) return;
      after = batch.at(-1)!.path;
    }
  }

  /**
   * The files of a package as a view: every iteration walks them afresh (`iterateFiles`), and a
   * path can be looked up without walking (for a package of many files, instead of a set of
   * every path).
   */
  filesOf(bagId: string): FileView {
    return {
      [Symbol.iterator]: () => this.iterateFiles(bagId),
      has: (path) => fitsKey(path) && this.files.doesExist([bagId, path]),
      holdsUnder: (folder) => {
        // A folder too long for a key holds no recorded file (every recorded path fits one).
        if (!fitsKey(`${folder}0`)) return false;
        for (const _ of this.files.getKeys({
          start: [bagId, `${folder}/`],
          end: [bagId, `${folder}0`],
          limit: 1,
        }))
          return true;
        return false;
      },
    };
  }

  file(bagId: string, path: string): FileRecord | undefined {
    if (!fitsKey(path)) return undefined;
    return this.files.get([bagId, path]);
  }

  /** Total size of a stored package's files (kept with them by filesStaged; 0 with none). */
  storedBytes(bagId: string): number {
    return this.fileBytes.get(bagId) ?? 0;
  }
}

/** The version of a record's next write (records written before versions were kept have none: 0). */
function nextVersion(current: Package): number {
  return (current.version ?? 0) + 1;
}

function strip(p: (Package & { seq?: number }) | undefined): Package | undefined {
  if (p === undefined) return undefined;
  const { seq: _seq, ...pkg } = p;
  return pkg;
}
