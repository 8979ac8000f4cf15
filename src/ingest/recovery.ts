/**
 * Putting uploads back where the depositor can reach them: after a failed ingest, and at start-up
 * for whatever a crash left between landing/ and staging/ (an object's assembly included: its
 * content goes back, storage/assembly.ts). Moves are renames within the data directory's
 * filesystem; nothing of an upload is ever deleted here.
 */
import { readdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Catalog } from '../catalog/catalog.js';
import type { Package } from '../catalog/types.js';
import { exists } from '../fs/exists.js';
import type { Logger } from '../logger.js';
import { undoAssembly } from '../storage/assembly.js';
import { undoRevision } from '../storage/revision-assembly.js';
import { isScratch } from '../storage/layout.js';
import { ASSEMBLY_SUFFIX, type Storage } from '../storage/storage.js';
import { isCapability } from './capability.js';
import type { IngestDeps } from './deps.js';
import type { LandingZone } from './landing.js';
import { finishRotations, rotateUpload } from './rotation.js';

/**
 * Gives an upload back to the depositor under a new upload link (rotation.ts: whoever held the
 * old one may not write into what is uploaded next): staging → the new landing folder (if it was
 * staged), the folder made if missing, and the link open. If both folders exist (the link was
 * closed, so this should not happen), the staged one is kept beside, renamed, rather than lose
 * either. Returns what it did, for the log.
 */
export async function returnUpload(
  deps: Pick<IngestDeps, 'catalog' | 'storage' | 'landing' | 'logger'>,
  pkg: Package,
): Promise<'returned' | 'kept-both' | 'reopened'> {
  const { storage, landing } = deps;
  // An object assembled (or renamed into the root) before the failure gives its content back first.
  const revision = deps.catalog.revisions.open(pkg.bagId);
  if (deps.catalog.packages.get(pkg.bagId)?.stored !== true) await undoAssembly(storage, pkg.bagId);
  else if (revision !== undefined) await undoRevision(storage, pkg.bagId, revision.version);
  const fresh = await rotateUpload(deps.catalog, landing, pkg.bagId, deps.logger).catch((err: unknown) => {
    // A catalog that cannot take the new link (the disk is full) must not keep the upload from its depositor.
    deps.logger.error(
      { err, bagId: pkg.bagId },
      'could not give the upload a new link; it goes back under the old one',
    );
    return deps.catalog.packages.get(pkg.bagId) ?? pkg;
  });
  const staged = storage.stagingDir(pkg.bagId);
  const upload = landing.path(fresh.capability);
  let outcome: 'returned' | 'kept-both' | 'reopened' = 'reopened';
  if (await exists(staged)) {
    if (await exists(upload)) {
      await rename(staged, `${staged}.returned-${Date.now()}`);
      outcome = 'kept-both';
    } else {
      await rename(staged, upload);
      outcome = 'returned';
    }
  } else if (!(await exists(upload))) {
    await landing.open(fresh.capability);
  }
  await landing.reopen(fresh.capability);
  return outcome;
}

/**
 * Start-up reconciliation of what was in flight, and nothing else: reading every package would
 * make start-up grow with the catalog. Unfinished link rotations are finished first (rotation.ts). PENDING items are resumed by the ingest worker from their
 * recorded stage. Here: an upload left in staging/, or a link left closed (the two marks an
 * interrupted ingest leaves), whose request has no PENDING item goes back to its depositor;
 * leftovers nobody owns are reported, never deleted. A stored package missing from storage is
 * the audits' to find.
 */
export async function reconcile(
  catalog: Catalog,
  storage: Storage,
  landing: LandingZone,
  logger: Logger,
): Promise<void> {
  await finishRotations(catalog, landing, logger);
  const pending = new Set(catalog.queue.pending().map((i) => i.bagId));
  // A stored package's upload is a revision's: given back while the revision is open.
  const uploading = (pkg: Package) => !pkg.stored || catalog.revisions.open(pkg.bagId) !== undefined;
  const giveBack = async (pkg: Package): Promise<void> => {
    if (!uploading(pkg) || pending.has(pkg.bagId)) return;
    const outcome = await returnUpload({ catalog, storage, landing, logger }, pkg);
    if (outcome !== 'reopened')
      logger.warn({ bagId: pkg.bagId, outcome }, 'returned an interrupted upload to its landing folder');
  };
  for (const entry of await readdir(storage.stagingRoot).catch(() => [] as string[])) {
    if (isScratch(entry)) continue;
    // An object being assembled is its upload's: finished by the ingest, or rolled back with it.
    const name = entry.endsWith(ASSEMBLY_SUFFIX) ? entry.slice(0, -ASSEMBLY_SUFFIX.length) : entry;
    const pkg = catalog.packages.get(name);
    if (pkg === undefined)
      logger.warn({ folder: join(storage.stagingRoot, entry) }, 'a staging folder belongs to no request');
    else await giveBack(pkg);
  }
  for (const name of await readdir(landing.layout.closed).catch(() => [] as string[])) {
    if (!isCapability(name)) continue;
    const pkg = catalog.packages.byUploadCapability(name);
    if (pkg === undefined) logger.warn({ capability: name }, 'a closed upload link belongs to no request');
    else if (pkg.capability !== name)
      continue; // a retired link: its marker is the refusal, kept
    else if (!uploading(pkg)) {
      // Its landing folder is gone, or an abandoned revision's left: either way the marker is moot.
      await rm(landing.path(name), { recursive: true, force: true });
      await landing.reopen(name);
    } else await giveBack(pkg);
  }
}
