/**
 * src/fixity/helping-hasher.ts: the pool's workers and the calling thread hash from one queue;
 * every answer, success or failure, is the one the pool alone gives, and both take a share.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { createHasher, HelpingHasher, type Algorithm } from '../../src/fixity/index.js';

const ALGS: Algorithm[] = ['md5', 'sha256'];

/** What a call settled with, comparable across hashers. */
async function outcome(p: Promise<unknown>): Promise<unknown> {
  try {
    return { ok: await p };
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return { failed: e.code, message: e.message, name: e.name };
  }
}

t.test('HelpingHasher', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'preservd-helping-'));
  const pool = createHasher({ workers: 1 });
  t.teardown(async () => {
    await pool.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const files = Array.from({ length: 40 }, (_, i) => join(dir, `f-${i}.bin`));
  files.forEach((path, i) =>
    writeFileSync(path, Buffer.alloc(i === 0 ? 0 : 1000 * i + (i % 3) * 700_000, i)),
  );
  mkdirSync(join(dir, 'folder'));
  const odd = [join(dir, 'folder'), join(dir, 'missing.txt')];
  const helper = new HelpingHasher(pool, 1);

  await t.test('each file and each failure as the pool answers it', async (t) => {
    for (const path of [...files.slice(0, 5), ...odd])
      for (const crc32 of [false, true])
        t.same(
          await outcome(helper.hashFile(path, ALGS, { crc32 })),
          await outcome(pool.hashFile(path, ALGS, { crc32 })),
          `${path} crc32 ${crc32}`,
        );
    const batch = [...files.slice(0, 8), ...odd].map((path) => ({ path, algorithms: ALGS }));
    const [mine, theirs] = await Promise.all([helper.hashFiles(batch), pool.hashFiles(batch)]);
    t.same(
      mine.map((r) => (r instanceof Error ? (r as NodeJS.ErrnoException).code : r)),
      theirs.map((r) => (r instanceof Error ? (r as NodeJS.ErrnoException).code : r)),
      'a batch',
    );
  });

  await t.test('the workers and this thread both hash', async (t) => {
    const before = pool.stats().filesHashed;
    const all = await Promise.all(files.map((path) => helper.hashFile(path, ALGS)));
    const byPool = pool.stats().filesHashed - before;
    t.equal(all.length, files.length);
    t.ok(byPool > 0 && byPool < files.length, `the pool hashed ${byPool} of ${files.length}`);
    const alone = await Promise.all(files.map((path) => pool.hashFile(path, ALGS)));
    t.same(all, alone, 'the same digests as the pool alone');
  });

  await t.test('an aborted call rejects as the pool rejects it', async (t) => {
    const signal = AbortSignal.abort();
    const calls = files.slice(0, 6).map((path) => outcome(helper.hashFile(path, ALGS, { signal })));
    for (const o of await Promise.all(calls)) t.match(o, { failed: 'ABORT_ERR' });
  });
});
