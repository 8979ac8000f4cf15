/**
 * Schema 1 → 3 and 2 → 3: a catalog written in the old shapes (no owner, content-type or state indexes, no
 * payload lists, no verification states) is carried forward when opened, in bounded batches, and
 * every list then reads its indexes.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { open } from 'lmdb';
import t, { type Test } from 'tap';
import { Catalog, SCHEMA_VERSION } from '../../src/catalog/catalog.js';
import { DataLayout } from '../../src/storage/layout.js';
import type { FileRecord, Package, PreservationEvent, QueueItem } from '../../src/catalog/types.js';

/** Writes a schema-1 catalog as preservd 0.1 did: `n` packages, every other one stored. */
async function writeOldCatalog(
  dataDir: string,
  n: number,
): Promise<{ packages: Package[]; events: PreservationEvent[]; queue: QueueItem[] }> {
  const root = open({ path: join(dataDir, 'catalog'), maxDbs: 32, compression: false });
  const db = (name: string) => root.openDB<any, any>({ name });
  const [
    meta,
    packages,
    byExternalId,
    order,
    byCapability,
    files,
    fileBytes,
    events,
    eventsByPackage,
    queue,
    queueByPackage,
  ] = [
    'meta',
    'packages',
    'packagesByExternalId',
    'packageOrder',
    'packagesByCapability',
    'files',
    'packageFileBytes',
    'events',
    'eventsByPackage',
    'queue',
    'queueByPackage',
  ].map(db) as [any, any, any, any, any, any, any, any, any, any, any];
  const out = { packages: [] as Package[], events: [] as PreservationEvent[], queue: [] as QueueItem[] };
  let eventId = 0;
  let queueId = 0;
  root.transactionSync(() => {
    for (let seq = 1; seq <= n; seq++) {
      const bagId = randomUUID();
      const stored = seq % 2 === 0;
      const at = 1_700_000_000_000 + seq * 1000;
      const pkg: Package = {
        bagId,
        externalId: `ext-${seq}`,
        contentType: seq % 3 === 0 ? 'audio' : 'video',
        user: seq % 4 === 0 ? 'alice' : 'bob',
        capability: randomBytes(16).toString('hex'),
        stored,
        createdAt: at,
        updatedAt: at + 500,
        ...(stored
          ? { storagePath: `${bagId.slice(0, 2)}/${bagId.slice(2, 4)}/${bagId.slice(4, 6)}/${bagId}` }
          : {}),
      };
      packages.put(bagId, { ...pkg, seq });
      byExternalId.put(pkg.externalId, bagId);
      order.put(seq, bagId);
      byCapability.put(pkg.capability, bagId);
      out.packages.push(pkg);
      const item: QueueItem = {
        id: ++queueId,
        bagId,
        status: stored ? 'DONE' : seq % 7 === 0 ? 'FAILED' : 'PENDING',
        stage: stored || seq % 7 === 0 ? 'finished' : 'waiting',
        user: pkg.user,
        createdAt: at,
        updatedAt: at,
      };
      if (seq % 5 !== 1) {
        queue.put(item.id, item);
        queueByPackage.put([bagId, item.id], null);
        out.queue.push(item);
      }
      if (!stored) continue;
      const records: FileRecord[] = ['bagit.txt', 'data/b.txt', 'data/a/ä.txt', 'manifest-sha256.txt'].map(
        (path) => ({ path, size: 1, crc32: '00000000', digests: { sha256: '0'.repeat(64) } }),
      );
      for (const f of records) files.put([bagId, f.path], f);
      fileBytes.put(bagId, records.length);
      const add = (
        type: PreservationEvent['type'],
        date: number,
        outcome: 'success' | 'failure' = 'success',
      ) => {
        const event: PreservationEvent = {
          id: ++eventId,
          bagId,
          type,
          executor: pkg.user,
          outcome,
          detail: null,
          date,
        };
        events.put(event.id, event);
        eventsByPackage.put([bagId, event.id], null);
        out.events.push(event);
      };
      add('ingestion', at + 500);
      // Every fourth stored package was audited, once or twice; the last check is what counts.
      if (seq % 8 === 0) add('fixity check', at + 10_000, 'success');
      if (seq % 16 === 0) add('fixity check', at + 20_000, 'failure');
    }
    meta.put('schemaVersion', 1);
    meta.put('seq:package', n);
    meta.put('seq:event', eventId);
    meta.put('seq:queue', queueId);
  });
  await root.close();
  return out;
}

