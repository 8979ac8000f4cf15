/**
 * The disaster (issue 25, "What it must show"): a repository with several users, grants, a failed
 * deposit then a fixed one, good deposits through the real rsync, an audit, copies on a dir replica
 * and on the S3 replica of a real Ceph RADOS Gateway. The whole data dir and the dir replica are
 * deleted; `preservd rebuild --from` the Ceph replica; the first start restores the primary from
 * it. Every package, file, digest, owner and event comes back (the API's answers before and after
 * compared; the documented differences: recovery and new replication events, and of the `fixity
 * check` events the latest), users and grants come back, old tokens do not, the primary is byte
 * for byte what it was, `preservd audit --wait` passes, downloads are identical, and the dir
 * replica is filled again. Without Ceph the same runs with the dir replica as the one rebuilt from.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { packageObjectPath } from '../../src/ocfl/layout.js';
import { s3Test, startCeph } from '../helpers/ceph.js';
import { rsyncUpload, TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { filesUnder } from '../helpers/walk.js';
import {
  createBucket,
  replicaFolder,
  s3Client,
  s3Replica,
  waitForCopies,
} from '../replicas/fixtures/replica-world.js';

interface Snapshot {
  packages: any[];
  events: Record<string, any[]>;
  digests: Record<string, string>;
  users: string;
  grants: string;
}

const sha256 = (b: Buffer | Uint8Array): string => createHash('sha256').update(b).digest('hex');

/** What the API and the CLI say about the repository, every payload file downloaded and hashed. */
async function snapshot(d: TestDaemon, bagIds: string[]): Promise<Snapshot> {
  const snap: Snapshot = {
    packages: [],
    events: {},
    digests: {},
    users: d.cli(['user', 'list']).stdout,
    grants: d.cli(['grants']).stdout,
  };
  for (const bagId of bagIds) {
    const pkg = await d.request('GET', `/v1/packages/${bagId}`);
    if (pkg.status !== 200) throw new Error(`GET package ${bagId}: ${pkg.status} ${pkg.text}`);
    snap.packages.push(pkg.json);
    snap.events[bagId] = (await d.request('GET', `/v1/packages/${bagId}/events`)).json as any[];
    for (const path of pkg.json.files as string[]) {
      const name = path.split('/').map(encodeURIComponent).join('/');
      const res = await fetch(`${d.url}/v1/packages/${bagId}/${name}`, {
        headers: { authorization: `Bearer ${d.adminToken}` },
      });
      if (res.status !== 200) throw new Error(`download ${bagId}/${name}: ${res.status}`);
      snap.digests[`${bagId}/${path}`] = sha256(new Uint8Array(await res.arrayBuffer()));
    }
  }
  return snap;
}

/** An event as it must come back. */
const eventKey = (e: any): string => JSON.stringify([e.type, e.outcome, e.executor, e.detail, e.date]);
/** Events a rebuild and the restore add, and the fixity checks of which only the latest is kept. */
const ADDED = new Set(['recovery', 'replication', 'fixity check']);

