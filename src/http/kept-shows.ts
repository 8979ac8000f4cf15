/**
 * The shows of recently shown stored packages, rendered: per package and view flavour (a caller
 * who may see storage details or one who may not) the finished body, sent as it is, so that
 * showing the same package again neither renders nor copies its payload list (docs/decisions.md,
 * "A show's CPU").
 *
 * A body is used only while what it was rendered from is unchanged: the package record's
 * `version` (every PackageStore write bumps it, the payload list's too) and, for the flavour with
 * storage details, the storage state itself, compared whole: the fixity state and each configured
 * replica's copy, which the caller reads afresh for every show (other processes, the CLI, write
 * them too). Least recently shown go first once the bodies held pass `maxBytes` (lru-cache); a
 * body larger than that is never held. Open requests are not held here: their `upload` changes
 * with every file that arrives.
 */
import { isDeepStrictEqual } from 'node:util';
import { LRUCache } from 'lru-cache';
import type { AbandonedRemoval, Removal } from '../catalog/deaccessions.js';
import type { FixityState } from '../catalog/fixity.js';
import type { Package, ReplicaCopy } from '../catalog/types.js';

/** What a show of a stored package shows beyond its record, to a caller who may see storage details. */
export interface StorageState {
  fixity: FixityState | undefined;
  /** Each configured replica, in configured order, and the package's copy there (undefined: none yet). */
  replicas: Array<{ name: string; copy: ReplicaCopy | undefined }>;
  /** A tombstone's removals still to do (its replicas show them instead of copies). */
  removals?: Removal[];
  /** A tombstone's removals given up (their replica left the configuration): shown `unknown`. */
  abandoned?: AbandonedRemoval[];
}

interface HeldShow {
  storage: StorageState | undefined;
  body: Buffer;
}

interface Entry {
  version: number;
  /** Without storage details, with them. */
  shows: [HeldShow | undefined, HeldShow | undefined];
}

export class KeptShows {
  private readonly entries: LRUCache<string, Entry>;

  constructor(maxBytes: number) {
    this.entries = new LRUCache({ maxSize: maxBytes, sizeCalculation: sizeOf });
  }

  /** The body held for stored `pkg` in this flavour (`storage` undefined: no storage details), if still valid. */
  get(pkg: Package, storage: StorageState | undefined): Buffer | undefined {
    const entry = this.entries.get(pkg.bagId);
    if (entry?.version !== (pkg.version ?? 0)) return undefined;
    const held = entry.shows[storage === undefined ? 0 : 1];
    return held !== undefined && isDeepStrictEqual(held.storage, storage) ? held.body : undefined;
  }

  /** Holds `body`, rendered from `pkg` and `storage`, from now on; returns it. */
  keep(pkg: Package, storage: StorageState | undefined, body: Buffer): Buffer {
    const version = pkg.version ?? 0;
    const entry = this.entries.get(pkg.bagId);
    const shows: Entry['shows'] =
      entry?.version === version ? [entry.shows[0], entry.shows[1]] : [undefined, undefined];
    shows[storage === undefined ? 0 : 1] = { storage, body };
    // A new entry, not the held one changed: lru-cache sizes an entry only when it is set anew.
    // One larger than maxSize is not stored (lru-cache's maxEntrySize defaults to maxSize).
    this.entries.set(pkg.bagId, { version, shows });
    return body;
  }
}

function sizeOf(entry: Entry): number {
  let size = 0;
  for (const held of entry.shows) if (held !== undefined) size += held.body.length;
  return Math.max(1, size);
}
