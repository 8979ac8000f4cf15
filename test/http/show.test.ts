/**
 * A show of a stored package (GET /v1/packages/{bag_id}) as held between shows (kept-shows.ts), a
 * finished body per view flavour that fastify sends as it is: the document, Content-Length and
 * Content-Type, HEAD with the headers and no body, the response still counted by the metrics;
 * each caller's flavour the bytes of a fresh rendering through the response schema, rendered
 * again once the package record, its payload list, its fixity check or a replica's copy changes.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import Fastify from 'fastify';
import t from 'tap';
import type { FileRecord, Package, PreservationEvent } from '../../src/catalog/types.js';
import { defaults, type Config } from '../../src/config/config.js';
import { KeptShows, type StorageBytes } from '../../src/http/kept-shows.js';
import { offlineServer } from '../../src/http/offline.js';
import { ref, sharedSchemas } from '../../src/http/schemas.js';
import { packageView } from '../../src/http/views.js';
import { uploadLink } from '../../src/ingest/upload-link.js';
import { Storage } from '../../src/storage/storage.js';

const file = (path: string): FileRecord => ({
  path,
  size: 1,
  crc32: '00000000',
  digests: { sha256: '0'.repeat(64) },
});

t.test(
  'KeptShows holds shows by package and flavour, drops the least recently shown, renders a changed package again',
  async (t) => {
    let reads = 0;
    let renders = 0;
    const lists = new Map<string, string>();
    const shows = new KeptShows(60);
    /** A package record as the catalog stores it: its bytes, which any write changes. */
    const record = (bagId: string, version?: number) =>
      Buffer.from(JSON.stringify(version === undefined ? { bagId } : { bagId, version }));
    /** As the route shows: the held package and body, else the record decoded, rendered and held. */
    const show = (bytes: Buffer, storage: StorageBytes | undefined): Buffer => {
      const { bagId } = JSON.parse(bytes.toString()) as Package;
      const held = shows.package(bagId, bytes);
      const pkg = held ?? (JSON.parse(bytes.toString()) as Package);
      const body = held === undefined ? undefined : shows.get(held, storage);
      if (body !== undefined) return body;
      reads++;
      renders++;
      return shows.keep(
        pkg,
        held === undefined ? Buffer.from(bytes) : undefined,
        storage,
        Buffer.from(`${bagId}${storage === undefined ? '' : '+'}:${lists.get(bagId)!}${renders}`),
      );
    };
    const text = (body: Buffer) => body.toString();
    const storage: StorageBytes = [undefined];
    lists.set('a', '[1,2]');
    t.equal(text(show(record('a', 1), undefined)), 'a:[1,2]1');
    t.equal(text(show(record('a', 1), undefined)), 'a:[1,2]1', 'held');
    t.equal(text(show(record('a', 1), storage)), 'a+:[1,2]2', 'the other flavour: rendered');
    t.equal(text(show(record('a', 1), [undefined])), 'a+:[1,2]2', 'the same storage state read again: held');
    t.equal(reads, 2, 'one rendering per flavour');
    t.equal(
      text(show(record('a', 1), [Buffer.from('{"verifiedAt":1}')])),
      'a+:[1,2]3',
      'another storage state: rendered again',
    );
    t.equal(
      text(show(record('a', 1), [Buffer.from('{"verifiedAt":1}'), undefined])),
      'a+:[1,2]4',
      'a replica more: rendered again',
    );
    t.equal(text(show(record('a', 1), undefined)), 'a:[1,2]1', 'the other flavour still held');
    lists.set('a', '[3]');
    t.equal(text(show(record('a', 2), undefined)), 'a:[3]5', 'the record changed: read and rendered again');
    t.equal(text(show(record('a', 2), storage)), 'a+:[3]6', 'both flavours');
    t.equal(
      text(show(record('a'), storage)),
      'a+:[3]7',
      'a record without a version (an older catalog): other bytes, rendered again',
    );
    t.equal(text(show(record('a'), storage)), 'a+:[3]7', 'and held');
    lists.set('b', '[4,5]');
    show(record('b', 1), undefined); // 'b:[4,5]8': 8 bytes and its record's 25, a's 7 and 14
    show(record('a'), storage); // a is now the most recently shown
    lists.set('c', '[6]');
    show(record('c', 1), undefined); // 'c:[6]9' and 25: 21 + 33 + 31 > 60, b goes
    t.equal(text(show(record('a'), storage)), 'a+:[3]7', 'kept');
    t.equal(text(show(record('b', 1), undefined)), 'b:[4,5]10', 'dropped, rendered again');
    lists.set('big', `[${'1,'.repeat(30)}1]`);
    const reads0 = reads;
    show(record('big', 1), undefined);
    show(record('big', 1), undefined);
    t.equal(reads - reads0, 2, 'larger than the limit: never held');
  },
);

