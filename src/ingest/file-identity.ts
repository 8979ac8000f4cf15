/**
 * A landed file's identity (size, mtime, ctime, inode, device), which any write, touch, rename or
 * replacement changes, and its flush to disk: what the landed hasher records with a file's
 * digests, and what the ingest compares at complete (landed-hasher.ts, known-digests.ts).
 */
import { lstatSync, type BigIntStats } from 'node:fs';
import { lstat, open } from 'node:fs/promises';
import type { FileIdentity } from '../catalog/landed-hashes.js';

/**
 * fdatasync of a file: false if it could not be opened (one that went meanwhile is the next
 * read's concern, not this one's).
 */
export async function flush(abs: string): Promise<boolean> {
  let handle;
  try {
    handle = await open(abs, 'r');
  } catch {
    return false;
  }
  try {
    await handle.datasync();
    return true;
  } finally {
    await handle.close();
  }
}

/** The file's identity, or undefined when it is not a regular file there. */
export async function identityOf(abs: string): Promise<FileIdentity | undefined> {
  try {
    return identityFrom(await lstat(abs, { bigint: true }));
  } catch {
    return undefined;
  }
}

/** `identityOf` on the calling thread: a few microseconds for an inode in the cache. */
export function identityOfSync(abs: string): FileIdentity | undefined {
  const s = lstatSync(abs, { bigint: true, throwIfNoEntry: false });
  return s === undefined ? undefined : identityFrom(s);
}

function identityFrom(s: BigIntStats): FileIdentity | undefined {
  if (!s.isFile()) return undefined;
  return {
    size: Number(s.size),
    mtimeNs: String(s.mtimeNs),
    ctimeNs: String(s.ctimeNs),
    ino: String(s.ino),
    dev: String(s.dev),
  };
}

export function sameIdentity(a: FileIdentity, b: FileIdentity): boolean {
  return (
    a.size === b.size &&
    a.mtimeNs === b.mtimeNs &&
    a.ctimeNs === b.ctimeNs &&
    a.ino === b.ino &&
    a.dev === b.dev
  );
}
