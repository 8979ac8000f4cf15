/**
 * Audits of every copy and repair from a good one, with the real daemon, a real Ceph RADOS
 * Gateway and a folder: a corrupted object and a deleted one are found by the next audit, each
 * named with its replica, and repaired (audit.repair auto); a deleted primary file is served from
 * a replica and restored by POST /repair; a file with no good copy is reported and left alone;
 * a whole storage/ removed is rebuilt from the replica with every audit clean afterwards. The
 * first runs over both `http:` and `https:` (the gateway's TLS), the rebuild over `https:`.
 */
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { createHash, randomBytes } from 'node:crypto';
import { readFile, rm, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import t from 'tap';
import { packageObjectPath } from '../../src/ocfl/layout.js';
import { s3Test, startCeph } from '../helpers/ceph.js';
import { TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { filesUnder } from '../helpers/walk.js';
import {
  contentFolder,
  createBucket,
  eventsOf,
  overTls,
  replicaFolder,
  replicaStates,
  s3Bytes,
  s3Client,
  s3Replica,
  waitForCopies,
} from './fixtures/replica-world.js';

/** Runs an audit to its end; its failures' details, by bag_id. */
async function audit(d: TestDaemon): Promise<Map<string, string>> {
  const started = await d.request('POST', '/v1/audits');
  const id = started.headers.get('location')!.split('/').pop();
  for (;;) {
    const res = await d.request('GET', `/v1/audits/${id}`);
    if (res.json.successes.length + res.json.failures.length === res.json.packages) {
      return new Map(
        (res.json.failures as Array<{ bag_id: string; detail: string }>).map((f) => [f.bag_id, f.detail]),
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function waitForEvents(
  d: TestDaemon,
  bagId: string,
  type: string,
  count: number,
): Promise<Array<{ outcome: string; detail: string | null }>> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const events = await eventsOf(d, bagId, type);
    if (events.length >= count) return events;
    if (Date.now() > deadline)
      throw new Error(
        `${count} ${type} events of ${bagId} not there: ${JSON.stringify(events)}\n${d.output.slice(-2000)}`,
      );
    await new Promise((r) => setTimeout(r, 100));
  }
}

t.test(
  'dir replica: a deleted primary file is served from the replica, restored by POST /repair, and audits are clean',
  async (t) => {
    const mirror = replicaFolder(t);
    const d = await TestDaemon.start(t, {
      config: { replicas: [{ name: 'mirror', kind: 'dir', path: mirror }] },
    });
    const content = randomBytes(200_000);
    const { request } = await ingestBag(d, d.adminToken, { 'a.bin': content, 'b.txt': 'bee\n' });
    const bagId = request.bag_id as string;
    await waitForCopies(d, bagId, 'verified');
    const primary = join(d.dataDir, 'storage', packageObjectPath(bagId), 'v1/content');
    await unlink(join(primary, 'data/a.bin'));

    const served = await fetch(`${d.url}/v1/packages/${bagId}/a.bin`, {
      headers: { authorization: `Bearer ${d.adminToken}` },
    });
    t.equal(served.status, 200);
    t.ok(Buffer.from(await served.arrayBuffer()).equals(content), 'the bytes come from the replica');
    const ranged = await fetch(`${d.url}/v1/packages/${bagId}/a.bin`, {
      headers: { authorization: `Bearer ${d.adminToken}`, range: 'bytes=100-199' },
    });
    t.equal(ranged.status, 206);
    t.ok(Buffer.from(await ranged.arrayBuffer()).equals(content.subarray(100, 200)), 'a range too');

    t.same([...(await audit(d))], [[bagId, 'data/a.bin: missing']]);
    const repair = await d.request('POST', `/v1/packages/${bagId}/repair`);
    t.equal(repair.status, 202);
    t.equal(repair.headers.get('location'), `/v1/packages/${bagId}/events`);
    const recovered = await waitForEvents(d, bagId, 'recovery', 1);
    t.same(
      recovered.map((e) => [e.outcome, e.detail]),
      [['success', 'data/a.bin: restored on the primary copy from replica mirror']],
    );
    t.ok((await readFile(join(primary, 'data/a.bin'))).equals(content), 'the primary file is back');
    t.same([...(await audit(d))], [], 'the next audit is clean');

    const alice = d.addUser('alice');
    t.equal(
      (await d.request('POST', `/v1/packages/${bagId}/repair`, { token: alice })).status,
      403,
      'admins only',
    );
  },
);

s3Test(t, 'on Ceph', async (t) => {
  const ceph = await startCeph(t);
  const s3 = s3Client(ceph);
  t.teardown(() => s3.destroy());

  for (const scheme of ['http', 'https'] as const)
    t.test(
      `a corrupted S3 object (over ${scheme}:) and a deleted dir object: found by the next audit, named, repaired (audit.repair auto)`,
      async (t) => {
        const bucket = `damage-${scheme}`;
        await createBucket(s3, bucket);
        const mirror = replicaFolder(t);
        const d = await TestDaemon.start(t, {
          config: {
            replicas: [
              s3Replica(ceph, bucket, scheme === 'https' ? overTls(ceph) : {}),
              { name: 'mirror', kind: 'dir', path: mirror },
            ],
            audit: { repair: 'auto' },
          },
        });
        const { request } = await ingestBag(d, d.adminToken, { 'a.txt': 'alpha\n', 'b.txt': 'beta\n' });
        const bagId = request.bag_id as string;
        await waitForCopies(d, bagId, 'verified');
        const prefix = contentFolder(bagId);
        await s3.send(
          new PutObjectCommand({ Bucket: bucket, Key: `copies/${prefix}/data/a.txt`, Body: 'alphA\n' }),
        );
        await unlink(join(mirror, prefix, 'data/b.txt'));

        const failures = await audit(d);
        t.same([...failures.keys()], [bagId]);
        t.same(failures.get(bagId)!.split('\n'), [
          'replica ceph: data/a.txt: sha256 changed: expected ' +
            (await sha256Of(d, bagId, 'data/a.txt')) +
            ', found ' +
            sha256Hex('alphA\n'),
          'replica mirror: data/b.txt: missing',
        ]);
        const recovered = await waitForEvents(d, bagId, 'recovery', 2);
        t.same(recovered.map((e) => [e.outcome, e.detail]).sort(), [
          ['success', 'data/a.txt: restored on replica ceph from the primary copy'],
          ['success', 'data/b.txt: restored on replica mirror from the primary copy'],
        ]);
        t.equal((await s3Bytes(s3, bucket, `copies/${prefix}/data/a.txt`)).toString(), 'alpha\n');
        t.equal(await readFile(join(mirror, prefix, 'data/b.txt'), 'utf8'), 'beta\n');
        t.same(
          (await waitForCopies(d, bagId, 'verified', 30_000)).map((s) => [s.name, s.status]),
          [
            ['ceph', 'verified'],
            ['mirror', 'verified'],
          ],
          'both copies whole again',
        );
        t.same([...(await audit(d))], [], 'the next audit is clean');
      },
    );

  t.test('a file with no good copy anywhere is reported, never overwritten', async (t) => {
    await createBucket(s3, 'nogood');
    const d = await TestDaemon.start(t, { config: { replicas: [s3Replica(ceph, 'nogood')] } });
    const { request } = await ingestBag(d, d.adminToken, { 'a.txt': 'original\n' });
    const bagId = request.bag_id as string;
    await waitForCopies(d, bagId, 'verified');
    const prefix = contentFolder(bagId);
    const primaryFile = join(d.dataDir, 'storage', packageObjectPath(bagId), 'v1/content/data/a.txt');
    await writeFile(primaryFile, 'damaged1\n');
    await s3.send(
      new PutObjectCommand({ Bucket: 'nogood', Key: `copies/${prefix}/data/a.txt`, Body: 'damaged2\n' }),
    );
    const expected = await sha256Of(d, bagId, 'data/a.txt');
    t.same(
      [...(await audit(d))],
      [
        [
          bagId,
          `data/a.txt: sha256 changed: expected ${expected}, found ${sha256Hex('damaged1\n')}\nreplica ceph: data/a.txt: sha256 changed: expected ${expected}, found ${sha256Hex('damaged2\n')}`,
        ],
      ],
    );
    t.same(
      await replicaStates(d, bagId),
      [
        {
          name: 'ceph',
          status: 'failed',
          verified_at: (await replicaStates(d, bagId))[0]!.verified_at,
          error: `replica ceph: data/a.txt: sha256 changed: expected ${expected}, found ${sha256Hex('damaged2\n')}`,
        },
      ],
      'with repair off, the damaged copy stays failed',
    );
    t.equal((await d.request('POST', `/v1/packages/${bagId}/repair`)).status, 202);
    const recovered = await waitForEvents(d, bagId, 'recovery', 2);
    t.same(
      recovered.map((e) => [e.outcome, e.detail]),
      [
        [
          'failure',
          'data/a.txt: damaged or missing on the primary copy, and no copy matches the catalog; nothing was overwritten',
        ],
        [
          'failure',
          'data/a.txt: damaged or missing on replica ceph, and no copy matches the catalog; nothing was overwritten',
        ],
      ],
    );
    t.equal(await readFile(primaryFile, 'utf8'), 'damaged1\n');
    t.equal((await s3Bytes(s3, 'nogood', `copies/${prefix}/data/a.txt`)).toString(), 'damaged2\n');
  });

  t.test(
    'a whole storage/ removed is rebuilt from the replica (over https:); every audit clean afterwards',
    async (t) => {
      await createBucket(s3, 'rebuild');
      const d = await TestDaemon.start(t, {
        config: { replicas: [s3Replica(ceph, 'rebuild', overTls(ceph))], audit: { repair: 'auto' } },
      });
      const bags = [];
      for (let i = 0; i < 3; i++)
        bags.push(
          await ingestBag(d, d.adminToken, {
            [`f${i}.bin`]: randomBytes(50_000 + i),
            'sub/readme.txt': `bag ${i}\n`,
          }),
        );
      for (const bag of bags) await waitForCopies(d, bag.request.bag_id, 'verified');
      await rm(join(d.dataDir, 'storage'), { recursive: true });

      const failures = await audit(d);
      t.same(
        [...failures.values()],
        ['the package folder is missing', 'the package folder is missing', 'the package folder is missing'],
      );
      for (const bag of bags) {
        const bagId = bag.request.bag_id as string;
        const files = filesUnder(bag.bagDir, { regularOnly: true }).sort();
        // The bag's files, then the object's declaration and its four inventory files.
        const restoredFiles = files.length + OBJECT_FILES;
        const recovered = await waitForEvents(d, bagId, 'recovery', restoredFiles);
        t.same(
          recovered.map((e) => (e.outcome === 'success' ? 'success' : `${e.outcome}: ${e.detail}`)),
          Array.from({ length: restoredFiles }, () => 'success'),
          `${bagId}: one recovery event per file, the object's own files included`,
        );
        const restored = join(d.dataDir, 'storage', packageObjectPath(bagId), 'v1/content');
        t.same(filesUnder(restored, { regularOnly: true }).sort(), files);
        for (const path of files)
          t.ok(
            (await readFile(join(restored, path))).equals(await readFile(join(bag.bagDir, path))),
            `${path} restored byte for byte`,
          );
      }
      t.same([...(await audit(d))], [], 'the next audit is clean');
    },
  );
});

/** `0=ocfl_object_1.1`, `inventory.json` and `v1/inventory.json` with their sidecars. */
const OBJECT_FILES = 5;

async function sha256Of(d: TestDaemon, bagId: string, path: string): Promise<string> {
  const head = await fetch(`${d.url}/v1/packages/${bagId}/${path.slice('data/'.length)}`, {
    method: 'HEAD',
    headers: { authorization: `Bearer ${d.adminToken}` },
  });
  return head.headers.get('etag')!.replaceAll('"', '');
}

function sha256Hex(s: string): string {
  return createHash('sha256').update(s).digest('hex');
}
