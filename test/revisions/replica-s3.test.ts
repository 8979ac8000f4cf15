/**
 * A revision reaches an S3 replica on the real Ceph RADOS Gateway, as test/revisions/replica.test.ts
 * shows for a folder: the bucket's object gains v2 with only its new content and its inventory,
 * its root inventory replaced by v2's, no other key of v1 written again; the copy is verified, an
 * audit finds it good, and the object under the bucket is a valid OCFL object by our validator,
 * read where it is. Under Object Lock retention the same, by new keys and new versions only: every
 * version the bucket held before is still there, untouched and locked, and every new one locked.
 */
import { GetObjectRetentionCommand, ListObjectVersionsCommand, type S3Client } from '@aws-sdk/client-s3';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { packageObjectPath } from '../../src/ocfl/layout.js';
import { validateObject } from '../../src/ocfl/validate/index.js';
import { s3Test, startCeph, type Ceph } from '../helpers/ceph.js';
import { TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { assertInvariants } from '../helpers/invariants.js';
import { revise } from '../helpers/revise.js';
import {
  createBucket,
  s3Bytes,
  s3Client,
  s3Replica,
  waitForCopies,
} from '../replicas/fixtures/replica-world.js';
import { s3OcflReader } from '../replicas/fixtures/s3-ocfl-reader.js';

/** Every version of every key under the prefix: key → its versions' ids and ETags, oldest last. */
async function keyVersions(s3: S3Client, bucket: string, prefix: string): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  let KeyMarker: string | undefined;
  let VersionIdMarker: string | undefined;
  do {
    const page = await s3.send(
      new ListObjectVersionsCommand({ Bucket: bucket, Prefix: prefix, KeyMarker, VersionIdMarker }),
    );
    for (const v of page.Versions ?? [])
      out.set(v.Key!.slice(prefix.length), [
        ...(out.get(v.Key!.slice(prefix.length)) ?? []),
        `${v.VersionId} ${v.ETag}`,
      ]);
    KeyMarker = page.IsTruncated === true ? page.NextKeyMarker : undefined;
    VersionIdMarker = page.IsTruncated === true ? page.NextVersionIdMarker : undefined;
  } while (KeyMarker !== undefined);
  return out;
}

/** The keys of the object's content and inventories (its `logs/`, the preservd record, aside). */
const ofObject = (versions: Map<string, string[]>) =>
  new Map([...versions].filter(([key]) => !key.startsWith('logs/')));

async function revisedOnS3(
  t: Test,
  ceph: Ceph,
  s3: S3Client,
  bucket: string,
  locked: boolean,
): Promise<void> {
  await createBucket(s3, bucket, locked);
  const retention = locked ? { retention: { mode: 'GOVERNANCE', days: 1 } } : {};
  const d = await TestDaemon.start(t, {
    config: { replicas: [s3Replica(ceph, bucket, retention)], storage: { recordDelayMs: 100 } },
  });
  const { request, bagDir } = await ingestBag(d, d.adminToken, {
    'a.txt': 'alpha\n',
    'b.txt': 'bravo\n',
    'big.bin': Buffer.alloc(300_000, 5),
  });
  const bagId = request.bag_id as string;
  await waitForCopies(d, bagId, 'verified');
  const prefix = `copies/${packageObjectPath(bagId)}/`;
  const before = ofObject(await keyVersions(s3, bucket, prefix));

  await revise(d, bagId, bagDir, 2, 'b corrected, c added, a withdrawn', (data) => {
    writeFileSync(join(data, 'b.txt'), 'BRAVO\n');
    writeFileSync(join(data, 'c.txt'), 'charlie\n');
    rmSync(join(data, 'a.txt'));
  });
  const deadline = Date.now() + 120_000;
  while (JSON.parse((await s3Bytes(s3, bucket, `${prefix}inventory.json`)).toString()).head !== 'v2') {
    if (Date.now() > deadline) throw new Error(`the bucket never got v2\n${d.output}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  await waitForCopies(d, bagId, 'verified');
  const after = ofObject(await keyVersions(s3, bucket, prefix));

  t.same(
    [...after.keys()].filter((k) => !before.has(k)).sort(),
    [
      'v2/content/bag-info.txt',
      'v2/content/data/b.txt',
      'v2/content/data/c.txt',
      'v2/content/manifest-md5.txt',
      'v2/content/manifest-sha256.txt',
      'v2/content/tagmanifest-md5.txt',
      'v2/content/tagmanifest-sha256.txt',
      'v2/inventory.json',
      'v2/inventory.json.sha256',
    ],
    'the new keys: only the new content and the version inventory',
  );
  const rewritten = [...before].filter(
    ([key, v]) => after.get(key)?.at(-1) !== v.at(-1) || after.get(key)!.length !== v.length,
  );
  t.same(
    rewritten.map(([key]) => key).sort(),
    ['inventory.json', 'inventory.json.sha256'],
    "of v1's keys only the root inventory and its sidecar written again",
  );
  if (locked)
    for (const [key, versions] of before)
      t.same(
        after.get(key)!.slice(-versions.length),
        versions,
        `${key}: every version held before still there, untouched`,
      );
  for (const key of ['inventory.json', 'v2/inventory.json'])
    t.ok(
      (await s3Bytes(s3, bucket, `${prefix}${key}`)).equals(
        await s3Bytes(s3, bucket, `${prefix}v2/inventory.json`),
      ),
      `${key} is v2's inventory`,
    );
  t.equal(
    (await s3Bytes(s3, bucket, `${prefix}v1/content/data/b.txt`)).toString(),
    'bravo\n',
    "v1's b.txt kept",
  );
  if (locked) {
    const soonest = Date.now() + 23 * 3600_000;
    for (const [key, versions] of after)
      for (const v of versions) {
        const lock = await s3.send(
          new GetObjectRetentionCommand({
            Bucket: bucket,
            Key: `${prefix}${key}`,
            VersionId: v.split(' ')[0],
          }),
        );
        t.ok(
          lock.Retention?.Mode === 'GOVERNANCE' && lock.Retention.RetainUntilDate!.getTime() > soonest,
          `${key} ${v.split(' ')[0]} is locked`,
        );
      }
  }

  const report = await validateObject(s3OcflReader(s3, bucket, prefix), '', { digests: true });
  t.same(
    report.problems.filter((p) => p.severity === 'error'),
    [],
    "the bucket's object is a valid OCFL object by our validator",
  );
  t.equal(report.valid, true);
  const audit = await d.waitForAudit((await d.request('POST', '/v1/audits')).json.id);
  t.same(audit.failures, [], "the audit finds every version's copy good");
  t.equal(await d.stop(), 0);
  await assertInvariants(t, d.dataDir, 'the invariants hold over v1 and v2');
}

s3Test(t, 'on Ceph', async (t) => {
  const ceph = await startCeph(t);
  const s3 = s3Client(ceph);
  t.teardown(() => s3.destroy());
  t.test('a revision is copied to an S3 replica: only the new content, the new inventories', (t) =>
    revisedOnS3(t, ceph, s3, 'revised', false),
  );
  t.test('under Object Lock: new keys and new versions only, every earlier version kept and locked', (t) =>
    revisedOnS3(t, ceph, s3, 'revised-locked', true),
  );
});
