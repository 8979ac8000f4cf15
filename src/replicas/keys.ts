/**
 * Where a stored file lives on a replica: the storage layout, so a replica is itself a plain,
 * readable bag (API.md): `ab/cd/ef/<bag_id>/<path in the bag>`, under the replica's own prefix
 * (S3) or folder (dir), which the target adds.
 */
import { Storage } from '../storage/storage.js';

/** `ab/cd/ef/<bag_id>/`: every key of one package starts with it. */
export function packagePrefix(bagId: string): string {
  return `${Storage.storagePath(bagId)}/`;
}

export function objectKey(bagId: string, path: string): string {
  return `${packagePrefix(bagId)}${path}`;
}