t.test(
  'a schema-1 catalog gets its indexes, payload lists and verification states, through schema 4',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'preservd-migrate-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    // More than one migration batch (5,000 records).
    const old = await writeOldCatalog(dir, 12_000);
    const catalog = Catalog.open(new DataLayout(dir));
    t.teardown(() => catalog.close());
    t.equal(catalog.schemaVersion, SCHEMA_VERSION);
    t.equal(SCHEMA_VERSION, 4);

    const ids = (pkgs: Iterable<Package>) => [...pkgs].map((p) => p.bagId);
    const alice = { kind: 'some', users: ['alice'], contentTypes: [] } as const;
    t.same(
      ids(catalog.packages.list({ scope: alice })),
      old.packages.filter((p) => p.user === 'alice').map((p) => p.bagId),
      'by owner, oldest first',
    );
    t.same(
      ids(catalog.packages.list({ contentType: 'audio' })),
      old.packages.filter((p) => p.contentType === 'audio').map((p) => p.bagId),
      'by content type',
    );
    t.same(
      ids(catalog.packages.list({ stored: false })),
      old.packages.filter((p) => !p.stored).map((p) => p.bagId),
      'open requests',
    );
    t.equal(catalog.packages.count({ stored: true }), 6_000);
    t.equal(
      catalog.packages.openCountOf('bob'),
      old.packages.filter((p) => p.user === 'bob' && !p.stored).length,
      "bob's open requests",
    );
    t.equal(catalog.packages.openCountOf('alice'), 0, 'alice has none open');
    const grantee = { kind: 'some', users: ['alice'], contentTypes: ['audio'] } as const;
    t.same(
      ids(catalog.packages.list({ scope: grantee })),
      old.packages.filter((p) => p.user === 'alice' || p.contentType === 'audio').map((p) => p.bagId),
      'owner and content type merged in order, each once',
    );

    const stored = old.packages.filter((p) => p.stored);
    const sample = stored[7]!; // seq 16: checked twice, the second time failed
    t.equal(
      catalog.files.payloadListJson(sample.bagId).toString('utf8'),
      JSON.stringify(['a/ä.txt', 'b.txt']),
      'payload list kept as JSON',
    );
    t.same(
      catalog.fixity.get(sample.bagId),
      { verifiedAt: sample.createdAt + 20_000, checkedAt: sample.createdAt + 20_000, outcome: 'failure' },
      'the last fixity check',
    );
    t.same(
      catalog.fixity.get(stored[0]!.bagId),
      { verifiedAt: stored[0]!.updatedAt },
      'never audited: verified by its ingest',
    );
    t.equal(catalog.fixity.get(old.packages[0]!.bagId), undefined, 'open requests are not scheduled');
    t.equal(catalog.fixity.count(), 6_000);
    const stalest = catalog.fixity.stalest(3).map((s) => s.bagId);
    t.same(
      stalest,
      stored.slice(0, 3).map((p) => p.bagId),
      'stalest first',
    );

    const aliceEvents = catalog.events.page({ scope: alice, limit: 1000 });
    t.same(
      aliceEvents.items.map((e) => e.id),
      old.events
        .filter((e) => old.packages.find((p) => p.bagId === e.bagId)!.user === 'alice')
        .slice(0, 1000)
        .map((e) => e.id),
      "alice's events by the owner index",
    );
    t.same(
      catalog.queue.pending().map((i) => i.id),
      old.queue.filter((i) => i.status === 'PENDING').map((i) => i.id),
      'PENDING items from their index',
    );
    t.equal(catalog.queue.depth(), old.queue.filter((i) => i.status === 'PENDING').length);
    assertQueueCounts(t, catalog, old.queue);
    const bobQueue = catalog.queue.page({
      scope: { kind: 'some', users: ['bob'], contentTypes: [] },
      limit: 5,
    });
    t.same(
      bobQueue.items.map((i) => i.id),
      old.queue
        .filter((i) => old.packages.find((p) => p.bagId === i.bagId)!.user === 'bob')
        .slice(0, 5)
        .map((i) => i.id),
    );

    // New records after the migration continue the sequences and land in the indexes.
    const created = catalog.packages.create({
      bagId: randomUUID(),
      externalId: 'after',
      contentType: 'audio',
      user: 'alice',
      capability: randomBytes(16).toString('hex'),
    });
    t.ok('created' in created);
    t.equal(
      ids(catalog.packages.list({ scope: alice })).at(-1),
      'created' in created ? created.created.bagId : '',
    );
  },
);

