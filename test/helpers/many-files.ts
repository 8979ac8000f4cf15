/**
 * Test fixture for the memory tests of the zip and the audit: a stored package of many tiny
 * files, written straight into storage as an object's `v1/content/` (1,000 to a folder) and recorded in a catalog of its own,
 * which is closed again so a child process can open it and measure only its own walk.
 */
import { createHash, randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { Catalog } from '../../src/catalog/catalog.js';
import type { FileRecord } from '../../src/catalog/types.js';
import { DataLayout } from '../../src/storage/layout.js';
import { Storage } from '../../src/storage/storage.js';

/** Writes `count` payload files and bagit.txt as a stored package under `dataDir`; returns its bag_id. */
export async function writeManyFilePackage(dataDir: string, count: number): Promise<string> {
  const bagId = randomUUID();
  const storagePath = Storage.storagePath(bagId);
  // The object's content only: the memory tests walk files, not inventories.
  const dir = new Storage(new DataLayout(dataDir)).firstContentDir(bagId);
  const files: FileRecord[] = [];
  const add = (path: string, content: string): void => {
    if (path.endsWith('/f0.txt') || !path.includes('/'))
      mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), content);
    const bytes = Buffer.from(content);
    files.push({
      path,
      size: bytes.length,
      crc32: (crc32(bytes) >>> 0).toString(16).padStart(8, '0'),
      digests: { sha256: createHash('sha256').update(bytes).digest('hex') },
    });
  };
  add('bagit.txt', 'BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n');
  for (let i = 0; i < count; i++) add(`data/d${Math.floor(i / 1000)}/f${i % 1000}.txt`, `${i}\n`);
  const catalog = Catalog.open(new DataLayout(dataDir));
  catalog.packages.create({
    bagId,
    externalId: `many-${count}`,
    contentType: 'digital',
    user: 'alice',
    capability: randomUUID(),
  });
  catalog.files.put(bagId, files);
  catalog.packages.markStored(bagId, storagePath);
  await catalog.close();
  return bagId;
}
