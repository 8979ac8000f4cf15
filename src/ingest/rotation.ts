/**
 * Rotating an upload link: the request gets a new capability (a new landing folder name) and the
 * old link is refused from then on. Done when a grant that let someone see the link is revoked,
 * and when a failed ingest gives the upload back (recovery.ts), so that whoever held the old link
 * cannot write into what is uploaded next (docs/access.md, "The upload link").
 *
 * Crash-safe in three steps, each safe to run again: (1) one catalog transaction gives the request
 * its new capability and records the rotation (catalog/rotations.ts); (2) on disk, each retired
 * capability is closed (the rsync gate refuses it from then on), the transfers still writing
 * through it are stopped, and its landing folder is renamed to the new name; (3) the record goes.
 * Whatever finds a record, start-up or the daemon's sweep, does (2) and (3) again. The closed
 * marker of a retired capability stays: a transfer that passed the gate's folder check just
 * before the rename is still refused by it.
 */
import { rename } from 'node:fs/promises';
import { join } from 'node:path';
import { Access } from '../auth/access.js';
import type { Catalog } from '../catalog/catalog.js';
import { ALL } from '../catalog/grants.js';
import type { Rotation } from '../catalog/rotations.js';
import type { Package, Role } from '../catalog/types.js';
import { failpoint } from '../failpoints.js';
import { isErrno } from '../fs/errors.js';
import type { Logger } from '../logger.js';
import { newCapability } from './capability.js';
import type { LandingZone } from './landing.js';

/**
 * Gives an open request a new upload link and retires the old one (all three steps): for an
 * upload given back, so its new link is an outcome, written even on a full disk (catalog/space.ts).
 */
export async function rotateUpload(
  catalog: Catalog,
  landing: LandingZone,
  bagId: string,
  logger: Logger,
): Promise<Package> {
  const rotated = catalog.outcomeTransaction(() => catalog.rotations.rotate(bagId, newCapability()));
  failpoint('rotation:after-catalog');
  await finishRotations(catalog, landing, logger);
  return rotated;
}

/** What a revoke did to upload links: the requests rotated, and the links of ingests under way closed. */
export interface RevokeOutcome {
  rotated: string[];
  closed: string[];
}

/**
 * Takes a grant away and, in the same transaction, rotates the link of every open request the
 * user could write into before (auth/access.ts, canSeeUploadLink) and cannot now. A request
 * whose ingest is under way keeps its capability (the ingest has it, and either stores the bag
 * or rotates the link when it gives the upload back): its link is only to be closed. The disk
 * is `retireLinks`'s.
 */
export function revokeAndRotate(
  catalog: Catalog,
  grant: { user: string; role: string; scope: string },
): RevokeOutcome {
  const outcome: RevokeOutcome = { rotated: [], closed: [] };
  catalog.transaction(() => {
    catalog.grants.revoke(grant.user, grant.role, grant.scope);
    const user = catalog.users.get(grant.user);
    if (user === undefined) return;
    const after = Access.of(user, catalog.grants.of(grant.user), { requireGrants: false });
    const before = Access.of(
      user,
      [...catalog.grants.of(grant.user), { ...grant, role: grant.role as Role, createdAt: 0 }],
      { requireGrants: false },
    );
    // The open requests through their own index (a content type's would read its stored packages too).
    for (const pkg of catalog.packages.list({ stored: false })) {
      if (
        (grant.scope !== ALL && pkg.contentType !== grant.scope) ||
        !before.canSeeUploadLink(pkg) ||
        after.canSeeUploadLink(pkg)
      )
        continue;
      if (catalog.queue.forPackage(pkg.bagId).some((i) => i.status === 'PENDING'))
        outcome.closed.push(pkg.capability);
      else outcome.rotated.push(catalog.rotations.rotate(pkg.bagId, newCapability()).bagId);
    }
  });
  failpoint('rotation:after-catalog');
  return outcome;
}

/** After `revokeAndRotate`: closes the links of ingests under way and finishes the rotations on disk. */
export async function retireLinks(
  catalog: Catalog,
  landing: LandingZone,
  logger: Logger,
  outcome: RevokeOutcome,
): Promise<void> {
  for (const capability of outcome.closed) {
    await landing.close(capability);
    await landing.stopTransfers(capability);
  }
  await finishRotations(catalog, landing, logger);
}

/**
 * Renames folder `from` to `to`, which may be an empty folder (replaced); true if done or if
 * `from` is gone (moved by another process), false if `to` holds files.
 */
async function renameUnlessFull(from: string, to: string): Promise<boolean> {
  try {
    await rename(from, to);
    return true;
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return true;
    if (isErrno(err, 'ENOTEMPTY') || isErrno(err, 'EEXIST')) return false;
    throw err;
  }
}

/** Finishes every rotation recorded and not yet done on disk (steps 2 and 3); safe to run at any time. */
export async function finishRotations(catalog: Catalog, landing: LandingZone, logger: Logger): Promise<void> {
  for (const rotation of catalog.rotations.pending()) await finish(catalog, landing, rotation, logger);
}

async function finish(
  catalog: Catalog,
  landing: LandingZone,
  rotation: Rotation,
  logger: Logger,
): Promise<void> {
  const target = landing.path(rotation.capability);
  for (const old of rotation.retired) {
    await landing.close(old);
    const stopped = await landing.stopTransfers(old);
    if (stopped > 0)
      logger.warn(
        { bagId: rotation.bagId, transfers: stopped },
        'stopped transfers through a retired upload link',
      );
    const from = landing.path(old);
    // An empty new folder (opened while this step could not run, e.g. on a full disk) gives way:
    // rename replaces an empty directory. One that holds files came from an earlier retired link:
    // this one is kept beside it, unused. Gone already: another process (`preservd revoke` and
    // the daemon's sweep may both finish a rotation) moved it just now. No folder is ever
    // removed here: a step of looking first and removing after could take the folder the other
    // process had just moved in for an empty new one.
    if (await renameUnlessFull(from, target)) continue;
    const aside = join(landing.layout.landing, `${old}.retired-${Date.now()}`);
    try {
      await rename(from, aside);
    } catch (err) {
      if (isErrno(err, 'ENOENT')) continue;
      throw err;
    }
    logger.warn(
      { bagId: rotation.bagId, folder: aside },
      'a retired upload folder was kept beside the new one',
    );
  }
  failpoint('rotation:after-move');
  catalog.rotations.finish(rotation);
}

/**
 * Finishes, every `intervalMs`, the rotations another process recorded (`preservd revoke`
 * beside the daemon, which does them itself unless it dies or may not stop a transfer).
 */
export class RotationSweeper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(
    private readonly catalog: Catalog,
    private readonly landing: LandingZone,
    private readonly logger: Logger,
    private readonly intervalMs = 2_000,
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      if (this.running !== undefined || this.catalog.rotations.pending().length === 0) return;
      this.running = finishRotations(this.catalog, this.landing, this.logger)
        .catch((err: unknown) =>
          this.logger.error({ err }, 'could not finish rotating an upload link; will retry'),
        )
        .finally(() => (this.running = undefined));
    }, this.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }
}
