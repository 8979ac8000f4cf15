/**
 * Revisions through the real daemon, its rsync and HTTP (API.md, "Versions"): a revision's upload
 * link starts pre-filled with the current version (copies, not links), so rsync -rtvzP --delete of
 * the corrected bag sends only what changed and complete reads only those files again; the
 * revision becomes the object's next OCFL version with only the new bytes stored; the versions are
 * listed and served; an invalid revision fails with every problem and changes nothing; an open
 * revision can be abandoned; and the rules of who may do it.
 */
import { readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { validateObject } from '../../src/ocfl/validate/index.js';
import { fsReader } from '../../src/ocfl/validate/index.js';
import { packageObjectPath } from '../../src/ocfl/layout.js';
import { rsyncUpload, TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { assertInvariants, findViolations } from '../helpers/invariants.js';
import { writeManifests } from '../helpers/make-bag.js';
import { getPage, Jar, logIn } from '../helpers/session.js';

const MiB = 1024 * 1024;

async function metric(d: TestDaemon, name: string): Promise<number> {
  const text = (await d.request('GET', '/metrics', { token: null })).text;
  const match = new RegExp(`^${name} (\\d+)`, 'm').exec(text);
  if (match === null) throw new Error(`no ${name} in the metrics`);
  return Number(match[1]);
}

/** Files under a folder, relative to it, sorted. */
function filesUnder(dir: string, prefix = ''): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.isDirectory()) out.push(...filesUnder(join(dir, e.name), `${prefix}${e.name}/`));
    else out.push(`${prefix}${e.name}`);
  }
  return out.sort();
}

/** Changes a payload file the way a depositor would (same size, new bytes) and rewrites the manifests. */
async function correct(bagDir: string, path: string, content: string): Promise<void> {
  writeFileSync(join(bagDir, 'data', path), content);
  await writeManifests(bagDir);
}

async function completeRevision(d: TestDaemon, bagId: string, n: number, token?: string): Promise<any> {
  const res = await d.request('POST', `/v1/packages/${bagId}/revisions/${n}/complete`, { token });
  if (res.status !== 201) throw new Error(`complete: ${res.status} ${res.text}`);
  return d.waitForQueueItem(res.json.id, token);
}

