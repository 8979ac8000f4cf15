/**
 * The primary `storage/` as an OCFL 1.1 storage root (STORAGE.md): at start-up an empty folder
 * gets the root's declaration and layout files; a folder that holds bags in the layout before
 * OCFL (`ab/cd/ef/<bag_id>`), or anything at all without a declaration, is refused until
 * `preservd migrate` has converted it. Each file is written whole: a temporary file in staging/
 * (same filesystem, outside the root), fsync, rename, fsync of its folder; nothing else is ever
 * made under the root.
 */
import { open, readdir, rename, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { exists } from '../fs/exists.js';
import { syncFolder } from '../fs/atomic.js';
import { layoutFiles, ROOT_DECLARATION } from '../ocfl/layout.js';
import type { DataLayout } from './layout.js';

/** Why the daemon will not use `storage/`: it is not (yet) an OCFL root. */
class StorageNotOcfl extends Error {
  override name = 'StorageNotOcfl';
}

/** A top-level folder of the layout before OCFL: two hex digits (OCFL's tuples have three). */
const OLD_SHARD = /^[0-9a-f]{2}$/;

/**
 * Makes `layout.storage` an OCFL root if it is empty, completes the layout files of one that is,
 * and throws StorageNotOcfl (naming `preservd migrate`) for one in the older layout. Scratch
 * files a crash left in staging/ are removed first.
 */
export async function prepareStorageRoot(layout: DataLayout): Promise<void> {
  await layout.clearScratch(); // what a crash left on its way into the root
  const root = layout.storage;
  const entries = await readdir(root, { withFileTypes: true });
  const declared = entries.some((e) => e.name === ROOT_DECLARATION.name && e.isFile());
  const old = entries.filter((e) => e.isDirectory() && OLD_SHARD.test(e.name)).map((e) => e.name);
  if (old.length > 0 || (!declared && entries.length > 0)) {
    const what =
      old.length > 0
        ? `holds packages in the layout before OCFL (${old.slice(0, 3).join(', ')}${old.length > 3 ? ', ...' : ''}: ab/cd/ef/<bag_id>)`
        : `is not empty and is not an OCFL storage root (no ${ROOT_DECLARATION.name})`;
    throw new StorageNotOcfl(
      `${root} ${what}; stop here and run \`preservd migrate\` to convert it to OCFL 1.1, then start again (docs/operators.md, Upgrades)`,
    );
  }
  // The declaration first: from then on the folder is a root, and a start after a crash here
  // finds it and writes the layout files that are missing.
  if (!declared) await placeFile(layout, ROOT_DECLARATION.name, ROOT_DECLARATION.text);
  for (const { path, text } of layoutFiles()) {
    if (!(await exists(join(root, path)))) await placeFile(layout, path, text);
  }
}

/** Writes `text` to `<root>/<path>` whole, from a temporary file in staging/. */
async function placeFile(layout: DataLayout, path: string, text: string): Promise<void> {
  const target = join(layout.storage, path);
  const folder = dirname(target);
  if (folder !== layout.storage) {
    await layout.ensureStored(folder);
    await syncFolder(dirname(folder));
  }
  const temporary = layout.scratchFile('root');
  try {
    const handle = await open(temporary, 'wx', 0o640);
    try {
      await handle.writeFile(text);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temporary, target);
  } catch (err) {
    await unlink(temporary).catch(() => undefined);
    throw err;
  }
  await syncFolder(folder);
}
