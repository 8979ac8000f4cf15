import t from 'tap';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { AbortError, createHasher, type FileDigests } from '../../src/fixity/index.js';
import { MiB, scratch } from './files.js';

const files = scratch();
t.teardown(() => files.remove());

const md5 = (path: string): string => createHash('md5').update(readFileSync(path)).digest('hex');
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

t.test('10^5 jobs queued at once all finish, with the right digests, in bounded memory', async (t) => {
  const pool = createHasher({ workers: 2 });
  t.teardown(() => pool.close());
  const paths = Array.from({ length: 500 }, (_, i) => files.file(`small-${i}`, 1 + ((i * 997) % 8192)));
  const expected = paths.map(md5);
  const heapBefore = process.memoryUsage().heapUsed;
  const jobs: Promise<FileDigests>[] = [];
  for (let i = 0; i < 100_000; i++) jobs.push(pool.hashFile(paths[i % paths.length]!, ['md5']));
  const queuedStats = pool.stats();
  t.ok(queuedStats.queued + queuedStats.running === 100_000, 'every job is queued or handed to a worker');
  const results = await Promise.all(jobs);
  const heapGrowth = process.memoryUsage().heapUsed - heapBefore;
  t.ok(
    results.every((r, i) => r.digests.md5 === expected[i % paths.length]),
    'every digest right',
  );
  t.match(pool.stats(), { filesHashed: 100_000, queued: 0, running: 0 });
  // 10^5 promises and results are ~50 MB at most; file contents would be far more.
  t.ok(heapGrowth < 200 * MiB, `heap grew ${(heapGrowth / MiB).toFixed(0)} MiB`);
});

t.test('ingest jobs overtake audit jobs that are queued (and run inside a running one)', async (t) => {
  // One worker; audits throttled to 2 MiB/s so each 128 KiB file takes ~60 ms.
  const pool = createHasher({ workers: 1, readSize: 64 * 1024, auditRateLimitBytesPerSec: 2 * MiB });
  t.teardown(() => pool.close());
  const auditFile = files.file('audit', 128 * 1024);
  const ingestFile = files.file('ingest', 256 * 1024);
  const order: string[] = [];
  const audits = Array.from({ length: 100 }, (_, i) =>
    pool.hashFile(auditFile, ['sha256'], { priority: 'audit' }).then(() => order.push(`audit ${i}`)),
  );
  await sleep(30); // the first audit job is running by now
  const ingests = Array.from({ length: 100 }, (_, i) =>
    pool.hashFile(ingestFile, ['sha256'], { priority: 'ingest' }).then(() => order.push(`ingest ${i}`)),
  );
  await Promise.all(ingests);
  const auditsDone = order.filter((o) => o.startsWith('audit')).length;
  t.ok(auditsDone <= 2, `all 100 ingest jobs finished after only ${auditsDone} audit jobs`);
  t.same(
    order.filter((o) => o.startsWith('ingest')),
    Array.from({ length: 100 }, (_, i) => `ingest ${i}`),
    'FIFO within a priority',
  );
  pool.setAuditRateLimit(0);
  await Promise.all(audits);
  t.same(
    order.filter((o) => o.startsWith('audit')),
    Array.from({ length: 100 }, (_, i) => `audit ${i}`),
  );
});

t.test('the audit rate limit holds the audit read rate down; ingest ignores it', async (t) => {
  const pool = createHasher({ workers: 2, auditRateLimitBytesPerSec: 16 * MiB });
  t.teardown(() => pool.close());
  const eight = files.file('eight', 8 * MiB);
  await pool.hashFile(eight, ['md5']); // warm the page cache and the workers

  let start = performance.now();
  await pool.hashFile(eight, ['md5'], { priority: 'audit' });
  const auditSeconds = (performance.now() - start) / 1000;
  t.ok(auditSeconds >= 0.4, `8 MiB audit at 16 MiB/s took ${auditSeconds.toFixed(3)} s (≥ 0.4)`);
  t.ok(auditSeconds < 5, 'but not far longer');

  // The limit is shared: two workers on two 4 MiB files still take ≥ 0.4 s together.
  const halves = [files.file('half-a', 4 * MiB), files.file('half-b', 4 * MiB)];
  start = performance.now();
  await Promise.all(halves.map((p) => pool.hashFile(p, ['md5'], { priority: 'audit' })));
  const sharedSeconds = (performance.now() - start) / 1000;
  t.ok(sharedSeconds >= 0.4, `two 4 MiB audits in parallel took ${sharedSeconds.toFixed(3)} s (≥ 0.4)`);

  start = performance.now();
  await pool.hashFile(eight, ['md5'], { priority: 'ingest' });
  const ingestSeconds = (performance.now() - start) / 1000;
  t.ok(ingestSeconds < 0.35, `8 MiB ingest took ${ingestSeconds.toFixed(3)} s: not throttled`);

  // Lifting the limit speeds up an audit already sleeping on it.
  pool.setAuditRateLimit(1 * MiB);
  start = performance.now();
  const slow = pool.hashFile(eight, ['md5'], { priority: 'audit' });
  await sleep(100);
  pool.setAuditRateLimit(0);
  await slow;
  t.ok(
    performance.now() - start < 1500,
    'an audit at 1 MiB/s (8 s) finished soon after the limit was lifted',
  );
});

