/**
 * What an audit checks of a stored package, every version included: a package stored once is its
 * `v1/content/` (verifyPrimary); a revised one, each version's content folder against the files
 * whose bytes it holds (verifyPrimaryVersions), and its copies hold every version's content too.
 */
import type { Catalog } from '../catalog/catalog.js';
import type { FileRecord } from '../catalog/types.js';
import type { Finding } from './findings.js';
import { verifyPrimary, verifyPrimaryVersions } from './object.js';
import type { PackageHasher, VerifyOptions } from './verify.js';

const revised = (catalog: Catalog, bagId: string) => (catalog.packages.get(bagId)?.head ?? 1) > 1;

/** Every content file of the package's object (for its copies): its files, or every version's. */
export function contentOf(catalog: Catalog, bagId: string, files: Iterable<FileRecord>): FileRecord[] {
  return revised(catalog, bagId) ? catalog.revisions.contentFiles(bagId, files) : [...files];
}

/** The primary's check of the package (its current `files`; `contentDir`: its `v1/content/`). */
export function verifyStored(
  catalog: Catalog,
  bagId: string,
  objectDir: string,
  contentDir: string,
  files: Iterable<FileRecord>,
  hasher: PackageHasher,
  opts: VerifyOptions,
): Promise<Finding[]> {
  if (!revised(catalog, bagId)) return verifyPrimary(objectDir, contentDir, files, hasher, opts);
  return verifyPrimaryVersions(objectDir, files, catalog.revisions.contentFiles(bagId, files), hasher, opts);
}
