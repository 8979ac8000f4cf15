/**
 * Deaccession with a replica on the real Ceph RGW: without Object Lock every version of every key
 * of the object goes; under Object Lock retention (GOVERNANCE, one day) the package is a tombstone
 * at once, the replica's copy is listed as retained until its date for admins (and by `preservd
 * deaccessions`), hidden behind delete markers so the bucket's current listing holds no object of
 * it, its versions kept; once the retention is over (shortened here by the bucket's owner, as
 * GOVERNANCE allows) the daemon removes them.
 */
import {
  ListObjectsV2Command,
  ListObjectVersionsCommand,
  PutObjectRetentionCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import t from 'tap';
import { packageObjectPath } from '../../src/ocfl/layout.js';
import { TOMBSTONES_RECORD } from '../../src/ocfl/record.js';
import { s3Test, startCeph } from '../helpers/ceph.js';
import { TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import {
  createBucket,
  s3Bytes,
  s3Client,
  s3Replica,
  waitForCopies,
} from '../replicas/fixtures/replica-world.js';

async function versionsUnder(s3: S3Client, bucket: string, prefix: string) {
  const page = await s3.send(new ListObjectVersionsCommand({ Bucket: bucket, Prefix: prefix }));
  return { versions: page.Versions ?? [], markers: page.DeleteMarkers ?? [] };
}

async function currentKeys(s3: S3Client, bucket: string, prefix: string): Promise<string[]> {
  const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
  return (page.Contents ?? []).map((c) => c.Key!);
}

/** Asks (as `second`) and approves (as the admin) a deaccession; the package's show after. */
async function deaccession(d: TestDaemon, second: string, bagId: string): Promise<void> {
  const asked = await d.request('POST', `/v1/packages/${bagId}/deaccession`, {
    token: second,
    json: { reason: 'a takedown' },
  });
  const approved = await d.request('POST', `${asked.headers.get('location')}/approve`, { json: {} });
  if (approved.status !== 200) throw new Error(`approve: ${approved.status} ${approved.text}`);
}

async function waitForShow(d: TestDaemon, bagId: string, until: (show: any) => boolean): Promise<any> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const show = (await d.request('GET', `/v1/packages/${bagId}`)).json;
    if (until(show)) return show;
    if (Date.now() > deadline) throw new Error(`${JSON.stringify(show)}\n${d.output.slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

s3Test(t, 'on Ceph', async (t) => {
  const ceph = await startCeph(t);
  const s3 = s3Client(ceph);
  t.teardown(() => s3.destroy());

  t.test(
    'without Object Lock: every key of the object goes, the tombstone stays in the bucket',
    async (t) => {
      await createBucket(s3, 'plain-deaccession');
      const d = await TestDaemon.start(t, {
        config: { replicas: [s3Replica(ceph, 'plain-deaccession')], storage: { recordDelayMs: 100 } },
      });
      const second = d.addUser('second', true);
      const bagId = (await ingestBag(d, d.adminToken, { 'a.txt': 'out\n' })).request.bag_id as string;
      await waitForCopies(d, bagId, 'verified');
      const prefix = `copies/${packageObjectPath(bagId)}/`;
      t.ok((await currentKeys(s3, 'plain-deaccession', prefix)).length > 0, 'the copy is there first');
      await deaccession(d, second, bagId);
      await waitForShow(d, bagId, (s) => s.replicas[0].status === 'removed');
      t.same(
        await versionsUnder(s3, 'plain-deaccession', prefix),
        { versions: [], markers: [] },
        'nothing left',
      );
      const tombstones = JSON.parse(
        (await s3Bytes(s3, 'plain-deaccession', `copies/${TOMBSTONES_RECORD}`)).toString(),
      );
      t.same(
        tombstones.tombstones.map((x: any) => x.package.bag_id),
        [bagId],
      );
    },
  );

  t.test(
    'under Object Lock: a tombstone at once, the copy retained until its date, removed after',
    async (t) => {
      const bucket = 'locked-deaccession';
      await createBucket(s3, bucket, true);
      const config = {
        replicas: [s3Replica(ceph, bucket, { retention: { mode: 'GOVERNANCE', days: 1 } })],
        storage: { recordDelayMs: 100 },
      };
      const d = await TestDaemon.start(t, { keepDataDir: true, config });
      const second = d.addUser('second', true);
      const bagId = (await ingestBag(d, d.adminToken, { 'a.txt': 'locked\n' })).request.bag_id as string;
      await waitForCopies(d, bagId, 'verified');
      const prefix = `copies/${packageObjectPath(bagId)}/`;
      await deaccession(d, second, bagId);

      const show = await waitForShow(d, bagId, (s) => s.replicas[0].status === 'retained');
      t.match(show, { deaccessioned: { reason: 'a takedown' }, files: [] }, 'a tombstone at once');
      const until = Date.parse(show.replicas[0].retained_until);
      t.ok(until > Date.now() + 23 * 3600_000, `retained until a day on: ${show.replicas[0].retained_until}`);
      t.equal((await d.request('GET', `/v1/packages/${bagId}/a.txt`)).status, 410);
      t.same(await currentKeys(s3, bucket, prefix), [], 'hidden: the current listing holds no key of it');
      const kept = await versionsUnder(s3, bucket, prefix);
      t.ok(kept.versions.length > 0, 'its versions are kept under retention');
      t.match(
        d.cli(['deaccessions']).stdout,
        new RegExp(`${bagId}\\s+approved.*ceph retained until \\d{4}-`),
      );

      // The owner ends the retention (GOVERNANCE lets them); the next look removes every version.
      const soon = new Date(Date.now() + 2000);
      for (const v of kept.versions)
        await s3.send(
          new PutObjectRetentionCommand({
            Bucket: bucket,
            Key: v.Key!,
            VersionId: v.VersionId!,
            BypassGovernanceRetention: true,
            Retention: { Mode: 'GOVERNANCE', RetainUntilDate: soon },
          }),
        );
      await new Promise((r) => setTimeout(r, 2500));
      t.equal(await d.stop(), 0);
      const after = await TestDaemon.start(t, { dataDir: d.dataDir, config });
      await waitForShow(after, bagId, (s) => s.replicas[0].status === 'removed');
      t.same(await versionsUnder(s3, bucket, prefix), { versions: [], markers: [] }, 'every version gone');
      t.match(after.cli(['deaccessions']).stdout, new RegExp(`${bagId}\\s+approved.*\\bremoved\\b`));
    },
  );
});
