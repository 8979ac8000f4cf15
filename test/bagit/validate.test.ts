/**
 * validateBag over generated bags: a valid bag, then the bag broken one way at a time (and two
 * ways at once), checking the exact problem each breakage gives.
 */
import t from 'tap';
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { appendFileSync, readFileSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { validateBag, type BagReport } from '../../src/bagit/index.js';
import type { Algorithm } from '../../src/fixity/index.js';
import { makeBag } from '../helpers/make-bag.js';
import { SimpleHasher } from './simple-hasher.js';

const FILES = { 'a.txt': 'hello\n', 'sub/b.bin': Buffer.alloc(3000, 7), 'c.txt': '' };

const validate = (dir: string, hasher = new SimpleHasher()): Promise<BagReport> =>
  validateBag(dir, { hasher, alsoDigest: ['sha256'] });
const codes = (r: BagReport): string[] => r.problems.map((p) => p.code);
const sha = (a: Algorithm, b: string | Buffer): string => createHash(a).update(b).digest('hex');

t.test('a generated bag is valid, and the report describes every file', async (t) => {
  const dir = await makeBag(t.testdir(), { files: FILES, bagInfo: { 'Contact-Name': 'Ada' } });
  const r = await validate(dir);
  t.same(r.problems, []);
  t.equal(r.valid, true);
  t.equal(r.version, '1.0');
  t.equal(r.encoding, 'UTF-8');
  t.same(r.algorithms, ['md5', 'sha256']);
  t.equal(r.payloadFiles, 3);
  t.equal(r.payloadBytes, 6 + 3000);
  t.same(r.bagInfo, [
    ['Bagging-Date', '2026-11-22'],
    ['Payload-Oxum', '3006.3'],
    ['Contact-Name', 'Ada'],
  ]);
  t.same(
    r.files.map((f) => f.path),
    [
      'bag-info.txt',
      'bagit.txt',
      'data/a.txt',
      'data/c.txt',
      'data/sub/b.bin',
      'manifest-md5.txt',
      'manifest-sha256.txt',
      'tagmanifest-md5.txt',
      'tagmanifest-sha256.txt',
    ],
  );
  const a = r.files.find((f) => f.path === 'data/a.txt')!;
  t.same(a, {
    path: 'data/a.txt',
    size: 6,
    crc32: crc32('hello\n').toString(16).padStart(8, '0'),
    digests: { md5: sha('md5', 'hello\n'), sha256: sha('sha256', 'hello\n') },
  });
});

t.test('every file is hashed exactly once, for every algorithm at once, largest first', async (t) => {
  const dir = await makeBag(t.testdir(), {
    files: { small: 'x', big: Buffer.alloc(100_000), middle: Buffer.alloc(5000) },
    algorithms: ['sha1'],
    tagAlgorithms: ['md5'],
  });
  const order: string[] = [];
  const hasher = new SimpleHasher();
  const spy = {
    hashFile: (
      path: string,
      algorithms: Algorithm[],
      opts?: { crc32?: boolean; priority?: 'ingest' | 'audit' },
    ) => {
      order.push(path.slice(dir.length + 1));
      t.equal(opts?.crc32, true, 'crc32 asked for in the same read');
      return hasher.hashFile(path, algorithms, opts);
    },
  };
  const r = await validateBag(dir, { hasher: spy, alsoDigest: ['sha512'], concurrency: 1 });
  t.equal(r.valid, true);
  t.equal(hasher.calls.size, r.files.length);
  t.ok(
    [...hasher.calls.values()].every((n) => n === 1),
    'one call per file',
  );
  t.ok(
    hasher.requested.every((algs) => algs.join() === 'md5,sha1,sha512'),
    'manifest algorithms plus alsoDigest, every call',
  );
  t.equal(order[0], 'data/big', 'the largest file goes first');
  t.equal(order[1], 'data/middle');
  t.same(Object.keys(r.files[0]!.digests).sort(), ['md5', 'sha1', 'sha512']);
});

t.test('a corrupted payload file gives one mismatch per manifest, with expected and actual', async (t) => {
  const dir = await makeBag(t.testdir(), { files: FILES, corrupt: ['data/a.txt'] });
  const actual = readFileSync(join(dir, 'data/a.txt'));
  const r = await validate(dir);
  t.equal(r.valid, false);
  t.same(
    r.problems.map((p) => [p.code, p.path, p.algorithm, p.expected, p.actual]),
    [
      ['manifest-mismatch', 'data/a.txt', 'md5', sha('md5', 'hello\n'), sha('md5', actual)],
      ['manifest-mismatch', 'data/a.txt', 'sha256', sha('sha256', 'hello\n'), sha('sha256', actual)],
    ],
  );
  t.match(r.problems[0]!.message, /data\/a\.txt has md5 .* but manifest-md5\.txt expects/);
});

t.test('a bag with two different problems reports both', async (t) => {
  const dir = await makeBag(t.testdir(), { files: FILES, corrupt: ['data/sub/b.bin'] });
  writeFileSync(join(dir, 'data/extra.txt'), 'not listed');
  const r = await validate(dir);
  t.same(codes(r).sort(), [
    'file-not-in-manifest',
    'manifest-mismatch',
    'manifest-mismatch',
    'payload-oxum-mismatch',
  ]);
});

t.test('a listed payload file that is absent is missing once, naming every manifest', async (t) => {
  const dir = await makeBag(t.testdir(), { files: FILES });
  unlinkSync(join(dir, 'data/a.txt'));
  const r = await validate(dir);
  t.match(r.problems, [
    {
      code: 'file-missing',
      path: 'data/a.txt',
      listedIn: ['manifest-md5.txt', 'manifest-sha256.txt'],
      severity: 'error',
    },
    { code: 'payload-oxum-mismatch', expected: '3006.3', actual: '3000.2' },
  ]);
  t.equal(r.problems.length, 2);
});

t.test('a payload file in no manifest is reported', async (t) => {
  const dir = await makeBag(t.testdir(), { files: FILES, unlisted: ['c.txt'] });
  const r = await validate(dir);
  t.same(
    r.problems.map((p) => [p.code, p.path]),
    [['file-not-in-manifest', 'data/c.txt']],
  );
});

t.test('BagIt 1.0 wants every payload file in every payload manifest; 0.97 in one', async (t) => {
  for (const version of ['1.0', '0.97']) {
    const dir = await makeBag(t.testdir(), { files: FILES, version, tagAlgorithms: false });
    const m = join(dir, 'manifest-sha256.txt');
    writeFileSync(
      m,
      readFileSync(m, 'utf8')
        .split('\n')
        .filter((l) => !l.endsWith('data/a.txt'))
        .join('\n'),
    );
    const r = await validate(dir);
    if (version === '1.0') {
      t.same(
        r.problems.map((p) => [p.code, p.path, p.algorithm]),
        [['file-not-in-manifest', 'data/a.txt', 'sha256']],
        version,
      );
      t.match(r.problems[0], { manifest: 'manifest-sha256.txt' });
    } else {
      t.same(r.problems, [], version);
    }
  }
});

t.test('Payload-Oxum: mismatch and malformed', async (t) => {
  let r = await validate(await makeBag(t.testdir(), { files: FILES, payloadOxum: '3006.4' }));
  t.match(r.problems, [
    { code: 'payload-oxum-mismatch', path: 'bag-info.txt', expected: '3006.4', actual: '3006.3' },
  ]);
  r = await validate(await makeBag(t.testdir(), { files: FILES, payloadOxum: 'lots' }));
  t.match(r.problems, [{ code: 'payload-oxum-malformed', value: 'lots' }]);
  r = await validate(await makeBag(t.testdir(), { files: FILES, payloadOxum: false }));
  t.same(r.problems, [], 'Payload-Oxum is optional');
});

t.test('manifests: none, unknown algorithm', async (t) => {
  let dir = await makeBag(t.testdir(), { files: FILES, algorithms: [], tagAlgorithms: false });
  let r = await validate(dir);
  t.same(codes(r), ['manifest-missing'], 'no manifest: said once, not once per file');
  dir = await makeBag(t.testdir(), { files: FILES, tagAlgorithms: false });
  writeFileSync(join(dir, 'manifest-blake3.txt'), 'abc data/a.txt\n');
  r = await validate(dir);
  t.match(r.problems, [
    { code: 'manifest-algorithm-unknown', path: 'manifest-blake3.txt', algorithmName: 'blake3' },
  ]);
});

t.test('no data/ directory', async (t) => {
  const dir = await makeBag(t.testdir(), { files: {}, tagAlgorithms: false });
  rmSync(join(dir, 'data'), { recursive: true });
  const r = await validate(dir);
  t.same(codes(r), ['data-dir-missing']);
});

t.test('tag manifests: a listed tag file must exist and match; entries into data/ are refused', async (t) => {
  const dir = await makeBag(t.testdir(), { files: FILES, extraTagFiles: { 'meta/marc.xml': '<record/>' } });
  unlinkSync(join(dir, 'meta/marc.xml'));
  appendFileSync(join(dir, 'bag-info.txt'), 'Late-Edit: yes\n');
  appendFileSync(join(dir, 'tagmanifest-md5.txt'), `${sha('md5', 'hello\n')}  data/a.txt\n`);
  const r = await validate(dir);
  t.same(r.problems.map((p) => [p.code, p.path]).sort(), [
    ['file-missing', 'meta/marc.xml'],
    ['manifest-mismatch', 'bag-info.txt'],
    ['manifest-mismatch', 'bag-info.txt'],
    ['tag-entry-inside-data', 'data/a.txt'],
  ]);
});

t.test('the same path listed twice with the same digest: error in 1.0, warning in 0.97', async (t) => {
  for (const [version, severity, valid] of [
    ['1.0', 'error', false],
    ['0.97', 'warning', true],
  ] as const) {
    const dir = await makeBag(t.testdir(), { files: FILES, version, tagAlgorithms: false });
    appendFileSync(join(dir, 'manifest-md5.txt'), `${sha('md5', 'hello\n')}  data/a.txt\n`);
    const r = await validate(dir);
    t.match(r.problems, [{ code: 'manifest-duplicate', path: 'data/a.txt', severity }], version);
    t.equal(r.valid, valid);
  }
});

t.test('symlinks and special files in a bag are errors; what they point to is never read', async (t) => {
  const dir = await makeBag(t.testdir(), { files: FILES, tagAlgorithms: false });
  symlinkSync('/etc/passwd', join(dir, 'data/passwd'));
  execFileSync('mkfifo', [join(dir, 'data/fifo')]);
  const hasher = new SimpleHasher();
  const r = await validate(dir, hasher);
  t.same(r.problems.map((p) => [p.code, p.path]).slice(0, 2), [
    ['special-file', 'data/fifo'],
    ['symlink', 'data/passwd'],
  ]);
  t.notOk(
    [...hasher.calls.keys()].some((p) => p.endsWith('passwd') || p.endsWith('fifo')),
    'neither was opened',
  );
});

t.test('fetch.txt: a listed file that is present is fine, an absent one is a hole', async (t) => {
  const dir = await makeBag(t.testdir(), {
    files: FILES,
    tagAlgorithms: false,
    extraTagFiles: {
      'fetch.txt':
        'https://example.org/a 6 data/a.txt\nhttps://example.org/gone - data/gone.txt\nhttps://example.org/x - data/unlisted.txt\n',
    },
  });
  // data/gone.txt is in the manifests (as fetch.txt requires) but not on disk.
  appendFileSync(join(dir, 'manifest-md5.txt'), `${sha('md5', 'gone')}  data/gone.txt\n`);
  appendFileSync(join(dir, 'manifest-sha256.txt'), `${sha('sha256', 'gone')}  data/gone.txt\n`);
  const r = await validate(dir);
  t.same(
    r.problems.map((p) => [p.code, p.path]),
    [
      ['fetch-hole', 'data/gone.txt'],
      ['fetch-hole', 'data/unlisted.txt'],
      ['fetch-not-in-manifest', 'data/unlisted.txt'],
      ['fetch-not-in-manifest', 'data/unlisted.txt'],
    ],
  );
  t.match(r.problems[0]!.message, /https:\/\/example\.org\/gone/);
});

t.test('operating-system files and case collisions warn; the bag stays valid', async (t) => {
  const dir = await makeBag(t.testdir(), {
    files: { ...FILES, '.DS_Store': 'junk', 'Readme.txt': 'a', 'README.txt': 'b' },
  });
  const r = await validate(dir);
  t.equal(r.valid, true);
  t.same(
    r.problems.map((p) => [p.severity, p.code, p.path]),
    [
      ['warning', 'system-file', 'data/.DS_Store'],
      ['warning', 'case-collision', 'data/Readme.txt'],
    ],
  );
});

t.test('names needing escapes: %25 in 1.0, a literal % before; a newline as %0A', async (t) => {
  let r = await validate(await makeBag(t.testdir(), { files: { '100%.txt': 'x', 'line\nbreak': 'y' } }));
  t.equal(r.valid, true, JSON.stringify(r.problems));
  t.same(
    r.problems.map((p) => p.code),
    ['non-portable-name'],
  );
  r = await validate(await makeBag(t.testdir(), { files: { '100%25.txt': 'x' }, version: '0.97' }));
  t.same(r.problems, []);
});

t.test('pre-0.96 bags: package-info.txt is the bag-info', async (t) => {
  const dir = await makeBag(t.testdir(), {
    files: FILES,
    version: '0.95',
    bagInfo: false,
    tagAlgorithms: false,
  });
  writeFileSync(join(dir, 'package-info.txt'), 'Payload-Oxum: 1.1\n');
  const r = await validate(dir);
  t.match(r.problems, [{ code: 'payload-oxum-mismatch', path: 'package-info.txt' }]);
  t.same(r.bagInfo, [['Payload-Oxum', '1.1']]);
});

t.test('a malformed bag-info line is an error', async (t) => {
  const dir = await makeBag(t.testdir(), { files: FILES, tagAlgorithms: false });
  appendFileSync(join(dir, 'bag-info.txt'), 'this line has no colon\n');
  const r = await validate(dir);
  t.match(r.problems, [{ code: 'tag-file-malformed', path: 'bag-info.txt', line: 3 }]);
});

t.test('a file the hasher cannot read is reported, not thrown', async (t) => {
  const dir = await makeBag(t.testdir(), { files: FILES, tagAlgorithms: false });
  const inner = new SimpleHasher();
  const hasher = {
    hashFile: async (p: string, a: Algorithm[], o?: { crc32?: boolean }) => {
      if (p.endsWith('a.txt')) throw Object.assign(new Error('permission denied'), { code: 'EACCES' });
      return inner.hashFile(p, a, o);
    },
  };
  const r = await validateBag(dir, { hasher });
  t.match(r.problems, [{ code: 'file-unreadable', path: 'data/a.txt', detail: 'EACCES' }]);
  t.notOk(r.problems[0]!.message.includes(dir), 'the server path is not in the sentence');
  t.notOk(r.files.some((f) => f.path === 'data/a.txt'));
});

t.test('a directory that does not exist is one problem', async (t) => {
  const r = await validate(join(t.testdir(), 'nope'));
  t.same(
    r.problems.map((p) => [p.code, p.severity]),
    [['bag-unreadable', 'error']],
  );
  t.equal(r.valid, false);
});

t.test('an aborted validation rejects and stops hashing', async (t) => {
  const dir = await makeBag(t.testdir(), { files: FILES });
  const controller = new AbortController();
  let calls = 0;
  const inner = new SimpleHasher();
  const hasher = {
    hashFile: async (p: string, a: Algorithm[], o?: { crc32?: boolean }) => {
      calls++;
      controller.abort(new Error('shutting down'));
      return inner.hashFile(p, a, o);
    },
  };
  await t.rejects(validateBag(dir, { hasher, signal: controller.signal, concurrency: 1 }), {
    message: 'shutting down',
  });
  t.equal(calls, 1, 'no file hashed after the abort');
});
