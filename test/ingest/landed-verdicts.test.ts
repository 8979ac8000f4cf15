/**
 * The verdict with digests taken from hashes made as files landed is exactly the verdict of a
 * full validation, for every bag of the Library of Congress conformance suite: each bag is put
 * in a landing folder, every file reported as rsync would report it and hashed by the landed
 * hasher (the real pool and catalog), then checked both ways; the second way reads no file that
 * was recorded. (The hostile bags run both ways through the daemon: test/hostile/bags.test.ts.)
 */
import { cpSync, statSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { checkUpload } from '../../src/ingest/check-upload.js';
import { KnownDigestsHasher } from '../../src/ingest/known-digests.js';
import { LANDED_ALGORITHMS } from '../../src/ingest/landed-algorithms.js';
import { suiteCases } from '../helpers/conformance-suite.js';
import { landedWorld } from '../helpers/landed-world.js';
import { filesUnder } from '../helpers/walk.js';

t.test('conformance suite: hashed as files land = full validation', async (t) => {
  const { catalog, landing, pool, landed, request } = await landedWorld(t, { workers: 2 });

  t.same(LANDED_ALGORITHMS, ['md5', 'sha1', 'sha256', 'sha512']);
  const cases = suiteCases();
  t.ok(cases.length > 40, `${cases.length} bags`);
  for (const c of cases) {
    const { bagId, capability } = request();
    const dir = landing.path(capability);
    cpSync(c.dir, dir, { recursive: true, verbatimSymlinks: true });
    const files = filesUnder(dir, { regularOnly: true });
    await landed.accept(files.map((path) => ({ capability, path, size: statSync(join(dir, path)).size })));
    const recorded = catalog.landedHashes.count(bagId);
    t.equal(recorded, files.length, `${c.id}: every file hashed as it landed`);

    const full = await checkUpload(dir, { hasher: pool });
    const before = { ...landed.stats };
    const fromLanding = await checkUpload(dir, {
      hasher: new KnownDigestsHasher(pool, landed, { bagId, dir }),
    });
    t.same(fromLanding, full, `${c.id}: the same verdict (${full.valid ? 'valid' : 'invalid'})`);
    // Hashed for sha256 and the algorithms of the manifests there (all four where there is none).
    t.equal(
      landed.stats.known - before.known,
      fromLanding.report.files.length,
      `${c.id}: no file read again`,
    );
    t.equal(landed.stats.rehashed - before.rehashed, 0);
  }
});
