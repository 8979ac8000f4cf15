/**
 * At complete the ingest takes over what the landed hasher has not started (src/ingest/
 * landed-hasher.ts, `takeOver`): the bag's queued files leave the queue unread and unrecorded
 * (the validation reads them), are flushed where the upload is staged, and are named as flushed
 * so that the store does not flush them again; a file that is gone is not named; another bag's
 * queue is left alone; small files hashed as they landed, recorded without a flush, are flushed
 * there too (their records good only in the machine's boot that made them), large ones were
 * flushed before they were recorded; a read under way that complete claims is given up once its file has left;
 * a read whose record the catalog refuses is given up too.
 */
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { goodInBoot } from '../../src/catalog/landed-hashes.js';
import type { FixityPool } from '../../src/fixity/index.js';
import type { LandedPool } from '../../src/ingest/landed-hasher.js';
import { landedWorld } from '../helpers/landed-world.js';

t.test("the ingest takes over a bag's queued files and flushes them where they are staged", async (t) => {
  // Held as while a download is answered: nothing queued starts.
  const { dataDir, catalog, landing, landed, request } = await landedWorld(t, { holdWhile: () => true });

  const bag = (files: Record<string, string>) => {
    const { bagId, capability } = request();
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(join(landing.path(capability), path, '..'), { recursive: true });
      writeFileSync(join(landing.path(capability), path), text);
    }
    const reported = Object.entries(files).map(([path, text]) => ({ capability, path, size: text.length }));
    return { capability, bagId, recorded: landed.accept(reported) };
  };
  const one = bag({ 'data/a.txt': 'a\n', 'data/b.txt': 'b\n', 'bagit.txt': 'x\n' });
  const other = bag({ 'data/c.txt': 'c\n' });
  t.equal(landed.pending, 4, 'every file queued, none started');

  const staged = join(dataDir, 'staged-one');
  renameSync(landing.path(one.capability), staged);
  rmSync(join(staged, 'bagit.txt'));
  const flushed = await landed.takeOver(one.bagId, staged, { recorded: true });
  t.same(
    [...flushed].sort(),
    ['data/a.txt', 'data/b.txt'],
    'the files there flushed; the one gone not named',
  );
  await one.recorded; // the landed log's wait for them ends
  t.equal(catalog.landedHashes.count(one.bagId), 0, 'none read or recorded: the validation reads them');
  t.equal(await landed.claim(one.bagId, 'data/a.txt'), undefined);
  t.equal(landed.pending, 1, "the other bag's file still queued");
  t.equal(catalog.landedHashes.count(other.bagId), 0);
  landed.stop();
  await t.rejects(
    other.recorded,
    { message: /stopped before every file was read/ },
    'its log is kept for the next start',
  );
});

t.test(
  'a read under way when complete comes is given up, not tried again, once its file has left',
  async (t) => {
    // The real pool, behind a gate: a read starts, and waits there until the test lets it go on.
    let entered: () => void = () => undefined;
    let release: () => void = () => undefined;
    const gated = (real: FixityPool): LandedPool => ({
      hashFile: (...args) => real.hashFile(...args),
      hashFiles: async (...args) => {
        const gate = new Promise<void>((resolve) => (release = resolve));
        entered();
        await gate;
        return real.hashFiles(...args);
      },
    });
    const { dataDir, catalog, landing, pool, landed, request } = await landedWorld(t, { pool: gated });

    /** A bag whose one small file is being read (held at the gate) when this resolves. */
    const reading = async () => {
      const { bagId, capability } = request();
      mkdirSync(join(landing.path(capability), 'data'), { recursive: true });
      writeFileSync(join(landing.path(capability), 'data/a.txt'), 'a\n');
      const started = new Promise<void>((resolve) => (entered = resolve));
      const recorded = landed.accept([{ capability, path: 'data/a.txt', size: 2 }]);
      await started;
      // Complete: the upload leaves the landing folder while its file is being read.
      const staged = join(dataDir, `staged-${bagId}`);
      renameSync(landing.path(capability), staged);
      return { bagId, staged, recorded };
    };
    // Before, such a job went back to the queue to look for its file again (after 0.1, 0.4, 1 and
    // 3 s), and the validation's claim waited all of that out: never less than 4.5 s. Now it ends
    // with the read (one failed read of a warm pool and an lstat): the bound is that, not a speed.
    const within = async <T>(what: string, promise: Promise<T>): Promise<T> => {
      const began = Date.now();
      const value = await promise;
      t.ok(Date.now() - began < 4_000, `${what} in ${Date.now() - began} ms, without the retries`);
      return value;
    };
    // The pool's worker started, so that its start is not in what is timed.
    writeFileSync(join(dataDir, 'warm.txt'), 'warm\n');
    await pool.hashFile(join(dataDir, 'warm.txt'), ['sha256']);

    const claimed = await reading();
    const claim = landed.claim(claimed.bagId, 'data/a.txt');
    release();
    t.equal(await within('the claim answered', claim), undefined, 'no record: the validation reads the file');
    await within("the landed log's wait ended", claimed.recorded);
    t.equal(catalog.landedHashes.count(claimed.bagId), 0);

    const taken = await reading();
    t.same(
      [...(await landed.takeOver(taken.bagId, taken.staged, { recorded: true }))],
      ['data/a.txt'],
      'a small file under way is flushed where it is staged (its read does not flush it)',
    );
    release();
    await within("the landed log's wait ended", taken.recorded);
    t.equal(landed.pending, 0, 'nothing left queued to look for the file again');
    t.equal(catalog.landedHashes.count(taken.bagId), 0);
  },
);

