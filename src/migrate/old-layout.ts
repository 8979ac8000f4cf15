/**
 * The storage layout of releases before OCFL, which `preservd migrate` converts: a package's bag
 * at `ab/cd/ef/<bag_id>/` (the first three pairs of its uuid, as chipmunk lays bags out) in the
 * primary `storage/` and under every replica's folder or prefix, a file at `<that>/<path in the bag>`.
 */

/** A top-level folder of that layout: two hex digits (OCFL's tuples have three). */
export const OLD_SHARD = /^[0-9a-f]{2}$/;

/** `ab/cd/ef/<bag_id>`: what the catalog's `storagePath` held. */
export function oldStoragePath(bagId: string): string {
  const id = bagId.toLowerCase();
  return `${id.slice(0, 2)}/${id.slice(2, 4)}/${id.slice(4, 6)}/${id}`;
}
