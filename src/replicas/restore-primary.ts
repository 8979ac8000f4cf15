/**
 * Bringing a lost primary back from the replicas (STORAGE.md, after `preservd rebuild --from` a
 * replica, or a volume lost under a catalog that survived): at start-up, before the replicator
 * runs, every stored package whose primary object is not whole (its root inventory sidecar, the
 * last file an object gets, is missing) is restored file by file from a replica whose copy
 * matches the catalog. Content first, each file read back against the catalog's size and sha256
 * on its way in (repair.ts's restorePrimary); then the object's declaration and inventories, read
 * from the same replica and checked as a copy checks them (object-files.ts), the root inventory
 * last; its `logs/` follow from the catalog (the record writer). Each restored file is a
 * `recovery` event. The replication bookkeeping is not touched here: a replica's copy counts as
 * verified only once the replicator has read it back against the catalog.
 */
import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { Catalog } from '../catalog/catalog.js';
import type { FileRecord } from '../catalog/types.js';
import type { Logger } from '../logger.js';
import { INVENTORY_SIDECAR } from '../ocfl/inventory.js';
import type { Storage } from '../storage/storage.js';
import { contentKey, objectKey } from './keys.js';
import { objectFilesFrom } from './object-files.js';
import { primaryMatches, restorePrimary } from './primary-files.js';
import type { ReplicaTarget } from './target.js';

/** The executor named in the recovery events. */
const EXECUTOR = 'preservd';

export interface PrimaryRestoreOptions {
  catalog: Catalog;
  storage: Storage;
  targets: readonly ReplicaTarget[];
  logger: Logger;
  signal?: AbortSignal;
}

/** Restores every primary object that is not whole; the number of files restored and of packages left short. */
export async function restoreLostObjects(
  o: PrimaryRestoreOptions,
): Promise<{ restored: number; packages: number; short: number }> {
  const report = { restored: 0, packages: 0, short: 0 };
  if (o.targets.length === 0) return report;
  for (const pkg of o.catalog.packages.list({ stored: true })) {
    o.signal?.throwIfAborted();
    const sidecar = join(o.storage.objectDir(pkg.bagId), INVENTORY_SIDECAR);
    if (
      await access(sidecar, constants.F_OK).then(
        () => true,
        () => false,
      )
    )
      continue;
    report.packages++;
    const { restored, whole } = await restoreObject(o, pkg.bagId);
    report.restored += restored;
    if (!whole) report.short++;
  }
  if (report.packages > 0)
    o.logger.info(
      report,
      `restored ${report.restored} file(s) of ${report.packages} primary object(s) from the replicas`,
    );
  return report;
}

/** Restores one primary object from the replicas: content, then its declaration and inventories. */
export async function restoreObject(
  o: PrimaryRestoreOptions,
  bagId: string,
  executor = EXECUTOR,
): Promise<{ restored: number; whole: boolean }> {
  const { catalog, storage } = o;
  const signal = o.signal ?? new AbortController().signal;
  const record = (outcome: 'success' | 'failure', detail: string) =>
    catalog.events.add({ bagId, type: 'recovery', executor, outcome, detail });
  const current = catalog.files.list(bagId);
  // Every version's content: a revised object's earlier versions hold bytes the current one does not.
  const files =
    (catalog.packages.get(bagId)?.head ?? 1) > 1 ? catalog.revisions.contentFiles(bagId, current) : current;
  let restored = 0;
  /** Replicas that gave every content file: the object files come from the first of them. */
  const sources = new Set(o.targets.map((t) => t.name));
  for (const file of files) {
    const sha256 = file.digests.sha256;
    if (sha256 === undefined) continue;
    const path = storage.storedFilePath(bagId, file);
    if (await primaryMatches(path, file, signal)) continue;
    const from = await firstMatching(o.targets, bagId, file, signal);
    for (const t of o.targets) if (t !== from) sources.delete(t.name);
    const stream =
      from === undefined ? undefined : await from.open(contentKey(bagId, file), undefined, signal);
    if (from === undefined || stream === undefined) {
      record('failure', `${file.path}: missing on the primary copy, and no replica copy matches the catalog`);
      return { restored, whole: false };
    }
    await restorePrimary(storage.layout, path, stream, { size: file.size, sha256 }, signal);
    restored++;
    record('success', `${file.path}: restored on the primary copy from replica ${from.name}`);
  }
  const from = o.targets.find((t) => sources.has(t.name)) ?? o.targets[0]!;
  const objectFiles = await objectFilesFrom((path) => bytesOf(from, objectKey(bagId, path), signal), files);
  if (!Array.isArray(objectFiles)) {
    record(
      'failure',
      `${objectFiles.path}: cannot be restored from replica ${from.name} (${objectFiles.detail})`,
    );
    return { restored, whole: false };
  }
  for (const file of objectFiles) {
    const path = join(storage.objectDir(bagId), file.path);
    await restorePrimary(storage.layout, path, Readable.from([file.bytes]), file, signal);
    restored++;
    record('success', `${file.path}: restored on the primary copy from replica ${from.name}`);
  }
  return { restored, whole: true };
}

/** The first replica whose copy of the file reads back as the catalog records, if any. */
async function firstMatching(
  targets: readonly ReplicaTarget[],
  bagId: string,
  file: FileRecord,
  signal: AbortSignal,
): Promise<ReplicaTarget | undefined> {
  for (const target of targets) {
    try {
      const back = await target.readBack(
        contentKey(bagId, file),
        { size: file.size, sha256: file.digests.sha256! },
        { signal },
      );
      if (back.kind === 'match') return target;
    } catch {
      signal.throwIfAborted(); // this replica is down: try the next
    }
  }
  return undefined;
}

async function bytesOf(target: ReplicaTarget, key: string, signal: AbortSignal): Promise<Buffer> {
  const stream = await target.open(key, undefined, signal);
  if (stream === undefined) throw Object.assign(new Error(`${key} is missing`), { code: 'ENOENT' });
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}
