/**
 * The validator defects an outside run found (issue 12), each on a bag built here: the exact
 * problems, as [severity, code, path], that each bag must give. No follow-on problems: one cause,
 * one problem.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import {
  appendFileSync,
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import t from 'tap';
import { validateBag, type BagReport } from '../../src/bagit/index.js';
import { cliPath } from '../helpers/daemon.js';
import { makeBag } from '../helpers/make-bag.js';
import { boundByPermissions } from '../helpers/unprivileged.js';
import { SimpleHasher } from './simple-hasher.js';
import { node } from '../helpers/node.js';

const validate = (dir: string): Promise<BagReport> =>
  validateBag(dir, { hasher: new SimpleHasher(), alsoDigest: ['sha256'] });
const triples = (r: BagReport): Array<[string, string, string | undefined]> =>
  r.problems.map((p) => [p.severity ?? 'error', p.code, p.path]);
const md5 = (b: string | Buffer): string => createHash('md5').update(b).digest('hex');

t.test('a directory where the RFC requires a file is an error naming it', async (t) => {
  const asDir = async (name: string) => {
    const dir = await makeBag(t.testdir(), { files: { 'a.txt': 'a\n' }, tagAlgorithms: false });
    rmSync(join(dir, name));
    mkdirSync(join(dir, name));
    return triples(await validate(dir));
  };
  t.same(await asDir('bagit.txt'), [['error', 'not-a-file', 'bagit.txt']], 'bagit.txt');
  t.same(await asDir('bag-info.txt'), [['error', 'not-a-file', 'bag-info.txt']], 'bag-info.txt');

  const listed = await makeBag(t.testdir(), {
    files: { 'a.txt': 'a\n', 'sub/b.txt': 'b\n' },
    tagAlgorithms: false,
    algorithms: ['md5'],
  });
  appendFileSync(join(listed, 'manifest-md5.txt'), `${md5('')}  data/sub\n`);
  t.same(
    triples(await validate(listed)),
    [['error', 'not-a-file', 'data/sub']],
    'a manifest line naming a folder',
  );
});

t.test('byte-order marks, a repeated Payload-Oxum and tag manifests that break the rules', async (t) => {
  const bomManifest = await makeBag(t.testdir(), {
    files: { 'a.txt': 'a\n' },
    algorithms: ['md5'],
    tagAlgorithms: false,
  });
  const manifest = join(bomManifest, 'manifest-md5.txt');
  writeFileSync(manifest, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), readFileSync(manifest)]));
  t.same(triples(await validate(bomManifest)), [['warning', 'tag-file-bom', 'manifest-md5.txt']]);

  const bomInfo = await makeBag(t.testdir(), {
    files: { 'a.txt': 'a\n' },
    algorithms: ['md5'],
    tagAlgorithms: false,
  });
  const info = join(bomInfo, 'bag-info.txt');
  writeFileSync(info, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), readFileSync(info)]));
  t.same(triples(await validate(bomInfo)), [['warning', 'tag-file-bom', 'bag-info.txt']]);

  const twice = await makeBag(t.testdir(), {
    files: { 'a.txt': 'a\n' },
    algorithms: ['md5'],
    tagAlgorithms: false,
    bagInfo: [['Payload-Oxum', '2.1']],
    payloadOxum: '2.1',
  });
  t.same(triples(await validate(twice)), [['error', 'payload-oxum-repeated', 'bag-info.txt']]);

  const omits = await makeBag(t.testdir(), {
    files: { 'a.txt': 'a\n' },
    algorithms: ['md5'],
    tagAlgorithms: ['md5'],
  });
  const tagManifest = join(omits, 'tagmanifest-md5.txt');
  writeFileSync(
    tagManifest,
    readFileSync(tagManifest, 'utf8')
      .split('\n')
      .filter((l) => !l.endsWith('  manifest-md5.txt'))
      .join('\n'),
  );
  t.same(
    triples(await validate(omits)),
    [['error', 'tag-manifest-incomplete', 'manifest-md5.txt']],
    'a tag manifest that omits a payload manifest',
  );

  const lists = await makeBag(t.testdir(), {
    files: { 'a.txt': 'a\n' },
    algorithms: ['md5'],
    tagAlgorithms: ['md5', 'sha256'],
  });
  appendFileSync(
    join(lists, 'tagmanifest-md5.txt'),
    `${md5(readFileSync(join(lists, 'tagmanifest-sha256.txt')))}  tagmanifest-sha256.txt\n`,
  );
  t.same(
    triples(await validate(lists)),
    [['error', 'tag-manifest-lists-tag-manifest', 'tagmanifest-sha256.txt']],
    'a tag manifest that lists a tag manifest',
  );
});

t.test('a path is kept exactly as the manifest writes it, trailing whitespace included', async (t) => {
  const dir = await makeBag(t.testdir(), {
    files: { 'trail.txt ': 't\n', 'plain.txt': 'p\n' },
    algorithms: ['md5'],
    tagAlgorithms: false,
  });
  const r = await validate(dir);
  t.same(
    triples(r),
    [
      ['warning', 'non-portable-name', 'data/trail.txt '],
      ['warning', 'path-ends-in-whitespace', 'data/trail.txt '],
    ],
    'matched, with a warning about the name and one about the manifest line',
  );
  t.ok(
    r.files.some((f) => f.path === 'data/trail.txt '),
    'recorded under its real name',
  );
  t.match(r.problems[0]?.message, /^"data\/trail\.txt " /, 'shown quoted, so the space is visible');

  // A sloppy writer's trailing space after a name that has none: the file is missing, and the
  // message names the file that is there.
  const sloppy = await makeBag(t.testdir(), {
    files: { 'a.txt': 'a\n' },
    algorithms: ['md5'],
    tagAlgorithms: false,
  });
  writeFileSync(join(sloppy, 'manifest-md5.txt'), `${md5('a\n')}  data/a.txt \n`);
  const s = await validate(sloppy);
  t.same(triples(s), [
    ['error', 'file-missing', 'data/a.txt '],
    ['error', 'file-not-in-manifest', 'data/a.txt'],
    ['warning', 'path-ends-in-whitespace', 'data/a.txt '],
  ]);
  t.match(
    s.problems[0]?.message,
    /^"data\/a\.txt " is listed in manifest-md5\.txt but is not in the bag \(the bag has data\/a\.txt, which differs only in letter case, Unicode normalization or trailing whitespace\)/,
  );
});

t.test('a manifest path in another Unicode normalization matches the file, with a warning', async (t) => {
  const nfc = 'caf\u00e9.txt';
  const nfd = 'cafe\u0301.txt';
  const dir = await makeBag(t.testdir(), {
    files: { [nfc]: 'coffee\n' },
    algorithms: ['md5'],
    tagAlgorithms: false,
  });
  writeFileSync(join(dir, 'manifest-md5.txt'), `${md5('coffee\n')}  data/${nfd}\n`);
  const r = await validate(dir);
  t.same(triples(r), [['warning', 'manifest-path-normalization', `data/${nfc}`]]);
  t.equal(r.valid, true);
  t.ok(
    r.files.some((f) => f.path === `data/${nfc}`),
    'the name as it is on disk is recorded',
  );

  // With a wrong digest the match still counts, and the mismatch is reported on the disk name.
  writeFileSync(join(dir, 'manifest-md5.txt'), `${md5('tea\n')}  data/${nfd}\n`);
  t.same(triples(await validate(dir)), [
    ['error', 'manifest-mismatch', `data/${nfc}`],
    ['warning', 'manifest-path-normalization', `data/${nfc}`],
  ]);
});

t.test('one problem per cause: a bag folder that cannot be read, and a path beyond PATH_MAX', async (t) => {
  const dir = await makeBag(t.testdir(), { files: { 'a.txt': 'a\n' } });
  chmodSync(dir, 0o000); // the check runs bound by permissions, even as root
  const script = `import('${new URL('../../src/bagit/index.js', import.meta.url).href}').then(async ({ validateBag }) => {
    const { SimpleHasher } = await import('${new URL('./simple-hasher.js', import.meta.url).href}');
    const r = await validateBag(process.argv[1], { hasher: new SimpleHasher() });
    console.log(JSON.stringify(r.problems.map((p) => [p.severity, p.code, p.path])));
  })`;
  const out = execFileSync(...boundByPermissions(node(['-e', script, dir]).flat()), {
    encoding: 'utf8',
  });
  t.same(JSON.parse(out), [['error', 'bag-unreadable', undefined]], 'one problem, no "bagit.txt missing"');
  const cli = spawnSync(...boundByPermissions(node([cliPath, 'validate', dir]).flat()), { encoding: 'utf8' });
  t.equal(cli.status, 2, 'preservd validate: could not run');
  t.equal(cli.stdout, '');
  t.equal(cli.stderr, 'preservd validate: The bag directory cannot be read (EACCES).\n');
  chmodSync(dir, 0o700); // so that tap can remove it

  // Not under t.testdir(): tap's clean-up cannot remove a tree deeper than PATH_MAX.
  const deep = await makeBag(join(mkdtempSync(join(tmpdir(), 'preservd-deep-')), 'bag'), {
    files: { 'a.txt': 'a\n' },
    algorithms: ['md5'],
    tagAlgorithms: false,
  });
  const segment = 'd'.repeat(200);
  const depth = Math.ceil(4200 / (segment.length + 1));
  // Made by relative steps: no single call sees a path beyond PATH_MAX.
  const mkdeep = `const fs = require('fs'); for (let i = 0; i < ${depth}; i++) { fs.mkdirSync('${segment}'); process.chdir('${segment}'); } fs.writeFileSync('deep.txt', 'x\\n');`;
  execFileSync(...node(['-e', mkdeep]), { cwd: join(deep, 'data') });
  t.teardown(() => execFileSync('rm', ['-rf', join(deep, '..')])); // coreutils rm walks any depth
  const rel = ['data', ...Array.from({ length: depth }, () => segment)].join('/');
  appendFileSync(join(deep, 'manifest-md5.txt'), `${md5('x\n')}  ${rel}/deep.txt\n`);
  writeFileSync(join(deep, 'bag-info.txt'), 'Payload-Oxum: 4.2\n'); // true: a.txt and deep.txt
  const r = await validate(deep);
  const codes = triples(r).map(([, code]) => code);
  t.same(codes, ['path-beyond-path-max'], 'one problem, no file-missing and no Payload-Oxum mismatch');
  t.match(triples(r)[0], ['error', 'path-beyond-path-max', /^data\/d{200}/]);
});

t.test('a bare % in a 1.0 manifest path and "Label:value" in 1.0 bag-info.txt are warnings', async (t) => {
  const dir = await makeBag(t.testdir(), {
    files: { '100%.txt': 'p\n' },
    algorithms: ['md5'],
    tagAlgorithms: false,
    bagInfo: [['Contact-Name', 'Ada']],
  });
  writeFileSync(join(dir, 'manifest-md5.txt'), `${md5('p\n')}  data/100%.txt\n`);
  appendFileSync(join(dir, 'bag-info.txt'), 'Source-Organization:UM\n');
  t.same(triples(await validate(dir)), [
    ['warning', 'tag-line-no-space', 'bag-info.txt'],
    ['warning', 'manifest-path-percent', 'data/100%.txt'],
  ]);
});
