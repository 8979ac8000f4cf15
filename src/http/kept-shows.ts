/**
 * The shows of recently shown stored packages, rendered, held in memory: per package its payload
 * list as the catalog keeps it (JSON, serialised at ingest), and per view flavour (a caller who
 * may see storage details or one who may not) the JSON text around it as UTF-8 buffers. Showing
 * the same package again sends the same three buffers instead of a fresh copy of the list and a
 * fresh rendering of the rest: those allocations, not the show's own code, were what kept the
 * garbage collector busy under load (docs/decisions.md, "A show's CPU").
 *
 * Only stored packages are held; a stored package's list never changes (the ingest writes it
 * before the package becomes stored). An entry is used only while what the show shows is
 * unchanged: the package record's `updatedAt` (every write to a record sets it: create,
 * markStored, touch), and for the flavour with storage details the fixity state's `checkedAt` and
 * each configured replica's copy (status, verifiedAt, error), which the caller reads afresh for
 * every show (other processes, the CLI, write them too). Least recently shown go first once the
 * shows held pass `maxBytes` (lru-cache); a package larger than that is never held. Open
 * requests are not held here: their `upload` changes with every file that arrives.
 */
import { LRUCache } from 'lru-cache';
import type { FixityState } from '../catalog/fixity.js';
import type { Package, ReplicaCopy } from '../catalog/types.js';

/** What a show of a stored package shows beyond its record, to a caller who may see storage details. */
export interface StorageState {
  fixity: FixityState | undefined;
  /** Each configured replica, in configured order, and the package's copy there (undefined: none yet). */
  replicas: Array<{ name: string; copy: ReplicaCopy | undefined }>;
}

/** How a show is made when none is held: the list read from the catalog, the rest rendered around it. */
export interface ShowSource {
  list(bagId: string): Buffer;
  /** `[head, files, tail]`, the JSON text of the show in the order it is sent (views.ts, packageParts). */
  render(pkg: Package, storage: StorageState | undefined, files: Buffer): readonly Buffer[];
}

interface HeldShow {
  storage: StorageState | undefined;
  parts: readonly Buffer[];
}

interface Entry {
  updatedAt: number;
  list: Buffer;
  /** Without storage details, with them. */
  shows: [HeldShow | undefined, HeldShow | undefined];
}

export class KeptShows {
  private readonly entries: LRUCache<string, Entry>;

  constructor(maxBytes: number, private readonly source: ShowSource) {
    this.entries = new LRUCache({ maxSize: maxBytes, sizeCalculation: sizeOf });
  }

  /**
   * The show of stored `pkg` as `[head, files, tail]`: the one held if still valid, else rendered
   * (and the list read, if it is not held either) and held from then on. `storage` is undefined
   * for a caller who may not see storage details.
   */
  show(pkg: Package, storage: StorageState | undefined): readonly Buffer[] {
    const flavour = storage === undefined ? 0 : 1;
    let entry = this.entries.get(pkg.bagId);
    if (entry?.updatedAt !== pkg.updatedAt) entry = undefined;
    const held = entry?.shows[flavour];
    if (held !== undefined && sameStorage(held.storage, storage)) return held.parts;
    const list = entry?.list ?? this.source.list(pkg.bagId);
    const parts = this.source.render(pkg, storage, list);
    const shows: Entry['shows'] = [entry?.shows[0], entry?.shows[1]];
    shows[flavour] = { storage, parts };
    // A new entry, not the held one changed: lru-cache sizes an entry only when it is set anew.
    // One larger than maxSize is not stored (lru-cache's maxEntrySize defaults to maxSize).
    this.entries.set(pkg.bagId, { updatedAt: pkg.updatedAt, list, shows });
    return parts;
  }
}

function sizeOf(entry: Entry): number {
  let size = entry.list.length;
  for (const held of entry.shows) if (held !== undefined) size += held.parts[0]!.length + held.parts[2]!.length;
  return Math.max(1, size);
}

/** Whether two readings of a package's storage state show the same (views.ts, packageView). */
function sameStorage(a: StorageState | undefined, b: StorageState | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  if (a.fixity?.checkedAt !== b.fixity?.checkedAt || a.replicas.length !== b.replicas.length) return false;
  for (let i = 0; i < a.replicas.length; i++) {
    const x = a.replicas[i]!;
    const y = b.replicas[i]!;
    if (x.name !== y.name || x.copy?.status !== y.copy?.status || x.copy?.verifiedAt !== y.copy?.verifiedAt || x.copy?.error !== y.copy?.error) return false;
  }
  return true;
}
