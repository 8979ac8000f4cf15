/**
 * Finishing a rotation of an upload link on disk (ingest/rotation.ts): the upload follows its new
 * link even when an empty folder of that name was opened while the rotation could not run (on a
 * full disk, the ingest gives an upload back under a link whose rename has not happened yet);
 * a new folder that already holds files is never overwritten.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { Catalog } from '../../src/catalog/catalog.js';
import { newCapability } from '../../src/ingest/capability.js';
import { LandingZone } from '../../src/ingest/landing.js';
import { finishRotations } from '../../src/ingest/rotation.js';
import { createLogger } from '../../src/logger.js';
import { DataLayout } from '../../src/storage/layout.js';

async function setUp(t: { teardown(fn: () => unknown): void }) {
  const dir = await mkdtemp(join(tmpdir(), 'preservd-rotation-'));
  const layout = new DataLayout(dir);
  await layout.ensure();
  const catalog = Catalog.open(layout);
  t.teardown(async () => {
    await catalog.close();
    await rm(dir, { recursive: true, force: true });
  });
  const landing = new LandingZone(layout);
  const old = newCapability();
  const pkg = catalog.packages.create({
    bagId: randomUUID(),
    externalId: `ext-${randomUUID()}`,
    contentType: 'audio',
    user: 'alice',
    capability: old,
  });
  if (!('created' in pkg)) throw new Error('not created');
  await landing.open(old);
  await writeFile(join(landing.path(old), 'bagit.txt'), 'the upload\n');
  const fresh = catalog.rotations.rotate(pkg.created.bagId, newCapability()).capability;
  return {
    catalog,
    landing,
    layout,
    old,
    fresh,
    logger: createLogger({ logLevel: 'silent', logFormat: 'json' }),
  };
}

t.test('an empty folder under the new link gives way to the upload', async (t) => {
  const { catalog, landing, layout, fresh, logger } = await setUp(t);
  await landing.open(fresh); // what returnUpload does when the rename could not run yet
  await finishRotations(catalog, landing, logger);
  t.equal(
    await readFile(join(landing.path(fresh), 'bagit.txt'), 'utf8'),
    'the upload\n',
    'the upload is under the new link',
  );
  t.same(
    (await readdir(layout.landing)).filter((n) => n.includes('.retired-')),
    [],
    'nothing set aside',
  );
  t.same(catalog.rotations.pending(), [], 'the rotation is finished');
});

t.test('a new folder that holds files is kept, and the old upload set beside it', async (t) => {
  const { catalog, landing, layout, fresh, logger } = await setUp(t);
  await mkdir(landing.path(fresh));
  await writeFile(join(landing.path(fresh), 'newer.txt'), 'uploaded through the new link\n');
  await finishRotations(catalog, landing, logger);
  t.equal(await readFile(join(landing.path(fresh), 'newer.txt'), 'utf8'), 'uploaded through the new link\n');
  const aside = (await readdir(layout.landing)).filter((n) => n.includes('.retired-'));
  t.equal(aside.length, 1, 'the old upload kept beside it');
  t.equal(await readFile(join(layout.landing, aside[0]!, 'bagit.txt'), 'utf8'), 'the upload\n');
});

t.test('two processes finishing one rotation at once leave the upload under the new link', async (t) => {
  // `preservd revoke` finishes it, and so does the daemon's sweep when its tick falls meanwhile:
  // the one that comes second must not take the moved folder for an empty new one and remove it.
  // The second starts 0 to 40 event-loop turns after the first, so that some start falls between
  // the first's look at the old folder and its rename.
  for (const upload of ['empty', 'with files'])
    for (let turns = 0; turns <= 40; turns++) {
      const { catalog, landing, layout, old, fresh, logger } = await setUp(t);
      if (upload === 'empty') await rm(join(landing.path(old), 'bagit.txt'));
      const first = finishRotations(catalog, landing, logger);
      for (let i = 0; i < turns; i++) await new Promise((resolve) => setImmediate(resolve));
      await Promise.all([first, finishRotations(catalog, landing, logger)]);
      const under = await readdir(landing.path(fresh)).catch(() => 'no folder');
      const left = (await readdir(layout.landing)).filter((n) => n.includes('.retired-') || n === old);
      const expected = upload === 'empty' ? [] : ['bagit.txt'];
      if (JSON.stringify(under) !== JSON.stringify(expected) || left.length > 0) {
        t.fail(
          `${upload}, the second after ${turns} turns: new link ${JSON.stringify(under)}, left ${left.join(', ')}`,
        );
        return;
      }
    }
  t.pass('the upload under the new link every time, nothing left under the old name or set aside');
});
