/**
 * Requests/packages (one record, two names) and the files of stored packages. Packages are
 * listed oldest first through an order index; files are keyed `[bag_id, path]`.
 */
import type { Database, RootDatabase } from 'lmdb';
import { fitsKey } from './keys.js';
import type { Transactor } from './transaction.js';
import type { FileRecord, Package } from './types.js';

export type CreateResult = { created: Package } | { existing: Package };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(s: string): boolean {
  return UUID.test(s);
}

export class PackageStore {
  private readonly packages: Database<Package & { seq: number }, string>;
  private readonly byExternalId: Database<string, string>;
  private readonly order: Database<string, number>;
  private readonly byCapability: Database<string, string>;
  private readonly files: Database<FileRecord, [string, string]>;
  /** bag_id → the total size of its files, kept by putFiles (storedBytes without reading every record). */
  private readonly fileBytes: Database<number, string>;

  constructor(root: RootDatabase, private readonly catalog: Transactor, private readonly nextSeq: () => number) {
    this.packages = root.openDB({ name: 'packages' });
    this.byExternalId = root.openDB({ name: 'packagesByExternalId' });
    this.order = root.openDB({ name: 'packageOrder' });
    this.byCapability = root.openDB({ name: 'packagesByCapability' });
    this.files = root.openDB({ name: 'files' });
    this.fileBytes = root.openDB({ name: 'packageFileBytes' });
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
    const bagId = this.byExternalId.get(idOrExternalId);
    return bagId === undefined ? undefined : this.get(bagId);
  }

  /**
   * Creates the package unless its bag_id or external_id is taken, in which case the package
   * holding it is returned and nothing is written. Check and insert are one transaction.
   */
  create(fields: Omit<Package, 'stored' | 'createdAt' | 'updatedAt'>): CreateResult {
    return this.catalog.transaction(() => {
      const bagId = fields.bagId.toLowerCase();
      const existing = this.get(bagId) ?? this.find(fields.externalId);
      if (existing !== undefined) return { existing };
      const now = Date.now();
      const seq = this.nextSeq();
      const pkg: Package = { ...fields, bagId, stored: false, createdAt: now, updatedAt: now };
      this.packages.put(bagId, { ...pkg, seq });
      this.byExternalId.put(fields.externalId, bagId);
      this.order.put(seq, bagId);
      this.byCapability.put(fields.capability, bagId);
      return { created: pkg };
    });
  }

  /** The package whose landing folder is named by this capability. */
  byUploadCapability(capability: string): Package | undefined {
    const bagId = this.byCapability.get(capability);
    return bagId === undefined ? undefined : this.get(bagId);
  }

  /** Every package, oldest first. */
  *list(filter: { user?: string; stored?: boolean } = {}): Generator<Package> {
    for (const { value: bagId } of this.order.getRange()) {
      const pkg = this.get(bagId);
      if (pkg === undefined) continue;
      if (filter.user !== undefined && pkg.user !== filter.user) continue;
      if (filter.stored !== undefined && pkg.stored !== filter.stored) continue;
      yield pkg;
    }
  }

  count(filter: { stored?: boolean } = {}): number {
    let n = 0;
    for (const _ of this.list(filter)) n++;
    return n;
  }

  /**
   * Records the files of a package about to be stored (the ingest's intent, written before the
   * bag is moved). Files of an unstored package are never served.
   */
  putFiles(bagId: string, files: FileRecord[]): void {
    // The path is in the key and the record; B-tree pages are partly empty: about twice the bytes.
    let bytes = 0;
    for (const file of files) bytes += 2 * (2 * Buffer.byteLength(file.path) + 150);
    this.catalog.reserve(bytes);
    this.catalog.transaction(() => {
      for (const { key } of this.files.getRange({ start: [bagId], end: [bagId, '\uffff'] })) this.files.remove(key);
      let total = 0;
      for (const file of files) {
        this.files.put([bagId, file.path], file);
        total += file.size;
      }
      this.fileBytes.put(bagId, total);
    });
  }

  /** Marks a package stored (its files recorded before by putFiles). */
  markStored(bagId: string, storagePath: string): Package {
    return this.catalog.transaction(() => {
      const current = this.packages.get(bagId);
      if (current === undefined) throw new Error(`no package ${bagId}`);
      const updated = { ...current, stored: true, storagePath, updatedAt: Date.now() };
      this.packages.put(bagId, updated);
      return strip(updated)!;
    });
  }

  touch(bagId: string): void {
    this.catalog.transaction(() => {
      const current = this.packages.get(bagId);
      if (current !== undefined) this.packages.put(bagId, { ...current, updatedAt: Date.now() });
    });
  }

  /** All files of a stored package, tag files and payload, sorted by path. */
  listFiles(bagId: string): FileRecord[] {
    return [...this.files.getRange({ start: [bagId], end: [bagId, '\uffff'] })].map((e) => e.value);
  }

  *iterateFiles(bagId: string): Generator<FileRecord> {
    for (const { value } of this.files.getRange({ start: [bagId], end: [bagId, '\uffff'] })) yield value;
  }

  file(bagId: string, path: string): FileRecord | undefined {
    if (!fitsKey(path)) return undefined;
    return this.files.get([bagId, path]);
  }

  /** Payload paths relative to `data/`, sorted: the `files` field of the API. */
  payloadPaths(bagId: string): string[] {
    const out: string[] = [];
    for (const { key } of this.files.getRange({ start: [bagId, 'data/'], end: [bagId, 'data0'] })) out.push(key[1].slice(5));
    return out;
  }

  /** Total size of a stored package's files. */
  storedBytes(bagId: string): number {
    const kept = this.fileBytes.get(bagId);
    if (kept !== undefined) return kept;
    // Files recorded before the total was kept: add them up.
    let total = 0;
    for (const file of this.iterateFiles(bagId)) total += file.size;
    return total;
  }
}

function strip(p: (Package & { seq?: number }) | undefined): Package | undefined {
  if (p === undefined) return undefined;
  const { seq: _seq, ...pkg } = p;
  return pkg;
}