/** The queue's counts and newest failures, from the indexes, as the records say. */
function assertQueueCounts(t: Test, catalog: Catalog, queue: QueueItem[]): void {
  const failed = queue.filter((i) => i.status === 'FAILED');
  t.ok(failed.length > 100, 'the catalog has failures to count');
  t.same(
    catalog.queue.counts(),
    {
      total: queue.length,
      pending: queue.filter((i) => i.status === 'PENDING').length,
      failed: failed.length,
    },
    'counts from the indexes',
  );
  t.same(
    [...catalog.queue.failedNewestFirst()].slice(0, 3).map((i) => i.id),
    failed
      .slice(-3)
      .reverse()
      .map((i) => i.id),
    'newest failures first',
  );
}

t.test('a schema-2 catalog gets the index of FAILED queue items', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'preservd-migrate-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const old = await writeOldCatalog(dir, 6_000);
  await Catalog.open(new DataLayout(dir)).close(); // 1 → 4
  // Back to what schema 2 had: no FAILED index.
  const root = open({ path: join(dir, 'catalog'), maxDbs: 64, compression: false });
  const failedIndex = root.openDB({ name: 'queueFailed' });
  const meta = root.openDB({ name: 'meta' });
  await root.transaction(() => {
    failedIndex.clearSync();
    meta.putSync('schemaVersion', 2);
  });
  await root.close();
  const catalog = Catalog.open(new DataLayout(dir));
  t.teardown(() => catalog.close());
  t.equal(catalog.schemaVersion, 4);
  assertQueueCounts(t, catalog, old.queue);
});

t.test('a schema-3 catalog gets the owner index of open requests', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'preservd-migrate-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const old = await writeOldCatalog(dir, 12_000);
  await Catalog.open(new DataLayout(dir)).close(); // 1 → 4
  // Back to what schema 3 had: no owner index of open requests.
  const root = open({ path: join(dir, 'catalog'), maxDbs: 64, compression: false });
  const openIndex = root.openDB({ name: 'openPackagesByOwner' });
  const meta = root.openDB({ name: 'meta' });
  await root.transaction(() => {
    openIndex.clearSync();
    meta.putSync('schemaVersion', 3);
  });
  await root.close();
  const catalog = Catalog.open(new DataLayout(dir));
  t.teardown(() => catalog.close());
  t.equal(catalog.schemaVersion, 4);
  const bobs = old.packages.filter((p) => p.user === 'bob' && !p.stored).length;
  t.equal(bobs, 6_000, 'more than one migration batch');
  t.equal(catalog.packages.openCountOf('bob'), bobs, "bob's open requests");
  t.equal(catalog.packages.openCountOf('alice'), 0, 'alice has none open (all hers are stored)');
});
