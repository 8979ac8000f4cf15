/**
 * The steps of an ingest that differ for a revision (a queue item of version 2 or more): its
 * files recorded as the new version's beside the current ones, the object's next version written
 * (storage/revision-assembly.ts), and the result that makes it current. Everything else (waiting
 * for quiet, staging, the validation itself, failing and giving the upload back) is the first
 * deposit's, in stages.ts.
 */
import type { FileRecord, Package, QueueItem } from '../catalog/types.js';
import { failpoint } from '../failpoints.js';
import { nextInventory, type Inventory, type VersionFile } from '../ocfl/inventory.js';
import { contentPathOf, versionName } from '../ocfl/layout.js';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { storeRevision } from '../storage/revision-assembly.js';
import type { CheckedUpload } from './isolated-check.js';
import type { IngestDeps } from './deps.js';

/** The version a queue item stores: 1 for a first deposit. */
export function versionOf(item: QueueItem): number {
  return item.version ?? 1;
}

/** Whether the item's version is stored already (an item replayed after its result). */
export function storedAlready(pkg: Package, item: QueueItem): boolean {
  const version = versionOf(item);
  return version === 1 ? pkg.stored : (pkg.head ?? 1) >= version;
}

/** The inventory of the object's version `n` as stored (each version keeps its own). */
async function inventoryOf(deps: Pick<IngestDeps, 'storage'>, bagId: string, n: number): Promise<Inventory> {
  const path = join(deps.storage.objectDir(bagId), versionName(n), 'inventory.json');
  return JSON.parse(await readFile(path, 'utf8')) as Inventory;
}

/** Records batched a transaction at a time. */
const BATCH = 5_000;

/**
 * The revision's intent: the current version's files kept as that version's (once superseded
 * they leave `FileStore`), the validated files recorded as version n's, each with where its bytes
 * will be (an unchanged file: the content already stored), then the validation event and the
 * stage in one transaction.
 */
export async function recordRevisionIntent(
  deps: IngestDeps,
  item: QueueItem,
  pkg: Package,
  checked: CheckedUpload,
  detail: string,
): Promise<void> {
  const { catalog } = deps;
  const version = versionOf(item);
  const previous = await inventoryOf(deps, pkg.bagId, version - 1);
  const current = version - 1;
  if (current === 1) {
    catalog.revisions.clearFiles(pkg.bagId, 1);
    let batch: FileRecord[] = [];
    for (const file of catalog.files.iterate(pkg.bagId)) {
      batch.push(file);
      if (batch.length === BATCH) {
        catalog.revisions.putFiles(pkg.bagId, 1, batch);
        batch = [];
      }
    }
    catalog.revisions.putFiles(pkg.bagId, 1, batch);
  }
  catalog.revisions.clearFiles(pkg.bagId, version);
  for await (const files of checked.files()) {
    const placed = files.map((f) => {
      const stored = f.digests.sha256 === undefined ? undefined : previous.manifest[f.digests.sha256]?.[0];
      return { ...f, contentPath: stored ?? contentPathOf(version, f.path) };
    });
    catalog.revisions.putFiles(pkg.bagId, version, placed);
    failpoint('ingest:after-file-batch');
  }
  await checked.close();
  catalog.transaction(() => {
    catalog.events.add({
      bagId: pkg.bagId,
      type: 'validation',
      executor: item.user,
      outcome: 'success',
      detail: `version ${version}: ${detail}`,
    });
    catalog.queue.advance(item.id, 'validated');
  });
}

/** Writes the object's version n from the staged upload (or finishes writing it). */
export async function storeRevisionVersion(deps: IngestDeps, item: QueueItem, pkg: Package): Promise<void> {
  const { catalog, storage } = deps;
  const version = versionOf(item);
  const previous = await inventoryOf(deps, pkg.bagId, version - 1);
  const files: VersionFile[] = [...catalog.revisions.files(pkg.bagId, version)].map((f) => {
    if (f.digests.sha256 === undefined) throw new Error(`${f.path} of ${pkg.bagId} has no sha256 recorded`);
    return { path: f.path, digests: { ...f.digests, sha256: f.digests.sha256 } };
  });
  const note = catalog.revisions.get(pkg.bagId, version)?.note;
  const { inventory, newContent } = nextInventory(previous, files, {
    created: Date.now(),
    user: item.user,
    message: `revision ${version}${note ? `: ${note}` : ''}`,
  });
  await storeRevision(storage, pkg.bagId, inventory, newContent);
}

/**
 * The result, one transaction: the version's files become the package's, its head the version,
 * the version recorded (version 1's too, kept from its files if never recorded), the revision
 * stored, the event, the item DONE, and copies owed to the replicas. Returns the bytes stored.
 */
export function recordRevisionResult(deps: IngestDeps, item: QueueItem, pkg: Package): number {
  const { catalog } = deps;
  const version = versionOf(item);
  const now = Date.now();
  return catalog.outcomeTransaction(() => {
    const files = [...catalog.revisions.files(pkg.bagId, version)];
    if (catalog.revisions.version(pkg.bagId, version - 1) === undefined) {
      const earlier = [...catalog.revisions.files(pkg.bagId, version - 1)];
      const deposit = catalog.queue
        .forPackage(pkg.bagId)
        .find((i) => i.status === 'DONE' && versionOf(i) === version - 1);
      catalog.revisions.putVersion(pkg.bagId, {
        version: version - 1,
        createdAt: deposit?.updatedAt ?? pkg.createdAt,
        user: deposit?.user ?? pkg.user,
        note: null,
        files: earlier.length,
        bytes: earlier.reduce((n, f) => n + f.size, 0),
      });
    }
    catalog.files.put(pkg.bagId, files);
    catalog.packages.revised(pkg.bagId, version);
    const bytes = catalog.files.bytes(pkg.bagId);
    const revision = catalog.revisions.end(pkg.bagId, version, 'stored');
    catalog.revisions.putVersion(pkg.bagId, {
      version,
      createdAt: now,
      user: item.user,
      note: revision.note,
      files: files.length,
      bytes,
    });
    catalog.events.add({
      bagId: pkg.bagId,
      type: 'ingestion',
      executor: item.user,
      outcome: 'success',
      detail: `version ${version}: stored at ${pkg.storagePath ?? ''}/${versionName(version)}`,
    });
    catalog.queue.finish(item.id, { status: 'DONE' });
    catalog.checkpoints.clearPackage(pkg.bagId);
    catalog.landedHashes.clearPackage(pkg.bagId);
    deps.replication?.packageRevised(pkg.bagId);
    return bytes;
  });
}