t.test(
  'abort: a queued job, a running job, an already-aborted signal, one signal for many jobs',
  async (t) => {
    const pool = createHasher({ workers: 1, readSize: 64 * 1024, auditRateLimitBytesPerSec: 1 * MiB });
    t.teardown(() => pool.close());
    const big = files.file('big', 4 * MiB);
    const small = files.file('small', 1000);

    const runningCtl = new AbortController();
    const running = pool.hashFile(big, ['sha256'], { priority: 'audit', signal: runningCtl.signal });
    const queuedCtl = new AbortController();
    const queued = pool.hashFile(big, ['sha256'], { priority: 'audit', signal: queuedCtl.signal });
    await sleep(100);
    queuedCtl.abort(new Error('no longer needed'));
    await t.rejects(queued, {
      name: 'AbortError',
      code: 'ABORT_ERR',
      cause: { message: 'no longer needed' },
    });
    const abortedAt = performance.now();
    runningCtl.abort();
    const err = await running.then(
      () => undefined,
      (e: unknown) => e,
    );
    t.type(err, AbortError);
    t.ok(performance.now() - abortedAt < 500, 'a running job stops within a chunk or two');

    await t.rejects(pool.hashFile(small, ['md5'], { signal: AbortSignal.abort() }), { code: 'ABORT_ERR' });

    const warnings: Error[] = [];
    const onWarning = (w: Error): number => warnings.push(w);
    process.on('warning', onWarning);
    const shared = new AbortController();
    const many = Array.from({ length: 200 }, () =>
      pool.hashFile(big, ['md5'], { priority: 'audit', signal: shared.signal }),
    );
    const settled = Promise.allSettled(many);
    await sleep(50);
    shared.abort();
    const outcomes = await settled;
    process.off('warning', onWarning);
    t.ok(
      outcomes.every((o) => o.status === 'rejected'),
      'all 200 jobs rejected',
    );
    t.same(
      warnings.map((w) => w.name),
      [],
      'no listener-leak warning',
    );

    pool.setAuditRateLimit(0);
    t.match(
      await pool.hashFile(small, ['md5'], { priority: 'audit' }),
      { size: 1000 },
      'the pool still works',
    );
    t.match(pool.stats(), { queued: 0, running: 0 });
  },
);

t.test('work goes to idle workers: a long job does not hold small ones back', async (t) => {
  const pool = createHasher({ workers: 2, readSize: 64 * 1024 });
  t.teardown(() => pool.close());
  // A resumable job whose first checkpoint save never returns until we say: a worker stuck on
  // one long file, deterministically, however busy the machine is.
  let release = (): void => {};
  const released = new Promise<void>((r) => (release = r));
  let stuck = (): void => {};
  const isStuck = new Promise<void>((r) => (stuck = r));
  const long = files.file('long', 1 * MiB);
  const longJob = pool.hashFile(long, ['md5'], {
    resume: {
      everyBytes: 64 * 1024,
      load: async () => undefined,
      save: () => (stuck(), released),
    },
  });
  await isStuck;
  const smalls = Array.from({ length: 40 }, (_, i) => files.file(`s${i}`, 1024));
  // Least-loaded dispatch puts about half of these behind the stuck job at first.
  const smallJobs = smalls.map((p) => pool.hashFile(p, ['md5']));
  const timeout = new Promise<never>((_, reject) =>
    setTimeout(() => reject(new Error('small jobs stuck behind the long one')), 10_000).unref(),
  );
  const results = await Promise.race([Promise.all(smallJobs), timeout]);
  t.equal(results.length, 40, 'all small jobs finished while the long one is still stuck');
  t.equal(pool.stats().running, 1, 'only the stuck job is left');
  release();
  t.equal((await longJob).digests.md5, md5(long));
});
