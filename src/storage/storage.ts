/**
 * Where packages live: each an OCFL object in the root `<dataDir>/storage/` (ocfl/layout.ts),
 * staging beside it, and safe resolution of a stored file. No string from a request is ever joined to a path here: callers
 * pass a `FileRecord` path that came from the catalog, and it is checked once more.
 */
import { statfsSync } from 'node:fs';
import { join } from 'node:path';
import { unsafePathReason } from '../bagit/index.js';
import { contentPathOf, packageObjectPath, versionName } from '../ocfl/layout.js';
import type { DataLayout } from './layout.js';

/** `staging/<bag_id>.object`: an assembly's name. */
export const ASSEMBLY_SUFFIX = '.object';

/** Free space below which an EIO is taken for a full disk (see `isOutOfSpace`). */
const NEARLY_FULL_BYTES = 1024 * 1024;

export class Storage {
  readonly storageRoot: string;
  readonly stagingRoot: string;

  constructor(readonly layout: DataLayout) {
    this.storageRoot = layout.storage;
    this.stagingRoot = layout.staging;
  }

  /** A package's object folder relative to the root: what the catalog keeps as `storagePath`. */
  static storagePath(bagId: string): string {
    return packageObjectPath(bagId);
  }

  /**
   * The absolute folder a catalog `storagePath` names: what `storage_location` shows admins (the
   * record as it is; files are found through `objectDir` and `storedFilePath`).
   */
  locationOf(storagePath: string): string {
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

  /**
   * The folder holding every file of version 1 as deposited (`v1/content/`): what an audit walks
   * for files the catalog does not know, while every object has one version.
   */
  firstContentDir(bagId: string): string {
    return join(this.objectDir(bagId), versionName(1), 'content');
  }

  stagingDir(bagId: string): string {
    return join(this.stagingRoot, bagId.toLowerCase());
  }

  /** Where a package's object is put together before it is renamed into the root (assembly.ts). */
  assemblyDir(bagId: string): string {
    return `${this.stagingDir(bagId)}${ASSEMBLY_SUFFIX}`;
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
