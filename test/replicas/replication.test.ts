/**
 * Replication end to end, with the real daemon, a real Ceph RADOS Gateway and a folder: a bag
 * ingested reaches `verified` on both with identical bytes at the documented keys and one
 * `replication` event each; radosgw killed during replication leaves the ingest DONE and the
 * copy `pending` until it comes back, then `verified` with no one asking; kill -9 of the daemon
 * in the middle of copying a large bag ends verified after a restart, with no duplicate event
 * and no multipart upload left behind; with Object Lock every object carries the retention and a
 * delete of a locked version is refused. The first runs over both `http:` and `https:` (the
 * gateway's TLS, its CA as the replica's `caFile`); Object Lock and the kill -9 over `https:`.
 */
import {
  DeleteObjectCommand,
  GetObjectRetentionCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  ListObjectVersionsCommand,
} from '@aws-sdk/client-s3';
import { randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import t from 'tap';
import { packageObjectPath } from '../../src/ocfl/layout.js';
import { REPOSITORY_RECORD } from '../../src/ocfl/record.js';
import { rootFiles } from '../../src/replicas/root.js';
import { s3Test, startCeph } from '../helpers/ceph.js';
import { TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { getPage, Jar, logIn } from '../helpers/session.js';
import { filesUnder } from '../helpers/walk.js';
import {
  contentFolder,
  createBucket,
  dirBytes,
  eventsOf,
  overTls,
  replicaFolder,
  replicaStates,
  s3Bytes,
  s3Client,
  OBJECT_FILES,
  s3Replica,
  waitForCopies,
} from './fixtures/replica-world.js';

t.test('a dir replica alone: verified, the same bytes at the documented paths, one event', async (t) => {
  const mirror = replicaFolder(t);
  const d = await TestDaemon.start(t, {
    config: { replicas: [{ name: 'mirror', kind: 'dir', path: mirror }] },
  });
  const { request, bagDir } = await ingestBag(d, d.adminToken, {
    'a.txt': 'first file\n',
    'sub/b.bin': randomBytes(70_000),
  });
  const bagId = request.bag_id as string;
  const states = await waitForCopies(d, bagId, 'verified');
  t.same(
    states.map((s) => [s.name, s.status]),
    [['mirror', 'verified']],
  );
  t.match(states[0]!.verified_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  const prefix = contentFolder(bagId);
  const bagFiles = filesUnder(bagDir, { regularOnly: true }).sort();
  t.same(
    filesUnder(join(mirror, packageObjectPath(bagId)), { regularOnly: true }).sort(),
    [...OBJECT_FILES, ...bagFiles.map((p) => `v1/content/${p}`)].sort(),
    'every file of the bag, tag files too, in the object with its inventories, and nothing else',
  );
  for (const path of bagFiles)
    t.ok(
      (await dirBytes(mirror, `${prefix}/${path}`)).equals(await readFile(join(bagDir, path))),
      `${path}: identical bytes`,
    );
  const events = await eventsOf(d, bagId, 'replication');
  t.same(
    events.map((e) => [e.outcome, e.executor]),
    [['success', 'preservd']],
  );
  t.match(
    events[0]!.detail,
    new RegExp(
      `^copied to replica mirror \\(dir, folder ${mirror}\\) and read back: ${bagFiles.length} files, \\d+ bytes, sizes and sha256 as in the catalog$`,
    ),
  );

  const bytes = bagFiles.reduce((n, p) => n + statSync(join(bagDir, p)).size, 0);
  const replicas = d.cli(['replicas']);
  t.same(
    [replicas.code, replicas.stdout],
    [
      0,
      `replica mirror (dir, ${mirror}): 1 of 1 packages verified (${(bytes / 1e3).toFixed(1)} kB), 0 pending, 0 failed\n`,
    ],
  );
  const status = d.cli(['status']);
  t.equal(status.code, 0);
  t.equal(
    status.stdout.split('\n').at(-2),
    replicas.stdout.trim(),
    'preservd status ends with the replica line',
  );
  const metrics = await (await fetch(`${d.url}/metrics`)).text();
  t.same(
    metrics
      .split('\n')
      .filter((l) => l.startsWith('preservd_replica_') && !l.startsWith('preservd_replica_bytes_copied')),
    [
      'preservd_replica_copies{replica="mirror",status="pending"} 0',
      'preservd_replica_copies{replica="mirror",status="verified"} 1',
      'preservd_replica_copies{replica="mirror",status="failed"} 0',
      `preservd_replica_verified_bytes{replica="mirror"} ${bytes}`,
      'preservd_replica_oldest_unverified_seconds{replica="mirror"} 0',
    ],
  );
  // Copied bytes count the object's declaration and inventories too.
  const objectBytes = OBJECT_FILES.reduce(
    (n, p) => n + statSync(join(mirror, packageObjectPath(bagId), p)).size,
    0,
  );
  t.match(metrics, `preservd_replica_bytes_copied_total{replica="mirror"} ${bytes + objectBytes}`);

  // The pages show the same to an admin: the copy on the package page, the counts on the overview.
  const jar = new Jar();
  t.equal((await logIn(d, jar, d.adminToken)).res.status, 303, 'logged in to the pages');
  const pkgPage = (await getPage(d, jar, `/packages/${bagId}`)).text;
  t.match(
    pkgPage,
    /<td>mirror<\/td>\s*<td class="replica-verified">verified<\/td>\s*<td><time datetime="\d{4}-/,
    'the package page shows the verified copy',
  );
  const overview = (await getPage(d, jar, '/')).text;
  t.match(
    overview,
    /<td>mirror<\/td>\s*<td class="number">1<\/td>\s*<td class="number">0<\/td>\s*<td class="number">0<\/td>/,
    'the overview counts it',
  );
});

t.test('a regular user sees no replicas; a missing replica folder stops the daemon at start', async (t) => {
  const mirror = replicaFolder(t);
  const d = await TestDaemon.start(t, {
    config: { replicas: [{ name: 'mirror', kind: 'dir', path: mirror }] },
  });
  const token = d.addUser('alice');
  const { request } = await ingestBag(d, token, { 'a.txt': 'x\n' });
  const seen = await d.request('GET', `/v1/packages/${request.bag_id}`, { token });
  t.equal(seen.json.replicas, undefined);
  t.same(Object.keys((await d.request('GET', `/v1/packages/${request.bag_id}`)).json).slice(0, 7), [
    'bag_id',
    'user',
    'content_type',
    'external_id',
    'upload_link',
    'storage_location',
    'replicas',
  ]);
  await d.stop();
  const gone = join(mirror, 'not-there');
  await t.rejects(
    TestDaemon.start(t, { config: { replicas: [{ name: 'mirror', kind: 'dir', path: gone }] } }),
    {
      message: new RegExp(
        `a replica cannot be used:\\n  replica mirror: folder ${gone} does not exist; create it \\(and mount the filesystem it is on\\) first`,
      ),
    },
  );
});

s3Test(t, 'on Ceph', async (t) => {
  const ceph = await startCeph(t);
  const s3 = s3Client(ceph);
  t.teardown(() => s3.destroy());

  for (const scheme of ['http', 'https'] as const)
    t.test(
      `an S3 (over ${scheme}:) and a dir replica: both verified, identical bytes at the documented keys`,
      async (t) => {
        const bucket = `both-${scheme}`;
        await createBucket(s3, bucket);
        const mirror = replicaFolder(t);
        const d = await TestDaemon.start(t, {
          config: {
            replicas: [
              s3Replica(ceph, bucket, scheme === 'https' ? overTls(ceph) : {}),
              { name: 'mirror', kind: 'dir', path: mirror },
            ],
          },
        });
        const { request, bagDir } = await ingestBag(d, d.adminToken, {
          'a.txt': 'hello\n',
          'deep/er/c.dat': randomBytes(300_000),
        });
        const bagId = request.bag_id as string;
        const states = await waitForCopies(d, bagId, 'verified');
        t.same(
          states.map((s) => s.name),
          ['ceph', 'mirror'],
        );
        const prefix = contentFolder(bagId);
        const bagFiles = filesUnder(bagDir, { regularOnly: true }).sort();
        const listed = await s3.send(
          new ListObjectsV2Command({ Bucket: bucket, Prefix: `copies/${packageObjectPath(bagId)}/` }),
        );
        t.same(
          (listed.Contents ?? []).map((o) => o.Key).sort(),
          [...OBJECT_FILES, ...bagFiles.map((p) => `v1/content/${p}`)]
            .map((p) => `copies/${packageObjectPath(bagId)}/${p}`)
            .sort(),
          'one object per file at copies/<object folder>/v1/content/<path>, beside the inventories',
        );
        for (const path of bagFiles) {
          const original = await readFile(join(bagDir, path));
          t.ok(
            (await s3Bytes(s3, bucket, `copies/${prefix}/${path}`)).equals(original),
            `s3 ${path}: identical bytes`,
          );
          t.ok(
            (await dirBytes(mirror, `${prefix}/${path}`)).equals(original),
            `dir ${path}: identical bytes`,
          );
        }
        t.same(
          (await eventsOf(d, bagId, 'replication')).map((e) => [e.outcome, e.detail!.split(' (')[0]]).sort(),
          [
            ['success', 'copied to replica ceph'],
            ['success', 'copied to replica mirror'],
          ],
        );
      },
    );

  t.test(
    'Object Lock (over https:): every object under retention, and a delete of a locked version refused',
    async (t) => {
      await createBucket(s3, 'locked', true);
      const d = await TestDaemon.start(t, {
        config: {
          replicas: [
            s3Replica(ceph, 'locked', { retention: { mode: 'COMPLIANCE', days: 2 }, ...overTls(ceph) }),
          ],
        },
      });
      const { request, bagDir } = await ingestBag(d, d.adminToken, {
        'a.txt': 'keep me\n',
        'b.bin': randomBytes(20 * 1024 * 1024),
      });
      const bagId = request.bag_id as string;
      await waitForCopies(d, bagId, 'verified');
      const versions =
        (await s3.send(new ListObjectVersionsCommand({ Bucket: 'locked', Prefix: 'copies/' }))).Versions ??
        [];
      // The preservd record (logs/, preservd-repository.json) follows the copy within seconds and is
      // rewritten as events come: locked like the rest (below), but not counted here.
      const copied = versions.filter(
        (v) => !/\/logs\//.test(v.Key!) && !v.Key!.endsWith(`/${REPOSITORY_RECORD}`),
      );
      t.equal(
        copied.length,
        filesUnder(bagDir, { regularOnly: true }).length + OBJECT_FILES.length + rootFiles().length,
        'one version per file, inventories and root files included',
      );
      const soonest = Date.now() + 47 * 3600_000;
      for (const v of versions) {
        const retention = await s3.send(
          new GetObjectRetentionCommand({ Bucket: 'locked', Key: v.Key!, VersionId: v.VersionId! }),
        );
        t.equal(retention.Retention?.Mode, 'COMPLIANCE', `${v.Key} is locked`);
        t.ok(retention.Retention!.RetainUntilDate!.getTime() > soonest, `${v.Key} is locked for two days`);
      }
      const victim = versions.find((v) => v.Key!.endsWith('/data/a.txt'))!;
      await t.rejects(
        s3.send(
          new DeleteObjectCommand({ Bucket: 'locked', Key: victim.Key!, VersionId: victim.VersionId! }),
        ),
        { name: 'AccessDenied' },
      );
      t.ok((await s3Bytes(s3, 'locked', victim.Key!)).equals(Buffer.from('keep me\n')), 'still there');
    },
  );

  t.test(
    'radosgw killed during replication: DONE anyway, pending, then verified when it is back',
    async (t) => {
      await createBucket(s3, 'outage');
      const d = await TestDaemon.start(t, { config: { replicas: [s3Replica(ceph, 'outage')] } });
      await ceph.stopGateway();
      let restarted = false;
      t.teardown(async () => {
        if (!restarted) await ceph.startGateway();
      });
      const { request, item } = await ingestBag(d, d.adminToken, { 'a.txt': 'while the gateway is down\n' });
      t.equal(item.status, 'DONE', 'the ingest does not wait for a replica');
      const bagId = request.bag_id as string;
      await new Promise((r) => setTimeout(r, 1500));
      t.same(
        (await replicaStates(d, bagId)).map((s) => [s.name, s.status, s.verified_at]),
        [['ceph', 'pending', null]],
      );
      t.match(d.output, /replica ceph unavailable/);
      const short = d.cli(['replicas']);
      t.equal(short.code, 1, 'preservd replicas exits 1 while a package lacks a verified copy');
      t.match(
        short.stdout,
        /^replica ceph \(s3, bucket outage at http:\/\/127\.0\.0\.1:\d+\): 0 of 1 packages verified \(0 B\), 1 pending, 0 failed; oldest not verified owed for \d+\.\d s\n$/,
      );
      const metrics = await (await fetch(`${d.url}/metrics`)).text();
      t.match(metrics, 'preservd_replica_copies{replica="ceph",status="pending"} 1');
      t.match(metrics, /preservd_replica_oldest_unverified_seconds\{replica="ceph"\} [1-9]/);
      await ceph.startGateway();
      restarted = true;
      await waitForCopies(d, bagId, 'verified', 120_000);
      t.same(
        (await eventsOf(d, bagId, 'replication')).map((e) => e.outcome),
        ['success'],
        'one event: the outage was no failure of the copy',
      );
      t.equal(d.cli(['replicas']).code, 0);
    },
  );

  t.test(
    'kill -9 in the middle of copying a large bag (over https:): verified after the restart, no duplicate event',
    async (t) => {
      await createBucket(s3, 'crash');
      const replicas = [s3Replica(ceph, 'crash', overTls(ceph))];
      const first = await TestDaemon.start(t, { config: { replicas }, keepDataDir: true });
      const payload: Record<string, Buffer> = {};
      // Larger than one PUT takes (64 MiB): multipart uploads of 5 parts, which a kill leaves unfinished.
      for (let i = 0; i < 2; i++) payload[`part-${i}.bin`] = randomBytes(72 * 1024 * 1024);
      const { request } = await ingestBag(first, first.adminToken, payload);
      const bagId = request.bag_id as string;
      // Kill in the middle of the copy: multipart uploads under way.
      const deadline = Date.now() + 120_000;
      for (;;) {
        const uploads = await s3.send(new ListMultipartUploadsCommand({ Bucket: 'crash' }));
        if ((uploads.Uploads ?? []).length > 0) break;
        if (Date.now() > deadline) throw new Error('the copy never got under way');
        await new Promise((r) => setTimeout(r, 20));
      }
      await first.kill9();
      t.equal(
        await replicaStates(first, bagId).catch(() => undefined),
        undefined,
        'the first daemon is gone',
      );
      const second = await TestDaemon.start(t, { dataDir: first.dataDir, config: { replicas } });
      t.same(
        (await waitForCopies(second, bagId, 'verified', 180_000)).map((s) => s.name),
        ['ceph'],
      );
      t.same(
        (await eventsOf(second, bagId, 'replication')).map((e) => e.outcome),
        ['success'],
        'exactly one replication event',
      );
      t.same(
        (await s3.send(new ListMultipartUploadsCommand({ Bucket: 'crash' }))).Uploads ?? [],
        [],
        'the upload cut short was aborted',
      );
      const objects = await s3.send(new ListObjectsV2Command({ Bucket: 'crash', Prefix: 'copies/' }));
      const prefix = contentFolder(bagId);
      for (const [name, bytes] of Object.entries(payload)) {
        const key = `copies/${prefix}/data/${name}`;
        t.equal(objects.Contents?.find((o) => o.Key === key)?.Size, bytes.length, `${name} is there, whole`);
      }
      t.ok(
        (await s3Bytes(s3, 'crash', `copies/${prefix}/data/part-1.bin`)).equals(payload['part-1.bin']!),
        'and its bytes are right',
      );
    },
  );
});