t.test('a revision: pre-filled, only changes sent and read, stored as v2 with only new bytes', async (t) => {
  const d = await TestDaemon.start(t);
  const big = Buffer.alloc(2 * MiB, 7);
  const { request, bagDir } = await ingestBag(d, d.adminToken, {
    'a.txt': 'alpha\n',
    'b.txt': 'bravo\n',
    'big.bin': big,
  });
  const bagId: string = request.bag_id;
  const shown = await d.request('GET', `/v1/packages/${bagId}`);
  t.equal(shown.json.version, 1, 'version 1 after the first deposit');
  t.same(
    Object.keys(shown.json).slice(
      Object.keys(shown.json).indexOf('stored'),
      Object.keys(shown.json).indexOf('stored') + 2,
    ),
    ['stored', 'version'],
    'version right after stored',
  );

  const opened = await d.request('POST', `/v1/packages/${bagId}/revisions`, {
    json: { note: 'b was wrong' },
  });
  t.equal(opened.status, 201, opened.text + d.output);
  t.equal(opened.headers.get('location'), `/v1/packages/${bagId}/revisions/2`);
  t.match(opened.json, { version: 2, bag_id: bagId, status: 'open', note: 'b was wrong', user: 'admin' });
  t.match(opened.json.upload_link, /^rsync:\/\//);
  const again = await d.request('POST', `/v1/packages/${bagId}/revisions`, { json: {} });
  t.equal(again.status, 303, 'one open revision per package');
  t.equal(again.headers.get('location'), `/v1/packages/${bagId}/revisions/2`);
  t.equal((await d.request('GET', `/v1/packages/${bagId}/revisions/2`)).json.status, 'open');

  // The pre-filled files are copies, with the stored files' mtimes.
  const capability = opened.json.upload_link.split('/').at(-2);
  const landed = join(d.dataDir, 'landing', capability);
  const object = join(d.dataDir, 'storage', packageObjectPath(bagId));
  t.same(filesUnder(landed), filesUnder(join(object, 'v1', 'content')), 'the current version pre-filled');
  const copy = statSync(join(landed, 'data', 'big.bin'), { bigint: true });
  const stored = statSync(join(object, 'v1', 'content', 'data', 'big.bin'), { bigint: true });
  t.not(copy.ino, stored.ino, 'a copy, not a hard link');
  t.equal(copy.mtimeNs, stored.mtimeNs, "the stored file's mtime, to the nanosecond");

  await correct(bagDir, 'b.txt', 'BRAVO\n');
  const before = await metric(d, 'preservd_ingest_files_known_total');
  const up = rsyncUpload(bagDir, opened.json.upload_link);
  t.equal(up.code, 0, up.output);
  t.notMatch(up.output, /big\.bin|a\.txt/, 'unchanged files are not sent');
  t.match(up.output, /data\/b\.txt/, 'the changed file is sent');

  const item = await completeRevision(d, bagId, 2);
  t.equal(item.status, 'DONE', JSON.stringify(item));
  // Run as root, our rsync's fake super rewrites an xattr of every file it lists, which changes
  // each copy's ctime: the copies are then read again (docs/decisions.md). Not root: not read.
  const known = (await metric(d, 'preservd_ingest_files_known_total')) - before;
  if (process.getuid?.() !== 0) t.ok(known >= 5, `unchanged files not read again (${known})`);
  t.equal((await d.request('POST', `/v1/packages/${bagId}/revisions/2/complete`)).status, 303, 'DONE: 303');

  const pkg = (await d.request('GET', `/v1/packages/${bagId}`)).json;
  t.equal(pkg.version, 2);
  t.same(pkg.files, ['a.txt', 'b.txt', 'big.bin']);
  t.equal((await d.request('GET', `/v1/packages/${bagId}/b.txt`)).text, 'BRAVO\n', 'the current version');
  t.equal(
    (await d.request('GET', `/v1/packages/${bagId}/versions/1/b.txt`)).text,
    'bravo\n',
    'version 1 kept',
  );
  t.equal((await d.request('GET', `/v1/packages/${bagId}/versions/2/b.txt`)).text, 'BRAVO\n');
  const ranged = await d.request('GET', `/v1/packages/${bagId}/versions/1/b.txt`, {
    headers: { range: 'bytes=1-2' },
  });
  t.equal(ranged.status, 206);
  t.equal(ranged.text, 'ra');
  t.ok(ranged.headers.get('etag'), 'an ETag');
  t.equal((await d.request('GET', `/v1/packages/${bagId}/versions/3`)).status, 404, 'an unknown version');
  const v1 = (await d.request('GET', `/v1/packages/${bagId}/versions/1`)).json;
  t.equal(v1.version, 1);
  t.same(v1.files, ['a.txt', 'b.txt', 'big.bin']);
  const zip = await d.request('GET', `/v1/packages/${bagId}/versions/1/download`);
  t.equal(zip.status, 200);
  t.equal(zip.headers.get('content-type'), 'application/zip');

  const jar = new Jar();
  await logIn(d, jar, d.adminToken);
  const page = await getPage(d, jar, `/packages/${bagId}`);
  t.equal(page.status, 200, 'the package page');
  t.match(
    page.text,
    /Versions \(2\)[\s\S]*versions\/1\/download[\s\S]*b was wrong/,
    "the page lists the package's versions",
  );
  const versions = (await d.request('GET', `/v1/packages/${bagId}/versions`)).json;
  t.match(
    versions,
    [
      { version: 1, note: null, user: 'admin', files: 10 },
      { version: 2, note: 'b was wrong', user: 'admin', files: 10 },
    ],
    JSON.stringify(versions),
  );

  // On disk: only the new bytes in v2, and a valid OCFL object.
  t.same(
    filesUnder(join(object, 'v2', 'content')),
    [
      'data/b.txt',
      'manifest-md5.txt',
      'manifest-sha256.txt',
      'tagmanifest-md5.txt',
      'tagmanifest-sha256.txt',
    ],
    'v2 holds only what changed',
  );
  const inventory = JSON.parse(readFileSync(join(object, 'inventory.json'), 'utf8'));
  t.equal(inventory.head, 'v2');
  t.equal(inventory.versions.v2.message, 'revision 2: b was wrong');
  const report = await validateObject(fsReader(object), '', { digests: true });
  t.same(report.problems?.filter((p: any) => p.severity === 'error') ?? [], [], 'a valid OCFL object');
  t.equal(report.valid, true);

  // An audit checks every version's content: v1's b.txt (superseded) and v2's, and passes.
  const audit = await d.request('POST', '/v1/audits');
  t.equal(audit.status, 201);
  const audited = await d.waitForAudit(audit.json.id);
  t.same(audited.failures, [], 'the audit finds nothing wrong with a revised package');
  writeFileSync(join(object, 'v1', 'content', 'data', 'b.txt'), 'BRAVX\n');
  const second = await d.waitForAudit((await d.request('POST', '/v1/audits')).json.id);
  t.match(second.failures, [{ bag_id: bagId }], "a superseded version's content is audited too");
  t.match(second.failures[0]?.detail, /v1|b\.txt/);
  writeFileSync(join(object, 'v1', 'content', 'data', 'b.txt'), 'bravo\n');

  const events = (await d.request('GET', `/v1/packages/${bagId}/events`)).json as any[];
  for (const type of ['transfer', 'validation', 'ingestion'])
    t.ok(
      events.some((e) => e.type === type && e.outcome === 'success' && /version 2/.test(e.detail ?? '')),
      `the ${type} event names version 2`,
    );

  // Stopped, the data dir holds every invariant over both versions; a broken v2 is caught.
  t.equal(await d.stop(), 0);
  await assertInvariants(t, d.dataDir, 'the invariants hold over v1 and v2');
  const v2b = join(object, 'v2', 'content', 'data', 'b.txt');
  rmSync(v2b);
  writeFileSync(join(object, 'v1', 'content', 'data', 'b.txt'), 'BRAVX\n');
  const violations = await findViolations(d.dataDir);
  t.match(violations, [{ code: 'object-invalid', bagId }], "the object without v2's content is invalid OCFL");
  t.same(
    violations.filter((v) => v.code.startsWith('stored-file')).map((v) => [v.code, v.path]),
    [
      ['stored-file-digest', 'v1/content/data/b.txt'],
      ['stored-file-missing', 'v2/content/data/b.txt'],
    ],
    'a v2 content file gone and a superseded v1 file changed, each named',
  );
});

t.test('a revision completed as pre-filled: nothing read again, nothing new stored', async (t) => {
  const d = await TestDaemon.start(t);
  const { request } = await ingestBag(d, d.adminToken, {
    'a.txt': 'alpha\n',
    'big.bin': Buffer.alloc(MiB, 1),
  });
  const bagId: string = request.bag_id;
  t.equal((await d.request('POST', `/v1/packages/${bagId}/revisions`)).status, 201);
  const before = await metric(d, 'preservd_ingest_files_known_total');
  t.equal((await completeRevision(d, bagId, 2)).status, 'DONE');
  t.equal(
    (await metric(d, 'preservd_ingest_files_known_total')) - before,
    9,
    "every file's digests taken from the copy's record, none read",
  );
  const object = join(d.dataDir, 'storage', packageObjectPath(bagId));
  t.notOk(readdirSync(join(object, 'v2')).includes('content'), 'v2 stores no content');
  t.equal((await validateObject(fsReader(object), '', { digests: true })).valid, true);
  t.equal((await d.request('GET', `/v1/packages/${bagId}/versions/2/a.txt`)).text, 'alpha\n');
  t.equal(await d.stop(), 0);
  await assertInvariants(t, d.dataDir, 'the invariants hold over a v2 with no content of its own');
});

t.test('an invalid revision fails with every problem and leaves the package as it was', async (t) => {
  const d = await TestDaemon.start(t);
  const { request, bagDir } = await ingestBag(d, d.adminToken, { 'a.txt': 'alpha\n', 'b.txt': 'bravo\n' });
  const bagId: string = request.bag_id;
  const opened = (await d.request('POST', `/v1/packages/${bagId}/revisions`)).json;
  // Two problems: a payload file changed without its manifests, and a file the manifests do not list.
  writeFileSync(join(bagDir, 'data', 'a.txt'), 'ALPHA\n');
  writeFileSync(join(bagDir, 'data', 'c.txt'), 'charlie\n');
  t.equal(rsyncUpload(bagDir, opened.upload_link).code, 0);
  const item = await completeRevision(d, bagId, 2);
  t.equal(item.status, 'FAILED');
  t.ok(item.errors.length >= 2, `every problem: ${item.error}`);
  const pkg = (await d.request('GET', `/v1/packages/${bagId}`)).json;
  t.equal(pkg.version, 1, 'still version 1');
  t.equal((await d.request('GET', `/v1/packages/${bagId}/a.txt`)).text, 'alpha\n');
  const object = join(d.dataDir, 'storage', packageObjectPath(bagId));
  t.same(
    readdirSync(object).sort(),
    ['0=ocfl_object_1.1', 'inventory.json', 'inventory.json.sha256', 'logs', 'v1'].filter(
      (n) => n !== 'logs' || readdirSync(object).includes('logs'),
    ),
    'no v2 in the object',
  );
  t.equal(JSON.parse(readFileSync(join(object, 'inventory.json'), 'utf8')).head, 'v1');
  const events = (await d.request('GET', `/v1/packages/${bagId}/events`)).json as any[];
  t.ok(
    events.some((e) => e.type === 'validation' && e.outcome === 'failure' && /^version 2: /.test(e.detail)),
  );

  // The upload is back, under a new link, for fixing.
  const revision = (await d.request('GET', `/v1/packages/${bagId}/revisions/2`)).json;
  t.equal(revision.status, 'open');
  t.not(revision.upload_link, opened.upload_link, 'a new link');
  const info = join(bagDir, 'bag-info.txt');
  writeFileSync(info, readFileSync(info, 'utf8').replace(/Payload-Oxum: .*/, 'Payload-Oxum: 20.3'));
  await writeManifests(bagDir);
  t.equal(rsyncUpload(bagDir, revision.upload_link).code, 0);
  const fixed = await completeRevision(d, bagId, 2);
  t.equal(fixed.status, 'DONE', `fixed, it is stored ${JSON.stringify(fixed)}`);
  t.same((await d.request('GET', `/v1/packages/${bagId}`)).json.files, ['a.txt', 'b.txt', 'c.txt']);
  t.equal(await d.stop(), 0);
  await assertInvariants(t, d.dataDir, 'the invariants hold once the fixed revision is v2');
});

t.test('abandoning, and who may revise', async (t) => {
  const d = await TestDaemon.start(t, { config: { contentTypes: { video: {}, audio: {} } } });
  const owner = d.addUser('olive');
  const viewer = d.addUser('victor');
  const manager = d.addUser('mona');
  for (const [user, role] of [
    ['olive', 'content_manager'],
    ['victor', 'viewer'],
    ['mona', 'content_manager'],
  ])
    t.equal(d.cli(['grant', user!, role!, 'video']).code, 0);
  const { request } = await ingestBag(d, owner, { 'a.txt': 'alpha\n' });
  const bagId: string = request.bag_id;
  t.equal(
    (await d.request('POST', `/v1/packages/${bagId}/revisions`, { token: viewer })).status,
    403,
    'a viewer may not',
  );
  const big = 'x'.repeat(2000);
  const tooLong = await d.request('POST', `/v1/packages/${bagId}/revisions`, {
    token: owner,
    json: { note: big },
  });
  t.equal(tooLong.status, 422, 'a note over 1024 bytes');
  const opened = await d.request('POST', `/v1/packages/${bagId}/revisions`, { token: manager });
  t.equal(opened.status, 201, 'a content_manager of its type may');
  t.equal(
    (await d.request('GET', `/v1/packages/${bagId}/revisions/2`, { token: viewer })).json.upload_link,
    null,
    'no link for a viewer',
  );
  const capability = opened.json.upload_link.split('/').at(-2);
  t.equal((await d.request('DELETE', `/v1/packages/${bagId}/revisions/2`, { token: viewer })).status, 403);
  t.equal((await d.request('DELETE', `/v1/packages/${bagId}/revisions/2`, { token: owner })).status, 204);
  t.equal((await d.request('GET', `/v1/packages/${bagId}/revisions/2`)).json.status, 'abandoned');
  t.notOk(readdirSync(join(d.dataDir, 'landing')).includes(capability), 'its upload removed');
  t.not(rsyncUpload(join(d.dataDir, 'storage'), opened.json.upload_link).code, 0, 'its link refused');
  t.equal(
    (await d.request('POST', `/v1/packages/${bagId}/revisions/2/complete`, { token: owner })).status,
    409,
  );
  const reopened = await d.request('POST', `/v1/packages/${bagId}/revisions`, { token: owner });
  t.equal(reopened.status, 201, 'a new one after');
  t.equal(reopened.json.version, 2);

  const unstored = await d.createRequest(owner, {
    bag_id: crypto.randomUUID(),
    external_id: 'not-yet',
    content_type: 'video',
  });
  t.equal(
    (await d.request('POST', `/v1/packages/${unstored.bag_id}/revisions`, { token: owner })).status,
    404,
    'not stored yet',
  );
  rmSync(join(d.dataDir, 'nothing'), { force: true });
  t.equal(await d.stop(), 0);
  await assertInvariants(t, d.dataDir, 'the invariants hold with a revision open');
});
