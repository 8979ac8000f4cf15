import t from 'tap';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { createHasher, FixityError, NOT_REGULAR_FILE } from '../../src/fixity/index.js';
import { scratch } from './files.js';

const files = scratch();
const pool = createHasher({ workers: 2 });
t.teardown(async () => {
  await pool.close();
  files.remove();
});

/** Fails the test instead of hanging if the pool ever blocks. */
function within<T>(ms: number, promise: Promise<T>): Promise<T> {
  return Promise.race([
    promise,
    new Promise<T>((_, reject) =>
      setTimeout(() => reject(new Error(`still pending after ${ms} ms`)), ms).unref(),
    ),
  ]);
}

t.test('a symbolic link is refused, not followed (ELOOP)', async (t) => {
  const target = files.file('target', 1000);
  const link = join(files.dir, 'link');
  symlinkSync(target, link);
  await t.rejects(pool.hashFile(link, ['md5']), { code: 'ELOOP', path: link });
  const dangling = join(files.dir, 'dangling');
  symlinkSync(join(files.dir, 'nowhere'), dangling);
  await t.rejects(pool.hashFile(dangling, ['md5']), { code: 'ELOOP' }, 'a dangling link too');
});

t.test('a FIFO is refused at once, without blocking on open', async (t) => {
  const fifo = join(files.dir, 'fifo');
  execFileSync('mkfifo', [fifo]);
  const err = await within(
    3000,
    pool.hashFile(fifo, ['sha256']).then(
      () => undefined,
      (e: unknown) => e,
    ),
  );
  t.type(err, FixityError);
  t.match(err, { code: NOT_REGULAR_FILE, message: /FIFO/ });
  t.match(
    await pool.hashFile(files.file('after-fifo', 10), ['md5']),
    { size: 10 },
    'the worker is still free',
  );
});

t.test('devices and directories are refused', async (t) => {
  await t.rejects(pool.hashFile('/dev/null', ['md5']), {
    code: NOT_REGULAR_FILE,
    message: /character device/,
  });
  const dir = join(files.dir, 'sub');
  mkdirSync(dir);
  await t.rejects(pool.hashFile(dir, ['md5']), { code: 'EISDIR' });
});

t.test('a missing file rejects with ENOENT and its path', async (t) => {
  const missing = join(files.dir, 'missing');
  await t.rejects(pool.hashFile(missing, ['md5']), { code: 'ENOENT', path: missing, syscall: 'open' });
});

t.test(
  'an unreadable file rejects with EACCES',
  { skip: process.getuid?.() === 0 && 'running as root' },
  async (t) => {
    const path = files.file('secret', 10);
    chmodSync(path, 0o000);
    await t.rejects(pool.hashFile(path, ['md5']), { code: 'EACCES' });
  },
);

t.test('bad arguments reject before any work', async (t) => {
  await t.rejects(pool.hashFile('relative/path', ['md5']), { code: 'ERR_INVALID_ARG_VALUE' });
  await t.rejects(pool.hashFile('/x', ['blake3' as 'md5']), {
    code: 'ERR_INVALID_ARG_VALUE',
    message: /blake3/,
  });
  await t.rejects(
    pool.hashFile('/x', ['md5'], {
      resume: { load: async () => undefined, save: async () => {}, everyBytes: 0 },
    }),
    {
      code: 'ERR_INVALID_ARG_VALUE',
    },
  );
});
