/**
 * A new catalog from one storage root (STORAGE.md, "The catalog is an index: rebuild"): the
 * repository's record (identity, users without tokens, grants), then every object, oldest package
 * first, each written to the catalog in one last transaction that makes it stored. A rebuild in
 * progress is marked in the catalog; a stored package is one done, so a rebuild killed at any
 * point goes on where it was when run again (the files of a package not finished are staged
 * again), and the daemon refuses to start on a catalog half rebuilt.
 */
import { failpoint } from '../failpoints.js';
import { newCapability } from '../ingest/capability.js';
import type { Catalog } from '../catalog/catalog.js';
import { packageObjectPath, ROOT_DECLARATION } from '../ocfl/layout.js';
import {
  msOf,
  readRepositoryRecord,
  RecordError,
  REPOSITORY_RECORD,
  type PackageRecord,
  type Tombstone,
} from '../ocfl/record.js';
import {
  ObjectSkipped,
  readObject,
  readRecord,
  type ReadObject,
  type ReadVersion,
} from './rebuild-object.js';
import { readTombstones, restoreHistory, restoreTombstone } from './rebuild-tombstones.js';
import { restoreVersions } from './rebuild-versions.js';
import type { RootReader } from './root-reader.js';

/** File records staged per transaction. */
const FILE_BATCH = 5_000;
/**
 * Objects read at once, ahead of the one being written: a root over the network answers each
 * small read after a round trip, which reads one after another would wait out one by one.
 */
const READ_AHEAD = 8;

/** The rebuild cannot run at all (exit 2); the message says why. */
export class RebuildRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RebuildRefused';
  }
}

export interface RebuildProgress {
  objects: number;
  done: number;
  bytes: number;
}

export interface RebuildOptions {
  /** `primary` or the replica's name: kept in the catalog's marker, so a resumed run reads the same root. */
  from: string;
  verify: boolean;
  signal?: AbortSignal | undefined;
  onProgress?: (progress: RebuildProgress) => void;
  /** Where a tombstone's object may linger, to be removed at the daemon's start: `primary` and the replicas. */
  copies?: readonly string[];
}

export interface RebuildResult {
  rebuilt: number;
  /** Done by an earlier, interrupted run. */
  resumed: number;
  skipped: Array<{ object: string; why: string }>;
  bytes: number;
  users: number;
  grants: number;
}

export async function rebuildCatalog(
  reader: RootReader,
  catalog: Catalog,
  o: RebuildOptions,
): Promise<RebuildResult> {
  const declaration = await reader.read(ROOT_DECLARATION.name, o.signal);
  if (declaration?.toString() !== ROOT_DECLARATION.text)
    throw new RebuildRefused(
      `${reader.target.where} is not an OCFL storage root (no ${ROOT_DECLARATION.name})`,
    );
  const repository = await readRepository(reader, o.signal);
  const marker = catalog.records.rebuild();
  if (marker !== undefined && marker.from !== o.from)
    throw new RebuildRefused(
      `the catalog is half rebuilt from ${marker.from}: finish it with --from ${marker.from}`,
    );
  catalog.transaction(() => {
    if (marker === undefined) catalog.records.startRebuild({ from: o.from, startedAt: Date.now() });
    catalog.records.adoptRepositoryId(repository.repository);
    for (const u of repository.users)
      catalog.restore.user({ name: u.name, admin: u.admin, createdAt: msOf(u.created_at) });
    for (const g of repository.grants)
      catalog.restore.grant({ user: g.user, role: g.role, scope: g.scope, createdAt: msOf(g.created_at) });
  });

  const result: RebuildResult = {
    rebuilt: 0,
    resumed: 0,
    skipped: [],
    bytes: 0,
    users: repository.users.length,
    grants: repository.grants.length,
  };
  const tombstones = await readTombstones(reader, (m) => new RebuildRefused(m), o.signal);
  const ordered = await packagesInOrder(reader, result, tombstones, o.signal);
  const progress: RebuildProgress = {
    objects: ordered.length + result.skipped.length,
    done: result.skipped.length,
    bytes: 0,
  };
  o.onProgress?.(progress);
  let index = 0;
  for await (const { object, record, tombstone, read } of readAhead(reader, catalog, ordered, o)) {
    o.signal?.throwIfAborted();
    index++;
    if (catalog.packages.get(record.bag_id)?.stored === true) result.resumed++;
    else if (tombstone !== undefined) {
      restoreTombstone(catalog, tombstone, index, o.copies ?? ['primary']);
      result.rebuilt++;
    } else if (read !== undefined) {
      try {
        const got = await read;
        const clash = catalog.packages.find(record.external_id);
        if (clash !== undefined && clash.bagId !== record.bag_id)
          throw new ObjectSkipped(
            `its external_id ${record.external_id} belongs to bag ${clash.bagId} already`,
          );
        restorePackage(catalog, got, index);
        result.rebuilt++;
        result.bytes += got.bytes;
        progress.bytes += got.bytes;
      } catch (err) {
        if (!(err instanceof ObjectSkipped)) throw err;
        result.skipped.push({ object, why: err.message });
      }
    }
    progress.done++;
    o.onProgress?.(progress);
    failpoint('rebuild:after-object');
  }
  catalog.records.finishRebuild();
  return result;
}

/** A package to rebuild: its object and record, or its tombstone (then no object is read). */
interface Ordered {
  object: string;
  record: PackageRecord;
  tombstone?: Tombstone;
}

/**
 * The objects in order, each read while the ones before it are written: up to READ_AHEAD reads
 * at once (`read` undefined: done by an earlier run, or a tombstone). A read's failure comes out
 * in its turn.
 */
