/**
 * Storage roots in exactly the on-disk form of OCFL.md, written by the test rather than by the
 * ingest: the root's declaration and layout files, `preservd-repository.json`, and per package
 * an object (declaration, `firstInventory` + `inventoryBytes` at the top and in v1, the bag under
 * `v1/content/`) with its preservd record in `logs/`. Also the same bytes as a key → bytes map,
 * to put into an S3 bucket through a replica target.
 */
import { createHash, randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { crc32 } from 'node:zlib';
import { firstInventory, INVENTORY, INVENTORY_SIDECAR, inventoryBytes } from '../../src/ocfl/inventory.js';
import {
  layoutFiles,
  OBJECT_DECLARATION,
  objectIdOf,
  packageObjectPath,
  ROOT_DECLARATION,
} from '../../src/ocfl/layout.js';
import {
  EVENTS_RECORD,
  LOGS,
  PACKAGE_RECORD,
  recordBytes,
  REPOSITORY_RECORD,
  type EventsRecord,
  type PackageRecord,
  type RepositoryRecord,
} from '../../src/ocfl/record.js';

export interface TestPackage {
  bagId: string;
  externalId: string;
  contentType: string;
  owner: string;
  createdAt: number;
  /** Payload files, path under `data/` → content. */
  payload: Record<string, string | Buffer>;
  /** Events beyond the deposit's three (ids must grow across the whole root). */
  extraEvents?: EventsRecord['events'];
  queueItemId: number;
  firstEventId: number;
}

const iso = (ms: number) => new Date(ms).toISOString();
const hex = (algorithm: string, bytes: Buffer) => createHash(algorithm).update(bytes).digest('hex');

/** The bag's files (bagit.txt, sha256 and md5 manifests, payload) as path → bytes. */
export function bagFiles(payload: Record<string, string | Buffer>): Map<string, Buffer> {
  const files = new Map<string, Buffer>();
  files.set('bagit.txt', Buffer.from('BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n'));
  const data = Object.entries(payload).map(([p, c]) => [`data/${p}`, Buffer.from(c)] as const);
  for (const algorithm of ['sha256', 'md5'])
    files.set(
      `manifest-${algorithm}.txt`,
      Buffer.from(data.map(([p, b]) => `${hex(algorithm, b)}  ${p}\n`).join('')),
    );
  for (const [p, b] of data) files.set(p, b);
  return files;
}

/** What the catalog should hold for a file of the bag (payload digests: sha256 and md5). */
export function expectedFile(path: string, bytes: Buffer) {
  return {
    path,
    size: bytes.length,
    crc32: (crc32(bytes) >>> 0).toString(16).padStart(8, '0'),
    digests: { sha256: hex('sha256', bytes), md5: hex('md5', bytes) },
  };
}

export function packageRecordFor(p: TestPackage): PackageRecord {
  return {
    format: 'preservd-package/1',
    bag_id: p.bagId,
    external_id: p.externalId,
    content_type: p.contentType,
    owner: p.owner,
    created_at: iso(p.createdAt),
    updated_at: iso(p.createdAt + 3000),
    versions: [
      {
        version: 1,
        queue_item: {
          id: p.queueItemId,
          user: p.owner,
          created_at: iso(p.createdAt + 1000),
          updated_at: iso(p.createdAt + 3001),
        },
        stored_at: iso(p.createdAt + 3000),
      },
    ],
  };
}

export function eventsRecordFor(p: TestPackage): EventsRecord {
  const e = (n: number, type: 'transfer' | 'validation' | 'ingestion', detail: string) => ({
    id: p.firstEventId + n,
    type,
    outcome: 'success' as const,
    executor: p.owner,
    detail,
    date: iso(p.createdAt + 500 + n * 1000 + 7),
  });
  return {
    format: 'preservd-events/1',
    bag_id: p.bagId,
    events: [
      e(0, 'transfer', 'rsync upload finished'),
      e(1, 'validation', 'valid BagIt bag'),
      e(2, 'ingestion', `stored at ${packageObjectPath(p.bagId)}`),
      ...(p.extraEvents ?? []),
    ],
  };
}

/** Every key of an object (relative to the root) with its bytes. */
export function objectKeys(p: TestPackage): Map<string, Buffer> {
  const files = bagFiles(p.payload);
  const versionFiles = [...files].map(([path, bytes]) => {
    const digests: { sha256: string; md5?: string } = { sha256: hex('sha256', bytes) };
    if (path.startsWith('data/')) digests.md5 = hex('md5', bytes);
    return { path, digests };
  });
  const inventory = firstInventory(objectIdOf(p.bagId), versionFiles, {
    created: p.createdAt + 3000,
    user: p.owner,
    message: 'deposit',
  });
  const { json, sidecar } = inventoryBytes(inventory);
  const dir = packageObjectPath(p.bagId);
  const out = new Map<string, Buffer>();
  out.set(`${dir}/${OBJECT_DECLARATION.name}`, Buffer.from(OBJECT_DECLARATION.text));
  for (const [path, bytes] of files) out.set(`${dir}/v1/content/${path}`, bytes);
  for (const at of [`${dir}/v1`, dir]) {
    out.set(`${at}/${INVENTORY}`, json);
    out.set(`${at}/${INVENTORY_SIDECAR}`, Buffer.from(sidecar));
  }
  out.set(`${dir}/${LOGS}/${PACKAGE_RECORD}`, recordBytes(packageRecordFor(p)));
  out.set(`${dir}/${LOGS}/${EVENTS_RECORD}`, recordBytes(eventsRecordFor(p)));
  return out;
}

/** The root's own files: declaration, layout, and the repository's record. */
function rootKeys(repository: RepositoryRecord): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  out.set(ROOT_DECLARATION.name, Buffer.from(ROOT_DECLARATION.text));
  for (const f of layoutFiles()) out.set(f.path, Buffer.from(f.text));
  out.set(REPOSITORY_RECORD, recordBytes(repository));
  return out;
}

