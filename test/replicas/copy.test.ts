/**
 * copyPackage against a real folder replica when its lanes shrink mid-copy (an ingest starts):
 * the extra lanes leave, the last one finishes the work, and a copy is reported verified only
 * with every file written and read back. The code before this let every lane leave at once
 * (each still counted itself while its last read-back ran) and reported the copy verified with
 * files never written; seen under load in repair.test.ts as objects "missing" on Ceph.
 */
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import type { FileRecord } from '../../src/catalog/types.js';
import { firstInventory, inventoryBytes } from '../../src/ocfl/inventory.js';
import { objectIdOf } from '../../src/ocfl/layout.js';
import { copyPackage } from '../../src/replicas/copy.js';
import { contentKey, targetsFor, type ReplicaTarget } from '../../src/replicas/index.js';
import { DataLayout } from '../../src/storage/layout.js';
import { Storage } from '../../src/storage/storage.js';

const BAG_ID = '0f1e2d3c-4b5a-4968-8776-655443322110';

t.test(
  'lanes that shrink from four to one mid-copy: every file still written, read back and verified',
  async (t) => {
    const scratch = await mkdtemp(join(tmpdir(), 'preservd-copy-'));
    t.teardown(() => rm(scratch, { recursive: true, force: true }));
    // The primary's files where an object's v1 holds them (copyPackage finds them through Storage).
    const storage = new Storage(new DataLayout(join(scratch, 'data')));
    const primary = storage.firstContentDir(BAG_ID);
    const mirror = join(scratch, 'mirror');
    await mkdir(mirror);
    const files: FileRecord[] = [];
    for (let i = 0; i < 24; i++) {
      const path = `data/f${String(i).padStart(2, '0')}.txt`;
      const bytes = Buffer.from(`file ${i}\n`.repeat(i + 1));
      await mkdir(dirname(join(primary, path)), { recursive: true });
      await writeFile(join(primary, path), bytes);
      files.push({
        path,
        size: bytes.length,
        crc32: '00000000',
        digests: { sha256: createHash('sha256').update(bytes).digest('hex') },
      });
    }
    // The object's declaration and inventories beside its content, as ingest leaves them.
    const inventory = firstInventory(
      objectIdOf(BAG_ID),
      files.map((f) => ({ path: f.path, digests: { sha256: f.digests.sha256! } })),
      { created: Date.now(), user: 'alice', message: 'deposit' },
    );
    const { json, sidecar } = inventoryBytes(inventory);
    const object = storage.objectDir(BAG_ID);
    await writeFile(join(object, '0=ocfl_object_1.1'), 'ocfl_object_1.1\n');
    for (const folder of ['', 'v1/']) {
      await writeFile(join(object, `${folder}inventory.json`), json);
      await writeFile(join(object, `${folder}inventory.json.sha256`), sidecar);
    }
    const [dir] = await targetsFor([{ name: 'mirror', kind: 'dir', path: mirror }]);
    t.teardown(() => rm(`${mirror}.preservd-tmp`, { recursive: true, force: true }));
    // The real folder target, its read-backs slowed so that lanes decide while others still read.
    const slow: ReplicaTarget = Object.assign(Object.create(dir!) as ReplicaTarget, {
      readBack: async (...args: Parameters<ReplicaTarget['readBack']>) => {
        await sleep(30);
        return dir!.readBack(...args);
      },
    });

    let ingestBusy = false;
    const verified: string[] = [];
    const outcome = await copyPackage(slow, BAG_ID, storage, files, {
      skip: new Set(),
      replaceable: new Set(),
      lanes: () => (ingestBusy ? 1 : 4),
      signal: new AbortController().signal,
      onVerified: (path) => {
        verified.push(path);
        ingestBusy = true; // an ingest starts after the first file is verified
      },
    });

    t.same(outcome, {
      kind: 'verified',
      files: files.length,
      bytes: files.reduce((n, f) => n + f.size, 0),
      written: files.length + 5,
    });
    t.same(
      verified.slice(-5),
      [
        '0=ocfl_object_1.1',
        'v1/inventory.json',
        'v1/inventory.json.sha256',
        'inventory.json',
        'inventory.json.sha256',
      ],
      'the declaration and inventories once the content is verified, the root inventory last',
    );
    t.same(
      verified.slice(0, -5).sort(),
      files.map((f) => `v1/content/${f.path}`),
      'each file reported verified once, by its path in the object',
    );
    for (const file of files) {
      t.equal(
        (await readFile(join(mirror, contentKey(BAG_ID, file)))).length,
        file.size,
        `${file.path} is on the replica`,
      );
    }
  },
);
