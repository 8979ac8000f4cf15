/**
 * Where a package's files live on a replica, which is an OCFL storage root laid out like the
 * primary (STORAGE.md): `<object folder>/<path in the object>`, the object folder given by the
 * root's layout extension (ocfl/layout.ts, `abc/def/012/urn%3auuid%3a<bag_id>`), under the
 * replica's own prefix (S3) or folder (dir), which the target adds. A file of the bag lives at
 * its content path (`v1/content/<path in the bag>`), as in the primary's object.
 */
import { contentPathOf, packageObjectPath } from '../ocfl/layout.js';

/** `<object folder>/`: every key of one package starts with it. */
export function objectPrefix(bagId: string): string {
  return `${packageObjectPath(bagId)}/`;
}

/** The key of a file of the package's object (`inventory.json`, `v1/content/data/a.txt`). */
export function objectKey(bagId: string, pathInObject: string): string {
  return `${objectPrefix(bagId)}${pathInObject}`;
}

/** Where a file the catalog records (a bag file) lives inside the object, as Storage.storedFilePath says for the primary. */
export function contentPathOfFile(file: { path: string; contentPath?: string }): string {
  return file.contentPath ?? contentPathOf(1, file.path);
}

/** The key of a bag file's content. */
export function contentKey(bagId: string, file: { path: string; contentPath?: string }): string {
  return objectKey(bagId, contentPathOfFile(file));
}
