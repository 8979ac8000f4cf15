/**
 * A landed file's identity (size, mtime, ctime, inode, device), which any write, touch, rename or
 * replacement changes, and its flush to disk: what the landed hasher records with a file's
 * digests, and what the ingest compares at complete (landed-hasher.ts, known-digests.ts).
 */
import { close, fdatasync, lstatSync, open, type BigIntStats } from 'node:fs';
import type { FileIdentity } from '../catalog/landed-hashes.js';

/**
 * fdatasync of a file: false if it could not be opened (one that went meanwhile is the next
 * read's concern, not this one's). Callbacks, not a FileHandle: the ingest flushes thousands of
 * small files at complete on the daemon's thread, and each FileHandle costs that thread more than
 * its three system calls do.
 */
export function flush(abs: string): Promise<boolean> {
  return new Promise((resolve, reject) => {
    open(abs, 'r', (openErr, fd) => {
      if (openErr !== null) return resolve(false);
      fdatasync(fd, (syncErr) => close(fd, () => (syncErr === null ? resolve(true) : reject(syncErr))));
    });
  });
}

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
