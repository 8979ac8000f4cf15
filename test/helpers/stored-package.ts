/**
 * Test fixture: a stored package as ingest leaves it, without running ingest. The bag is written
 * by `makeBag` (a valid BagIt 1.0 bag) into staging/, recorded in the catalog (packages.create,
 * files.put: every file, tag files too: size, CRC-32 and a digest per manifest algorithm plus
 * sha256, computed here from the bytes on disk), made an OCFL object in the storage root by the
 * ingest's own code (storage/assembly.ts; the root prepared as the daemon does), then markStored.
 * The one way tests make a stored package without ingest (the download fixture builds on it).
 *
 *   const storage = new Storage(dataDir);
 *   const { bagId, dir, files } = await createStoredPackage(catalog, storage, { payload: { 'a.txt': 'hi\n' } });
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { crc32 } from 'node:zlib';
import type { Catalog } from '../../src/catalog/catalog.js';
import type { FileRecord, Package } from '../../src/catalog/types.js';
import type { Algorithm } from '../../src/fixity/index.js';
import { firstInventory } from '../../src/ocfl/inventory.js';
import { objectIdOf } from '../../src/ocfl/layout.js';
import { assembleObject, commitObject } from '../../src/storage/assembly.js';
import { prepareStorageRoot } from '../../src/storage/ocfl-root.js';
import { Storage } from '../../src/storage/storage.js';
import { makeBag } from './make-bag.js';
import { filesUnder } from './walk.js';

export interface StoredPackageSpec {
  bagId?: string;
  externalId?: string;
  user?: string;
  contentType?: string;
  /** Payload files, by path relative to `data/`. Default: two small files. */
  payload?: Record<string, string | Buffer>;
  /** Manifest algorithms; default md5 and sha256. sha256 is always recorded in the catalog. */
  algorithms?: Algorithm[];
  /**
   * Adds files to the written bag that are not to be read here (a sparse giant, a file the
   * manifests do not list) and returns their records, which are recorded as given (one without
   * a sha256 gets a made-up one in the inventory, which then does not vouch for it).
   */
  extra?: (dir: string) => Promise<FileRecord[]>;
}

export interface StoredPackage {
  pkg: Package;
  bagId: string;
  /** Absolute folder of the bag in storage: the object's `v1/content/`. */
  dir: string;
  storagePath: string;
  /** As recorded in the catalog, sorted by path. */
  files: FileRecord[];
  /** Total bytes of all files (tag files included), as the audit counts them. */
  bytes: number;
}

/** The record ingest would write for a file of the bag at `dir` (whole file read: test sizes only). */
export async function fileRecordOf(
  dir: string,
  path: string,
  algorithms: readonly Algorithm[] = ['sha256'],
): Promise<FileRecord> {
  const bytes = await readFile(Storage.resolveInside(dir, path));
  const digests: Partial<Record<Algorithm, string>> = {};
  for (const a of new Set<Algorithm>([...algorithms, 'sha256']))
    digests[a] = createHash(a).update(bytes).digest('hex');
  return { path, size: bytes.length, crc32: (crc32(bytes) >>> 0).toString(16).padStart(8, '0'), digests };
}

/** Writes a bag into storage and records it as a stored package. */
export async function createStoredPackage(
  catalog: Catalog,
  storage: Storage,
  spec: StoredPackageSpec = {},
): Promise<StoredPackage> {
  const bagId = (spec.bagId ?? randomUUID()).toLowerCase();
  const algorithms = spec.algorithms ?? ['md5', 'sha256'];
  const payload = spec.payload ?? {
    'hello.txt': `hello from ${bagId}\n`,
    'sub/notes.txt': randomBytes(64).toString('hex'),
  };
  await storage.layout.ensure();
  await prepareStorageRoot(storage.layout);
  const storagePath = Storage.storagePath(bagId);
  const staged = storage.stagingDir(bagId);
  await makeBag(staged, { files: payload, algorithms });
  const extra = spec.extra === undefined ? [] : await spec.extra(staged);
  const extraPaths = new Set(extra.map((r) => r.path));

  const files: FileRecord[] = [...extra];
  for (const path of filesUnder(staged))
    if (!extraPaths.has(path)) files.push(await fileRecordOf(staged, path, algorithms));

  const created = catalog.packages.create({
    bagId,
    externalId: spec.externalId ?? `ext-${bagId.slice(0, 8)}`,
    contentType: spec.contentType ?? 'digital',
    user: spec.user ?? 'alice',
    capability: randomBytes(16).toString('hex'),
  });
  if ('existing' in created) throw new Error(`package ${bagId} already exists`);
  catalog.files.put(bagId, files);
  const versionFiles = files.map((f) => ({
    path: f.path,
    digests: { ...f.digests, sha256: f.digests.sha256 ?? '0'.repeat(64) },
  }));
  const inventory = firstInventory(objectIdOf(bagId), versionFiles, {
    created: Date.now(),
    user: spec.user ?? 'alice',
    message: 'deposit',
  });
  await assembleObject(storage, bagId, inventory);
  await commitObject(storage, bagId);
  const pkg = catalog.packages.markStored(bagId, storagePath);
  return {
    pkg,
    bagId,
    dir: storage.firstContentDir(bagId),
    storagePath,
    files: catalog.files.list(bagId),
    bytes: files.reduce((n, f) => n + f.size, 0),
  };
}
