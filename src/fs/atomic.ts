/**
 * Small files written whole or not at all: readers see the old content or the new, never a
 * part. A temporary file beside the target, then a rename; with `fsync`, the content is on disk
 * before the rename and the rename before we return (for secrets and records that must
 * survive a power cut, such as the admin token).
 */
import { open, rename, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';

export interface AtomicWriteOptions {
  /** File mode of the new file. Default 0600. */
  mode?: number;
  /** Flush the file and its folder to disk. Default false (the page cache suffices for state a restart rebuilds). */
  fsync?: boolean;
}

export async function writeAtomically(
  file: string,
  content: string | Uint8Array,
  options: AtomicWriteOptions = {},
): Promise<void> {
  const { mode = 0o600, fsync = false } = options;
  const tmp = join(dirname(file), `.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`);
  try {
    const handle = await open(tmp, 'wx', mode);
    try {
      await handle.writeFile(content);
      if (fsync) await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, file);
  } catch (err) {
    await unlink(tmp).catch(() => {});
    throw err;
  }
  if (fsync) await syncFolder(dirname(file));
}

/** Flushes a folder's entries (a rename into it, a new file) to disk. */
export async function syncFolder(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
