/**
 * The rebuild's part for a revised package's versions (catalog/revisions.ts): each version's record
 * as the versions list shows it, and the revision that made it, from the package record's
 * `listed` and `revision` (ocfl/record.ts). A record written before it kept them, or one behind
 * the object (a version stored, its record not yet written), gives them from the queue item and
 * the inventory's version instead: near, not exact (docs/storage.md).
 */
import type { Catalog } from '../catalog/catalog.js';
import { msOf, type PackageRecord } from '../ocfl/record.js';
import type { ReadVersion } from './rebuild-object.js';

/** A revision's note as the inventory's message carries it (`revision N: note`). */
function noteOf(message: string): string | null {
  return /^revision \d+: ([\s\S]*)$/.exec(message)?.[1] ?? null;
}

/**
 * The versions' records and revisions into the catalog (inside the caller's transaction): those of
 * `read` (the object's every version) or, for a tombstone, whose object is gone, of its record.
 */
export function restoreVersions(
  catalog: Catalog,
  bagId: string,
  entries: PackageRecord['versions'],
  read?: readonly ReadVersion[],
): void {
  const count = read?.length ?? entries.length;
  for (let n = 1; n <= count; n++) {
    const entry = entries[n - 1];
    const version = read?.[n - 1];
    const listed = entry?.listed;
    const note = listed !== undefined ? listed.note : n === 1 ? null : noteOf(version?.message ?? '');
    if (listed !== undefined)
      catalog.revisions.putVersion(bagId, {
        version: n,
        createdAt: msOf(listed.created_at),
        user: listed.user,
        note,
        files: listed.files,
        bytes: listed.bytes,
      });
    else if (version !== undefined)
      catalog.revisions.putVersion(bagId, {
        version: n,
        createdAt: msOf(entry?.queue_item.updated_at ?? version.created),
        user: entry?.queue_item.user ?? version.user,
        note,
        files: version.files.length,
        bytes: version.files.reduce((sum, f) => sum + f.size, 0),
      });
    if (n === 1) continue;
    const opened = entry?.revision ?? {
      user: entry?.queue_item.user ?? version?.user ?? '',
      created_at: entry?.queue_item.created_at ?? version?.created ?? new Date(0).toISOString(),
      updated_at: entry?.queue_item.updated_at ?? version?.created ?? new Date(0).toISOString(),
    };
    catalog.restore.revision({
      bagId,
      version: n,
      status: 'stored',
      note,
      user: opened.user,
      createdAt: msOf(opened.created_at),
      updatedAt: msOf(opened.updated_at),
    });
  }
}
