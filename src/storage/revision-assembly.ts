/**
 * A revision stored as the next version `vN` of its package's object (STORAGE.md): the new content
 * (only files whose sha256 the object does not hold) is moved from the staged upload into
 * `staging/<bag_id>.object/vN/content/`, the version's inventory and sidecar are written last,
 * all is flushed, and one rename puts `vN` into the object. The object's root inventory is then
 * replaced by a rename: that is the commit. Until it, the object is the old one (an extra `vN`
 * folder its inventory does not name); after it, the new one. Every step is safe to run again, so
 * a kill -9 anywhere is finished by the ingest resuming its item, or rolled back (`undoRevision`)
 * with every file of the upload back in staging/.
 */
import { copyFile, mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { failpoint } from '../failpoints.js';
import { syncFolder } from '../fs/atomic.js';
import { exists } from '../fs/exists.js';
import { INVENTORY, INVENTORY_SIDECAR, inventoryBytes, type Inventory } from '../ocfl/inventory.js';
import { versionName } from '../ocfl/layout.js';
import { flushAll } from './assembly.js';
import type { Storage } from './storage.js';

/**
 * Stores version `inventory.head` of the object from the staged upload, or finishes a store a
 * crash interrupted. `newContent`: the logical paths whose bytes the version adds.
 */
export async function storeRevision(
  storage: Storage,
  bagId: string,
  inventory: Inventory,
  newContent: readonly string[],
): Promise<void> {
  const object = storage.objectDir(bagId);
  const inObject = join(object, inventory.head);
  if (!(await exists(inObject))) {
    await assembleVersion(storage, bagId, inventory, newContent);
    failpoint('revision:after-assembly');
    await rename(join(storage.assemblyDir(bagId), inventory.head), inObject);
    await syncFolder(object);
  }
  failpoint('revision:after-version');
  await replaceRootInventory(object, inventory.head, storage.assemblyDir(bagId));
  failpoint('revision:after-commit');
  // The staged upload's unchanged files are copies of stored content: nothing of the depositor's is lost.
  await rm(storage.assemblyDir(bagId), { recursive: true, force: true });
  await rm(storage.stagingDir(bagId), { recursive: true, force: true });
}

/** `staging/<bag_id>.object/vN/`: the new content moved in, the version's inventory last, flushed. */
async function assembleVersion(
  storage: Storage,
  bagId: string,
  inventory: Inventory,
  newContent: readonly string[],
): Promise<void> {
  const version = join(storage.assemblyDir(bagId), inventory.head);
  const content = join(version, 'content');
  const staged = storage.stagingDir(bagId);
  await mkdir(version, { recursive: true, mode: storage.layout.storedFolderMode });
  const written: string[] = [];
  const folders = new Set<string>([version, dirname(version)]);
  for (const path of newContent) {
    const from = join(staged, path);
    const to = join(content, path);
    if (await exists(from)) {
      await mkdir(dirname(to), { recursive: true, mode: storage.layout.storedFolderMode });
      await rename(from, to);
      failpoint('revision:in-assembly');
    } else if (!(await exists(to))) throw new Error(`${path} of ${bagId} is neither staged nor assembled`);
    written.push(to);
    for (let d = dirname(to); d.length > version.length; d = dirname(d)) folders.add(d);
  }
  const { json, sidecar } = inventoryBytes(inventory);
  await rm(join(version, INVENTORY_SIDECAR), { force: true });
  await writeFile(join(version, INVENTORY), json, { mode: 0o640 });
  await writeFile(join(version, INVENTORY_SIDECAR), sidecar, { mode: 0o640 });
  await flushAll([...written, join(version, INVENTORY), join(version, INVENTORY_SIDECAR), ...folders]);
}

/**
 * Makes the object's root inventory and sidecar those of version `head` (copied beside, then
 * renamed over: the inventory's rename is the commit), unless they are already. The copies are
 * made in `scratch` (the assembly, outside the root: nothing else lives under a root).
 */
async function replaceRootInventory(object: string, head: string, scratch: string): Promise<void> {
  await mkdir(scratch, { recursive: true });
  for (const name of [INVENTORY, INVENTORY_SIDECAR]) {
    const want = await readFile(join(object, head, name));
    const have = await readFile(join(object, name)).catch(() => undefined);
    if (have?.equals(want) === true) continue;
    const tmp = join(scratch, `root-${name}`);
    await copyFile(join(object, head, name), tmp);
    await flushAll([tmp]);
    await rename(tmp, join(object, name));
    if (name === INVENTORY) failpoint('revision:between-inventories');
  }
  await syncFolder(object);
}

/**
 * Rolls back version `version` that the catalog does not hold as stored: the root inventory back
 * to the previous version's, `vN` out of the object, its content back into the staged upload.
 */
export async function undoRevision(storage: Storage, bagId: string, version: number): Promise<void> {
  const object = storage.objectDir(bagId);
  const head = versionName(version);
  const assembled = join(storage.assemblyDir(bagId), head);
  if (await exists(join(object, head))) {
    await replaceRootInventory(object, versionName(version - 1), storage.assemblyDir(bagId));
    await rename(join(object, head), assembled);
    await syncFolder(object);
  }
  const content = join(assembled, 'content');
  if (await exists(content)) await moveBack(content, storage.stagingDir(bagId));
  await rm(storage.assemblyDir(bagId), { recursive: true, force: true });
}

/** Every file under `from` renamed to the same path under `to` (a file already there is kept). */
async function moveBack(from: string, to: string): Promise<void> {
  for (const entry of await readdir(from, { withFileTypes: true })) {
    const source = join(from, entry.name);
    const target = join(to, entry.name);
    if (entry.isDirectory()) {
      await mkdir(target, { recursive: true });
      await moveBack(source, target);
    } else if (!(await exists(target))) await rename(source, target);
  }
}
