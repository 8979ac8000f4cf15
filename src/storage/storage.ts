/**
 * Where bags live: `<dataDir>/storage/ab/cd/ef/<bag_id>/`, staging beside it, and safe
 * resolution of a stored file. No string from a request is ever joined to a path here: callers
 * pass a `FileRecord` path that came from the catalog, and it is checked once more.
 */
import { statfsSync } from 'node:fs';
import { rename } from 'node:fs/promises';
import { join } from 'node:path';
import { unsafePathReason } from '../bagit/index.js';
import { contentPathOf, packageObjectPath } from '../ocfl/layout.js';
import type { DataLayout } from './layout.js';

/** Free space below which an EIO is taken for a full disk (see `isOutOfSpace`). */
const NEARLY_FULL_BYTES = 1024 * 1024;

export class Storage {
  readonly storageRoot: string;
  readonly stagingRoot: string;

  constructor(readonly layout: DataLayout) {
    this.storageRoot = layout.storage;
    this.stagingRoot = layout.staging;
  }

  /** `ab/cd/ef/<bag_id>`: the first three pairs of the uuid, as chipmunk lays bags out. */
  static storagePath(bagId: string): string {
    const id = bagId.toLowerCase();
    return `${id.slice(0, 2)}/${id.slice(2, 4)}/${id.slice(4, 6)}/${id}`;
  }

  /** Absolute folder of a stored package, from its catalog `storagePath`. */
  packageDir(storagePath: string): string {
    if (!/^[0-9a-f]{2}\/[0-9a-f]{2}\/[0-9a-f]{2}\/[0-9a-f-]{36}$/.test(storagePath))
      throw new Error(`malformed storage path ${storagePath}`);
    return join(this.storageRoot, storagePath);
  }

  /** The folder of a package's OCFL object in the primary root (ocfl/layout.ts). */
  objectDir(bagId: string): string {
    return join(this.storageRoot, packageObjectPath(bagId));
  }

  /**
   * The absolute path of a stored file of a package: its content path in the object, which is
   * `v1/content/<path>` for a file deposited in version 1 (`contentPath` names another version's).
   */
  storedFilePath(bagId: string, file: { path: string; contentPath?: string }): string {
    return Storage.resolveInside(this.objectDir(bagId), file.contentPath ?? contentPathOf(1, file.path));
  }

  stagingDir(bagId: string): string {
    return join(this.stagingRoot, bagId.toLowerCase());
  }

  /**
   * The absolute path of a file inside a package folder. `relPath` comes from the catalog, but
   * is checked anyway, by the rule the validator refuses every path of a bag by (`unsafe-path`):
   * so nothing stored is ever refused here.
   */
  static resolveInside(dir: string, relPath: string): string {
    if (unsafePathReason(relPath) !== undefined) throw new Error('unsafe path');
    return join(dir, relPath);
  }

  /**
   * Moves a staged bag into storage by rename (same filesystem: atomic). The destination must
   * not exist; parents are created.
   */
  async moveIntoStorage(stagedDir: string, storagePath: string): Promise<string> {
    const target = this.packageDir(storagePath);
    await this.layout.ensureStored(join(target, '..'));
    await rename(stagedDir, target);
    return target;
  }

  /**
   * Whether an error means the data directory's filesystem is out of space or quota: ENOSPC or
   * EDQUOT from node:fs; the same errno (28, 122) from an LMDB write, which lmdb-js reports as a
   * numeric `code`; or EIO (5) while next to nothing is free, because LMDB reports a write cut
   * short by a full disk as EIO.
   */
  isOutOfSpace(err: unknown): boolean {
    const code = (err as { code?: unknown } | null)?.code;
    if (code === 'ENOSPC' || code === 'EDQUOT' || code === 28 || code === 122) return true;
    if (code !== 'EIO' && code !== 5) return false;
    try {
      const fs = statfsSync(this.layout.dataDir);
      return fs.bavail * fs.bsize < NEARLY_FULL_BYTES;
    } catch {
      return false;
    }
  }
}
