/**
 * The catalog on a disk that fills again and again: every write is either done whole or refused
 * as out of space (CatalogSpaceError, ENOSPC) before LMDB writes a byte. LMDB must never meet the
 * full disk itself: lmdb-js answers a failed page write with errors of its own (ENOSPC, EIO) and,
 * a few writes later, can abort the process on a corrupted heap (catalog/space.ts). The writer
 * runs in a child so that such an abort is seen as the failure it is. Once ordinary writes are
 * refused, a write that records an outcome still goes through: room is kept back for it; and once
 * background writes (files hashed as they land) are refused, ordinary ones still go through.
 */
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { Catalog } from '../../src/catalog/catalog.js';
import { DataLayout } from '../../src/storage/layout.js';
import { fill, mountSmallFilesystem, type SmallFilesystem } from '../helpers/small-fs.js';
import { node } from '../helpers/node.js';

const mounted = mountSmallFilesystem(16);
const skip = 'skip' in mounted ? mounted.skip : false;
const writer = fileURLToPath(new URL('./fixtures/catalog-space-writer.js', import.meta.url));

t.test(
  'a catalog on a disk that keeps filling refuses writes cleanly and loses nothing',
  { skip },
  async (t) => {
    const fs = mounted as SmallFilesystem;
    t.teardown(() => fs.unmount());
    const dataDir = join(fs.dir, 'data');
    mkdirSync(dataDir);
    await Catalog.open(new DataLayout(dataDir)).close(); // created while there is room

    const child = spawnSync(...node([writer, dataDir, fs.dir, '25', '20261125']), {
      encoding: 'utf8',
      timeout: 300_000,
    });
    t.equal(
      child.signal,
      null,
      `the writer was not killed by a signal (${child.signal}); its stderr ends: ${child.stderr.slice(-2000)}`,
    );
    t.equal(child.status, 0, `the writer finished: ${child.stderr.slice(-2000)}`);
    const report = JSON.parse(child.stdout) as {
      created: number;
      refusals: Record<string, number>;
      outcomes: { written: number; refused: string[] };
    };
    t.same(
      Object.keys(report.refusals),
      ['CatalogSpaceError ENOSPC'],
      'every failed write was refused as out of space before it began',
    );
    t.ok(
      report.refusals['CatalogSpaceError ENOSPC']! > 100,
      `many writes were refused (${report.refusals['CatalogSpaceError ENOSPC']})`,
    );
    t.ok(report.created > 100, `and many went through (${report.created} packages)`);
    t.same(report.outcomes.refused, [], 'no outcome write was refused after ordinary ones were');
    t.ok(report.outcomes.written > 10, `outcomes written on a full disk: ${report.outcomes.written}`);

    const catalog = Catalog.open(new DataLayout(dataDir));
    t.teardown(() => catalog.close());
    t.equal(
      catalog.packages.count(),
      report.created,
      'every package the writer was told it created is there, and no other',
    );
    t.equal(catalog.audits.inProgress(), undefined, 'every audit started was finished');
    for (const audit of catalog.audits.list()) {
      if (audit.successes !== audit.packages)
        t.fail(`audit ${audit.id}: ${audit.successes} of ${audit.packages} recorded`);
      if ([...catalog.events.forAudit(audit.id)].length !== audit.packages)
        t.fail(`audit ${audit.id} has not one event per package`);
    }
  },
);

t.test(
  'on a filling disk background writes stop first, then ordinary ones, and outcomes last',
  { skip },
  async (t) => {
    const small = mountSmallFilesystem(16) as SmallFilesystem;
    t.teardown(() => small.unmount());
    const dataDir = join(small.dir, 'data');
    mkdirSync(dataDir);
    const catalog = Catalog.open(new DataLayout(dataDir));
    t.teardown(() => catalog.close());
    const filler = fill(small.dir, 3 * (catalog.space?.headroom ?? 0));
    t.teardown(() => rmSync(filler, { force: true }));

    const request = () => {
      const bagId = randomUUID();
      catalog.packages.create({
        bagId,
        externalId: `ext-${bagId}`,
        contentType: 'video',
        user: 'alice',
        capability: randomUUID().replace(/-/g, ''),
      });
    };
    /** Writes until one is refused as out of space; how many went through. */
    const untilRefused = (write: () => void): number => {
      for (let done = 0; ; done++) {
        try {
          write();
        } catch (err) {
          t.match(err, { name: 'CatalogSpaceError', code: 'ENOSPC' }, 'refused as out of space');
          return done;
        }
      }
    };
    const bagId = randomUUID();
    let batch = 0;
    const landed = untilRefused(() => {
      const records = Array.from({ length: 20 }, (_, i) => ({
        bagId,
        path: `data/${batch}-${i}-${'x'.repeat(150)}.txt`,
        hash: { size: 1, mtimeNs: '1', ctimeNs: '1', ino: '1', dev: '1', crc32: '0', digests: {} },
      }));
      batch++;
      catalog.backgroundTransaction(() => catalog.landedHashes.putAll(records));
    });
    t.ok(landed > 0, `background writes went through until the disk filled (${landed})`);
    const requests = untilRefused(request);
    t.ok(requests > 0, `ordinary writes still went through after them (${requests})`);
    t.doesNotThrow(
      () =>
        catalog.outcomeTransaction(() =>
          catalog.events.add({
            type: 'ingestion',
            bagId,
            executor: 'alice',
            outcome: 'failure',
            detail: 'the disk is full; the upload is kept',
          }),
        ),
      'and an outcome after those',
    );
    t.equal(
      catalog.landedHashes.count(bagId),
      landed * 20,
      'every background write that went through is there',
    );
  },
);
