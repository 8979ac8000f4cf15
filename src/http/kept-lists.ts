/**
 * The payload lists of recently shown packages, as the catalog keeps them (JSON, serialised at
 * ingest), held in memory so that showing the same package again sends the same buffer instead
 * of a fresh 43 kB copy out of the catalog each time: those copies, not the show's own code, were
 * what kept the garbage collector busy under load (docs/decisions.md, "A show's CPU").
 *
 * Only stored packages' lists are held; a stored package's list never changes (the ingest writes
 * it before the package becomes stored). An entry is used only while the package record has the
 * `updatedAt` it had when the list was read, so a package stored again (a catalog written by
 * another process, a future re-ingest) is read afresh. Least recently shown go first once the
 * lists held pass `maxBytes` (lru-cache); a list larger than that is never held.
 */
import { LRUCache } from 'lru-cache';
import type { Package } from '../catalog/types.js';

interface Entry {
  updatedAt: number;
  list: Buffer;
}

export class KeptLists {
  private readonly entries: LRUCache<string, Entry>;

  constructor(maxBytes: number) {
    this.entries = new LRUCache({ maxSize: maxBytes, sizeCalculation: (entry) => Math.max(1, entry.list.length) });
  }

  /** The list of stored `pkg`: the one held if still valid, else `read()`, held from then on. */
  of(pkg: Package, read: () => Buffer): Buffer {
    const held = this.entries.get(pkg.bagId);
    if (held !== undefined && held.updatedAt === pkg.updatedAt) return held.list;
    const list = read();
    // One larger than maxSize is not stored (lru-cache's maxEntrySize defaults to maxSize).
    this.entries.set(pkg.bagId, { updatedAt: pkg.updatedAt, list });
    return list;
  }
}
