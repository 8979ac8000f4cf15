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
 * lists held pass `maxBytes`; a list larger than that is never held.
 */
import type { Package } from '../catalog/types.js';

interface Entry {
  updatedAt: number;
  list: Buffer;
}

export class KeptLists {
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;

  constructor(private readonly maxBytes: number) {}

  /** The list of stored `pkg`: the one held if still valid, else `read()`, held from then on. */
  of(pkg: Package, read: () => Buffer): Buffer {
    const held = this.entries.get(pkg.bagId);
    if (held !== undefined) {
      this.drop(pkg.bagId, held);
      if (held.updatedAt === pkg.updatedAt) {
        this.entries.set(pkg.bagId, held); // now the most recently shown
        this.bytes += held.list.length;
        return held.list;
      }
    }
    const list = read();
    if (list.length > this.maxBytes) return list;
    while (this.bytes + list.length > this.maxBytes) {
      const [oldest, entry] = this.entries.entries().next().value as [string, Entry];
      this.drop(oldest, entry);
    }
    this.entries.set(pkg.bagId, { updatedAt: pkg.updatedAt, list });
    this.bytes += list.length;
    return list;
  }

  private drop(bagId: string, entry: Entry): void {
    this.entries.delete(bagId);
    this.bytes -= entry.list.length;
  }
}