t.test('a show of a stored package', async (t) => {
  const server = await offlineServer();
  t.teardown(() => server.close());
  const { app, catalog } = server;
  catalog.users.add('admin', true);
  const { secret } = catalog.users.issueToken('admin');
  const headers = { authorization: `Bearer ${secret}` };
  const bagId = randomUUID();
  catalog.packages.create({
    bagId,
    externalId: 'x',
    contentType: 'audio',
    user: 'admin',
    capability: 'c'.repeat(32),
  });
  catalog.files.put(bagId, ['bagit.txt', 'data/é "q".wav', 'data/a.wav'].map(file));
  catalog.packages.markStored(bagId, Storage.storagePath(bagId));

  const show = await app.inject({ method: 'GET', url: `/v1/packages/${bagId}`, headers });
  t.equal(show.statusCode, 200, show.body);
  t.equal(show.headers['content-type'], 'application/json; charset=utf-8');
  t.equal(Number(show.headers['content-length']), show.rawPayload.length);
  const doc = show.json();
  t.same(doc.files, ['a.wav', 'é "q".wav']);
  t.equal(doc.version, 1, 'version 1 after the first deposit (API.md)');
  t.same(Object.keys(doc), [
    'bag_id',
    'user',
    'content_type',
    'external_id',
    'upload_link',
    'storage_location',
    'replicas',
    'stored',
    'version',
    'last_fixity_check',
    'files',
    'created_at',
    'updated_at',
  ]);

  const head = await app.inject({ method: 'HEAD', url: `/v1/packages/${bagId}`, headers });
  t.equal(head.statusCode, 200);
  t.equal(head.headers['content-length'], show.headers['content-length'], 'HEAD: the length of the GET');
  t.equal(head.rawPayload.length, 0, 'HEAD: no body');

  t.same(
    (await app.inject({ method: 'GET', url: `/v1/packages/${bagId}`, headers })).json(),
    doc,
    'the second show, from the held list',
  );
  const metrics = await app.inject({ method: 'GET', url: '/metrics', remoteAddress: '127.0.0.1' });
  t.match(
    metrics.body,
    /preservd_http_requests_total\{route="\/v1\/packages\/:bag_id",method="GET",status="200"\} 2/,
    'counted by the metrics',
  );

  // Held: the records' bytes are compared, nothing is decoded (kept-shows.ts).
  const decoded: string[] = [];
  const spy = <T extends object>(label: string, store: T, name: keyof T & string) => {
    const real = (store[name] as (...args: unknown[]) => unknown).bind(store);
    Object.assign(store, { [name]: (...args: unknown[]) => (decoded.push(label), real(...args)) });
  };
  spy('packages.find', catalog.packages, 'find');
  spy('packages.get', catalog.packages, 'get');
  spy('fixity.get', catalog.fixity, 'get');
  t.same(
    (await app.inject({ method: 'GET', url: `/v1/packages/${bagId}`, headers })).rawPayload,
    show.rawPayload,
    'held: the same bytes',
  );
  t.same(decoded, [], 'held: neither the package nor its fixity state decoded');
  catalog.fixity.checked(bagId, Date.now() + 1000, 'success');
  const audited = (await app.inject({ method: 'GET', url: `/v1/packages/${bagId}`, headers })).json();
  t.not(audited.last_fixity_check, null, 'its fixity record changed: rendered again');
  t.same(decoded, ['fixity.get'], 'the package held, its fixity state read');
  decoded.length = 0;

  // Files recorded again without a write to the record itself: the payload list is part of the version.
  catalog.files.put(bagId, ['bagit.txt', 'data/c.wav'].map(file));
  t.same(
    (await app.inject({ method: 'GET', url: `/v1/packages/${bagId}`, headers })).json().files,
    ['c.wav'],
    'a new payload list alone changes the show',
  );

  // Stored again with other files (not something the ingest does): the record changes, so does the list.
  await sleep(5);
  catalog.files.put(bagId, ['bagit.txt', 'data/b.wav'].map(file));
  catalog.packages.markStored(bagId, Storage.storagePath(bagId));
  t.same((await app.inject({ method: 'GET', url: `/v1/packages/${bagId}`, headers })).json().files, [
    'b.wav',
  ]);
});

