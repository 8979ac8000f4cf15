/**
 * The upload link is a bearer capability to write into a request's upload (security-probe.md,
 * finding 1; API.md: "null for callers who may not complete the request"). Through the real
 * daemon and the real rsync: a viewer never learns a writable link (show, lists, pages); a stored
 * package shows none; revoking a grant that could see the link rotates it, the old link is refused
 * and a transfer still writing through it is stopped; a FAILED item reopens under a new link; a
 * kill -9 between a rotation's steps leaves the old link refused and the new one working; the
 * owner and a content_manager colleague still deposit as chipmunk-client does.
 */
import { randomUUID } from 'node:crypto';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { rsyncUpload, TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { makeBag } from '../helpers/make-bag.js';
import { getPage, Jar, logIn } from '../helpers/session.js';
import { stagingWhileRunning } from '../helpers/walk.js';

const scratch = mkdtempSync(join(tmpdir(), 'preservd-link-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));

const capabilityOf = (link: string) => link.split('/').filter(Boolean).at(-1)!;
const REFUSED = /unknown upload link|upload is (finished|complete)/;

async function bagFor(
  req: any,
  files: Record<string, string> = { 'a.txt': `${req.bag_id}\n` },
  options: { corrupt?: string[] } = {},
): Promise<string> {
  const dir = join(scratch, randomUUID());
  await makeBag(dir, {
    files,
    chipmunkInfo: { externalId: req.external_id, bagId: req.bag_id, contentType: req.content_type },
    ...options,
  });
  return dir;
}

async function linkAs(d: TestDaemon, token: string, bagId: string): Promise<string | null> {
  const res = await d.request('GET', `/v1/requests/${bagId}`, { token });
  if (res.status !== 200) throw new Error(`GET /v1/requests/${bagId}: ${res.status} ${res.text}`);
  return res.json.upload_link;
}

async function completeAs(d: TestDaemon, token: string, bagId: string): Promise<any> {
  const res = await d.request('POST', `/v1/requests/${bagId}/complete`, { token });
  if (res.status !== 201) throw new Error(`complete ${bagId}: ${res.status} ${res.text}`);
  return d.waitForQueueItem(res.json.id, token);
}

/** What landing/ holds: capability folders only (the rotation must leave nothing beside). */
const landingFolders = (d: TestDaemon) => readdirSync(join(d.dataDir, 'landing')).sort();

async function eventually(what: string, check: () => boolean | Promise<boolean>, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

t.test('the link: who sees it, revoke and FAILED rotate it, colleagues still deposit', async (t) => {
  const d = await TestDaemon.start(t);
  const alice = d.addUser('alice');
  const bob = d.addUser('bob');
  const carol = d.addUser('carol');
  t.equal(d.cli(['grant', 'bob', 'content_manager', 'digital']).code, 0);
  t.equal(d.cli(['grant', 'carol', 'viewer', 'digital']).code, 0);
  const req = await d.createRequest(alice, {
    bag_id: randomUUID(),
    external_id: 'link-open-1',
    content_type: 'digital',
  });
  const capability = capabilityOf(req.upload_link);

  await t.test('a viewer never learns it: show, lists, pages', async (t) => {
    t.equal(await linkAs(d, carol, req.bag_id), null, 'the viewer: null');
    for (const [who, token] of [
      ['the owner', alice],
      ['a content_manager', bob],
      ['an admin', d.adminToken],
    ] as const)
      t.equal(await linkAs(d, token, req.bag_id), req.upload_link, `${who}: the link`);
    for (const path of [
      '/v1/requests?stored=false',
      '/v1/requests',
      '/v1/packages',
      '/v1/bags',
      '/v1/requests?content_type=digital',
    ]) {
      const viewer = (await d.request('GET', path, { token: carol })).json as any[];
      t.same(
        viewer.find((p) => p.bag_id === req.bag_id)?.upload_link,
        null,
        `${path}: listed for the viewer without its link`,
      );
      const manager = (await d.request('GET', path, { token: bob })).json as any[];
      t.equal(
        manager.find((p) => p.bag_id === req.bag_id)?.upload_link,
        req.upload_link,
        `${path}: with it for the content_manager`,
      );
    }
    for (const path of [
      `/v1/requests/${req.bag_id}`,
      `/v1/packages/${req.external_id}`,
      '/v1/requests?stored=false',
      '/v1/queue',
      '/v1/events',
    ])
      t.notOk(
        (await d.request('GET', path, { token: carol })).text.includes(capability),
        `${path}: the capability nowhere in the viewer's answer`,
      );
    const jar = new Jar();
    t.equal((await logIn(d, jar, carol)).res.status, 303);
    for (const path of [
      '/',
      '/packages',
      `/packages?q=${req.external_id}`,
      `/packages/${req.bag_id}`,
      '/queue',
    ]) {
      const page = await getPage(d, jar, path);
      t.equal(page.status, 200, path);
      t.notOk(page.text.includes(capability), `page ${path}: no capability`);
    }
  });

  await t.test('a stored package shows no link, to anyone', async (t) => {
    const stored = await ingestBag(d, alice, { 'a.txt': 'stored\n' }, { contentType: 'digital' });
    for (const token of [alice, bob, carol, d.adminToken]) {
      t.equal(await linkAs(d, token, stored.request.bag_id), null);
      const listed = ((await d.request('GET', '/v1/packages?stored=true', { token })).json as any[]).find(
        (p) => p.bag_id === stored.request.bag_id,
      );
      t.equal(listed.upload_link, null);
    }
  });

  await t.test(
    "a content_manager colleague deposits the owner's request (chipmunk-client's flow)",
    async (t) => {
      const bagId = randomUUID();
      const own = await d.createRequest(alice, {
        bag_id: bagId,
        external_id: 'link-colleague',
        content_type: 'digital',
      });
      const again = await d.request('POST', '/v1/requests', {
        token: bob,
        json: { bag_id: bagId, external_id: own.external_id, content_type: 'digital' },
      });
      t.equal(again.status, 303, 'the colleague is sent to the request');
      const link = await linkAs(d, bob, bagId);
      t.equal(link, own.upload_link);
      t.equal(rsyncUpload(await bagFor(own), link!).code, 0);
      t.equal((await completeAs(d, bob, bagId)).status, 'DONE');
    },
  );

  await t.test(
    'revoking the grant rotates the link: the old one is refused, its transfer stopped',
    async (t) => {
      const open = await d.createRequest(alice, {
        bag_id: randomUUID(),
        external_id: 'link-revoked',
        content_type: 'digital',
      });
      const old = (await linkAs(d, bob, open.bag_id))!;
      // bob writes slowly through the link while his grant is revoked.
      const slow = join(scratch, 'slow');
      mkdirSync(slow);
      writeFileSync(join(slow, 'big.bin'), Buffer.alloc(40 * 1024 * 1024, 7));
      const rsync = spawn('rsync', ['-r', '--bwlimit=200', `${slow}/`, old], { stdio: 'ignore' });
      const ended = new Promise<number | null>((ok) => rsync.once('close', ok));
      const active = join(d.dataDir, 'rsyncd', 'active');
      await eventually(
        'the slow transfer is admitted',
        () => existsSync(active) && readdirSync(active).some((n) => /^\d+$/.test(n)),
      );

      const revoked = d.cli(['revoke', 'bob', 'content_manager', 'digital']);
      t.equal(revoked.code, 0, revoked.stderr);
      t.match(revoked.stdout, /upload links replaced: [1-9]/);
      const code = await Promise.race([
        ended,
        new Promise<'running'>((ok) => setTimeout(() => ok('running'), 30_000)),
      ]);
      t.not(code, 'running', 'the transfer through the old link was stopped');
      t.not(code, 0);
      const refused = rsyncUpload(await bagFor(open), old);
      t.not(refused.code, 0, 'the old link is refused');
      t.match(refused.output, REFUSED);

      const fresh = (await linkAs(d, alice, open.bag_id))!;
      t.not(fresh, old, 'the owner sees a new link');
      t.notOk(existsSync(join(d.dataDir, 'landing', capabilityOf(old))), 'the old landing folder is gone');
      t.ok(existsSync(join(d.dataDir, 'landing', capabilityOf(fresh))), 'the upload is under the new name');
      t.equal(rsyncUpload(await bagFor(open), fresh).code, 0, 'the owner uploads through the new link');
      const item = await completeAs(d, alice, open.bag_id);
      t.equal(item.status, 'DONE');
      const files = (await d.request('GET', `/v1/packages/${open.bag_id}`, { token: alice })).json.files;
      t.same(
        files,
        ['a.txt'],
        "the owner's bag, nothing of the stopped transfer (its --delete removed any of it)",
      );
      t.equal(
        (await d.request('GET', `/v1/requests/${req.bag_id}`, { token: bob })).status,
        403,
        'bob no longer sees the digital requests',
      );
    },
  );

  await t.test('a FAILED item reopens the upload under a new link', async (t) => {
    const open = await d.createRequest(alice, {
      bag_id: randomUUID(),
      external_id: 'link-failed',
      content_type: 'digital',
    });
    t.equal(
      rsyncUpload(await bagFor(open, undefined, { corrupt: ['data/a.txt'] }), open.upload_link).code,
      0,
    );
    t.equal((await completeAs(d, alice, open.bag_id)).status, 'FAILED');
    const fresh = (await linkAs(d, alice, open.bag_id))!;
    t.not(fresh, open.upload_link, 'a new link');
    const refused = rsyncUpload(await bagFor(open), open.upload_link);
    t.not(refused.code, 0, 'the old link is refused');
    t.match(refused.output, REFUSED);
    t.equal(rsyncUpload(await bagFor(open), fresh).code, 0);
    t.equal((await completeAs(d, alice, open.bag_id)).status, 'DONE');
  });
});

t.test('kill -9 between the steps of a rotation', async (t) => {
  await t.test('preservd revoke dies after the catalog step: the daemon finishes the rotation', async (t) => {
    const d = await TestDaemon.start(t);
    const alice = d.addUser('alice');
    d.addUser('bob');
    t.equal(d.cli(['grant', 'bob', 'content_manager', 'digital']).code, 0);
    const open = await d.createRequest(alice, {
      bag_id: randomUUID(),
      external_id: 'crash-revoke',
      content_type: 'digital',
    });
    const died = d.cli(['revoke', 'bob', 'content_manager', 'digital'], {
      PRESERVD_FAILPOINT: 'rotation:after-catalog',
    });
    t.not(died.code, 0, 'the command was killed');
    t.match(d.cli(['grants', 'bob']).stdout, /^user\trole\tscope\n$/, 'the revoke itself is done');
    const fresh = (await linkAs(d, alice, open.bag_id))!;
    t.not(fresh, open.upload_link, 'and the new link is in the catalog');
    await eventually(
      'the old landing folder is renamed by the daemon',
      () => landingFolders(d).join() === capabilityOf(fresh),
    );
    t.match(rsyncUpload(await bagFor(open), open.upload_link).output, REFUSED, 'the old link is refused');
    t.equal(rsyncUpload(await bagFor(open), fresh).code, 0);
    t.equal((await completeAs(d, alice, open.bag_id)).status, 'DONE');
  });

  for (const point of ['rotation:after-catalog', 'rotation:after-move']) {
    await t.test(`the daemon dies at ${point} while a FAILED item reopens the upload`, async (t) =>
      crashWhileReopening(t, point),
    );
  }
});

async function crashWhileReopening(t: Test, point: string): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'preservd-linkcrash-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const first = await TestDaemon.start(t, { dataDir, keepDataDir: true, env: { PRESERVD_FAILPOINT: point } });
  const alice = first.addUser('alice');
  const open = await first.createRequest(alice, {
    bag_id: randomUUID(),
    external_id: `crash-${point}`,
    content_type: 'digital',
  });
  t.equal(rsyncUpload(await bagFor(open, undefined, { corrupt: ['data/a.txt'] }), open.upload_link).code, 0);
  t.equal(
    (await first.request('POST', `/v1/requests/${open.bag_id}/complete`, { token: alice })).status,
    201,
  );
  t.ok(await first.exitsWithin(60_000), `the daemon died at ${point}`);
  await first.kill9();

  const second = await TestDaemon.start(t, { dataDir, keepDataDir: true });
  const item = (
    (await second.request('GET', `/v1/queue?package=${open.bag_id}`, { token: alice })).json as any[]
  )[0];
  t.equal(
    (await second.waitForQueueItem(item.id, alice)).status,
    'FAILED',
    'the ingest ends FAILED after the restart',
  );
  const fresh = (await linkAs(second, alice, open.bag_id))!;
  t.not(fresh, open.upload_link);
  t.same(landingFolders(second), [capabilityOf(fresh)], 'one landing folder, under the current link');
  t.same(stagingWhileRunning(dataDir), [], 'nothing left in staging');
  // The restarted daemon's rsync listens on another port: the old capability on the new port.
  const oldLink = fresh.replace(capabilityOf(fresh), capabilityOf(open.upload_link));
  const refused = rsyncUpload(await bagFor(open), oldLink);
  t.match(refused.output, REFUSED, 'the old link is refused');
  t.equal(rsyncUpload(await bagFor(open), fresh).code, 0, 'the new one takes the fixed bag');
  t.equal((await completeAs(second, alice, open.bag_id)).status, 'DONE');
}
