/**
 * A package's OCFL object made outside the root and renamed into it whole (STORAGE.md; OCFL
 * implementation notes): the validated upload is renamed to `<assembly>/v1/content`, the object
 * declaration and the inventories are written last, everything is flushed to disk, and one
 * rename puts the object at its place in `storage/`. The assembly is `staging/<bag_id>.object/`,
 * on the same filesystem, so a kill -9 at any moment leaves the upload in staging/, a (partial)
 * assembly whose content can be moved back, or a complete object in the root: never part of one.
 *
 * Empty folders are dropped on the way (OCFL E024 forbids them in content; validation warned
 * with `empty-folder`).
 */
import { mkdir, open, readdir, rename, rm, rmdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { failpoint } from '../failpoints.js';
import { exists } from '../fs/exists.js';
import { syncFolder } from '../fs/atomic.js';
import { INVENTORY, INVENTORY_SIDECAR, inventoryBytes, type Inventory } from '../ocfl/inventory.js';
import { OBJECT_DECLARATION, versionName } from '../ocfl/layout.js';
import type { Storage } from './storage.js';

/**
 * Assembles the first version of a package's object from its staged upload, or finishes an
 * assembly a crash interrupted (the upload already moved in): `inventory` must list every file.
 */
export async function assembleObject(storage: Storage, bagId: string, inventory: Inventory): Promise<void> {
  const assembly = storage.assemblyDir(bagId);
  const version = join(assembly, versionName(1));
  const content = join(version, 'content');
  const staged = storage.stagingDir(bagId);
  await mkdir(version, { recursive: true, mode: storage.layout.storedFolderMode });
  if (await exists(staged)) {
    await rename(staged, content);
    failpoint('ingest:in-assembly');
  } else if (!(await exists(content)))
    throw new Error(`the validated bag ${bagId} is neither in staging nor in its assembly`);
  const files = await settleContent(content);
  const listed = Object.values(inventory.manifest).reduce((n, paths) => n + paths.length, 0);
  if (files !== listed)
    throw new Error(`the upload of ${bagId} holds ${files} files, its inventory lists ${listed}`);
  await writeObjectFiles(assembly, inventory);
  await syncFolder(version);
  await syncFolder(assembly);
}

/**
 * Writes an object's declaration, its head version's inventory and sidecar, and the same as the
 * root inventory, each flushed to disk: the object's files beside its content, written last.
 */
export async function writeObjectFiles(objectDir: string, inventory: Inventory): Promise<void> {
  const { json, sidecar } = inventoryBytes(inventory);
  const head = join(objectDir, inventory.head);
  await mkdir(head, { recursive: true, mode: 0o750 });
  await writeSynced(join(objectDir, OBJECT_DECLARATION.name), OBJECT_DECLARATION.text);
  await writeSynced(join(head, INVENTORY), json);
  await writeSynced(join(head, INVENTORY_SIDECAR), sidecar);
  await syncFolder(head);
  await writeSynced(join(objectDir, INVENTORY), json);
  await writeSynced(join(objectDir, INVENTORY_SIDECAR), sidecar);
  await syncFolder(objectDir);
}

/** Renames the assembled object into the root (parents made), and flushes the rename. */
export async function commitObject(storage: Storage, bagId: string): Promise<void> {
  const target = storage.objectDir(bagId);
  await storage.layout.ensureStored(dirname(target));
  await rename(storage.assemblyDir(bagId), target);
  await syncFolder(dirname(target));
}

/**
 * Undoes an ingest's store step for an upload that goes back to its depositor: an object in the
 * root (a failure after the rename, before the catalog said stored) goes back to its assembly,
 * an assembly's content back to staging/, and the assembly's own files are removed. Nothing of
 * the upload is deleted. Call it only for a package the catalog does not hold as stored.
 */
export async function undoAssembly(storage: Storage, bagId: string): Promise<void> {
  const assembly = storage.assemblyDir(bagId);
  const object = storage.objectDir(bagId);
  if (!(await exists(assembly)) && (await exists(object))) await rename(object, assembly);
  if (!(await exists(assembly))) return;
  const content = join(assembly, versionName(1), 'content');
  const staged = storage.stagingDir(bagId);
  if ((await exists(content)) && !(await exists(staged))) await rename(content, staged);
  if (await exists(content)) throw new Error(`both ${staged} and ${content} exist; neither is removed`);
  await rm(assembly, { recursive: true });
}

/** Flushes every file and folder of `dir` to disk, removing the empty folders; returns how many files. */
async function settleContent(dir: string): Promise<number> {
  let files = 0;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      const inside = await settleContent(path);
      if (inside === 0) await rmdir(path);
      files += inside;
    } else {
      const handle = await open(path, 'r');
      try {
        await handle.sync();
      } finally {
        await handle.close();
      }
      files++;
    }
  }
  await syncFolder(dir);
  return files;
}

async function writeSynced(path: string, data: string | Buffer): Promise<void> {
  const handle = await open(path, 'w', 0o640);
  try {
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
}
