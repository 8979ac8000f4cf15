import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { filesChangedSinceScan, findNameCollisions, findSystemFiles, scanBag } from '../../src/bagit/scan.js';

t.test('regular files and folders are listed, sorted, with sizes', async (t) => {
  const dir = t.testdir({ 'bagit.txt': 'x', data: { b: '12', a: { c: '123' } } });
  const scan = await scanBag(dir);
  t.same(
    scan.files.map(({ path, size }) => ({ path, size })),
    [
      { path: 'bagit.txt', size: 1 },
      { path: 'data/a/c', size: 3 },
      { path: 'data/b', size: 2 },
    ],
  );
  t.same(scan.directories, ['data', 'data/a']);
  t.same(scan.problems, []);
});

t.test('symbolic links are refused and never followed', async (t) => {
  const outside = t.testdir({ secret: 'do not read', inner: { x: 'y' } });
  const dir = join(outside, 'bag');
  mkdirSync(join(dir, 'data'), { recursive: true });
  symlinkSync(join(outside, 'secret'), join(dir, 'data', 'link'));
  symlinkSync(join(outside, 'inner'), join(dir, 'data', 'dirlink'));
  symlinkSync('/nonexistent', join(dir, 'data', 'dangling'));
  const scan = await scanBag(dir);
  t.same(scan.files, []);
  t.same(
    scan.problems.map((p) => `${p.code} ${'path' in p ? p.path : ''}`),
    ['symlink data/dangling', 'symlink data/dirlink', 'symlink data/link'],
  );
  t.ok(scan.others.has('data/link'), 'a link still counts as there (so it is not also "missing")');
});

t.test('FIFOs and sockets are refused as special files', async (t) => {
  // A short path: socket names are limited to about 100 bytes.
  const dir = mkdtempSync('/tmp/pb-');
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, 'data'));
  execFileSync('mkfifo', [join(dir, 'data', 'pipe')]);
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(join(dir, 'data', 'sock'), resolve));
  t.teardown(() => server.close());
  const scan = await scanBag(dir);
  t.match(scan.problems, [
    { code: 'special-file', path: 'data/pipe', kind: 'fifo' },
    { code: 'special-file', path: 'data/sock', kind: 'socket' },
  ]);
  t.same(scan.files, []);
});

t.test('a name that is not UTF-8 is reported, not mangled', async (t) => {
  const dir = t.testdir({ data: { 'ok.txt': 'x' } });
  writeFileSync(
    Buffer.concat([Buffer.from(join(dir, 'data') + '/'), Buffer.from([0x4e, 0xfa, 0x6e])]),
    'latin-1 name',
  );
  const scan = await scanBag(dir);
  t.match(scan.problems, [{ code: 'name-not-utf8' }]);
  t.same(
    scan.files.map((f) => f.path),
    ['data/ok.txt'],
  );
});

t.test('non-portable names are warned about', async (t) => {
  const dir = t.testdir({ data: { 'a:b.txt': 'x', 'CON.txt': 'y' } });
  const scan = await scanBag(dir);
  t.match(scan.problems, [
    { code: 'non-portable-name', path: 'data/CON.txt', reason: 'reserved-name' },
    { code: 'non-portable-name', path: 'data/a:b.txt', reason: 'reserved-character' },
  ]);
});

t.test('operating-system junk is found once per file or folder', async (t) => {
  t.same(
    findSystemFiles([
      'data/.DS_Store',
      'data/x/Thumbs.db',
      'data/ok.txt',
      'data/__MACOSX/a/b',
      'data/__MACOSX/c',
      'data/._song.wav',
      'data/desktop.ini',
      'data/THUMBS.DB',
    ]),
    [
      'data/.DS_Store',
      'data/THUMBS.DB',
      'data/._song.wav',
      'data/__MACOSX',
      'data/desktop.ini',
      'data/x/Thumbs.db',
    ]
      .sort()
      .map((path) => ({ code: 'system-file', path })),
  );
});

t.test('case and normalization collisions, one warning per extra spelling', async (t) => {
  const nfc = 'data/N\u00fa\u00f1ez';
  const nfd = 'data/Nu\u0301n\u0303ez';
  t.same(findNameCollisions(['data/hello.txt', 'data/HELLO.txt', 'data/other']), [
    { code: 'case-collision', path: 'data/hello.txt', other: 'data/HELLO.txt' },
  ]);
  t.same(findNameCollisions([nfc, nfd]), [
    { code: 'normalization-collision', path: nfd < nfc ? nfc : nfd, other: nfd < nfc ? nfd : nfc },
  ]);
  t.same(
    findNameCollisions([nfc, 'data/N\u00da\u00d1EZ']).map((p) => p.code),
    ['case-collision'],
  );
  t.same(findNameCollisions(['data/a', 'data/b']), []);
});

t.test('the walk queues no lstat per file in the thread pool, and the event loop still turns', async (t) => {
  // 3,000 lstat calls through fs/promises cost several times the CPU of lstatSync and sat in the
  // thread pool ahead of every other file operation of the daemon (a download's reads).
  const names = Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`f${i}`, 'x']));
  const dir = t.testdir({ 'bagit.txt': 'x', data: names });
  let mostInFlight = 0;
  let turns = 0;
  let scanning = true;
  const watch = (): void => {
    const inFlight = process.getActiveResourcesInfo().filter((r) => r === 'FSReqPromise').length;
    mostInFlight = Math.max(mostInFlight, inFlight);
    turns++;
    if (scanning) setImmediate(watch);
  };
  setImmediate(watch);
  const [scan, changed] = await (async () => {
    const s = await scanBag(dir);
    return [s, await filesChangedSinceScan(dir, s.files)] as const;
  })();
  scanning = false;
  t.equal(scan.files.length, 3001);
  t.same(changed, []);
  t.ok(mostInFlight <= 2, `at most ${mostInFlight} file requests in flight at once`);
  t.ok(turns >= 2, `the event loop turned ${turns} times during the walk`);
});
