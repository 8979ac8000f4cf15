/**
 * The data directory's one owner: every folder with its documented mode, made or corrected by
 * `DataLayout.ensure()`; and `Storage.resolveInside`, the last check before a catalog path
 * becomes a file name.
 */
import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { DataLayout } from '../../src/storage/layout.js';
import { Storage } from '../../src/storage/storage.js';

const modeOf = (path: string) => statSync(path).mode & 0o777;

t.test('ensure() makes every folder with its mode, and closes folders made too open', async (t) => {
  const dataDir = join(t.testdir(), 'var');
  // An older preservd made landing/ 0750: its entries are upload capabilities.
  mkdirSync(join(dataDir, 'landing'), { recursive: true, mode: 0o755 });
  mkdirSync(join(dataDir, 'storage'), { mode: 0o777 });
  const layout = new DataLayout(dataDir);
  await layout.ensure();
  t.same(
    layout.folders.map(([path]) => [path.slice(layout.dataDir.length) || '/', modeOf(path).toString(8)]),
    [
      ['/', '750'],
      ['/catalog', '700'],
      ['/landing', '700'],
      ['/rsyncd', '700'],
      ['/rsyncd/closed', '700'],
      ['/rsyncd/active', '700'],
      ['/rsyncd/transfers', '700'],
      ['/rsyncd/landed', '700'],
      ['/staging', '750'],
      ['/storage', '750'],
    ],
  );
  await layout.ensure();
  t.equal(modeOf(layout.landing), 0o700, 'a second start changes nothing');
  t.equal(layout.adminToken, join(layout.dataDir, 'admin.token'));
});

t.test('resolveInside accepts a plain relative path and refuses every way out', async (t) => {
  t.equal(Storage.resolveInside('/srv/bag', 'data/a b/c.txt'), '/srv/bag/data/a b/c.txt');
  t.equal(Storage.resolveInside('/srv/bag', 'bagit.txt'), '/srv/bag/bagit.txt');
  for (const bad of [
    '',
    '/etc/passwd',
    '../x',
    'data/../../x',
    'data/./a',
    'data//a',
    'data/a/',
    'data\\a',
    'data/a\0b',
    '.',
    '..',
  ]) {
    t.throws(() => Storage.resolveInside('/srv/bag', bad), /unsafe path/, JSON.stringify(bad));
  }
});
