/**
 * The pool's batch jobs: hashFiles (many files, one job; a bad file is an error in its own slot,
 * never the batch's) and listTree (a folder tree listed in a worker, links not followed, errors
 * in the tree); both stop on abort.
 */
import t from 'tap';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import {
  AbortError,
  createHasher,
  entriesOf,
  FixityError,
  type FileDigests,
  type FolderEntries,
} from '../../src/fixity/index.js';
import { MiB, scratch } from './files.js';

const files = scratch();
const pool = createHasher({ workers: 2 });
t.teardown(async () => {
  await pool.close();
  files.remove();
});

const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

t.test('hashFiles: every file of the batch, in order, with its own digests', async (t) => {
  const paths = Array.from({ length: 40 }, (_, i) => files.file(`small-${i}`, 100 + i * 37));
  paths.push(files.file('big', 3 * MiB + 5));
  const results = await pool.hashFiles(
    paths.map((path) => ({ path, algorithms: ['sha256', 'md5'] })),
    { priority: 'audit' },
  );
  t.equal(results.length, paths.length);
  results.forEach((r, i) => {
    t.notOk(r instanceof Error, `file ${i} hashed`);
    const digests = r as FileDigests;
    t.equal(digests.digests.sha256, sha256(paths[i]!), `sha256 of file ${i}`);
    t.equal(digests.size, readFileSync(paths[i]!).length);
  });
  t.same(await pool.hashFiles([]), [], 'an empty batch is an empty answer');
});

t.test(
  'hashFiles: a missing file, a link and a FIFO are errors in their slots; the rest is hashed',
  async (t) => {
    const good = files.file('good', 1234);
    const missing = join(files.dir, 'missing');
    const link = join(files.dir, 'batch-link');
    symlinkSync(good, link);
    const fifo = join(files.dir, 'batch-fifo');
    t.equal(spawnSync('mkfifo', [fifo]).status, 0, 'mkfifo');
    const results = await pool.hashFiles(
      [missing, good, link, fifo].map((path) => ({ path, algorithms: ['sha256'] })),
    );
    t.ok(results[0] instanceof FixityError || results[0] instanceof Error, 'missing: an error');
    t.equal((results[0] as NodeJS.ErrnoException).code, 'ENOENT');
    t.equal((results[1] as FileDigests).digests.sha256, sha256(good), 'the good file beside them is hashed');
    t.equal((results[2] as NodeJS.ErrnoException).code, 'ELOOP', 'the link is not followed');
    t.ok(results[3] instanceof Error, 'the FIFO is refused without blocking');
  },
);

t.test('hashFiles: an abort rejects the batch', async (t) => {
  const big = Array.from({ length: 8 }, (_, i) => files.file(`abort-${i}`, 4 * MiB));
  const controller = new AbortController();
  const batch = pool.hashFiles(
    big.map((path) => ({ path, algorithms: ['sha512', 'md5', 'sha1'] })),
    { signal: controller.signal },
  );
  setTimeout(() => controller.abort(), 1);
  await t.rejects(batch, AbortError);
  await t.rejects(
    pool.hashFiles([{ path: 'relative', algorithms: ['md5'] }]),
    /not an absolute path/,
    'a relative path is refused',
  );
});

t.test('listTree: folders parents first, each entry with its kind, links not followed', async (t) => {
  const root = join(files.dir, 'tree');
  mkdirSync(join(root, 'data/sub'), { recursive: true });
  files.file('tree/bagit.txt', Buffer.from('BagIt-Version: 1.0\n'));
  files.file('tree/data/a.txt', Buffer.from('a'));
  files.file('tree/data/sub/b.txt', Buffer.from('b'));
  symlinkSync('/etc', join(root, 'data/to-etc'));
  const tree = await pool.listTree(root, { priority: 'audit' });
  t.same(tree.root, { ok: true });
  const dirs = new Map(tree.dirs);
  t.same(
    [...dirs.keys()],
    ['', 'data', 'data/sub'],
    'every folder, parents before children; the link is not entered',
  );
  const sorted = (rel: string) =>
    [...entriesOf(dirs.get(rel) as FolderEntries)].sort((a, b) => a[0].localeCompare(b[0]));
  t.same(sorted(''), [
    ['bagit.txt', 'file'],
    ['data', 'directory'],
  ]);
  t.same(sorted('data'), [
    ['a.txt', 'file'],
    ['sub', 'directory'],
    ['to-etc', 'symlink'],
  ]);
  t.same(sorted('data/sub'), [['b.txt', 'file']]);
});

t.test('listTree: a missing root, a file as root, a link as root', async (t) => {
  t.same((await pool.listTree(join(files.dir, 'no-such-folder'))).root, { code: 'ENOENT' });
  const file = files.file('plain', 10);
  t.same((await pool.listTree(file)).root, { kind: 'file' });
  const link = join(files.dir, 'root-link');
  symlinkSync(join(files.dir, 'tree'), link);
  t.same((await pool.listTree(link)).root, { kind: 'symlink' }, 'a link to a folder is not followed');
});
