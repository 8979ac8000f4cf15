/**
 * How an OCFL 1.1 storage root of preservd is laid out: the root's declaration and layout files,
 * and where each package's object lives. One object per package, its id `urn:uuid:<bag_id>`, its
 * folder given by the registered storage-layout extension 0003-hash-and-id-n-tuple (sha256 of the
 * id, three tuples of three hex digits, then the id percent-encoded): the bag id stays readable in
 * every path, and the three-character tuples never meet the two-character `ab/cd/ef/` folders of
 * the layout before OCFL (which `preservd migrate` converts).
 *
 * Pure functions: nothing here touches a disk, so a replica, a rebuild and the migration all lay a
 * root out the same way.
 */
import { createHash } from 'node:crypto';

export const ROOT_DECLARATION = { name: '0=ocfl_1.1', text: 'ocfl_1.1\n' } as const;
export const OBJECT_DECLARATION = { name: '0=ocfl_object_1.1', text: 'ocfl_object_1.1\n' } as const;
export const INVENTORY_TYPE = 'https://ocfl.io/1.1/spec/#inventory';

export const LAYOUT_EXTENSION = '0003-hash-and-id-n-tuple-storage-layout';
const TUPLE_SIZE = 3;
const NUMBER_OF_TUPLES = 3;
/** Longer encoded ids are cut and given their digest (the extension's rule; ours are 49 characters). */
const MAX_ENCODED_ID = 100;

/** The files at the top of every root, beside `0=ocfl_1.1`: the layout, and its extension's config. */
export function layoutFiles(): Array<{ path: string; text: string }> {
  const layout = {
    extension: LAYOUT_EXTENSION,
    description:
      'OCFL object identifiers hashed with sha256 into three tuples of three, then percent-encoded',
  };
  const config = {
    extensionName: LAYOUT_EXTENSION,
    digestAlgorithm: 'sha256',
    tupleSize: TUPLE_SIZE,
    numberOfTuples: NUMBER_OF_TUPLES,
  };
  return [
    { path: 'ocfl_layout.json', text: `${JSON.stringify(layout, null, 2)}\n` },
    { path: `extensions/${LAYOUT_EXTENSION}/config.json`, text: `${JSON.stringify(config, null, 2)}\n` },
  ];
}

/** The OCFL object id of a package: bag ids are UUIDs (API.md), kept lower-case. */
export function objectIdOf(bagId: string): string {
  return `urn:uuid:${bagId.toLowerCase()}`;
}

/** The bag id an object id names, or undefined when it is not one of ours. */
export function bagIdOf(objectId: string): string | undefined {
  const m = /^urn:uuid:([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/.exec(objectId);
  return m?.[1];
}

/**
 * The last object folder asked for: a download, a copy or a repair asks for one object's
 * folder once for each of its files (2,000 sha256 digests and encodings per zip of a bag of
 * 2,000 files, before this).
 */
let last = { objectId: '', path: '' };

/** An object's folder relative to the storage root, by extension 0003 (`abc/def/012/urn%3auuid%3a…`). */
export function objectPathOf(objectId: string): string {
  if (last.objectId === objectId) return last.path;
  const digest = createHash('sha256').update(objectId, 'utf8').digest('hex');
  const tuples: string[] = [];
  for (let i = 0; i < NUMBER_OF_TUPLES; i++) tuples.push(digest.slice(i * TUPLE_SIZE, (i + 1) * TUPLE_SIZE));
  let encoded = percentEncode(objectId);
  if (encoded.length > MAX_ENCODED_ID) encoded = `${encoded.slice(0, MAX_ENCODED_ID)}-${digest}`;
  last = { objectId, path: [...tuples, encoded].join('/') };
  return last.path;
}

/** The folder of a package's object relative to the root. */
export function packageObjectPath(bagId: string): string {
  return objectPathOf(objectIdOf(bagId));
}

/** Every UTF-8 byte outside `[A-Za-z0-9_-]` as `%xx`, lower-case hex (extension 0003). */
function percentEncode(id: string): string {
  return id.replace(/[^A-Za-z0-9_-]/gu, (char) =>
    Array.from(Buffer.from(char, 'utf8'), (byte) => `%${byte.toString(16).padStart(2, '0')}`).join(''),
  );
}

/** `v1`, `v2`, ...: no zero padding. */
export function versionName(n: number): string {
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`bad version number ${n}`);
  return `v${n}`;
}

/** Where a file first stored in version `n` lives inside the object: `v<n>/content/<logical path>`. */
export function contentPathOf(version: number, logicalPath: string): string {
  return `${versionName(version)}/content/${logicalPath}`;
}
