/**
 * The shows of recently shown stored packages, rendered: per package and view flavour (a caller
 * who may see storage details or one who may not) the finished body, sent as it is, so that
 * showing the same package again neither renders nor copies its payload list (docs/decisions.md,
 * "A show's CPU").
 *
 * A body is used only while what it was rendered from is unchanged, compared as the catalog
 * stores it, never decoded: the package record's bytes (every PackageStore write changes them,
 * its `version` at least, a new payload list too) and, for the flavour with storage details, the
 * storage records' bytes: the fixity state and each configured replica's copy, which the caller
 * reads afresh for every show (other processes, the CLI, write them too). The package decoded
 * from those bytes is held beside them, so a show of an unchanged record decodes nothing. Least
 * recently shown go first once the bodies held pass `maxBytes` (lru-cache); a body larger than
 * that is never held. Open requests (their `upload` changes with every file that arrives) and
 * tombstones (their removals are not among the bytes compared) are not held here.
 */
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

/** The storage records a show with storage details shows, as stored: the fixity state, then each configured replica's copy (undefined: none). */
export type StorageBytes = Array<Buffer | undefined>;

interface HeldShow {
  storage: StorageBytes | undefined;
  body: Buffer;
}

interface Entry {
  /** The package record's bytes, and the package decoded from them. */
  record: Buffer;
  pkg: Package;
  /** Without storage details, with them. */
  shows: [HeldShow | undefined, HeldShow | undefined];
}

export class KeptShows {
  private readonly entries: LRUCache<string, Entry>;

  constructor(maxBytes: number) {
    this.entries = new LRUCache({ maxSize: maxBytes, sizeCalculation: sizeOf });
  }

  /** The package held for `bagId` if its record is still `record` (the bytes the catalog holds now). */
  package(bagId: string, record: Buffer): Package | undefined {
    const entry = this.entries.get(bagId);
    return entry !== undefined && entry.record.equals(record) ? entry.pkg : undefined;
  }

  /**
   * The body held for `pkg` (as `package` returned it) in this flavour (`storage` undefined: no
   * storage details), if its storage records are still these bytes.
   */
  get(pkg: Package, storage: StorageBytes | undefined): Buffer | undefined {
    const entry = this.entries.peek(pkg.bagId);
    if (entry?.pkg !== pkg) return undefined;
    const held = entry.shows[storage === undefined ? 0 : 1];
    return held !== undefined && sameBytes(held.storage, storage) ? held.body : undefined;
  }

  /**
   * Holds `body`, rendered from `pkg` and `storage`, from now on; returns it. `record` is the
   * bytes `pkg` was decoded from (a copy the catalog will not overwrite), or undefined when `pkg`
   * is the one held (`package`).
   */
  keep(pkg: Package, record: Buffer | undefined, storage: StorageBytes | undefined, body: Buffer): Buffer {
    const entry = this.entries.get(pkg.bagId);
    const same =
      entry !== undefined && (record === undefined ? entry.pkg === pkg : entry.record.equals(record));
    if (!same && record === undefined) return body; // dropped since: nothing to hold it by
    const shows: Entry['shows'] = same ? [entry.shows[0], entry.shows[1]] : [undefined, undefined];
    shows[storage === undefined ? 0 : 1] = { storage, body };
    // A new entry, not the held one changed: lru-cache sizes an entry only when it is set anew.
    // One larger than maxSize is not stored (lru-cache's maxEntrySize defaults to maxSize).
    this.entries.set(pkg.bagId, same ? { ...entry, shows } : { record: record!, pkg, shows });
    return body;
  }
}

function sameBytes(held: StorageBytes | undefined, now: StorageBytes | undefined): boolean {
  if (held === undefined || now === undefined) return held === now;
  if (held.length !== now.length) return false;
  for (let i = 0; i < held.length; i++) {
    const a = held[i];
    const b = now[i];
    if (a === undefined || b === undefined ? a !== b : !a.equals(b)) return false;
  }
  return true;
}

function sizeOf(entry: Entry): number {
  let size = entry.record.length;
  for (const held of entry.shows) if (held !== undefined) size += held.body.length;
  return Math.max(1, size);
}
