/**
 * What an audit checks of a stored package, every version included: a package stored once is its
 * `v1/content/` (verifyPrimary); a revised one, each version's content folder against the files
 * whose bytes it holds (verifyPrimaryVersions), and its copies hold every version's content too.
 * The full audit and the continuous one both check a package with `storedPackageFindings`.
 */
import type { Catalog } from '../catalog/catalog.js';
import type { FileRecord } from '../catalog/types.js';
import type { Storage } from '../storage/storage.js';
import { auditCopies, type AuditedReplicas } from './copies.js';
import type { Finding } from './findings.js';
import { verifyPrimary, verifyPrimaryVersions } from './object.js';
import type { PackageHasher, VerifyOptions } from './verify.js';

/** What checking a stored package reads with. */
export interface StoredCheck {
  catalog: Catalog;
  storage: Storage;
  hasher: PackageHasher;
  replicas: AuditedReplicas | undefined;
}

/**
 * Every finding of a stored package: its object in the primary (every version's content) and its
 * copy in every replica; `package-missing` when the object is not in the primary at all. A
 * stopped check throws (`opts.signal`), never returns what it had found so far.
 */
export async function storedPackageFindings(
  check: StoredCheck,
  bagId: string,
  files: Iterable<FileRecord>,
  opts: VerifyOptions & { signal: AbortSignal },
): Promise<Finding[]> {
  let dir: string;
  try {
    dir = check.storage.firstContentDir(bagId);
  } catch {
    return [{ code: 'package-missing' }];
  }
  const { catalog, replicas } = check;
  const findings = await verifyStored(
    catalog,
    bagId,
    check.storage.objectDir(bagId),
    dir,
    files,
    check.hasher,
    opts,
  );
  if (replicas !== undefined)
    findings.push(
      ...(await auditCopies(catalog, replicas, bagId, contentOf(catalog, bagId, files), opts.signal)),
    );
  return findings;
}

const revised = (catalog: Catalog, bagId: string) => (catalog.packages.get(bagId)?.head ?? 1) > 1;

/** Every content file of the package's object (for its copies): its files, or every version's. */
function contentOf(catalog: Catalog, bagId: string, files: Iterable<FileRecord>): FileRecord[] {
  return revised(catalog, bagId) ? catalog.revisions.contentFiles(bagId, files) : [...files];
}

/** The primary's check of the package (its current `files`; `contentDir`: its `v1/content/`). */
function verifyStored(
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
