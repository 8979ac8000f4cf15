/**
 * Deaccession with the real daemon, real rsync and a dir replica (API.md, "Deaccession"): who may
 * ask and who may decide (never the one who asked), the reason's bounds, 303 for a request
 * already waiting, 409 for a tombstone; an approval removes the package's object from the primary
 * and the replica, leaves both valid OCFL roots holding the tombstone, answers 410 for every
 * download, keeps the events plus a `deaccession` event, and audits stay clean (and fail on
 * content of it put back, which is then removed again); a rejection
 * changes nothing; `preservd deaccessions` lists them; a rebuild from the replica brings the
 * tombstone back.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { packageObjectPath } from '../../src/ocfl/layout.js';
import { TOMBSTONES_RECORD } from '../../src/ocfl/record.js';
import { fsReader, validateRoot } from '../../src/ocfl/validate/index.js';
import { TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { replicaFolder, waitForCopies } from '../replicas/fixtures/replica-world.js';

async function validRoot(t: Test, root: string, what: string): Promise<void> {
  const report = await validateRoot(fsReader(root));
  t.same(
    [...report.problems].filter((p) => p.code !== 'W004'),
    [],
    `${what} is a valid OCFL root`,
  );
}

/** Polls the package (as the admin) until its replicas all show `removed`. */
async function waitForRemoval(d: TestDaemon, bagId: string): Promise<any> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const res = await d.request('GET', `/v1/packages/${bagId}`);
    if ((res.json.replicas as Array<{ status: string }>).every((r) => r.status === 'removed'))
      return res.json;
    if (Date.now() > deadline) throw new Error(`not removed: ${res.text}\n${d.output.slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const tombstonesOf = (root: string): string[] =>
  (JSON.parse(readFileSync(join(root, TOMBSTONES_RECORD), 'utf8')).tombstones as any[]).map(
    (x) => x.package.bag_id,
  );

t.test('two people: asked with a reason, decided by a second admin; a tombstone everywhere', async (t) => {
  const mirror = replicaFolder(t);
  const d = await TestDaemon.start(t, {
    keepDataDir: true,
    config: { replicas: [{ name: 'mirror', kind: 'dir', path: mirror }], storage: { recordDelayMs: 100 } },
  });
  t.teardown(() => rmSync(d.dataDir, { recursive: true, force: true }));
  const second = d.addUser('second', true);
  const carol = d.addUser('carol');
  const victor = d.addUser('victor');
  const dave = d.addUser('dave');
  t.equal(d.cli(['grant', 'carol', 'content_manager', 'video']).code, 0);
  t.equal(d.cli(['grant', 'victor', 'viewer', 'video']).code, 0);
  const a = (await ingestBag(d, d.adminToken, { 'a.txt': 'gone soon\n' })).request.bag_id as string;
  const b = (await ingestBag(d, d.adminToken, { 'b.txt': 'stays\n' })).request.bag_id as string;
  await waitForCopies(d, a, 'verified');
  await waitForCopies(d, b, 'verified');
  const ask = (bagId: string, token: string, json: unknown) =>
    d.request('POST', `/v1/packages/${bagId}/deaccession`, { token, json });

  t.equal((await ask(a, dave, { reason: 'x' })).status, 403, 'one who may not see it: 403');
  const viewer = await ask(a, victor, { reason: 'x' });
  t.equal(viewer.status, 403, 'a viewer may not ask');
  t.match(viewer.json.error, /content_manager/);
  t.equal((await ask(a, carol, {})).status, 422, 'no reason: 422');
  t.equal((await ask(a, carol, { reason: '' })).status, 422, 'an empty reason: 422');
  const long = await ask(a, carol, { reason: 'é'.repeat(2049) });
  t.equal(long.status, 422, 'a reason over 4096 bytes: 422');
  t.same(Object.keys(long.json.fields), ['reason']);
  t.same((await d.request('GET', '/v1/deaccessions')).json, [], 'nothing was recorded by the refusals');

  const asked = await ask(a, carol, { reason: 'a rights claim' });
  t.equal(asked.status, 201);
  const where = asked.headers.get('location')!;
  t.match(where, /^\/v1\/deaccessions\/\d+$/);
  t.match(asked.json, {
    id: Number(where.split('/').pop()),
    bag_id: a,
    status: 'requested',
    reason: 'a rights claim',
    requested_by: 'carol',
    decided_by: null,
    decided_at: null,
  });
  t.same(Object.keys(asked.json).slice(0, 8), [
    'id',
    'bag_id',
    'status',
    'reason',
    'requested_by',
    'requested_at',
    'decided_by',
    'decided_at',
  ]);
  const again = await ask(a, d.adminToken, { reason: 'me too' });
  t.equal(again.status, 303, 'a request already waiting: 303');
  t.equal(again.headers.get('location'), where);
  t.same(
    ((await d.request('GET', '/v1/deaccessions', { token: victor })).json as any[]).map((x) => x.bag_id),
    [a],
    'a viewer of the type sees the request',
  );
  t.same((await d.request('GET', '/v1/deaccessions', { token: dave })).json, [], 'others do not');
  t.equal((await d.request('GET', where, { token: dave })).status, 403);
  t.equal((await d.request('GET', '/v1/deaccessions/999')).status, 404);

  const byCarol = await d.request('POST', `${where}/approve`, { token: carol, json: {} });
  t.equal(byCarol.status, 403, 'a content_manager may not decide');
  t.match(byCarol.json.error, /second admin/);

  // The admin who asks may not decide their own request.
  const askedB = await ask(b, d.adminToken, { reason: 'deposited in error' });
  const whereB = askedB.headers.get('location')!;
  const own = await d.request('POST', `${whereB}/approve`, { json: {} });
  t.equal(own.status, 403, 'the requester may not approve');
  t.match(own.json.error, /second admin/);
  t.equal((await d.request('POST', `${whereB}/reject`, { json: { reason: 'no' } })).status, 403);
  t.equal(
    (await d.request('POST', `${whereB}/reject`, { token: second, json: {} })).status,
    422,
    'a rejection needs a reason',
  );
  const rejected = await d.request('POST', `${whereB}/reject`, {
    token: second,
    json: { reason: 'keep it' },
  });
  t.equal(rejected.status, 200);
  t.match(rejected.json, { status: 'rejected', decided_by: 'second', decision_reason: 'keep it' });
  t.equal((await d.request('GET', `/v1/packages/${b}/b.txt`)).text, 'stays\n', 'a rejected package stays');

  const approved = await d.request('POST', `${where}/approve`, { json: { reason: 'claim upheld' } });
  t.equal(approved.status, 200, approved.text);
  t.match(approved.json, { status: 'approved', decided_by: 'admin', decision_reason: 'claim upheld' });
  t.equal((await d.request('POST', `${where}/approve`, { token: second })).status, 409, 'decided once');
  t.equal((await ask(a, carol, { reason: 'again' })).status, 409, 'a tombstone takes no new request');

  const shown = await waitForRemoval(d, a);
  t.match(shown, {
    bag_id: a,
    stored: true,
    deaccessioned: { reason: 'a rights claim', requested_by: 'carol', approved_by: 'admin' },
    files: [],
  });
  t.same(shown.replicas, [{ name: 'mirror', status: 'removed', verified_at: null }]);
  const listed = (await d.request('GET', '/v1/packages')).json as any[];
  t.ok(listed.find((p) => p.bag_id === a)?.deaccessioned, 'the tombstone is listed, with its deaccession');
  for (const path of [`/v1/packages/${a}/a.txt`, `/v1/packages/${a}/download`, `/v1/packages/${a}/nothing`])
    t.equal((await d.request('GET', path)).status, 410, `${path}: 410 Gone`);
  const events = (await d.request('GET', `/v1/packages/${a}/events`)).json as any[];
  t.match(
    events.map((e) => e.type),
    ['transfer', 'validation', 'ingestion', 'replication', 'deaccession'],
    'the events are kept, and a deaccession event added',
  );
  t.match(events.at(-1), { type: 'deaccession', executor: 'admin', outcome: 'success' });

  const storage = join(d.dataDir, 'storage');
  t.notOk(existsSync(join(storage, packageObjectPath(a))), 'the object is gone from the primary');
  t.notOk(existsSync(join(mirror, packageObjectPath(a))), 'and from the replica');
  t.ok(existsSync(join(storage, packageObjectPath(b))), 'the other package stays');
  t.same(tombstonesOf(storage), [a], 'the primary root holds the tombstone');
  t.same(tombstonesOf(mirror), [a], 'the replica root too');
  await validRoot(t, storage, 'the primary');
  await validRoot(t, mirror, 'the replica');

  const audit = d.cli(['audit', '--wait'], { PRESERVD_TOKEN: d.adminToken });
  t.equal(audit.code, 0, `the audit passes: the removed content is no damage ${audit.stdout}${audit.stderr}`);
  // Content put back where its removal was done is an audit failure, and is removed again.
  for (const root of [storage, mirror]) {
    mkdirSync(join(root, packageObjectPath(a), 'v1/content/data'), { recursive: true });
    writeFileSync(join(root, packageObjectPath(a), 'v1/content/data/a.txt'), 'gone soon\n');
  }
  const found = d.cli(['audit', '--wait'], { PRESERVD_TOKEN: d.adminToken });
  t.equal(found.code, 1, 'content left of a tombstone fails the audit');
  const failures = (await d.request('GET', `/v1/packages/${a}/events`)).json.filter(
    (e: any) => e.type === 'fixity check' && e.outcome === 'failure',
  );
  t.match(
    failures.at(-1)?.detail,
    /deaccessioned, but content of its object is still here[^]*replica mirror: the package was deaccessioned/,
  );
  await waitForRemoval(d, a);
  for (let i = 0; i < 100 && existsSync(join(storage, packageObjectPath(a))); i++)
    await new Promise((r) => setTimeout(r, 100));
  t.notOk(existsSync(join(storage, packageObjectPath(a))), 'removed again from the primary');
  t.notOk(existsSync(join(mirror, packageObjectPath(a))), 'and from the replica');
  t.equal(d.cli(['audit', '--wait'], { PRESERVD_TOKEN: d.adminToken }).code, 0, 'the next audit passes');

  const listing = d.cli(['deaccessions']);
  t.equal(listing.code, 0, listing.stderr);
  t.match(listing.stdout, new RegExp(`${a}\\s+approved\\s+carol\\s+admin`));
  t.match(listing.stdout, new RegExp(`${b}\\s+rejected\\s+admin\\s+second`));

  t.test('a rebuild from the replica brings the tombstone back', async (t) => {
    t.equal(await d.stop(), 0);
    rmSync(join(d.dataDir, 'catalog'), { recursive: true, force: true });
    // As from a new primary disk: the tombstones file only in the root rebuilt from.
    rmSync(join(storage, TOMBSTONES_RECORD));
    const rebuilt = d.cli(['rebuild', '--from', 'mirror']);
    t.equal(rebuilt.code, 0, `${rebuilt.stdout}${rebuilt.stderr}`);
    const after = await TestDaemon.start(t, {
      dataDir: d.dataDir,
      keepDataDir: true,
      config: { replicas: [{ name: 'mirror', kind: 'dir', path: mirror }] },
    });
    const token = after.cli(['token', 'issue', 'second']).stdout.trim().split('\n').at(-1)!;
    const back = await after.request('GET', `/v1/packages/${a}`, { token });
    t.match(back.json, {
      deaccessioned: {
        at: shown.deaccessioned.at,
        reason: 'a rights claim',
        requested_by: 'carol',
        approved_by: 'admin',
      },
      files: [],
    });
    t.same(
      ((await after.request('GET', `/v1/packages/${a}/events`, { token })).json as any[])
        .filter((e) => e.type !== 'fixity check')
        .map((e) => e.id),
      events.map((e) => e.id),
      'every event is back (of the fixity checks since, the latest and the failures, as for any package)',
    );
    t.equal((await after.request('GET', `/v1/packages/${a}/a.txt`, { token })).status, 410);
    t.match((await after.request('GET', where, { token })).json, { status: 'approved', decided_by: 'admin' });
    t.equal((await after.request('GET', `/v1/packages/${b}/b.txt`, { token })).text, 'stays\n');
    const deadline = Date.now() + 60_000;
    while (!existsSync(join(storage, TOMBSTONES_RECORD)) && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 100));
    t.same(
      tombstonesOf(storage),
      [a],
      "the primary's tombstones file written again from the rebuilt catalog",
    );
  });
});