async function disaster(t: Test, replicas: Array<Record<string, unknown>>, from: string, mirror: string) {
  const d = await TestDaemon.start(t, {
    keepDataDir: true,
    config: { replicas, storage: { recordDelayMs: 100 } },
  });
  const alice = d.addUser('alice');
  const bob = d.addUser('bob');
  d.addUser('carol', true);
  for (const g of [
    ['alice', 'content_manager', 'video'],
    ['bob', 'viewer', 'all'],
    ['alice', 'viewer', 'audio'],
  ])
    t.equal(d.cli(['grant', ...g]).code, 0, `grant ${g.join(' ')}`);

  const bagIds: string[] = [];
  // A failed deposit (a payload file changed after the manifest was written), then the fixed one.
  const failed = await ingestBag(
    d,
    alice,
    { 'a.txt': 'first try\n' },
    {
      expect: 'FAILED',
      beforeUpload: (dir) => writeFileSync(join(dir, 'data', 'a.txt'), 'not what the manifest says\n'),
    },
  );
  const fixedId = failed.request.bag_id as string;
  writeFileSync(join(failed.bagDir, 'data', 'a.txt'), 'first try\n');
  // A failure gives the request a new upload link (the old one is refused).
  const link = (await d.request('GET', `/v1/requests/${fixedId}`, { token: alice })).json
    .upload_link as string;
  t.equal(rsyncUpload(failed.bagDir, link).code, 0, 'the fixed bag uploaded');
  const again = await d.request('POST', `/v1/requests/${fixedId}/complete`, { token: alice });
  t.equal(again.status, 201);
  t.equal((await d.waitForQueueItem(again.json.id, alice)).status, 'DONE', 'the fixed deposit is stored');
  bagIds.push(fixedId);
  for (const [token, files] of [
    [alice, { 'one.txt': 'one\n', 'deep/two.bin': randomBytes(200_000) }],
    [bob, { 'b.txt': 'bob\n' }],
    [d.adminToken, { 'big.bin': randomBytes(3_000_000), 'n/ü.txt': 'unicode\n' }],
  ] as const) {
    const { request } = await ingestBag(d, token, files, {
      contentType: token === alice ? 'video' : 'audio',
    });
    bagIds.push(request.bag_id as string);
  }
  for (const bagId of bagIds) await waitForCopies(d, bagId, 'verified', 180_000);
  const audit = d.cli(['audit', '--wait'], { PRESERVD_TOKEN: d.adminToken });
  t.equal(audit.code, 0, `the audit before passes ${audit.stderr}`);
  const before = await snapshot(d, bagIds);
  const primaryBefore = new Map<string, Buffer>();
  const storage = join(d.dataDir, 'storage');
  for (const p of filesUnder(storage, { regularOnly: true }))
    if (!p.includes('/logs/')) primaryBefore.set(p, await readFile(join(storage, p)));
  const oldAdmin = d.adminToken;
  t.equal(await d.stop(), 0, 'stopped');

  rmSync(d.dataDir, { recursive: true, force: true });
  rmSync(mirror, { recursive: true, force: true });
  rmSync(`${mirror}.preservd-tmp`, { recursive: true, force: true });
  mkdirSync(mirror); // the lost disk replaced by an empty one
  const rebuiltAt = Date.now();
  const rebuilt = d.cli(['rebuild', '--from', from]);
  t.equal(rebuilt.code, 0, `rebuild --from ${from}: ${rebuilt.stdout}${rebuilt.stderr}`);

  const after = await TestDaemon.start(t, {
    dataDir: d.dataDir,
    config: { replicas, storage: { recordDelayMs: 100 } },
  });
  const issued = after.cli(['token', 'issue', 'admin']);
  t.equal(issued.code, 0, 'a new admin token');
  // Where `preservd audit` and the test's requests find the admin's token.
  writeFileSync(join(after.dataDir, 'admin.token'), `${issued.stdout.trim().split('\n').at(-1)!}\n`, {
    mode: 0o600,
  });
  for (const old of [oldAdmin, alice, bob])
    t.equal(
      (await after.request('GET', '/v1/packages', { token: old })).status,
      401,
      'an old token does not work',
    );
  for (const bagId of bagIds) await waitForCopies(after, bagId, 'verified', 180_000);
  const now = await snapshot(after, bagIds);
  // A copy counts as verified again only once it was read back after the rebuild.
  const unverified = (packages: any[]) =>
    packages.map((p) => ({ ...p, replicas: p.replicas.map((r: any) => ({ ...r, verified_at: undefined })) }));
  t.same(unverified(now.packages), unverified(before.packages), 'every package, file and owner as before');
  t.ok(
    now.packages.every((p) => p.replicas.every((r: any) => Date.parse(r.verified_at) >= rebuiltAt)),
    'every copy verified again after the rebuild',
  );
  t.same(now.digests, before.digests, 'every download byte-identical');
  t.equal(now.grants, before.grants, 'the grants as before');
  const withoutTokens = (list: string) => list.replace(/^([^\t]+\t[^\t]+)\t\d+\t/gm, '$1\t');
  t.equal(withoutTokens(now.users), withoutTokens(before.users), 'the users as before (their tokens aside)');
  t.match(now.users, /^alice\tno\t0\t/m, 'no token of theirs came back');
  for (const bagId of bagIds) {
    const kept = now.events[bagId]!.map(eventKey);
    t.same(
      before.events[bagId]!.filter((e) => e.type !== 'fixity check' && !kept.includes(eventKey(e))),
      [],
      `${bagId}: every event came back`,
    );
    t.same(
      now.events[bagId]!.filter(
        (e) => !ADDED.has(e.type) && !before.events[bagId]!.map(eventKey).includes(eventKey(e)),
      ),
      [],
      `${bagId}: no other event`,
    );
    t.ok(
      now.events[bagId]!.some((e) => e.type === 'recovery' && e.outcome === 'success'),
      `${bagId}: its restore is recorded as recovery events`,
    );
  }
  for (const [p, bytes] of primaryBefore)
    t.ok(
      (await readFile(join(storage, p)).catch(() => Buffer.alloc(0))).equals(bytes),
      `primary ${p} restored byte for byte`,
    );
  const audited = after.cli(['audit', '--wait'], { PRESERVD_TOKEN: after.adminToken });
  t.equal(audited.code, 0, `the audit after passes ${audited.stdout}${audited.stderr}`);
  for (const bagId of bagIds)
    t.ok(
      existsSync(join(mirror, packageObjectPath(bagId), 'inventory.json')),
      `the dir replica holds ${bagId} again`,
    );
}

s3Test(t, 'on Ceph', async (t) => {
  const ceph = await startCeph(t);
  const s3 = s3Client(ceph);
  t.teardown(() => s3.destroy());
  t.test('the data dir and the dir replica lost: rebuilt from Ceph', async (t) => {
    await createBucket(s3, 'disaster');
    const mirror = replicaFolder(t);
    await disaster(
      t,
      [s3Replica(ceph, 'disaster'), { name: 'mirror', kind: 'dir', path: mirror }],
      'ceph',
      mirror,
    );
  });
});

t.test('the data dir lost: rebuilt from a dir replica', async (t) => {
  const mirror = replicaFolder(t);
  const keep = replicaFolder(t);
  await disaster(
    t,
    [
      { name: 'keep', kind: 'dir', path: keep },
      { name: 'mirror', kind: 'dir', path: mirror },
    ],
    'keep',
    mirror,
  );
});
