/**
 * src/ingest/flush-files.ts: many files flushed by one syncfs when the machine holds little
 * unwritten, else one by one; the same answer either way (the files that are there), and a
 * syncfs that cannot run falls back to the files' own fdatasyncs. Writeback started behind:
 * one at a time, the requests made meanwhile answered by one more, none while not allowed.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pLimit, { type LimitFunction } from 'p-limit';
import t from 'tap';
import { BackgroundWriteback, flushFiles } from '../../src/ingest/flush-files.js';

/** A p-limit that counts the fdatasyncs it is given. */
function countingLimit(): { limit: LimitFunction; calls: () => number } {
  const inner = pLimit(4);
  let calls = 0;
  const limit = ((fn: () => Promise<unknown>) => {
    calls++;
    return inner(fn);
  }) as LimitFunction;
  return { limit, calls: () => calls };
}

t.test('flushFiles', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'preservd-flush-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const present = Array.from({ length: 100 }, (_, i) => join(dir, `page-${i}.txt`));
  for (const path of present) writeFileSync(path, `page ${path}\n`);
  const paths = [...present, join(dir, 'gone.txt')];

  await t.test('one by one below the threshold', async (t) => {
    const { limit, calls } = countingLimit();
    const flushed = await flushFiles(paths, limit, { syncfsFrom: Infinity });
    t.same([...flushed].sort(), [...present].sort(), 'the files there, not the one gone');
    t.equal(calls(), paths.length, 'an fdatasync for each');
  });

  await t.test('one syncfs for many while little is unwritten', async (t) => {
    const { limit, calls } = countingLimit();
    const flushed = await flushFiles(paths, limit, { syncfsFrom: 10, maxUnwrittenBytes: Infinity });
    t.same([...flushed].sort(), [...present].sort(), 'the same answer');
    t.equal(calls(), 0, 'no fdatasync of its own');
  });

  await t.test('not while the machine holds more unwritten than allowed', async (t) => {
    const { limit, calls } = countingLimit();
    await flushFiles(paths, limit, { syncfsFrom: 10, maxUnwrittenBytes: -1 });
    t.equal(calls(), paths.length);
  });

  await t.test('file by file when sync cannot run', async (t) => {
    const path = process.env.PATH;
    process.env.PATH = dir; // no `sync` here
    t.teardown(() => void (process.env.PATH = path));
    const { limit, calls } = countingLimit();
    const flushed = await flushFiles(paths, limit, { syncfsFrom: 10, maxUnwrittenBytes: Infinity });
    t.same([...flushed].sort(), [...present].sort());
    t.equal(calls(), paths.length, 'fell back to fdatasyncs');
  });
});

t.test('BackgroundWriteback: one at a time, one more for the requests made meanwhile', async (t) => {
  const started: string[] = [];
  const running: Array<() => void> = [];
  let allowed = true;
  const writeback = new BackgroundWriteback(
    () => allowed,
    (path) =>
      new Promise<boolean>((resolve) => {
        started.push(path);
        running.push(() => resolve(true));
      }),
  );
  const settle = () => new Promise((resolve) => setImmediate(resolve));
  writeback.request('/fs/a');
  writeback.request('/fs/b');
  writeback.request('/fs/c');
  t.same(started, ['/fs/a'], 'one started, the others wait for it');
  running.shift()!();
  await settle();
  t.same(started, ['/fs/a', '/fs/c'], 'then one more for the two asked meanwhile');
  running.shift()!();
  await settle();
  t.same(started, ['/fs/a', '/fs/c'], 'and no other');
  allowed = false;
  writeback.request('/fs/d');
  t.same(started, ['/fs/a', '/fs/c'], 'none while not allowed');
  allowed = true;
  writeback.request('/fs/e');
  t.same(started, ['/fs/a', '/fs/c', '/fs/e']);
  running.shift()!();
});