t.test('a read whose record the catalog refuses is given up: a claim does not wait for it', async (t) => {
  const { catalog, landing, landed, request } = await landedWorld(t);
  // The catalog refuses the record, as on a full disk (catalog/space.ts); the real disk-full
  // test (test/faults/disk-full.test.ts) met this as an ingest whose claim waited forever.
  catalog.landedHashes.putAll = () => {
    throw new Error('the catalog cannot claim disk space for a write');
  };
  const { bagId, capability } = request();
  mkdirSync(join(landing.path(capability), 'data'), { recursive: true });
  writeFileSync(join(landing.path(capability), 'data/a.txt'), 'a\n');
  const recorded = landed.accept([{ capability, path: 'data/a.txt', size: 2 }]);
  const ended = await Promise.race([
    recorded.then(() => 'ended'),
    new Promise((resolve) => setTimeout(() => resolve('still waiting'), 10_000).unref()),
  ]);
  t.equal(ended, 'ended', "the landed log's wait ends");
  t.equal(landed.pending, 0, 'nothing left queued or under way');
  t.equal(await landed.claim(bagId, 'data/a.txt'), undefined, 'no record: the validation reads the file');
  t.equal(landed.stats.hashed, 0);
});

t.test(
  'small files are recorded unflushed and flushed at the take-over; large ones are flushed as they land',
  async (t) => {
    const { dataDir, catalog, landing, landed, request } = await landedWorld(t);
    const { bagId, capability } = request();
    const upload = landing.path(capability);
    mkdirSync(join(upload, 'data'), { recursive: true });
    const large = Buffer.alloc(1024 * 1024 + 1, 7); // the landed hasher's SMALL is 1 MiB
    writeFileSync(join(upload, 'data/large.bin'), large);
    writeFileSync(join(upload, 'data/small.txt'), 'small\n');
    writeFileSync(join(upload, 'bagit.txt'), 'x\n');
    await landed.accept([
      { capability, path: 'data/large.bin', size: large.length },
      { capability, path: 'data/small.txt', size: 6 },
      { capability, path: 'bagit.txt', size: 2 },
    ]);
    t.equal(catalog.landedHashes.count(bagId), 3, 'all three hashed and recorded');
    t.equal(catalog.landedHashes.get(bagId, 'data/large.bin')?.flushed, true);
    t.equal(catalog.landedHashes.get(bagId, 'data/small.txt')?.flushed, false);
    t.same(catalog.landedHashes.unflushed(bagId).sort(), ['bagit.txt', 'data/small.txt']);
    // Unflushed, a record is good only in the boot that made it: after a power loss its file's
    // bytes may not be what it says.
    const thisBoot = readFileSync('/proc/sys/kernel/random/boot_id', 'latin1').trim();
    const small = catalog.landedHashes.get(bagId, 'data/small.txt')!;
    t.equal(small.bootId, thisBoot, 'the small file recorded with this boot');
    t.ok(goodInBoot(small, thisBoot), 'used in this boot');
    t.notOk(goodInBoot(small, 'an-earlier-boot'), 'not in another: the file is read at complete');
    t.notOk(goodInBoot(small, undefined), 'nor where the boot cannot be told');
    t.ok(
      goodInBoot(catalog.landedHashes.get(bagId, 'data/large.bin')!, 'an-earlier-boot'),
      'a flushed one in any boot',
    );
    t.ok(
      landed.onDisk(bagId, 'data/large.bin', join(upload, 'data/large.bin')),
      'the store need not flush the large file',
    );
    t.notOk(
      landed.onDisk(bagId, 'data/small.txt', join(upload, 'data/small.txt')),
      'the store flushes the small one',
    );

    const staged = join(dataDir, 'staged');
    renameSync(upload, staged);
    t.same(
      [...(await landed.takeOver(bagId, staged, { recorded: false }))],
      [],
      'a revision: none flushed here',
    );
    t.same(
      [...(await landed.takeOver(bagId, staged, { recorded: true }))].sort(),
      ['bagit.txt', 'data/small.txt'],
      'the first version: the small files flushed where they are staged, the large one not again',
    );
  },
);
