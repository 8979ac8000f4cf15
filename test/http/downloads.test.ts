/**
 * Downloads and event listings through the real daemon, on a bag that went through ingest:
 * every file back byte for byte, names resolved through the catalog only, the zip checked by
 * Python's zipfile and unzip, ownership rules, and a zip that aborts when storage is damaged.
 */
import { spawnSync } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';

const files: Record<string, string | Buffer> = {
  'a.txt': 'hello\n',
  'deep/er/b.bin': Buffer.alloc(3 * 1024 * 1024 + 5, 9),
  'Núñez ünïcode.xml': '<x/>\n',
  'empty.dat': '',
  'with space.tif': Buffer.from([0x49, 0x49, 0x2a, 0]),
};

const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest();

t.test('downloads and events', async (t) => {
  const d = await TestDaemon.start(t);
  const alice = d.addUser('alice');
  const bob = d.addUser('bob');
  const { request } = await ingestBag(d, alice, files);
  const bagId: string = request.bag_id;
  const scratch = mkdtempSync(join(tmpdir(), 'preservd-dl-'));
  t.teardown(() => rmSync(scratch, { recursive: true, force: true }));

  await t.test('every file comes back byte for byte with its digest', async (t) => {
    for (const [name, content] of Object.entries(files)) {
      const path = `/v1/packages/${bagId}/${name.split('/').map(encodeURIComponent).join('/')}`;
      const res = await fetch(`${d.url}${path}`, { headers: { authorization: `Bearer ${alice}` } });
      t.equal(res.status, 200, name);
      const body = Buffer.from(await res.arrayBuffer());
      t.ok(body.equals(Buffer.from(content)), `${name}: bytes`);
      t.equal(res.headers.get('etag'), `"${sha256(content).toString('hex')}"`, `${name}: ETag is the sha256`);
      t.equal(
        res.headers.get('repr-digest'),
        `sha-256=:${sha256(content).toString('base64')}:`,
        `${name}: Repr-Digest`,
      );
      t.equal(res.headers.get('content-length'), String(Buffer.byteLength(content)));
      t.match(res.headers.get('content-disposition'), /^attachment; filename=/);
    }
    const xml = await d.request('GET', `/v1/packages/${bagId}/${encodeURIComponent('Núñez ünïcode.xml')}`, {
      token: alice,
    });
    t.match(xml.headers.get('content-type'), /xml/);
    const ranged = await fetch(`${d.url}/v1/packages/${bagId}/a.txt`, {
      headers: { authorization: `Bearer ${alice}`, range: 'bytes=1-3' },
    });
    t.equal(ranged.status, 206);
    t.equal(await ranged.text(), 'ell');
    const etag = ranged.headers.get('etag')!;
    const cached = await fetch(`${d.url}/v1/packages/${bagId}/a.txt`, {
      headers: { authorization: `Bearer ${alice}`, 'if-none-match': etag },
    });
    t.equal(cached.status, 304);
  });

  await t.test('only payload files of the catalog: tag files, .. and unknown names are 404', async (t) => {
    for (const name of [
      'bagit.txt',
      'chipmunk-info.txt',
      'manifest-md5.txt',
      'data/a.txt',
      '..%2Fbagit.txt',
      '%2e%2e/bagit.txt',
      '..%2F..%2F..%2F..%2Fetc%2Fpasswd',
      'deep',
      'deep/er',
      'nope',
      '.%2Fa.txt',
      'a.txt%00',
    ]) {
      const res = await d.request('GET', `/v1/packages/${bagId}/${name}`, { token: alice });
      t.equal(res.status, 404, name);
      t.type(res.json?.error, 'string', `${name}: JSON error`);
    }
    const bobs = await d.request('GET', `/v1/packages/${bagId}/a.txt`, { token: bob });
    t.equal(bobs.status, 403);
    t.equal((await d.request('GET', `/v1/packages/${randomUUID()}/a.txt`, { token: alice })).status, 404);
    const unstored = await d.createRequest(alice, {
      bag_id: randomUUID(),
      external_id: `unstored-${randomUUID()}`,
    });
    t.equal((await d.request('GET', `/v1/packages/${unstored.bag_id}/a.txt`, { token: alice })).status, 404);
    t.equal(
      (await d.request('GET', `/v1/packages/${unstored.bag_id}/download`, { token: alice })).status,
      404,
    );
    t.equal((await d.request('GET', `/v1/packages/${bagId}/download`, { token: bob })).status, 403);
  });

  await t.test('the zip holds every file under <bag_id>/ and checks out', async (t) => {
    const res = await fetch(`${d.url}/v1/packages/${request.external_id}/download`, {
      headers: { authorization: `Bearer ${alice}` },
    });
    t.equal(res.status, 200);
    t.equal(res.headers.get('content-type'), 'application/zip');
    t.match(res.headers.get('content-disposition'), new RegExp(`filename="${bagId}\\.zip"`));
    const zip = Buffer.from(await res.arrayBuffer());
    t.equal(
      String(zip.length),
      res.headers.get('content-length'),
      'Content-Length announced up front is exact',
    );
    const zipPath = join(scratch, 'bag.zip');
    writeFileSync(zipPath, zip);
    const check = spawnSync(
      'python3',
      [
        '-c',
        `
import sys, zipfile, json
z = zipfile.ZipFile(sys.argv[1])
assert z.testzip() is None
print(json.dumps({i.filename: i.compress_type for i in z.infolist()}))
`,
        zipPath,
      ],
      { encoding: 'utf8' },
    );
    t.equal(check.status, 0, check.stderr);
    const entries = JSON.parse(check.stdout) as Record<string, number>;
    const names = Object.keys(entries).sort();
    t.ok(
      names.every((n) => n.startsWith(`${bagId}/`)),
      'one top folder',
    );
    for (const name of Object.keys(files)) t.ok(names.includes(`${bagId}/data/${name}`), `has data/${name}`);
    for (const tag of [
      'bagit.txt',
      'bag-info.txt',
      'chipmunk-info.txt',
      'manifest-md5.txt',
      'manifest-sha256.txt',
    ])
      t.ok(names.includes(`${bagId}/${tag}`), `has ${tag}`);
    t.ok(
      Object.values(entries).every((c) => c === 0),
      'stored, not deflated',
    );
    const unzip = spawnSync('unzip', ['-t', zipPath], { encoding: 'utf8' });
    t.equal(unzip.status, 0, unzip.stdout);
  });

  await t.test('events: per package, repository-wide, ownership', async (t) => {
    const own = await d.request('GET', `/v1/packages/${bagId}/events`, { token: alice });
    t.same(
      own.json.map((e: any) => e.type),
      ['transfer', 'validation', 'ingestion'],
    );
    const deprecated = await d.request('GET', `/v1/bags/${bagId}/events`, { token: alice });
    t.same(deprecated.json, own.json);
    const filtered = await d.request('GET', `/v1/events?bag_id=${request.external_id}`, { token: alice });
    t.same(filtered.json, own.json);
    const ids = own.json.map((e: any) => e.id);
    t.same(
      ids,
      [...ids].sort((a: number, b: number) => a - b),
      'in date order',
    );
    t.equal((await d.request('GET', `/v1/packages/${bagId}/events`, { token: bob })).status, 403);
    t.equal((await d.request('GET', `/v1/packages/${randomUUID()}/events`, { token: bob })).status, 404);
    t.same(
      (await d.request('GET', `/v1/events?bag_id=${bagId}`, { token: bob })).json,
      [],
      "another user's events are not listed",
    );
    t.same((await d.request('GET', '/v1/events', { token: bob })).json, []);
    const all = await d.request('GET', '/v1/events');
    t.ok(all.json.length >= 3, 'admins see every event');
  });

  await t.test('a damaged package aborts the zip instead of sending a complete-looking one', async (t) => {
    const admin = await d.request('GET', `/v1/packages/${bagId}`);
    unlinkSync(join(admin.json.storage_location, 'v1/content/data/deep/er/b.bin'));
    let failed = false;
    let received = 0;
    try {
      const res = await fetch(`${d.url}/v1/packages/${bagId}/download`, {
        headers: { authorization: `Bearer ${alice}` },
      });
      received = (await res.arrayBuffer()).byteLength;
    } catch {
      failed = true;
    }
    t.ok(failed, `the client sees a broken transfer (received ${received} bytes)`);
    const file = await d.request('GET', `/v1/packages/${bagId}/deep/er/b.bin`, { token: alice });
    t.equal(file.status, 500, 'a missing stored file is a server-side problem');
    t.notMatch(file.text, d.dataDir, 'no server path in the error');
    t.equal(
      (await d.request('GET', `/v1/packages/${bagId}/a.txt`, { token: alice })).status,
      200,
      'still serving',
    );
  });
});