t.test(
  'a held show is the bytes of a fresh rendering, per flavour, until what it shows changes',
  async (t) => {
    const replicas = [
      { name: 'mirror', kind: 'dir', path: '/nonexistent/mirror' },
      { name: 'vault', kind: 'dir', path: '/nonexistent/vault' },
    ] as Config['replicas'];
    const server = await offlineServer({ replicas });
    t.teardown(() => server.close());
    const { app, catalog } = server;
    const config = { ...defaults(), replicas };
    const tokenOf = (name: string, admin = false) => {
      catalog.users.add(name, admin);
      return catalog.users.issueToken(name).secret;
    };
    const callers = {
      admin: tokenOf('root', true),
      owner: tokenOf('olga'),
      viewer: tokenOf('vera'),
      typeAdmin: tokenOf('tess'),
    };
    catalog.grants.grant('vera', 'viewer', 'audio', Object.keys(config.contentTypes));
    catalog.grants.grant('tess', 'admin', 'audio', Object.keys(config.contentTypes));
    const seesStorage = { admin: true, owner: false, viewer: false, typeAdmin: true };
    const bagId = randomUUID();
    catalog.packages.create({
      bagId,
      externalId: 'ü-1',
      contentType: 'audio',
      user: 'olga',
      capability: 'c'.repeat(32),
    });
    catalog.files.put(bagId, ['bagit.txt', 'data/é "q".wav', 'data/a.wav'].map(file));
    catalog.packages.markStored(bagId, Storage.storagePath(bagId));

    const show = async (who: keyof typeof callers) =>
      (
        await app.inject({
          method: 'GET',
          url: `/v1/packages/${bagId}`,
          headers: { authorization: `Bearer ${callers[who]}` },
        })
      ).rawPayload;
    const storageLocation = JSON.parse((await show('admin')).toString()).storage_location as string;
    /** Where packages are stored: their locations are under it. */
    const storageRoot = storageLocation.slice(0, -Storage.storagePath(bagId).length);
    // A fresh rendering through the response schema: a route of its own with the show's schema, as fastify serialises it.
    const schemaApp = Fastify();
    for (const schema of sharedSchemas) schemaApp.addSchema(schema);
    let rendering: Record<string, unknown> = {};
    schemaApp.get('/', { schema: { response: { 200: ref('Package') } } }, async () => rendering);
    t.teardown(() => schemaApp.close());
    /** The show rendered afresh from what the catalog holds now (views.ts, through the Package schema). */
    const fresh = async (storageVisible: boolean) => {
      const pkg = catalog.packages.get(bagId)!;
      const view = packageView(pkg, {
        storageVisible,
        uploadLink: uploadLink(config.upload, pkg),
        storageLocation: storageVisible ? `${storageRoot}${pkg.storagePath!}` : undefined,
        replicas: storageVisible
          ? replicas.map(({ name }) => ({ name, copy: catalog.replication.get(bagId, name) }))
          : undefined,
        fixity: storageVisible ? catalog.fixity.get(bagId) : undefined,
        files: JSON.parse(catalog.files.payloadListJson(bagId).toString('utf8')) as string[],
      });
      rendering = view;
      const body = (await schemaApp.inject({ method: 'GET', url: '/' })).body;
      t.equal(
        body,
        JSON.stringify(view),
        'the schema writes the view as JSON.stringify does (the bytes the show always sent)',
      );
      return body;
    };
    const everyCaller = async (when: string) => {
      for (const round of ['rendered', 'held'])
        for (const who of Object.keys(callers) as Array<keyof typeof callers>)
          t.same((await show(who)).toString(), await fresh(seesStorage[who]), `${when}: ${who}, ${round}`);
    };

    await everyCaller('as stored');
    t.notOk(
      JSON.parse((await show('owner')).toString()).storage_location,
      'the owner after an admin: no storage details',
    );
    t.ok(
      JSON.parse((await show('admin')).toString()).storage_location,
      'an admin after the owner: storage details',
    );

    const before = (await show('admin')).toString();
    catalog.fixity.checked(bagId, Date.now() + 1000, 'success');
    t.not((await show('admin')).toString(), before, 'an audit of the package changes the show');
    await everyCaller('after an audit');

    catalog.replication.enqueue(bagId, ['mirror', 'vault'], 10);
    await everyCaller('copies pending');
    catalog.replication.verified(bagId, 'mirror', () => ({}) as PreservationEvent);
    t.match(
      JSON.parse((await show('admin')).toString()).replicas[0],
      { name: 'mirror', status: 'verified' },
      'a verified copy shows',
    );
    await everyCaller('one copy verified');
    catalog.replication.fail(bagId, 'vault', { error: 'wrong size', nextAttemptAt: Date.now() });
    t.match(
      JSON.parse((await show('admin')).toString()).replicas[1],
      { name: 'vault', status: 'failed', error: 'wrong size' },
      'a failed copy shows',
    );
    await everyCaller('one copy failed');

    const shownAt = JSON.parse((await show('owner')).toString()).updated_at as string;
    await sleep(5);
    catalog.packages.markStored(bagId, Storage.storagePath(bagId));
    t.not(
      JSON.parse((await show('owner')).toString()).updated_at,
      shownAt,
      'a changed record changes the show',
    );
    await everyCaller('after the record changed');

    // Two writes within one millisecond: the second changes what an admin sees, not updated_at.
    const realNow = Date.now;
    const frozen = realNow();
    Date.now = () => frozen;
    try {
      catalog.packages.markStored(bagId, Storage.storagePath(bagId));
      const shown = (await show('admin')).toString();
      catalog.packages.markStored(bagId, Storage.storagePath(randomUUID()));
      t.not(
        (await show('admin')).toString(),
        shown,
        'a second write in the same millisecond changes the show',
      );
      await everyCaller('after two writes in one millisecond');
    } finally {
      Date.now = realNow;
    }

    const open = randomUUID();
    catalog.packages.create({
      bagId: open,
      externalId: 'open',
      contentType: 'audio',
      user: 'olga',
      capability: 'd'.repeat(32),
    });
    const openShow = await app.inject({
      method: 'GET',
      url: `/v1/packages/${open}`,
      headers: { authorization: `Bearer ${callers.admin}` },
    });
    t.same(openShow.json().files, [], 'an open request: its show rendered, with no files');
  },
);