async function* readAhead(
  reader: RootReader,
  catalog: Catalog,
  ordered: readonly Ordered[],
  o: RebuildOptions,
): AsyncGenerator<Ordered & { read: Promise<ReadObject> | undefined }> {
  const reads = new Map<number, Promise<ReadObject>>();
  let next = 0;
  try {
    for (const [index, entry] of ordered.entries()) {
      for (; next < ordered.length && next < index + READ_AHEAD; next++) {
        const ahead = ordered[next]!;
        if (ahead.tombstone !== undefined) continue;
        if (catalog.packages.get(ahead.record.bag_id)?.stored === true) continue;
        const read = readObject(reader, ahead.object, ahead.record, { verify: o.verify, signal: o.signal });
        read.catch(() => undefined); // awaited in its turn; one never reached must not go unhandled
        reads.set(next, read);
      }
      const read = reads.get(index);
      reads.delete(index);
      yield { ...entry, read };
    }
  } finally {
    await Promise.allSettled(reads.values());
  }
}

async function readRepository(reader: RootReader, signal?: AbortSignal) {
  const bytes = await reader.read(REPOSITORY_RECORD, signal);
  if (bytes === undefined)
    throw new RebuildRefused(
      `${reader.target.where} holds no ${REPOSITORY_RECORD}: not a root preservd keeps its record in`,
    );
  try {
    return readRepositoryRecord(bytes);
  } catch (err) {
    if (err instanceof RecordError) throw new RebuildRefused(err.message);
    throw err;
  }
}

/**
 * Every object's package record and every tombstone, oldest package first (the order packages
 * are listed in); the objects whose record cannot be read are added to the skipped. An object
 * left of a tombstone (its removal cut short) is not read: the tombstone is the package.
 */
async function packagesInOrder(
  reader: RootReader,
  result: RebuildResult,
  tombstones: readonly Tombstone[],
  signal?: AbortSignal,
): Promise<Ordered[]> {
  const found: Ordered[] = tombstones.map((t) => ({
    object: packageObjectPath(t.package.bag_id),
    record: t.package,
    tombstone: t,
  }));
  const gone = new Set(found.map((f) => f.object));
  const skipped: Array<{ at: number; object: string; why: string }> = [];
  const reading = new Set<Promise<void>>();
  let at = 0;
  try {
    for await (const object of reader.objects(signal)) {
      if (gone.has(object)) continue;
      const index = at++;
      const read = readRecord(reader, object, signal).then(
        (record) => void found.push({ object, record }),
        (err: unknown) => {
          if (!(err instanceof ObjectSkipped)) throw err;
          skipped.push({ at: index, object, why: err.message });
        },
      );
      reading.add(read);
      void read.finally(() => reading.delete(read)).catch(() => undefined);
      // A failure other than a skip comes out at the next wait and ends the listing.
      if (reading.size >= READ_AHEAD) await Promise.race(reading);
    }
    await Promise.all(reading);
  } finally {
    await Promise.allSettled(reading);
  }
  for (const { object, why } of skipped.sort((a, b) => a.at - b.at)) result.skipped.push({ object, why });
  const key = (r: PackageRecord) => `${r.created_at} ${r.bag_id}`;
  return found.sort((a, b) => (key(a.record) < key(b.record) ? -1 : key(a.record) > key(b.record) ? 1 : 0));
}

/**
 * A package in one transaction that makes it stored, its files with it when they fit in one batch
 * (each commit is a sync to disk: the rebuild's main cost); the files of a larger one are staged
 * in batches before it. A revised package's every version comes back too: its files, its record
 * as the versions list shows it, and the revision that made it (restoreVersions).
 */
function restorePackage(catalog: Catalog, read: ReadObject, seq: number): void {
  const { record, events, versions } = read;
  const bagId = record.bag_id;
  const files = versions.at(-1)!.files;
  const stage = (): number => {
    catalog.files.unstage(bagId);
    let total = 0;
    for (let i = 0; i < files.length; i += FILE_BATCH)
      total += catalog.files.stageBatch(bagId, files.slice(i, i + FILE_BATCH));
    if (versions.length > 1) stageVersionFiles(catalog, bagId, versions);
    return total;
  };
  const inOne = versions.reduce((n, v) => n + v.files.length, 0) <= FILE_BATCH;
  const staged = inOne ? 0 : stage();
  const latest = record.versions.at(-1)!;
  catalog.transaction(() => {
    catalog.files.staged(bagId, inOne ? stage() : staged);
    catalog.restore.package(
      {
        bagId,
        externalId: record.external_id,
        contentType: record.content_type,
        user: record.owner,
        capability: newCapability(),
        stored: true,
        storagePath: packageObjectPath(bagId),
        createdAt: msOf(record.created_at),
        updatedAt: msOf(record.updated_at),
        version: 1,
        ...(versions.length > 1 ? { head: versions.length } : {}),
      },
      seq,
      msOf(latest.stored_at),
    );
    if (versions.length > 1) restoreVersions(catalog, bagId, record.versions, versions);
    const { lastItem, lastEvent } = restoreHistory(catalog, bagId, record.versions, events.events);
    catalog.raiseSequence('package', seq);
    catalog.raiseSequence('queue', lastItem);
    catalog.raiseSequence('event', lastEvent);
  });
}

/** Every version's file records, as a revision keeps them (catalog/revisions.ts), a batch per transaction. */
function stageVersionFiles(catalog: Catalog, bagId: string, versions: readonly ReadVersion[]): void {
  for (const { version, files } of versions) {
    catalog.revisions.clearFiles(bagId, version);
    for (let i = 0; i < files.length; i += FILE_BATCH)
      catalog.revisions.putFiles(bagId, version, files.slice(i, i + FILE_BATCH));
  }
}
