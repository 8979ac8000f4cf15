/**
 * Upload links being replaced (ingest/rotation.ts). Rotating a request's link writes, in one
 * transaction, its new capability and a record here of the capabilities it retires; the record
 * goes once the landing folder has moved and nothing writes through a retired link any more.
 * A crash in between leaves the record, and start-up finishes it: only these few records are
 * read then, never every package.
 */
import type { Database, RootDatabase } from 'lmdb';
import type { PackageStore } from './packages.js';
import type { Transactor } from './transaction.js';
import type { Package } from './types.js';

/** A rotation not finished yet: the request, the capabilities it retired (oldest first), its new one. */
export interface Rotation {
  bagId: string;
  retired: string[];
  capability: string;
}

export class RotationStore {
  private readonly rotations: Database<Rotation, string>;

  constructor(
    root: RootDatabase,
    private readonly catalog: Transactor,
    private readonly packages: PackageStore,
    /** Whether a stored package has a revision in flight, whose upload link rotates like a request's. */
    private readonly revising: (bagId: string) => boolean,
  ) {
    this.rotations = root.openDB({ name: 'capabilityRotations' });
  }

  /**
   * Gives the open request `bagId` the capability `fresh` and records the one it retires (with
   * any an unfinished rotation retired before). Returns the request as it is now.
   */
  rotate(bagId: string, fresh: string): Package {
    return this.catalog.transaction(() => {
      const pkg = this.packages.get(bagId);
      if (pkg === undefined) throw new Error(`no request ${bagId}`);
      if (pkg.stored && !this.revising(pkg.bagId))
        throw new Error(`${bagId} is stored: its upload link is closed for good`);
      const earlier = this.rotations.get(pkg.bagId)?.retired ?? [];
      const rotated = this.packages.replaceCapability(pkg.bagId, fresh);
      this.rotations.putSync(pkg.bagId, {
        bagId: pkg.bagId,
        retired: [...earlier, pkg.capability],
        capability: fresh,
      });
      return rotated;
    });
  }

  /** Every rotation not finished yet. */
  pending(): Rotation[] {
    return [...this.rotations.getRange()].map((e) => e.value);
  }

  /** Drops the record of a finished rotation, unless a newer one has replaced it meanwhile. */
  finish(rotation: Rotation): void {
    this.catalog.transaction(() => {
      if (this.rotations.get(rotation.bagId)?.capability === rotation.capability)
        this.rotations.removeSync(rotation.bagId);
    });
  }
}
