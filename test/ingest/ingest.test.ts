/**
 * Ingest end to end: real rsync uploads to the daemon's upload links, complete, the queue, and
 * the bag stored (or the upload given back with every problem named).
 */
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { packageObjectPath } from '../../src/ocfl/layout.js';
import { repoRoot, rsyncUpload, TestDaemon } from '../helpers/daemon.js';
import { makeBag } from '../helpers/make-bag.js';

const scratch = mkdtempSync(join(tmpdir(), 'preservd-bags-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));

let n = 0;
async function bagFor(
  req: { bag_id: string; external_id: string; content_type: string },
  options: Record<string, unknown> = {},
): Promise<string> {
  const dir = join(scratch, `bag-${++n}`);
  await makeBag(dir, {
    files: { 'a.txt': 'hello\n', 'sub/dir/b.bin': Buffer.alloc(70_000, 7), 'empty.dat': '' },
    chipmunkInfo: { externalId: req.external_id, bagId: req.bag_id, contentType: req.content_type },
    ...options,
  });
  return dir;
}

t.test('ingest', async (t) => {
  const d = await TestDaemon.start(t, {
    config: {
      contentTypes: {
        digital: { profile: join(repoRoot, 'config/profiles/test-profile.json') },
        audio: { validator: ['sh', '-c', 'echo "no audio in {external_id}" >&2; exit 3'], timeoutMs: 5000 },
        video: {},
      },
    },
  });
  const alice = d.addUser('alice');
  const bob = d.addUser('bob');

  const newRequest = async (token: string, contentType = 'video') =>
    d.createRequest(token, {
      bag_id: randomUUID(),
      external_id: `ext-${randomUUID().slice(0, 8)}`,
      content_type: contentType,
    });

  await t.test('happy path: rsync, complete, DONE, stored with files and events', async (t) => {
    const req = await newRequest(alice);
    const bag = await bagFor(req);
    const up = rsyncUpload(bag, req.upload_link);
    t.equal(up.code, 0, up.output);
    const landing = readdirSync(join(d.dataDir, 'landing'));
    t.ok(
      landing.some((name) => req.upload_link.includes(name)),
      'the upload is in its landing folder',
    );

    const complete = await d.request('POST', `/v1/requests/${req.bag_id}/complete`, { token: alice });
    t.equal(complete.status, 201);
    t.match(complete.headers.get('location'), /^\/v1\/queue\/\d+$/);
    t.equal(complete.json.status, 'PENDING');
    t.equal(complete.json.request, `/v1/requests/${req.bag_id}`);
    const item = await d.waitForQueueItem(complete.json.id, alice);
    t.equal(item.status, 'DONE', JSON.stringify(item));
    t.equal(item.package, `/v1/packages/${req.bag_id}`);
    t.notOk('error' in item);

    const pkg = await d.request('GET', `/v1/packages/${req.bag_id}`, { token: alice });
    t.equal(pkg.json.stored, true);
    t.same(pkg.json.files, ['a.txt', 'empty.dat', 'sub/dir/b.bin']);
    t.notOk('storage_location' in pkg.json);
    const admin = await d.request('GET', `/v1/packages/${req.bag_id}`);
    const id = req.bag_id as string;
    t.equal(admin.json.storage_location, join(d.dataDir, 'storage', packageObjectPath(id)));
    t.ok(existsSync(join(admin.json.storage_location, 'v1/content/data/sub/dir/b.bin')));
    t.notOk(existsSync(join(d.dataDir, 'staging', id)), 'nothing left in staging');

    const events = await d.request('GET', `/v1/packages/${req.bag_id}/events`, { token: alice });
    t.same(
      events.json.map((e: any) => [e.type, e.outcome]),
      [
        ['transfer', 'success'],
        ['validation', 'success'],
        ['ingestion', 'success'],
      ],
    );
    t.same(
      events.json.slice(1).map((e: any) => e.executor),
      ['alice', 'alice'],
    );

    const again = await d.request('POST', `/v1/requests/${req.bag_id}/complete`, { token: alice });
    t.equal(again.status, 303);
    t.equal(again.headers.get('location'), `/v1/queue/${item.id}`);
    const reupload = rsyncUpload(bag, req.upload_link);
    t.not(reupload.code, 0, 'the upload link is closed once stored');

    const queue = await d.request('GET', `/v1/queue?package=${req.external_id}`, { token: alice });
    t.same(
      queue.json.map((i: any) => i.id),
      [item.id],
      '?package= takes an external_id',
    );
  });

  await t.test('a broken bag fails with every problem, then is fixed and completed again', async (t) => {
    const req = await newRequest(alice);
    // An mtime of its own, for the fixed bag below to be sent over it.
    const bag = await bagFor(req, {
      corrupt: ['data/a.txt'],
      unlisted: ['sub/dir/b.bin'],
      mtime: new Date('2001-01-01T00:00:00Z'),
    });
    t.equal(rsyncUpload(bag, req.upload_link).code, 0);
    const complete = await d.request('POST', `/v1/requests/${req.bag_id}/complete`, { token: alice });
    const item = await d.waitForQueueItem(complete.json.id, alice);
    t.equal(item.status, 'FAILED');
    t.ok(
      item.errors.some((e: any) => e.path === 'data/a.txt'),
      `names the corrupt file: ${JSON.stringify(item.errors)}`,
    );
    t.ok(
      item.errors.some((e: any) => e.path === 'data/sub/dir/b.bin'),
      'names the unlisted file',
    );
    t.same(
      item.errors.map((e: any) => [e.code, e.path]).sort(),
      [
        ['file-not-in-manifest', 'data/sub/dir/b.bin'],
        ['manifest-mismatch', 'data/a.txt'],
        ['manifest-mismatch', 'data/a.txt'],
      ],
      'both problems reported (the corrupt file in each of the two manifests), and nothing else',
    );
    t.type(item.error, 'string');
    t.equal(item.error.split('\n\n').length, item.errors.length, 'error joins every problem by blank lines');
    t.notOk('package' in item);
    const pkg = await d.request('GET', `/v1/packages/${req.bag_id}`, { token: alice });
    t.equal(pkg.json.stored, false);
    const events = await d.request('GET', `/v1/packages/${req.bag_id}/events`, { token: alice });
    t.ok(events.json.some((e: any) => e.type === 'validation' && e.outcome === 'failure'));

    const fixed = await bagFor(req);
    // The upload is handed back under a new link; the old one is refused (security-probe.md, finding 1).
    t.not(pkg.json.upload_link, req.upload_link, 'a FAILED item reopens the upload under a new link');
    t.not(rsyncUpload(fixed, req.upload_link).code, 0, 'the old link is refused');
    const up = rsyncUpload(fixed, pkg.json.upload_link);
    t.equal(up.code, 0, `the link is open again after a failure: ${up.output}`);
    const retry = await d.request('POST', `/v1/requests/${req.bag_id}/complete`, { token: alice });
    t.equal(retry.status, 201, 'a FAILED item does not block a new attempt');
    t.not(retry.json.id, item.id);
    const retried = await d.waitForQueueItem(retry.json.id, alice);
    t.equal(retried.status, 'DONE', JSON.stringify(retried));
  });

  await t.test(
    'a path longer than the catalog can key fails with path-too-long, and nothing is stored',
    async (t) => {
      const req = await newRequest(alice);
      const deep = Array.from({ length: 8 }, (_, i) => `${i}${'d'.repeat(240)}`).join('/'); // ~1,940 bytes
      const bag = await bagFor(req, { files: { [`${deep}/f.txt`]: 'deep\n', 'a.txt': 'fine\n' } });
      t.equal(rsyncUpload(bag, req.upload_link).code, 0);
      const complete = await d.request('POST', `/v1/requests/${req.bag_id}/complete`, { token: alice });
      const item = await d.waitForQueueItem(complete.json.id, alice);
      t.equal(item.status, 'FAILED', JSON.stringify(item));
      t.same(
        item.errors.map((e: any) => [e.code, e.path]),
        [['path-too-long', `data/${deep}/f.txt`]],
        'the one problem, naming the file',
      );
      t.equal((await d.request('GET', `/v1/packages/${req.bag_id}`, { token: alice })).json.stored, false);
    },
  );

  await t.test('chipmunk-info must match the request', async (t) => {
    const req = await newRequest(alice);
    const bag = await bagFor({ ...req, external_id: 'somebody-else' });
    t.equal(rsyncUpload(bag, req.upload_link).code, 0);
    const complete = await d.request('POST', `/v1/requests/${req.bag_id}/complete`, { token: alice });
    const item = await d.waitForQueueItem(complete.json.id, alice);
    t.equal(item.status, 'FAILED');
    t.match(item.error, /External-Identifier/);
  });

  await t.test('nothing uploaded', async (t) => {
    const req = await newRequest(alice);
    const complete = await d.request('POST', `/v1/requests/${req.bag_id}/complete`, { token: alice });
    const item = await d.waitForQueueItem(complete.json.id, alice);
    t.equal(item.status, 'FAILED');
    t.same(
      item.errors.map((e: any) => e.code),
      ['upload-empty'],
    );
  });

  await t.test('the landing folder gone: upload-missing, and the link opens again', async (t) => {
    const req = await newRequest(alice);
    const capability = String(req.upload_link).split('/').filter(Boolean).pop()!;
    rmSync(join(d.dataDir, 'landing', capability), { recursive: true });
    const complete = await d.request('POST', `/v1/requests/${req.bag_id}/complete`, { token: alice });
    const item = await d.waitForQueueItem(complete.json.id, alice);
    t.equal(item.status, 'FAILED');
    t.same(
      item.errors.map((e: any) => [e.code, e.path]),
      [['upload-missing', undefined]],
    );
    const reopened = String(
      (await d.request('GET', `/v1/requests/${req.bag_id}`, { token: alice })).json.upload_link,
    )
      .split('/')
      .filter(Boolean)
      .pop()!;
    t.not(reopened, capability, 'under a new link');
    t.ok(existsSync(join(d.dataDir, 'landing', reopened)), 'an empty landing folder to upload into again');
    const events = await d.request('GET', `/v1/packages/${req.bag_id}/events`, { token: alice });
    t.same(
      events.json.map((e: any) => [e.type, e.outcome]),
      [['ingestion', 'failure']],
      'the ingestion failure, and no validation',
    );
  });

  await t.test('profile violation and failing external validator', async (t) => {
    const digital = await newRequest(alice, 'digital');
    t.equal(rsyncUpload(await bagFor(digital, { bagInfo: { Baz: 'nope' } }), digital.upload_link).code, 0);
    const c1 = await d.request('POST', `/v1/requests/${digital.bag_id}/complete`, { token: alice });
    const i1 = await d.waitForQueueItem(c1.json.id, alice);
    t.equal(i1.status, 'FAILED');
    t.match(i1.error, /Foo/, 'the missing required tag');
    t.match(i1.error, /Baz/, 'the value not allowed');

    const audio = await newRequest(alice, 'audio');
    t.equal(rsyncUpload(await bagFor(audio), audio.upload_link).code, 0);
    const c2 = await d.request('POST', `/v1/requests/${audio.bag_id}/complete`, { token: alice });
    const i2 = await d.waitForQueueItem(c2.json.id, alice);
    t.equal(i2.status, 'FAILED');
    t.match(
      i2.error,
      new RegExp(`no audio in ${audio.external_id}`),
      "the validator's stderr, with placeholders replaced",
    );
  });

  await t.test('complete: 404 unknown or by external_id, 403 for another user', async (t) => {
    const req = await newRequest(alice);
    t.equal((await d.request('POST', `/v1/requests/${randomUUID()}/complete`, { token: alice })).status, 404);
    t.equal(
      (await d.request('POST', `/v1/requests/${req.external_id}/complete`, { token: alice })).status,
      404,
    );
    const other = await d.request('POST', `/v1/requests/${req.bag_id}/complete`, { token: bob });
    t.equal(other.status, 403);
    const queue = await d.request('GET', '/v1/queue', { token: bob });
    t.ok(
      queue.json.every((i: any) => !i.request.includes(req.bag_id)),
      "bob's queue does not show alice's items",
    );
  });

  await t.test('five bags completed at once', async (t) => {
    const reqs = await Promise.all([1, 2, 3, 4, 5].map(() => newRequest(bob)));
    for (const req of reqs) t.equal(rsyncUpload(await bagFor(req), req.upload_link).code, 0);
    const completes = await Promise.all(
      reqs.map((req) => d.request('POST', `/v1/requests/${req.bag_id}/complete`, { token: bob })),
    );
    t.same(
      completes.map((c) => c.status),
      [201, 201, 201, 201, 201],
    );
    const items = await Promise.all(completes.map((c) => d.waitForQueueItem(c.json.id, bob)));
    t.same(
      items.map((i) => i.status),
      ['DONE', 'DONE', 'DONE', 'DONE', 'DONE'],
    );
  });

  await t.test('rsync to a made-up capability or the module root is refused', async (t) => {
    const src = join(scratch, 'intruder');
    await makeBag(src, { files: { 'x.txt': 'x' } });
    const base = `rsync://127.0.0.1:${d.rsyncPort}/preservd`;
    t.not(rsyncUpload(src, `${base}/${'0'.repeat(32)}/`).code, 0);
    t.not(rsyncUpload(src, `${base}/`).code, 0);
    t.not(rsyncUpload(src, `${base}/new-folder/`).code, 0);
    t.same(
      readdirSync(join(d.dataDir, 'landing')).filter(
        (name) => name === '0'.repeat(32) || name === 'new-folder' || name === 'x.txt',
      ),
      [],
    );
  });
});
