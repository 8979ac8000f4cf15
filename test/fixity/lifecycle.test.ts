import t from 'tap';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { WORKER_IDLE_MS } from '../../src/fixity/worker-options.js';
import { createHasher, POOL_CLOSED } from '../../src/fixity/index.js';
import { scratch } from './files.js';
import { node } from '../helpers/node.js';

const files = scratch();
t.teardown(() => files.remove());

t.test('close() rejects running and queued jobs, and every later call', async (t) => {
  const pool = createHasher({ workers: 1, auditRateLimitBytesPerSec: 64 * 1024 });
  const path = files.file('slow', 1024 * 1024);
  const running = pool.hashFile(path, ['md5'], { priority: 'audit' });
  const queued = pool.hashFile(path, ['md5'], { priority: 'audit' });
  const outcomes = [t.rejects(running, { code: POOL_CLOSED }), t.rejects(queued, { code: POOL_CLOSED })];
  await new Promise((r) => setTimeout(r, 50));
  await pool.close();
  await Promise.all(outcomes);
  await t.rejects(pool.hashFile(path, ['md5']), { code: POOL_CLOSED });
  await pool.close(); // twice is fine
});

t.test('an idle pool does not keep the process alive; a busy one does until its jobs end', async (t) => {
  const index = fileURLToPath(new URL('../../src/fixity/index.js', import.meta.url));
  const path = files.file('child', 100_000);
  // No close(): the child must still exit once the job is done.
  const script = `
    const { createHasher } = await import(${JSON.stringify(index)});
    const pool = createHasher({ workers: 2, auditRateLimitBytesPerSec: 200_000 });
    const r = await pool.hashFile(${JSON.stringify(path)}, ['sha256'], { priority: 'audit' });
    console.log(r.size);
  `;
  const started = Date.now();
  const stdout = await new Promise<string>((resolve, reject) => {
    execFile(...node(['--input-type=module', '-e', script]), { timeout: 15_000 }, (err, out) =>
      err ? reject(err) : resolve(out),
    );
  });
  t.equal(stdout.trim(), '100000', 'the job finished (the throttled read kept the process alive)');
  t.ok(Date.now() - started < 10_000, 'and the process exited without close()');
});

t.test('workers that cannot start fail the jobs instead of respawning forever', async (t) => {
  const index = fileURLToPath(new URL('../../src/fixity/index.js', import.meta.url));
  const path = files.file('never', 1000);
  const failInWorkers =
    'data:text/javascript,import{isMainThread}from"node:worker_threads";if(!isMainThread)throw new Error("boom")';
  const script = `
    const { createHasher } = await import(${JSON.stringify(index)});
    const pool = createHasher({ workers: 2 });
    const outcome = await pool.hashFile(${JSON.stringify(path)}, ['md5']).then(() => 'resolved', (e) => e.code);
    const later = await pool.hashFile(${JSON.stringify(path)}, ['md5']).then(() => 'resolved', (e) => e.code);
    console.log(outcome, later);
  `;
  const stdout = await new Promise<string>((resolve, reject) => {
    execFile(
      ...node(['--import', failInWorkers, '--input-type=module', '-e', script]),
      { timeout: 15_000 },
      (err, out) => (err ? reject(err) : resolve(out)),
    );
  });
  t.equal(stdout.trim(), 'ERR_FIXITY_WORKER_FAILED ERR_FIXITY_WORKER_FAILED');
});

t.test('constructor options are checked', async (t) => {
  t.throws(() => createHasher({ workers: 0 }), RangeError);
  t.throws(() => createHasher({ readSize: -1 }), RangeError);
  t.throws(() => createHasher({ maxOpenFiles: 0 }), RangeError);
  t.throws(() => createHasher({ auditRateLimitBytesPerSec: -5 }), RangeError);
  const small = createHasher({ workers: 4, maxOpenFiles: 1, readSize: 1 });
  t.teardown(() => small.close());
  const path = files.file('tiny', 100_000);
  t.match(
    await small.hashFile(path, ['md5']),
    { size: 100_000 },
    'one open file at most, reads raised to 64 KiB',
  );
});

t.test('idle workers end after WORKER_IDLE_MS and start again for the next job', async (t) => {
  const threads = () => Number(/Threads:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1]);
  const pool = createHasher({ workers: 2 });
  t.teardown(() => pool.close());
  const path = files.file('idle', 100_000);
  t.equal((await pool.hashFile(path, ['sha256'])).size, 100_000);
  const busy = threads();
  await new Promise((r) => setTimeout(r, WORKER_IDLE_MS + 1000));
  t.ok(
    threads() <= busy - 2,
    `the two workers' threads ended (${busy} threads with them, ${threads()} after)`,
  );
  t.equal((await pool.hashFile(path, ['sha256'])).size, 100_000, 'the next job starts them again');
  t.equal((await pool.hashFiles([{ path, algorithms: ['md5'] }], { priority: 'audit' })).length, 1);
});
