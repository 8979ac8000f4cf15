/**
 * An OCFL 1.1 inventory as preservd writes it (spec §3.5): sha256 content addressing, every other
 * digest a bag's manifests carry in `fixity`, one version per deposit or revision. Building and
 * writing only; reading an inventory someone else wrote is the validator's job, which trusts
 * nothing in it.
 */
import { createHash } from 'node:crypto';
import type { Algorithm } from '../fixity/index.js';
import { contentPathOf, INVENTORY_TYPE, versionName } from './layout.js';

/** digest → paths (content paths in `manifest` and `fixity`, logical paths in a version's `state`). */
type DigestMap = Record<string, string[]>;

interface InventoryVersion {
  /** RFC 3339 in UTC, to the second or finer. */
  created: string;
  state: DigestMap;
  message: string;
  user: { name: string; address: string };
}

export interface Inventory {
  id: string;
  type: typeof INVENTORY_TYPE;
  digestAlgorithm: 'sha256';
  head: string;
  manifest: DigestMap;
  versions: Record<string, InventoryVersion>;
  fixity?: Partial<Record<FixityAlgorithm, DigestMap>>;
}

/** One file of a bag as a version holds it: its path in the bag and its digests (sha256 always). */
export interface VersionFile {
  path: string;
  digests: Partial<Record<Algorithm, string>> & { sha256: string };
}

export interface VersionInfo {
  /** When the version was made (ms since the epoch). */
  created: number;
  /** The repository user who made it. */
  user: string;
  message: string;
}

/**
 * The digests OCFL 1.1 names for `fixity` besides the sha256 of the manifest (spec §3.5.3, and
 * none of the registered digest extensions names sha224 or sha384): a bag's sha224 and sha384
 * manifests stay in the bag itself, which is the object's content.
 */
type FixityAlgorithm = 'md5' | 'sha1' | 'sha512';

function isFixityAlgorithm(algorithm: Algorithm): algorithm is FixityAlgorithm {
  return algorithm === 'md5' || algorithm === 'sha1' || algorithm === 'sha512';
}

/** The URI naming a repository user in an inventory's `user.address`. */
function userAddress(name: string): string {
  return `urn:preservd:user:${encodeURIComponent(name)}`;
}

/**
 * The inventory of a new object whose only version, v1, is `files`, all of them stored under
 * `v1/content/` (two files with one digest are both stored and both listed: OCFL allows it).
 */
export function firstInventory(
  objectId: string,
  files: readonly VersionFile[],
  info: VersionInfo,
): Inventory {
  const manifest: DigestMap = {};
  const state: DigestMap = {};
  const fixity: Partial<Record<FixityAlgorithm, DigestMap>> = {};
  for (const file of files) {
    const contentPath = contentPathOf(1, file.path);
    (manifest[file.digests.sha256] ??= []).push(contentPath);
    (state[file.digests.sha256] ??= []).push(file.path);
    for (const [algorithm, digest] of Object.entries(file.digests) as Array<[Algorithm, string]>) {
      if (!isFixityAlgorithm(algorithm)) continue;
      ((fixity[algorithm] ??= {})[digest] ??= []).push(contentPath);
    }
  }
  const head = versionName(1);
  const inventory: Inventory = {
    id: objectId,
    type: INVENTORY_TYPE,
    digestAlgorithm: 'sha256',
    head,
    manifest,
    versions: {
      [head]: {
        created: new Date(info.created).toISOString(),
        state,
        message: info.message,
        user: { name: info.user, address: userAddress(info.user) },
      },
    },
  };
  if (Object.keys(fixity).length > 0) inventory.fixity = fixity;
  return inventory;
}

/**
 * The inventory of an object's next version `files` (a revision): a file whose sha256 the object
 * already holds is referenced, any other is new content of this version at its logical path (OCFL
 * forward-delta: only new bytes are stored). Returns it with the logical paths of the new content.
 */
export function nextInventory(
  previous: Inventory,
  files: readonly VersionFile[],
  info: VersionInfo,
): { inventory: Inventory; newContent: string[] } {
  const version = Number(previous.head.slice(1)) + 1;
  const manifest: DigestMap = structuredClone(previous.manifest);
  const fixity = structuredClone(previous.fixity ?? {});
  const state: DigestMap = {};
  const newContent: string[] = [];
  for (const file of files) {
    (state[file.digests.sha256] ??= []).push(file.path);
    if (previous.manifest[file.digests.sha256] !== undefined) continue;
    const contentPath = contentPathOf(version, file.path);
    (manifest[file.digests.sha256] ??= []).push(contentPath);
    newContent.push(file.path);
    for (const [algorithm, digest] of Object.entries(file.digests) as Array<[Algorithm, string]>) {
      if (isFixityAlgorithm(algorithm)) ((fixity[algorithm] ??= {})[digest] ??= []).push(contentPath);
    }
  }
  const head = versionName(version);
  const inventory: Inventory = {
    ...previous,
    head,
    manifest,
    versions: {
      ...previous.versions,
      [head]: {
        created: new Date(info.created).toISOString(),
        state,
        message: info.message,
        user: { name: info.user, address: userAddress(info.user) },
      },
    },
  };
  if (Object.keys(fixity).length > 0) inventory.fixity = fixity;
  return { inventory, newContent };
}

/** The inventory's bytes as written to `inventory.json`, and its sidecar `inventory.json.sha256`. */
export function inventoryBytes(inventory: Inventory): { json: Buffer; sidecar: string } {
  const json = Buffer.from(`${JSON.stringify(inventory, null, 1)}\n`, 'utf8');
  const digest = createHash('sha256').update(json).digest('hex');
  return { json, sidecar: `${digest} inventory.json\n` };
}

export const INVENTORY = 'inventory.json';
export const INVENTORY_SIDECAR = 'inventory.json.sha256';
