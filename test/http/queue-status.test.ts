/**
 * `GET /v1/queue/status`, chipmunk's status report (API.md): visible items by outcome, newest
 * first, times with milliseconds, `before`/`after` strictly, 400 on a time that is not RFC 3339.
 */
import t from 'tap';
import { TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

t.test('the status report', async (t) => {
  const d = await TestDaemon.start(t);
  const alice = d.addUser('alice');
  const bob = d.addUser('bob');

  const first = await ingestBag(d, alice, { 'a.txt': 'a\n' });
  const failed = await ingestBag(d, alice, { 'b.txt': 'b\n' }, { payloadOxum: '1.1', expect: 'FAILED' });
  const third = await ingestBag(d, alice, { 'c.txt': 'c\n' });
  const bobs = await ingestBag(d, bob, { 'd.txt': 'd\n' });

  const mine = await d.request('GET', '/v1/queue/status', { token: alice });
  t.equal(mine.status, 200);
  t.same(Object.keys(mine.json), ['done', 'pending', 'failed'], 'keys in chipmunk’s order');
  t.same(
    mine.json.done.map((i: any) => i.id),
    [third.item.id, first.item.id],
    'done, newest first; not bob’s',
  );
  t.same(mine.json.pending, []);
  t.same(
    mine.json.failed.map((i: any) => i.id),
    [failed.item.id],
  );
  const item = mine.json.done[0];
  t.same(Object.keys(item), ['id', 'status', 'request', 'package', 'created_at', 'updated_at']);
  t.same(item.package, {
    bag_id: third.request.bag_id,
    external_id: third.request.external_id,
    content_type: 'video',
  });
  t.equal(item.request, `/v1/requests/${third.request.bag_id}`);
  t.match(item.updated_at, ISO_MS);
  t.match(mine.json.failed[0].error, /Payload-Oxum/);

  const admin = await d.request('GET', '/v1/queue/status', { token: d.adminToken });
  t.same(
    admin.json.done.map((i: any) => i.id),
    [bobs.item.id, third.item.id, first.item.id],
    'an admin sees everyone’s',
  );

  // Strict bounds on updated_at.
  const at = third.item.updated_at as string;
  const before = await d.request('GET', `/v1/queue/status?before=${encodeURIComponent(at)}`, {
    token: alice,
  });
  t.same(
    before.json.done.map((i: any) => i.id),
    [first.item.id],
    'before is strict',
  );
  const after = await d.request('GET', `/v1/queue/status?after=${encodeURIComponent(at)}`, { token: alice });
  t.same(after.json.done, [], 'after is strict');
  const since = await d.request(
    'GET',
    `/v1/queue/status?after=${encodeURIComponent(first.item.updated_at)}`,
    { token: alice },
  );
  t.same(
    since.json.done.map((i: any) => i.id),
    [third.item.id],
  );
  t.same(
    since.json.failed.map((i: any) => i.id),
    [failed.item.id],
  );
  const day = await d.request('GET', '/v1/queue/status?before=2000-01-01', { token: alice });
  t.same([day.json.done, day.json.failed], [[], []], 'a date alone is midnight UTC');

  for (const bad of ['yesterday', '2026-13-01T00:00:00Z', '2026-11-25T10:00:00+0100', '1700000000']) {
    const r = await d.request('GET', `/v1/queue/status?before=${encodeURIComponent(bad)}`, { token: alice });
    t.equal(r.status, 400, `before=${bad} is refused`);
    t.match(r.json.error, /not an RFC 3339 time/);
  }
  t.equal((await d.request('GET', '/v1/queue/status', { token: null })).status, 401);
});
