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
import { copyPackage } from '../../src/replicas/copy.js';
import { objectKey, targetsFor, type ReplicaTarget } from '../../src/replicas/index.js';
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
    const [dir] = targetsFor([{ name: 'mirror', kind: 'dir', path: mirror }]);
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
      written: files.length,
    });
    t.same(
      verified.sort(),
      files.map((f) => f.path),
      'each file reported verified once',
    );
    for (const file of files) {
      t.equal(
        (await readFile(join(mirror, objectKey(BAG_ID, file.path)))).length,
        file.size,
        `${file.path} is on the replica`,
      );
    }
  },
);
