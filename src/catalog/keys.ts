/**
 * The longest id or file path (UTF-8 bytes) the catalog can hold: its keys are LMDB keys, at
 * most 1,978 bytes with the bag_id beside the path. Ingest refuses longer paths (`path-too-long`).
 */
export const MAX_PATH_BYTES = 1900;

/**
 * Whether `s` fits in a key. LMDB refuses longer keys (and throws): a lookup by a longer string,
 * a hostile id in a URL, finds nothing rather than failing.
 */
export function fitsKey(s: string): boolean {
  return Buffer.byteLength(s, 'utf8') <= MAX_PATH_BYTES;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether an id is a UUID (a bag_id), rather than an external_id. */
export function isUuid(s: string): boolean {
  return UUID.test(s);
}
