/**
 * The files of a package's OCFL object that the catalog does not record: the object's declaration,
 * every version's inventory and sidecar, and the root inventory and its sidecar. A replica copy
 * sends them after the content, in the order that keeps every state a reader can see as valid as
 * the store allows (STORAGE.md): declaration, version inventories, then the root inventory and
 * its sidecar last. They are read whole from the primary object and checked before anything is
 * sent: the declaration's text, each inventory against its sidecar, the root inventory equal to
 * its head version's, and every file the catalog records in the manifest at its content path with
 * its sha256. A copy then writes and reads them back against these bytes' size and sha256.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { FileRecord } from '../catalog/types.js';
import { errorCode } from '../fs/errors.js';
import { INVENTORY, INVENTORY_SIDECAR } from '../ocfl/inventory.js';
import { OBJECT_DECLARATION } from '../ocfl/layout.js';
import type { Storage } from '../storage/storage.js';
import { contentPathOfFile } from './keys.js';

/** One such file: its path in the object, its bytes, and what a copy must read back. */
export interface ObjectFile {
  path: string;
  bytes: Buffer;
  size: number;
  sha256: string;
}

/** Why the primary's object files cannot be sent: the file and what is wrong with it. */
export interface ObjectFilesRefused {
  path: string;
  code: 'primary-unreadable' | 'primary-changed';
  detail: string;
}

const sha256Of = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

const fileOf = (path: string, bytes: Buffer): ObjectFile => ({
  path,
  bytes,
  size: bytes.length,
  sha256: sha256Of(bytes),
});

/** A version folder's name: `v1`, `v2`, ... (no padding, as preservd writes them). */
const VERSION = /^v[1-9][0-9]*$/;

/**
 * The object's files besides content, in the order a copy writes them, or why they cannot be
 * sent (read from the primary and checked as the header says).
 */
export async function objectFilesOf(
  storage: Storage,
  bagId: string,
  files: readonly FileRecord[],
): Promise<ObjectFile[] | ObjectFilesRefused> {
  const dir = storage.objectDir(bagId);
  return objectFilesFrom((path) => readFile(join(dir, path)), files);
}

/**
 * The same, read through `readBytes` (a path in the object to its bytes; throws when it cannot):
 * restoring a primary object from a replica reads them from the replica and checks them alike.
 */
export async function objectFilesFrom(
  readBytes: (path: string) => Promise<Buffer>,
  files: readonly FileRecord[],
): Promise<ObjectFile[] | ObjectFilesRefused> {
  const read = async (path: string): Promise<Buffer | ObjectFilesRefused> =>
    readBytes(path).catch((err: unknown) => ({
      path,
      code: 'primary-unreadable' as const,
      detail: errorCode(err),
    }));
  const changed = (path: string, detail: string): ObjectFilesRefused => ({
    path,
    code: 'primary-changed',
    detail,
  });

  const declaration = await read(OBJECT_DECLARATION.name);
  if (!Buffer.isBuffer(declaration)) return declaration;
  if (declaration.toString('utf8') !== OBJECT_DECLARATION.text)
    return changed(OBJECT_DECLARATION.name, `it does not read "${OBJECT_DECLARATION.text.trim()}"`);

  /** An inventory and its sidecar, the sidecar's digest checked against the inventory's bytes. */
  const inventoryAt = async (folder: string): Promise<[ObjectFile, ObjectFile] | ObjectFilesRefused> => {
    const at = (name: string) => (folder === '' ? name : `${folder}/${name}`);
    const json = await read(at(INVENTORY));
    if (!Buffer.isBuffer(json)) return json;
    const sidecar = await read(at(INVENTORY_SIDECAR));
    if (!Buffer.isBuffer(sidecar)) return sidecar;
    const digest = sha256Of(json);
    if (sidecar.toString('utf8').trim().split(/\s+/)[0] !== digest)
      return changed(at(INVENTORY), `its sha256 ${digest} is not the one its sidecar names`);
    return [fileOf(at(INVENTORY), json), fileOf(at(INVENTORY_SIDECAR), sidecar)];
  };

  const root = await inventoryAt('');
  if (!Array.isArray(root)) return root;
  let inventory: { head?: unknown; manifest?: Record<string, string[]>; versions?: Record<string, unknown> };
  try {
    inventory = JSON.parse(root[0].bytes.toString('utf8')) as typeof inventory;
  } catch (err) {
    return changed(INVENTORY, `it is not JSON (${(err as Error).message})`);
  }
  const versions = Object.keys(inventory.versions ?? {});
  if (
    typeof inventory.head !== 'string' ||
    !versions.includes(inventory.head) ||
    !versions.every((v) => VERSION.test(v))
  )
    return changed(INVENTORY, 'its head or versions are not what preservd writes');
  const manifest = inventory.manifest ?? {};
  for (const file of files) {
    const contentPath = contentPathOfFile(file);
    const sha256 = file.digests.sha256;
    if (sha256 === undefined || !(manifest[sha256] ?? []).includes(contentPath))
      return changed(INVENTORY, `its manifest does not list ${contentPath} with the catalog's sha256`);
  }

  const out: ObjectFile[] = [fileOf(OBJECT_DECLARATION.name, declaration)];
  for (const version of versions.sort((a, b) => Number(a.slice(1)) - Number(b.slice(1)))) {
    const own = await inventoryAt(version);
    if (!Array.isArray(own)) return own;
    if (version === inventory.head && !own[0].bytes.equals(root[0].bytes))
      return changed(`${version}/${INVENTORY}`, `it is not the same as the root ${INVENTORY}`);
    out.push(...own);
  }
  out.push(...root);
  return out;
}