export function writeKeys(root: string, keys: Map<string, Buffer>): void {
  for (const [key, bytes] of keys) {
    mkdirSync(dirname(join(root, key)), { recursive: true });
    writeFileSync(join(root, key), bytes);
  }
}

/** A repository of `count` packages by two depositors, with users and grants, as a map of keys. */
export function testRepository(count: number): {
  repository: RepositoryRecord;
  packages: TestPackage[];
  keys: Map<string, Buffer>;
} {
  const base = Date.parse('2024-03-01T10:00:00.000Z');
  const repository: RepositoryRecord = {
    format: 'preservd-repository/1',
    repository: randomUUID(),
    users: [
      { name: 'admin', admin: true, created_at: iso(base - 100_000) },
      { name: 'alice', admin: false, created_at: iso(base - 90_000) },
      { name: 'bob', admin: false, created_at: iso(base - 80_000) },
    ],
    grants: [{ user: 'bob', role: 'viewer', scope: 'audio', created_at: iso(base - 70_000) }],
    content_types: ['audio', 'video'],
  };
  const packages: TestPackage[] = [];
  for (let i = 0; i < count; i++)
    packages.push({
      bagId: randomUUID(),
      externalId: `ext-${i}`,
      contentType: i % 2 === 0 ? 'audio' : 'video',
      owner: i % 3 === 0 ? 'bob' : 'alice',
      // Not in the order of the layout's hashes: the rebuild must put them back in this order.
      createdAt: base + i * 10_000,
      payload: { [`file-${i}.txt`]: `content of package ${i}\n`, 'sub/two.bin': Buffer.alloc(1000 + i, i) },
      queueItemId: i + 1,
      firstEventId: 10 * i + 1,
    });
  const keys = rootKeys(repository);
  for (const p of packages) for (const [k, v] of objectKeys(p)) keys.set(k, v);
  return { repository, packages, keys };
}
