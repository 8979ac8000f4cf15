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
import { mkdir, open, readdir, rename, rm, rmdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import pLimit from 'p-limit';
import { failpoint } from '../failpoints.js';
import { exists } from '../fs/exists.js';
import { syncFolder } from '../fs/atomic.js';
import { relativeUnder, under } from '../fs/paths.js';
import { INVENTORY, INVENTORY_SIDECAR, inventoryBytes, type Inventory } from '../ocfl/inventory.js';
import { OBJECT_DECLARATION, versionName } from '../ocfl/layout.js';
import type { Storage } from './storage.js';

/**
 * Assembles the first version of a package's object from its staged upload, or finishes an
 * assembly a crash interrupted (the upload already moved in): `inventory` must list every file.
 */
export async function assembleObject(
  storage: Storage,
  bagId: string,
  inventory: Inventory,
  /** Whether a content file (its path in the bag, its path now) is on disk already: not flushed again. */
  onDisk: (path: string, abs: string) => boolean = () => false,
): Promise<void> {
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
  const contentFiles: string[] = [];
  const folders: string[] = [];
  await listRemovingEmpty(content, contentFiles, folders);
  const listed = Object.values(inventory.manifest).reduce((n, paths) => n + paths.length, 0);
  if (contentFiles.length !== listed)
    throw new Error(
      `the upload of ${bagId} holds ${contentFiles.length} files, its inventory lists ${listed}`,
    );
  const objectFiles = await writeObjectFiles(assembly, inventory);
  const unflushed = await filterInSlices(contentFiles, (abs) => !onDisk(relativeUnder(content, abs), abs));
  // One round of fsyncs for the whole object, not one after another (docs/performance.md).
  await flushAll([...unflushed, ...folders, ...objectFiles, version, assembly]);
}

/**
 * Writes an object's declaration, its head version's inventory and sidecar, and the same as the
 * root inventory; returns what it wrote (files and the head folder) for `flushAll`.
 */
async function writeObjectFiles(objectDir: string, inventory: Inventory): Promise<string[]> {
  const { json, sidecar } = inventoryBytes(inventory);
  const head = join(objectDir, inventory.head);
  await mkdir(head, { recursive: true, mode: 0o750 });
  const files: Array<[string, string | Buffer]> = [
    [join(objectDir, OBJECT_DECLARATION.name), OBJECT_DECLARATION.text],
    [join(head, INVENTORY), json],
    [join(head, INVENTORY_SIDECAR), sidecar],
    [join(objectDir, INVENTORY), json],
    [join(objectDir, INVENTORY_SIDECAR), sidecar],
  ];
  await Promise.all(files.map(([path, data]) => writeFile(path, data, { mode: 0o640 })));
  return [...files.map(([path]) => path), head];
}

/** Files and folders flushed at once: ext4 commits concurrent fsyncs together (docs/performance.md). */
const SYNC_AT_ONCE = 16;

/** Flushes files and folders to disk, SYNC_AT_ONCE at a time. */
export async function flushAll(paths: readonly string[]): Promise<void> {
  const limit = pLimit(SYNC_AT_ONCE);
  await Promise.all(paths.map((path) => limit(() => syncPath(path))));
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

/** Collects the files and folders under `dir` (itself included), removing the folders that hold no file. */
async function listRemovingEmpty(dir: string, files: string[], folders: string[]): Promise<number> {
  let found = 0;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = under(dir, entry.name);
    if (!entry.isDirectory()) {
      files.push(path);
      found++;
    } else if ((await listRemovingEmpty(path, files, folders)) === 0) await rmdir(path);
    else found++;
  }
  if (found > 0) folders.push(dir);
  return found;
}

/** The longest run of `keep` calls (an lstat each) before the event loop gets a turn. */
const SLICE_MS = 4;

/** The items `keep` says yes to, asked on this thread in slices of SLICE_MS. */
async function filterInSlices<T>(items: readonly T[], keep: (item: T) => boolean): Promise<T[]> {
  const kept: T[] = [];
  let sliceStart = performance.now();
  for (const item of items) {
    if (performance.now() - sliceStart > SLICE_MS) {
      await nextTurn();
      sliceStart = performance.now();
    }
    if (keep(item)) kept.push(item);
  }
  return kept;
}

async function syncPath(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
