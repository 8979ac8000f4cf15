/**
 * A file of the primary copy, as repair sees it: whether it reads as the catalog records, and
 * how it is written back from a good copy (a scratch file in staging/, never a temporary name in
 * the OCFL root; checked on the way, fsync, rename into place, folder fsync).
 */
import { constants } from 'node:fs';
import { open, rename, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Readable } from 'node:stream';
import type { FileRecord } from '../catalog/types.js';
import type { DataLayout } from '../storage/layout.js';
import { CheckedPassThrough, digestOf } from './hashing.js';
import type { ExpectedFile } from './target.js';

/** Whether the primary file is there and reads as the catalog records. */
export async function primaryMatches(path: string, file: FileRecord, signal: AbortSignal): Promise<boolean> {
  let handle;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch {
    return false;
  }
  const stream = handle.createReadStream({ highWaterMark: 1 << 20 });
  try {
    const found = await digestOf(stream, { signal });
    return found.size === file.size && found.sha256 === file.digests.sha256?.toLowerCase();
  } catch {
    signal.throwIfAborted();
    return false;
  } finally {
    stream.destroy();
  }
}

/**
 * Writes a primary file from a good copy: a scratch file in staging/ (nothing but whole files in
 * the OCFL root), checked on the way, fsync, rename into place, folder fsync.
 */
export async function restorePrimary(
  layout: DataLayout,
  target: string,
  source: Readable,
  expected: ExpectedFile,
  signal: AbortSignal,
): Promise<void> {
  const folder = dirname(target);
  await layout.ensureStored(folder);
  const temporary = layout.scratchFile('repair');
  const handle = await open(temporary, 'wx', 0o640);
  try {
    const checked = source.pipe(new CheckedPassThrough(expected));
    source.once('error', (err) => checked.destroy(err));
    for await (const chunk of checked) {
      signal.throwIfAborted();
      await handle.write(chunk as Buffer);
    }
    await handle.sync();
    await handle.close();
    await rename(temporary, target);
  } catch (err) {
    await handle.close().catch(() => undefined);
    await unlink(temporary).catch(() => undefined);
    throw err;
  } finally {
    source.destroy();
  }
  const folderHandle = await open(folder, constants.O_RDONLY | constants.O_DIRECTORY);
  await folderHandle.sync().finally(() => folderHandle.close());
}
