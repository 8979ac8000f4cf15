/**
 * A landed file's identity (size, mtime, ctime, inode, device), which any write, touch, rename or
 * replacement changes: what the landed hasher records with a file's digests, and what the
 * ingest compares at complete (landed-hasher.ts, known-digests.ts).
 */
import { lstatSync, type BigIntStats } from 'node:fs';
import type { FileIdentity } from '../catalog/landed-hashes.js';

/**
 * The file's identity, or undefined when it is not a regular file there: an lstat on this
 * thread, a few microseconds for an inode in the cache, as a landed file's is.
 */
export function identityOf(abs: string): FileIdentity | undefined {
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
