/**
 * A show of a stored package (GET /v1/packages/{bag_id}) as sent in parts (send-parts.ts) with
 * the payload list held between shows (kept-lists.ts): the same document, Content-Length and
 * Content-Type as one buffer would give, HEAD with the headers and no body, the response still
 * counted by the metrics, and a list read afresh once the package record changes.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import type { FileRecord, Package } from '../../src/catalog/types.js';
import { KeptLists } from '../../src/http/kept-lists.js';
import { offlineServer } from '../../src/http/offline.js';
import { Storage } from '../../src/storage/storage.js';

const file = (path: string): FileRecord => ({ path, size: 1, crc32: '00000000', digests: { sha256: '0'.repeat(64) } });

t.test('KeptLists holds lists by package, drops the least recently shown, rereads a changed package', async (t) => {
  const lists = new KeptLists(10);
  const pkg = (bagId: string, updatedAt = 1) => ({ bagId, updatedAt }) as Package;
  let reads = 0;
  const read = (text: string) => () => {
    reads++;
    return Buffer.from(text);
  };
  t.equal(lists.of(pkg('a'), read('[1,2]')).toString(), '[1,2]');
  t.equal(lists.of(pkg('a'), read('[9]')).toString(), '[1,2]', 'held');
  t.equal(reads, 1);
  t.equal(lists.of(pkg('a', 2), read('[3]')).toString(), '[3]', 'the record changed: read again');
  lists.of(pkg('b'), read('[4,5]'));
  lists.of(pkg('a', 2), read('[x]')); // a is now the most recently shown
  lists.of(pkg('c'), read('[6,7,8]')); // 3 + 5 + 7 > 10: b goes
  t.equal(lists.of(pkg('a', 2), read('[x]')).toString(), '[3]', 'kept');
  t.equal(lists.of(pkg('b'), read('[b]')).toString(), '[b]', 'dropped, read again');
  t.equal(lists.of(pkg('big'), read('[1,2,3,4,5]')).toString(), '[1,2,3,4,5]');
  t.equal(lists.of(pkg('big'), read('[other]')).toString(), '[other]', 'larger than the limit: never held');
});

t.test('a show of a stored package', async (t) => {
  const server = await offlineServer();
  t.teardown(() => server.close());
  const { app, catalog } = server;
  catalog.users.add('admin', true);
  const { secret } = catalog.users.issueToken('admin');
  const headers = { authorization: `Bearer ${secret}` };
  const bagId = randomUUID();
  catalog.packages.create({ bagId, externalId: 'x', contentType: 'audio', user: 'admin', capability: 'c'.repeat(32) });
  catalog.packages.putFiles(bagId, ['bagit.txt', 'data/é "q".wav', 'data/a.wav'].map(file));
  catalog.packages.markStored(bagId, Storage.storagePath(bagId));

  const show = await app.inject({ method: 'GET', url: `/v1/packages/${bagId}`, headers });
  t.equal(show.statusCode, 200, show.body);
  t.equal(show.headers['content-type'], 'application/json; charset=utf-8');
  t.equal(Number(show.headers['content-length']), show.rawPayload.length);
  const doc = show.json();
  t.same(doc.files, ['a.wav', 'é "q".wav']);
  t.same(Object.keys(doc), ['bag_id', 'user', 'content_type', 'external_id', 'upload_link', 'storage_location', 'replicas', 'stored', 'last_fixity_check', 'files', 'created_at', 'updated_at']);

  const head = await app.inject({ method: 'HEAD', url: `/v1/packages/${bagId}`, headers });
  t.equal(head.statusCode, 200);
  t.equal(head.headers['content-length'], show.headers['content-length'], 'HEAD: the length of the GET');
  t.equal(head.rawPayload.length, 0, 'HEAD: no body');

  t.same((await app.inject({ method: 'GET', url: `/v1/packages/${bagId}`, headers })).json(), doc, 'the second show, from the held list');
  const metrics = await app.inject({ method: 'GET', url: '/metrics', remoteAddress: '127.0.0.1' });
  t.match(metrics.body, /preservd_http_requests_total\{route="\/v1\/packages\/:bag_id",method="GET",status="200"\} 2/, 'counted by the metrics');

  // Stored again with other files (not something the ingest does): the record changes, so does the list.
  await sleep(5);
  catalog.packages.putFiles(bagId, ['bagit.txt', 'data/b.wav'].map(file));
  catalog.packages.markStored(bagId, Storage.storagePath(bagId));
  t.same((await app.inject({ method: 'GET', url: `/v1/packages/${bagId}`, headers })).json().files, ['b.wav']);
});
