/**
 * LMDB's map full: the catalog starts with lmdb-js's small default map (128 KiB; the catalog
 * sets no mapSize) and must grow it whenever a transaction needs more, instead of failing with
 * MDB_MAP_FULL. Proved in one transaction far bigger than the map (100,000 file records, as one
 * huge bag's intent writes them), and through the daemon with a bag of thousands of files while
 * another process holds the catalog open and reads what the daemon wrote past the old map.
 * `PRESERVD_LONG_TESTS=1` adds a bag of 100,000 files through the daemon.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { open } from 'lmdb';
import t from 'tap';
import { Catalog } from '../../src/catalog/catalog.js';
import { DataLayout } from '../../src/storage/layout.js';
import type { FileRecord } from '../../src/catalog/types.js';
import { TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';
import { assertInvariants } from '../helpers/invariants.js';

const INITIAL_MAP = 128 * 1024;

function catalogSize(metrics: string): number {
  const m = /^preservd_catalog_size_bytes (\d+)$/m.exec(metrics);
  if (m === null) throw new Error('no preservd_catalog_size_bytes in /metrics');
  return Number(m[1]);
}

t.test('one transaction much larger than the map grows it, and every record reads back', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'preservd-map-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const catalog = Catalog.open(new DataLayout(dataDir));
  // Same environment in this process: its stats show the map the catalog runs with.
  const env = open({ path: join(dataDir, 'catalog'), readOnly: true });
  const mapSize = () => (env.getStats() as { mapSize: number }).mapSize;
  t.equal(mapSize(), INITIAL_MAP, 'the catalog starts with a 128 KiB map');

  const bagId = '0badc0de-0000-4000-8000-000000000001';
  catalog.packages.create({
    bagId,
    externalId: 'map-full',
    contentType: 'video',
    user: 'alice',
    capability: 'a'.repeat(32),
  });
  const files: FileRecord[] = [];
  for (let i = 0; i < 100_000; i++)
    files.push({
      path: `data/${String(i).padStart(6, '0')}.txt`,
      size: i,
      crc32: i.toString(16).padStart(8, '0'),
      digests: { md5: 'a'.repeat(32), sha256: i.toString(16).padStart(64, '0') },
    });
  catalog.files.put(bagId, files);
  catalog.packages.markStored(bagId, '0b/ad/c0/0badc0de-0000-4000-8000-000000000001');
  t.ok(
    catalog.sizeBytes() > 100 * INITIAL_MAP,
    `the data (${catalog.sizeBytes()} bytes) is far beyond the first map`,
  );
  t.ok(mapSize() >= catalog.sizeBytes(), `the map grew to ${mapSize()} bytes`);
  await catalog.close();
  await env.close();

  const again = Catalog.open(new DataLayout(dataDir), { readOnly: true });
  t.teardown(() => again.close());
  const read = again.files.list(bagId);
  t.equal(read.length, 100_000, 'reopened, every record is there');
  t.same(read[99_999], files[99_999], 'and intact');
});

t.test('the daemon grows the map during an ingest while another process has the catalog open', async (t) => {
  const d = await TestDaemon.start(t, { keepDataDir: true });
  t.teardown(() => rmSync(d.dataDir, { recursive: true, force: true }));
  const token = d.addUser('alice');
  const before = catalogSize((await d.request('GET', '/metrics', { token: null })).text);
  t.ok(before < INITIAL_MAP, `the catalog starts inside its first map (${before} bytes)`);
  // A reader holding the environment open across the growth (as a CLI process might).
  const reader = Catalog.open(new DataLayout(d.dataDir), { readOnly: true });
  t.teardown(() => reader.close());
  t.equal(reader.packages.count(), 0);

  const count = process.env.PRESERVD_LONG_TESTS === '1' ? 100_000 : 2_000;
  const files: Record<string, string> = {};
  for (let i = 0; i < count; i++)
    files[`many/${String(i).padStart(6, '0')}-${'n'.repeat(60)}.txt`] = `${i}\n`;
  const { request } = await ingestBag(d, token, files);
  const after = catalogSize((await d.request('GET', '/metrics', { token: null })).text);
  t.ok(after > 4 * INITIAL_MAP, `the catalog grew to ${after} bytes in one ingest`);
  const pkg = await d.request('GET', `/v1/packages/${request.bag_id}`, { token });
  t.equal(pkg.json.files.length, count, 'every file is recorded');
  const seen = reader.files.list(request.bag_id).filter((f) => f.path.startsWith('data/'));
  t.equal(seen.length, count, 'the other process reads the records written past the old map');

  await d.stop();
  await assertInvariants(t, d.dataDir);
});
