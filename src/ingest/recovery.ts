/**
 * Putting uploads back where the depositor can reach them: after a failed ingest, and at start-up
 * for whatever a crash left between landing/ and staging/. Moves are renames within the data
 * directory's filesystem; nothing is ever deleted here.
 */
import { readdir, rename } from 'node:fs/promises';
import { join } from 'node:path';
import type { Catalog } from '../catalog/catalog.js';
import type { Package } from '../catalog/types.js';
import { exists } from '../fs/exists.js';
import type { Logger } from '../logger.js';
import type { Storage } from '../storage/storage.js';
import { isCapability } from './capability.js';
import type { LandingZone } from './landing.js';

/**
 * Gives an upload back to the depositor: staging → landing (if it was staged), the landing
 * folder made if missing, and the upload link opened again. If both folders exist (the link was
 * closed, so this should not happen), the staged one is kept beside, renamed, rather than lose
 * either. Returns what it did, for the log.
 */
export async function returnUpload(storage: Storage, landing: LandingZone, pkg: Package): Promise<'returned' | 'kept-both' | 'reopened'> {
  const staged = storage.stagingDir(pkg.bagId);
  const upload = landing.path(pkg.capability);
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
    await landing.open(pkg.capability);
  }
  await landing.reopen(pkg.capability);
  return outcome;
}

/**
 * Start-up reconciliation of disk and catalog. PENDING items are resumed by the ingest worker
 * from their recorded stage; here: every open request without a PENDING item has its landing
 * folder, open link, and nothing left in staging; leftovers nobody owns are reported, never
 * deleted.
 */
export async function reconcile(catalog: Catalog, storage: Storage, landing: LandingZone, logger: Logger): Promise<void> {
  const pending = new Set(catalog.queue.pending().map((i) => i.bagId));
  const known = new Set<string>();
  for (const pkg of catalog.packages.list()) {
    known.add(pkg.bagId);
    known.add(pkg.capability);
    if (pkg.stored) {
      if (pkg.storagePath !== undefined && !(await exists(storage.packageDir(pkg.storagePath))))
        logger.error({ bagId: pkg.bagId, storagePath: pkg.storagePath }, 'a stored package is missing from storage; the next audit will report it');
      continue;
    }
    if (pending.has(pkg.bagId)) continue;
    const outcome = await returnUpload(storage, landing, pkg);
    if (outcome !== 'reopened') logger.warn({ bagId: pkg.bagId, outcome }, 'returned an interrupted upload to its landing folder');
  }
  for (const name of await readdir(storage.landingRoot).catch(() => [] as string[])) {
    if (!known.has(name)) logger.warn({ folder: join(storage.landingRoot, name), capability: isCapability(name) }, 'a landing folder belongs to no request');
  }
  for (const name of await readdir(storage.stagingRoot).catch(() => [] as string[])) {
    if (!known.has(name)) logger.warn({ folder: join(storage.stagingRoot, name) }, 'a staging folder belongs to no request');
  }
}
