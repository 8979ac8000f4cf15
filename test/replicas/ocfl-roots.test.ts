/**
 * Every replica is an OCFL 1.1 storage root holding the same objects as the primary (STORAGE.md):
 * a bag ingested through the real daemon reaches `verified` on a folder and on a bucket of a real
 * Ceph RADOS Gateway, and each root then holds the root declaration and layout files, the object
 * with an inventory byte-identical to the primary's, and the content bytes of the primary; our
 * validator finds the folder a valid root (the bucket is listed and compared). A kill -9 in the
 * middle of a copy to a folder never leaves a root inventory whose content is not all there, and
 * the copy completes after a restart, the temporary files it left removed.
 */
import { GetObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import t, { type Test } from 'tap';
import { packageObjectPath } from '../../src/ocfl/layout.js';
import { REPOSITORY_RECORD } from '../../src/ocfl/record.js';
import { fsReader, validateRoot } from '../../src/ocfl/validate/index.js';
import { rootFiles } from '../../src/replicas/root.js';
import { s3Test, startCeph } from '../helpers/ceph.js';
import { TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { filesUnder } from '../helpers/walk.js';
import {
  createBucket,
  OBJECT_FILES,
  replicaFolder,
  s3Client,
  s3Replica,
  waitForCopies,
} from './fixtures/replica-world.js';

/** The folder replica is a valid OCFL root: no error, and no warning but W004 (sha256). */
async function validRoot(t: Test, root: string, what: string): Promise<void> {
  const report = await validateRoot(fsReader(root));
  const problems = [...report.problems].filter((p) => p.code !== 'W004');
  t.same(problems, [], `${what}: our validator finds a valid OCFL root`);
}

/** Not a file of the preservd record (replicas/record-copies.ts), which may or may not be there yet. */
const notRecord = (path: string): boolean => path !== REPOSITORY_RECORD && !/\/logs\//.test(path);

s3Test(t, 'on Ceph', async (t) => {
  const ceph = await startCeph(t);
  const s3 = s3Client(ceph);
  t.teardown(() => s3.destroy());

  t.test('a dir and an S3 replica are OCFL roots holding the primary object', async (t) => {
    await createBucket(s3, 'roots');
    const mirror = replicaFolder(t);
    const d = await TestDaemon.start(t, {
      config: { replicas: [s3Replica(ceph, 'roots'), { name: 'mirror', kind: 'dir', path: mirror }] },
    });
    const { request, bagDir } = await ingestBag(d, d.adminToken, {
      'a.txt': 'hello\n',
      'deep/er/c.dat': randomBytes(300_000),
    });
    const bagId = request.bag_id as string;
    await waitForCopies(d, bagId, 'verified');
    const object = packageObjectPath(bagId);
    const primary = join(d.dataDir, 'storage', object);
    const inObject = [
      ...OBJECT_FILES,
      ...filesUnder(bagDir, { regularOnly: true }).map((p) => `v1/content/${p}`),
    ].sort();

    // The folder: root files, the object, nothing else (but the preservd record, which follows the
    // copy within recordDelayMs); the scratch folder beside it empty.
    t.same(
      filesUnder(mirror, { regularOnly: true }).filter(notRecord).sort(),
      [...rootFiles().map((f) => f.path), ...inObject.map((p) => `${object}/${p}`)].sort(),
      'dir: the root files and the object, nothing else under the root',
    );
    for (const { path, text } of rootFiles())
      t.equal(await readFile(join(mirror, path), 'utf8'), text, `dir: ${path} as the primary's`);
    for (const path of inObject)
      t.ok(
        (await readFile(join(mirror, object, path))).equals(await readFile(join(primary, path))),
        `dir: ${path} identical to the primary's`,
      );
    t.same(readdirSync(`${mirror}.preservd-tmp`), [], 'no temporary file left beside it');
    await validRoot(t, mirror, 'dir');

    // The bucket, under the replica's prefix: the same keys, the same bytes.
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: 'roots' }));
    t.same(
      (listed.Contents ?? [])
        .map((o) => o.Key!)
        .filter((k) => notRecord(k.replace(/^copies\//, '')))
        .sort(),
      [...rootFiles().map((f) => f.path), ...inObject.map((p) => `${object}/${p}`)]
        .map((k) => `copies/${k}`)
        .sort(),
      's3: the root files and the object under the prefix, nothing else',
    );
    const s3Bytes = async (key: string) =>
      Buffer.from(
        await (
          await s3.send(new GetObjectCommand({ Bucket: 'roots', Key: key }))
        ).Body!.transformToByteArray(),
      );
    for (const { path, text } of rootFiles())
      t.equal((await s3Bytes(`copies/${path}`)).toString('utf8'), text, `s3: ${path} as the primary's`);
    for (const path of inObject)
      t.ok(
        (await s3Bytes(`copies/${object}/${path}`)).equals(await readFile(join(primary, path))),
        `s3: ${path} identical to the primary's`,
      );
  });
});

t.test(
  'kill -9 during a copy to a folder: no root inventory without its content; the copy completes',
  async (t) => {
    const payload: Record<string, Buffer> = {};
    for (let i = 0; i < 8; i++) payload[`part-${i}.bin`] = randomBytes((20 + i) * 1024 * 1024);
    // Stored first with no replica; the replica configured at the next start is owed the copy at once.
    const first = await TestDaemon.start(t, { keepDataDir: true });
    const { request } = await ingestBag(first, first.adminToken, payload);
    const bagId = request.bag_id as string;
    await first.stop();

    const mirror = replicaFolder(t);
    const replicas = [{ name: 'mirror', kind: 'dir', path: mirror }];
    const object = join(mirror, packageObjectPath(bagId));
    const content = (name: string) => join(object, 'v1/content/data', name);
    /** A root inventory is there only when every content file is there, whole. */
    const inventoryWithoutContent = (): string[] =>
      existsSync(join(object, 'inventory.json'))
        ? Object.entries(payload)
            .filter(
              ([name, bytes]) => !existsSync(content(name)) || statSync(content(name)).size !== bytes.length,
            )
            .map(([name]) => name)
        : [];
    const second = await TestDaemon.start(t, {
      dataDir: first.dataDir,
      config: { replicas },
      keepDataDir: true,
    });
    const seen: string[] = [];
    const deadline = Date.now() + 120_000;
    for (;;) {
      seen.push(...inventoryWithoutContent());
      const landed = Object.keys(payload).filter((name) => existsSync(content(name)));
      if (landed.length > 0 && !existsSync(join(object, 'inventory.json'))) break;
      if (existsSync(join(object, 'inventory.json')))
        throw new Error('the copy finished before it could be cut short');
      if (Date.now() > deadline) throw new Error('the copy never got under way');
      await sleep(5);
    }
    await second.kill9();
    t.same(seen, [], 'while it ran, no root inventory was seen before all its content');
    t.notOk(existsSync(join(object, 'inventory.json')), 'cut short: the object has no root inventory yet');
    // Old temporary names sat beside their file, in the object's folders: none may be anywhere under the root.
    const objectPath = packageObjectPath(bagId);
    const whole = (p: string): boolean => {
      if (rootFiles().some((f) => f.path === p) || !notRecord(p)) return true;
      if (!p.startsWith(`${objectPath}/`)) return false;
      const inside = p.slice(objectPath.length + 1);
      return (
        OBJECT_FILES.includes(inside) || /^v1\/content\/(data\/part-[0-7]\.bin|[a-z0-9-]+\.txt)$/.test(inside)
      );
    };
    t.same(
      filesUnder(mirror, { regularOnly: true }).filter((p) => !whole(p)),
      [],
      'nothing under the root but its files and whole files of the object: temporary files are outside it',
    );

    const third = await TestDaemon.start(t, { dataDir: first.dataDir, config: { replicas } });
    t.same(
      (await waitForCopies(third, bagId, 'verified', 180_000)).map((s) => [s.name, s.status]),
      [['mirror', 'verified']],
    );
    t.same(inventoryWithoutContent(), [], 'after the restart the object is whole');
    const primary = join(first.dataDir, 'storage', packageObjectPath(bagId));
    for (const path of [...OBJECT_FILES, 'v1/content/data/part-7.bin'])
      t.ok(
        (await readFile(join(object, path))).equals(await readFile(join(primary, path))),
        `${path} identical to the primary's`,
      );
    t.same(readdirSync(`${mirror}.preservd-tmp`), [], 'the temporary files the kill left were removed');
    await validRoot(t, mirror, 'after the restart');
  },
);
