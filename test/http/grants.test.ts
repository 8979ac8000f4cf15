/**
 * Grants (API.md "Authentication and roles", CLI.md `preservd grant`): the command line refuses
 * bad grants and changes nothing; each role on one content type and on `all` opens exactly what
 * it should, through the real daemon; revoking closes it again; `auth.requireGrants` is
 * chipmunk's stricter rule for creating requests. The colleague case of chipmunk-client-real.md
 * D1/D14: a content manager of a type sees and completes a colleague's deposit.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { rsyncUpload, TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { makeBag } from '../helpers/make-bag.js';

t.test('the command line: grant, grants, revoke; bad grants refused and nothing changed', async (t) => {
  const d = await TestDaemon.start(t);
  d.addUser('alice');
  const grants = () => d.cli(['grants']).stdout;
  t.equal(grants(), 'user\trole\tscope\n', 'none at first');

  const bad = d.cli(['grant', 'nobody', 'boss', 'films']);
  t.equal(bad.code, 1);
  t.equal(
    bad.stderr,
    'preservd: grant refused, nothing changed: no user "nobody" (preservd user add nobody creates one); no role "boss": the roles are viewer, content_manager, admin; no content type "films": the scope is one of audio, bentleyaudio, video, digital, video_game, all\n',
  );
  t.equal(d.cli(['grant', 'alice', 'viewer', 'films']).code, 1, 'an unknown content type alone is refused');
  t.equal(d.cli(['grant', 'alice', 'owner', 'video']).code, 1, 'an unknown role alone is refused');
  t.equal(d.cli(['grant', 'bob', 'viewer', 'video']).code, 1, 'an unknown user alone is refused');
  t.equal(grants(), 'user\trole\tscope\n', 'nothing changed');
  t.equal(d.cli(['grant', 'alice', 'viewer']).code, 2, 'a missing argument is a usage error');
  t.equal(d.cli(['grants', 'alice', 'bob']).code, 2);

  const ok = d.cli(['grant', 'alice', 'viewer', 'video']);
  t.same([ok.code, ok.stdout], [0, 'granted viewer on video to alice\n']);
  t.same(
    d.cli(['grant', 'alice', 'viewer', 'video']).stdout,
    'alice already holds viewer on video; nothing changed\n',
  );
  t.equal(d.cli(['grant', 'alice', 'content_manager', 'all']).code, 0);
  t.equal(d.cli(['grant', 'admin', 'admin', 'audio']).code, 0);
  t.equal(
    grants(),
    'user\trole\tscope\nadmin\tadmin\taudio\nalice\tcontent_manager\tall\nalice\tviewer\tvideo\n',
  );
  t.equal(
    d.cli(['grants', 'alice']).stdout,
    'user\trole\tscope\nalice\tcontent_manager\tall\nalice\tviewer\tvideo\n',
  );
  t.equal(d.cli(['grants', 'nobody']).code, 1);

  const notHeld = d.cli(['revoke', 'alice', 'admin', 'video']);
  t.same([notHeld.code, notHeld.stderr], [1, 'preservd: alice holds no grant admin on video\n']);
  t.same(d.cli(['revoke', 'nobody', 'viewer', 'video']).stderr, 'preservd: no user "nobody"\n');
  const revoked = d.cli(['revoke', 'alice', 'viewer', 'video']);
  t.same([revoked.code, revoked.stdout], [0, 'revoked viewer on video from alice\n']);
  t.equal(d.cli(['grants', 'alice']).stdout, 'user\trole\tscope\nalice\tcontent_manager\tall\n');
});

t.test('each role on a content type and on all, through the API', async (t) => {
  const d = await TestDaemon.start(t);
  const alice = d.addUser('alice');
  const viewer = d.addUser('vera');
  const manager = d.addUser('carl');
  const typeAdmin = d.addUser('tess');
  const everything = d.addUser('walt');
  const allAdmin = d.addUser('ada');
  const grant = (user: string, role: string, scope: string) =>
    t.equal(d.cli(['grant', user, role, scope]).code, 0, `grant ${role} ${scope} to ${user}`);
  grant('vera', 'viewer', 'video');
  grant('carl', 'content_manager', 'video');
  grant('tess', 'admin', 'video');
  grant('walt', 'viewer', 'all');
  grant('ada', 'admin', 'all');

  // alice: a stored video package, an audio one, and a video request uploaded but not completed.
  const video = await ingestBag(d, alice, { 'a.txt': 'alice video\n' }, { contentType: 'video' });
  const audio = await ingestBag(d, alice, { 'b.txt': 'alice audio\n' }, { contentType: 'audio' });
  const openId = randomUUID();
  const open = await d.createRequest(alice, {
    bag_id: openId,
    external_id: 'colleague-barcode',
    content_type: 'video',
  });
  const scratch = mkdtempSync(join(tmpdir(), 'preservd-grants-'));
  t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
  const bagDir = join(scratch, 'bag');
  await makeBag(bagDir, {
    files: { 'c.txt': 'finished by a colleague\n' },
    chipmunkInfo: { externalId: 'colleague-barcode', bagId: openId, contentType: 'video' },
  });
  t.equal(rsyncUpload(bagDir, open.upload_link).code, 0);

  const v = video.request.bag_id as string;
  const a = audio.request.bag_id as string;
  const status = async (token: string, path: string) => (await d.request('GET', path, { token })).status;
  const listed = async (token: string) =>
    ((await d.request('GET', '/v1/packages', { token })).json as any[]).map((p) => p.bag_id).sort();

  await t.test('viewer on video: sees video packages, files, events, queue; completes nothing', async (t) => {
    t.same(await listed(viewer), [v, openId].sort(), 'lists: the video packages, not the audio one');
    for (const path of [
      `/v1/packages/${v}`,
      `/v1/packages/${v}/a.txt`,
      `/v1/packages/${v}/download`,
      `/v1/packages/${v}/events`,
      `/v1/queue/${video.item.id}`,
    ])
      t.equal(await status(viewer, path), 200, path);
    for (const path of [
      `/v1/packages/${a}`,
      `/v1/packages/${a}/b.txt`,
      `/v1/packages/${a}/events`,
      `/v1/queue/${audio.item.id}`,
    ])
      t.equal(await status(viewer, path), 403, path);
    const file = await d.request('GET', `/v1/packages/${v}/a.txt`, { token: viewer });
    t.equal(file.text, 'alice video\n');
    t.notOk('storage_location' in (await d.request('GET', `/v1/packages/${v}`, { token: viewer })).json);
    const report = (await d.request('GET', '/v1/queue/status', { token: viewer })).json;
    t.same(
      report.done.map((i: any) => i.id),
      [video.item.id],
      'the status report shows the video item only',
    );
    t.same(
      ((await d.request('GET', '/v1/queue', { token: viewer })).json as any[]).map((i) => i.id),
      [video.item.id],
    );
    const events = (await d.request('GET', '/v1/events', { token: viewer })).json as any[];
    t.ok(events.length > 0);
    t.same(
      events.filter((e) => e.executor !== 'alice'),
      [],
      'events of alice’s video package only',
    );
    t.same(
      ((await d.request('GET', `/v1/events?bag_id=${a}`, { token: viewer })).json as any[]).length,
      0,
      'events of an invisible package: none',
    );
    const complete = await d.request('POST', `/v1/requests/${openId}/complete`, { token: viewer });
    t.equal(complete.status, 403, 'a viewer may not complete');
    t.match(complete.json.error, /content_manager on video/);
    const again = await d.request('POST', `/v1/requests/${v}/complete`, { token: viewer });
    t.same(
      [again.status, again.headers.get('location')],
      [303, `/v1/queue/${video.item.id}`],
      'but learns of a DONE attempt, as chipmunk',
    );
    const dup = await d.request('POST', '/v1/requests', {
      token: viewer,
      json: { bag_id: randomUUID(), external_id: video.request.external_id, content_type: 'video' },
    });
    t.same(
      [dup.status, dup.headers.get('location')],
      [303, `/v1/requests/${v}`],
      'a visible duplicate is a 303, not a 409 (D1)',
    );
    t.equal(await status(viewer, '/v1/audits'), 403);
  });

  await t.test('content_manager on video: completes a colleague’s deposit (D1/D14)', async (t) => {
    t.equal(await status(manager, `/v1/packages/${a}`), 403, 'not the audio package');
    const dup = await d.request('POST', '/v1/requests', {
      token: manager,
      json: { bag_id: openId, external_id: 'colleague-barcode', content_type: 'video' },
    });
    t.same(
      [dup.status, dup.headers.get('location')],
      [303, `/v1/requests/${openId}`],
      'the client’s re-upload of a colleague’s bag: 303',
    );
    const complete = await d.request('POST', `/v1/requests/${openId}/complete`, { token: manager });
    t.equal(complete.status, 201);
    const item = await d.waitForQueueItem(complete.json.id, manager);
    t.equal(item.status, 'DONE');
    const pkg = (await d.request('GET', `/v1/packages/${openId}`, { token: manager })).json;
    t.same([pkg.user, pkg.stored, pkg.files], ['alice', true, ['c.txt']], 'still alice’s package');
    const ingestion = (
      (await d.request('GET', `/v1/packages/${openId}/events`, { token: alice })).json as any[]
    ).find((e) => e.type === 'ingestion');
    t.equal(ingestion.executor, 'carl', 'the ingest is recorded as carl’s act');
    const report = (await d.request('GET', '/v1/queue/status', { token: manager })).json;
    t.same(report.done.map((i: any) => i.id).sort(), [video.item.id, item.id].sort());
    t.notOk('storage_location' in pkg);
    t.equal(await status(manager, '/v1/audits'), 403);
  });

  await t.test('admin on video: storage_location on video packages; no audits', async (t) => {
    const pkg = (await d.request('GET', `/v1/packages/${v}`, { token: typeAdmin })).json;
    t.match(pkg.storage_location, new RegExp(`/storage/.*/urn%3auuid%3a${v}$`));
    t.equal(await status(typeAdmin, `/v1/packages/${a}`), 403);
    t.equal(await status(typeAdmin, '/v1/audits'), 403, 'audits are for administrators of everything');
  });

  await t.test('viewer on all: sees everything, no storage, no audits, completes nothing', async (t) => {
    t.same(await listed(everything), [v, a, openId].sort());
    t.equal(await status(everything, `/v1/packages/${a}/b.txt`), 200);
    t.notOk('storage_location' in (await d.request('GET', `/v1/packages/${a}`, { token: everything })).json);
    t.equal(await status(everything, '/v1/audits'), 403);
    const other = await d.createRequest(alice, {
      bag_id: randomUUID(),
      external_id: 'not-walts',
      content_type: 'digital',
    });
    t.equal(
      (await d.request('POST', `/v1/requests/${other.bag_id}/complete`, { token: everything })).status,
      403,
    );
  });

  await t.test('admin on all is an administrator', async (t) => {
    t.equal(await status(allAdmin, '/v1/audits'), 200);
    t.equal(
      (await d.request('GET', `/v1/packages/${a}`, { token: allAdmin })).json.storage_location.endsWith(a),
      true,
    );
    const forAlice = await d.request('POST', '/v1/requests', {
      token: allAdmin,
      json: { bag_id: randomUUID(), external_id: 'by-ada', content_type: 'audio', user: 'alice' },
    });
    t.same(
      [forAlice.status, forAlice.json.user],
      [201, 'alice'],
      'may create requests for another user, as an admin',
    );
  });

  await t.test('revoke closes what the grant opened', async (t) => {
    t.equal(d.cli(['revoke', 'vera', 'viewer', 'video']).code, 0);
    t.equal(await status(viewer, `/v1/packages/${v}`), 403);
    t.same(await listed(viewer), []);
    t.same((await d.request('GET', '/v1/queue/status', { token: viewer })).json, {
      done: [],
      pending: [],
      failed: [],
    });
    const dup = await d.request('POST', '/v1/requests', {
      token: viewer,
      json: { bag_id: v, external_id: 'x', content_type: 'video' },
    });
    t.equal(dup.status, 409, 'an invisible duplicate is a 409 again');
  });
});

t.test('auth.requireGrants: creating a request needs content_manager or admin on its type', async (t) => {
  const d = await TestDaemon.start(t, { config: { auth: { requireGrants: true } } });
  const nobody = d.addUser('nina');
  const viewer = d.addUser('vera');
  const manager = d.addUser('carl');
  const typeAdmin = d.addUser('tess');
  t.equal(d.cli(['grant', 'vera', 'viewer', 'digital']).code, 0);
  t.equal(d.cli(['grant', 'carl', 'content_manager', 'digital']).code, 0);
  t.equal(d.cli(['grant', 'tess', 'admin', 'audio']).code, 0);
  const create = (token: string, contentType: string) =>
    d.request('POST', '/v1/requests', {
      token,
      json: { bag_id: randomUUID(), external_id: `e-${randomUUID()}`, content_type: contentType },
    });

  const refused = await create(nobody, 'digital');
  t.equal(refused.status, 403);
  t.equal(
    refused.json.error,
    'you may not deposit digital: ask for the role content_manager on it (preservd grant)',
  );
  t.equal((await create(viewer, 'digital')).status, 403, 'a viewer may not deposit');
  t.equal((await create(manager, 'digital')).status, 201);
  t.equal((await create(manager, 'audio')).status, 403, 'not another type');
  t.equal((await create(typeAdmin, 'audio')).status, 201);
  t.equal((await create(d.adminToken, 'video')).status, 201, 'an admin user needs no grant');
  t.equal((await create(nobody, 'films')).status, 422, 'an unknown type is still a 422');
  t.equal(d.cli(['revoke', 'carl', 'content_manager', 'digital']).code, 0);
  t.equal((await create(manager, 'digital')).status, 403, 'revoked');
});
