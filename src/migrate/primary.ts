/**
 * The primary's half of `preservd migrate` (STORAGE.md, Migration): `storage/` becomes an OCFL
 * root in place. The root's declaration and layout files first; then, per package, every file's
 * bytes are checked against the catalog's digests, the bag folder is renamed into the package's
 * assembly as `v1/content` and the object completed and renamed into the root by the ingest's
 * own code (storage/assembly.ts), and the catalog's `storagePath` changes last, in one
 * transaction. Renames only: no byte is copied. Each step leaves a state the next run knows:
 *
 *   bag at ab/cd/ef/<bag_id>          not begun: checked, then moved
 *   staging/<bag_id>.object/ exists   moved in: the assembly is finished and renamed
 *   object in the root, catalog old   renamed: the catalog is updated
 *   catalog's storagePath the object  done
 *
 * A package whose bytes do not match is left as it is and named. Empty `ab/cd/ef` folders are
 * removed at the very end, so the daemon refuses a storage root until every bag is converted.
 */
import { mkdir, readdir, rename, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import { describeFinding } from '../audit/findings.js';
import { verifyPackage, type PackageHasher } from '../audit/verify.js';
import type { Catalog } from '../catalog/catalog.js';
import type { Package } from '../catalog/types.js';
import { failpoint } from '../failpoints.js';
import { exists } from '../fs/exists.js';
import { firstInventory, type Inventory } from '../ocfl/inventory.js';
import { objectIdOf, versionName } from '../ocfl/layout.js';
import { assembleObject, commitObject } from '../storage/assembly.js';
import { writeRootFiles } from '../storage/ocfl-root.js';
import { Storage } from '../storage/storage.js';
import { OLD_SHARD, oldStoragePath } from './old-layout.js';

/** A package not migrated, and why. */
export interface Skipped {
  bagId: string;
  why: string;
}

export interface PrimaryOutcome {
  migrated: number;
  /** Migrated by an earlier run. */
  already: number;
  bytes: number;
  skipped: Skipped[];
}

export interface PrimaryProgress {
  done: number;
  total: number;
  bytes: number;
}

/** Packages read from the catalog at a time. */
const BATCH = 256;

export async function migratePrimary(
  storage: Storage,
  catalog: Catalog,
  hasher: PackageHasher,
  onProgress: (p: PrimaryProgress) => void,
): Promise<PrimaryOutcome> {
  await writeRootFiles(storage.layout);
  failpoint('migrate:root-files');
  const outcome: PrimaryOutcome = { migrated: 0, already: 0, bytes: 0, skipped: [] };
  const total = catalog.packages.count();
  const known = new Set<string>();
  let done = 0;
  for (let after = 0; ;) {
    const batch = [...catalog.packages.everyRecord(after, BATCH)];
    if (batch.length === 0) break;
    after = batch.at(-1)!.seq;
    for (const pkg of batch) {
      known.add(oldStoragePath(pkg.bagId));
      const result = await migratePackage(storage, catalog, hasher, pkg);
      if (result === 'already') outcome.already++;
      else if (typeof result === 'object') outcome.skipped.push({ bagId: pkg.bagId, why: result.why });
      else if (pkg.stored) {
        outcome.migrated++;
        outcome.bytes += result;
      }
      onProgress({ done: ++done, total, bytes: outcome.bytes });
    }
  }
  for (const folder of await oldFolders(storage.storageRoot))
    if (!known.has(folder))
      outcome.skipped.push({
        bagId: folder.split('/').at(-1)!,
        why: `storage/${folder} is not a package of the catalog; left where it is`,
      });
  await removeEmptyShards(storage.storageRoot);
  return outcome;
}

/**
 * One package: 'already' when the catalog names its object, the bytes checked when it was
 * converted now (0 when it was found converted but the catalog not yet updated, or it has
 * nothing in storage), or why it was not.
 */
async function migratePackage(
  storage: Storage,
  catalog: Catalog,
  hasher: PackageHasher,
  pkg: Package,
): Promise<'already' | number | { why: string }> {
  const { bagId } = pkg;
  const objectPath = Storage.storagePath(bagId);
  if (pkg.stored && pkg.storagePath === objectPath) return 'already';
  const old = join(storage.storageRoot, oldStoragePath(bagId));
  const assembly = storage.assemblyDir(bagId);
  let bytes = 0;
  if (await exists(old)) {
    if (await exists(storage.objectDir(bagId)))
      return { why: `both storage/${oldStoragePath(bagId)} and its OCFL object exist; neither was changed` };
    const findings = await verifyPackage(old, catalog.files.view(bagId), hasher, { algorithms: 'all' });
    if (findings.length > 0)
      return {
        why: `its bytes do not match the catalog (${findings.slice(0, 3).map(describeFinding).join('; ')}${findings.length > 3 ? `; ${findings.length - 3} more` : ''}); storage/${oldStoragePath(bagId)} left as it was`,
      };
    bytes = catalog.files.bytes(bagId);
    await mkdir(join(assembly, versionName(1)), { recursive: true, mode: storage.layout.storedFolderMode });
    await rename(old, join(assembly, versionName(1), 'content'));
    failpoint('migrate:moved');
  }
  if (await exists(assembly)) {
    await assembleObject(storage, bagId, inventoryOf(catalog, pkg));
    failpoint('migrate:assembled');
    await commitObject(storage, bagId);
    failpoint('migrate:renamed');
  }
  if (!(await exists(storage.objectDir(bagId)))) {
    // An upload never stored (no folder of its own in storage) has nothing to convert.
    if (!pkg.stored) return 0;
    return { why: `neither storage/${oldStoragePath(bagId)} nor its OCFL object exists` };
  }
  // A package an ingest had put in storage without recording it stored: its ingest resumes on the object.
  if (pkg.stored) catalog.packages.moveStored(bagId, objectPath);
  return bytes;
}

/** The package's first inventory from the catalog's records, as the ingest makes it (ingest/stages.ts). */
function inventoryOf(catalog: Catalog, pkg: Package): Inventory {
  const files = [...catalog.files.iterate(pkg.bagId)].map((f) => {
    if (f.digests.sha256 === undefined) throw new Error(`${f.path} of ${pkg.bagId} has no sha256 recorded`);
    return { path: f.path, digests: { ...f.digests, sha256: f.digests.sha256 } };
  });
  return firstInventory(objectIdOf(pkg.bagId), files, {
    created: pkg.updatedAt,
    user: pkg.user,
    message: 'deposit',
  });
}

/** Every `ab/cd/ef/<folder>` under the root. */
async function oldFolders(root: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (rel: string, depth: number): Promise<void> => {
    for (const entry of await readdir(join(root, rel), { withFileTypes: true })) {
      if (!entry.isDirectory() || (depth < 3 && !OLD_SHARD.test(entry.name))) continue;
      const path = rel === '' ? entry.name : `${rel}/${entry.name}`;
      if (depth === 3) out.push(path);
      else await walk(path, depth + 1);
    }
  };
  await walk('', 0);
  return out;
}

/** Removes the `ab/cd/ef` folders that hold nothing, deepest first. */
async function removeEmptyShards(root: string): Promise<void> {
  const prune = async (dir: string, depth: number): Promise<boolean> => {
    let empty = true;
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      if (depth < 3 && entry.isDirectory() && OLD_SHARD.test(entry.name)) {
        if (!(await prune(join(dir, entry.name), depth + 1))) empty = false;
      } else empty = false;
    }
    if (depth > 0 && empty) await rmdir(dir);
    return empty;
  };
  await prune(root, 0);
}
