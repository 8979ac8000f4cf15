/**
 * Where a stored file lives on a replica: `ab/cd/ef/<bag_id>/<path in the bag>` (the first three
 * pairs of the uuid, as chipmunk lays bags out), under the replica's own prefix (S3) or folder
 * (dir), which the target adds. The primary is an OCFL root (storage/storage.ts); replicas keep
 * this layout until they become OCFL roots too.
 */

/** `ab/cd/ef/<bag_id>/`: every key of one package starts with it. */
export function packagePrefix(bagId: string): string {
  const id = bagId.toLowerCase();
  return `${id.slice(0, 2)}/${id.slice(2, 4)}/${id.slice(4, 6)}/${id}/`;
}

export function objectKey(bagId: string, path: string): string {
  return `${packagePrefix(bagId)}${path}`;
}
