/**
 * Hostile bags through the real daemon: each is uploaded with rsync (or, where rsync cannot carry
 * it, put into the landing folder on disk), completed, and must fail with the problems that name
 * it, with the upload given back in its landing folder and nothing stored. What only `preservd
 * validate` can show (a file changing under the validator) goes through the command.
 */
import { createHash } from 'node:crypto';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { linkSync, symlinkSync } from 'node:fs';
import { open, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { cliPath, rsyncUpload, TestDaemon } from '../helpers/daemon.js';
import { assertInvariants } from '../helpers/invariants.js';
import { makeBag, type MakeBagOptions } from '../helpers/make-bag.js';
import {
  followUploadLink,
  landingDirOf,
  listTree,
  newRequest,
  resealTagManifests,
  snapshot,
  type Request,
} from './fixtures/attack.js';
import { node } from '../helpers/node.js';

const scratchRoot = mkdtempSync(join(tmpdir(), 'preservd-hostile-'));
t.teardown(() => rmSync(scratchRoot, { recursive: true, force: true }));

const sha256 = (s: string | Buffer): string => createHash('sha256').update(s).digest('hex');
const md5 = (s: string | Buffer): string => createHash('md5').update(s).digest('hex');

/** Paths that try to leave the bag, in every spelling preservd refuses (docs/decisions.md). */
const ESCAPES: Array<[string, string]> = [
  ['../x', 'parent-segment'],
  ['/etc/passwd', 'absolute'],
  ['data/../../x', 'parent-segment'],
  ['data/./a.txt', 'dot-segment'],
  ['C:/Windows/win.ini', 'drive-letter'],
  ['c:x', 'drive-letter'],
  ['~/.ssh/authorized_keys', 'home-directory'],
  ['~root/x', 'home-directory'],
  ['\\\\server\\share\\x', 'unc'],
  ['data\\..\\..\\x', 'backslash'],
  ['%SYSTEMROOT%/x', 'environment-variable'],
  ['data//a.txt', 'empty-segment'],
];

/**
 * Run both ways: files hashed as our rsync receives them (their digests taken at complete), and
 * every file read at complete; each way must give the verdicts below.
 */
async function hostileBags(t: Test, hashOnArrival: boolean): Promise<void> {
  const scratch = mkdtempSync(join(scratchRoot, hashOnArrival ? 'on-arrival-' : 'at-complete-'));
  const d = await TestDaemon.start(t, { config: { upload: { quietMs: 200, rsync: { hashOnArrival } } } });
  const alice = d.addUser('alice');
  let n = 0;

  /** A request and a valid bag for it in a scratch folder (or straight in its landing folder). */
  const prepare = async (
    options: Partial<MakeBagOptions> = {},
    where: 'scratch' | 'landing' = 'scratch',
  ): Promise<{ req: Request; dir: string }> => {
    const req = await newRequest(d, alice);
    const dir = where === 'landing' ? landingDirOf(d, req) : join(scratch, `bag-${++n}`);
    await makeBag(dir, {
      files: { 'a.txt': 'hello\n' },
      chipmunkInfo: { externalId: req.external_id, bagId: req.bag_id, contentType: req.content_type },
      ...options,
    });
    return { req, dir };
  };

  const upload = (t: Test, dir: string, req: Request): void => {
    const up = rsyncUpload(dir, req.upload_link);
    t.equal(up.code, 0, `rsync: ${up.output}`);
  };

  /**
   * Complete the request and expect FAILED with at least `expected` (code, and path when given),
   * the upload back in its landing folder, storage and every package's state unchanged.
   */
  const expectRefused = async (
    t: Test,
    req: Request,
    expected: Array<{ code: string; path?: string }>,
    kept = 'bagit.txt',
  ): Promise<any> => {
    const before = await snapshot(d);
    const complete = await d.request('POST', `/v1/requests/${req.bag_id}/complete`, { token: alice });
    t.equal(complete.status, 201, complete.text);
    const item = await d.waitForQueueItem(complete.json.id, alice, 30_000);
    t.equal(item.status, 'FAILED');
    for (const e of expected) {
      t.ok(
        item.errors.some((x: any) => x.code === e.code && (e.path === undefined || x.path === e.path)),
        `${e.code}${e.path === undefined ? '' : ` naming ${JSON.stringify(e.path)}`}`,
        { errors: item.errors.slice(0, 20) },
      );
    }
    t.ok(
      item.errors.every((x: any) => typeof x.message === 'string' && !x.message.includes(d.dataDir)),
      'messages never name a server path',
    );
    await followUploadLink(d, alice, req);
    t.ok(existsSync(join(landingDirOf(d, req), kept)), 'the upload is back in its landing folder');
    t.same(await snapshot(d), before, 'nothing stored, no package changed');
    return item;
  };

  await t.test('path escapes in the payload manifest', async (t) => {
    const { req, dir } = await prepare();
    const digest = sha256('hello\n');
    const lines = [...ESCAPES.map(([p]) => p), 'data/%2e%2e/%2e%2e/x', 'data/%2E%2E%2Fx'].map(
      (p) => `${digest}  ${p}\n`,
    );
    await writeFile(
      join(dir, 'manifest-sha256.txt'),
      (await readFile(join(dir, 'manifest-sha256.txt'), 'utf8')) + lines.join(''),
    );
    await resealTagManifests(dir);
    upload(t, dir, req);
    const item = await expectRefused(t, req, [
      ...ESCAPES.map(([path]) => ({ code: 'unsafe-path', path })),
      // Percent escapes other than %0A, %0D and %25 are never decoded: these are just names.
      { code: 'file-missing', path: 'data/%2e%2e/%2e%2e/x' },
      { code: 'file-missing', path: 'data/%2E%2E%2Fx' },
    ]);
    const unsafe = item.errors.filter((e: any) => e.code === 'unsafe-path');
    t.equal(unsafe.length, ESCAPES.length, 'one problem per escaping line');
    t.match(
      unsafe[0].message,
      /manifest-sha256\.txt line 2 names "\.\.\/x", which is refused because it contains a "\.\." segment/,
    );
  });

  await t.test('path escapes in a tag manifest and in fetch.txt', async (t) => {
    const fetchLines = ESCAPES.map(([p]) => `https://example.org/x 6 ${p}\n`).join('');
    const { req, dir } = await prepare({ extraTagFiles: { 'fetch.txt': fetchLines } });
    const tagLines = [...ESCAPES.map(([p]) => p), '%2e%2e/x'].map((p) => `${md5('x')}  ${p}\n`).join('');
    await writeFile(
      join(dir, 'tagmanifest-md5.txt'),
      (await readFile(join(dir, 'tagmanifest-md5.txt'), 'utf8')) + tagLines,
    );
    upload(t, dir, req);
    const item = await expectRefused(t, req, [{ code: 'file-missing', path: '%2e%2e/x' }]);
    for (const listedIn of ['tagmanifest-md5.txt', 'fetch.txt']) {
      const found = item.errors.filter(
        (e: any) => e.code === 'unsafe-path' && e.message.startsWith(`${listedIn} line`),
      );
      t.same(
        found.map((e: any) => e.path),
        ESCAPES.map(([p]) => p),
        `every escape in ${listedIn} is refused, in order`,
      );
    }
    t.notOk(
      item.errors.some((e: any) => e.code === 'fetch-hole'),
      'a refused fetch line is not also a hole',
    );
  });

  await t.test('Metadata-Tagfile pointing outside the bag', async (t) => {
    const { req, dir } = await prepare();
    await writeFile(
      join(dir, 'chipmunk-info.txt'),
      `${await readFile(join(dir, 'chipmunk-info.txt'), 'utf8')}Metadata-URL: https://example.org/m\nMetadata-Type: MARC\nMetadata-Tagfile: ../../../../etc/passwd\n`,
    );
    await resealTagManifests(dir);
    upload(t, dir, req);
    await expectRefused(t, req, [{ code: 'unsafe-path', path: '../../../../etc/passwd' }]);
  });

  await t.test(
    'names in the bag that storage would refuse: refused at ingest, each named once',
    async (t) => {
      // No manifest lists them: unlisted tag files and folders are the bag's paths all the same.
      const { req, dir } = await prepare();
      await writeFile(join(dir, 'notes\\2026.txt'), 'made on Windows\n');
      await writeFile(join(dir, '..\\..\\AppData\\Roaming\\Startup\\evil.bat'), 'x');
      mkdirSync(join(dir, '..\\x'));
      await writeFile(join(dir, '..\\x', 'y.txt'), 'hi\n');
      mkdirSync(join(dir, 'data', 'sub\\dir'));
      await writeFile(join(dir, 'data', 'sub\\dir', 'z.txt'), 'z\n');
      await writeFile(join(dir, '~notes.txt'), 'x');
      await writeFile(join(dir, 'C:notes.txt'), 'x');
      await writeFile(join(dir, '%TEMP%notes.txt'), 'x');
      upload(t, dir, req);
      const item = await expectRefused(t, req, [{ code: 'unsafe-path', path: 'notes\\2026.txt' }]);
      const unsafe = item.errors.filter((e: any) => e.code === 'unsafe-path');
      t.same(
        unsafe.map((e: any) => e.path).sort(),
        [
          '%TEMP%notes.txt',
          '..\\..\\AppData\\Roaming\\Startup\\evil.bat',
          '..\\x',
          'C:notes.txt',
          'data/sub\\dir',
          'notes\\2026.txt',
          '~notes.txt',
        ],
        'each file and folder once; nothing inside a refused folder again',
      );
      t.equal(
        unsafe.find((e: any) => e.path === '..\\x').message,
        'The bag holds "..\\x", which is refused because it contains a backslash, a path separator on Windows; rename it.',
      );
      t.match(unsafe.find((e: any) => e.path === '~notes.txt').message, /starts with "~"/);
      t.notOk(
        item.errors.some((e: any) => e.code === 'non-portable-name' && e.path === 'notes\\2026.txt'),
        'an error, not also a warning',
      );
    },
  );

  await t.test('symbolic links to /etc/passwd, placed in the landing folder', async (t) => {
    const passwd = await readFile('/etc/passwd');
    const { req, dir } = await prepare({ files: { 'a.txt': 'hello\n', passwd: passwd } }, 'landing');
    // The manifests list the real /etc/passwd's digest: following the link would make it "valid".
    rmSync(join(dir, 'data', 'passwd'));
    symlinkSync('/etc/passwd', join(dir, 'data', 'passwd'));
    symlinkSync('/etc', join(dir, 'data', 'etc'));
    rmSync(join(dir, 'bag-info.txt'));
    symlinkSync('/etc/passwd', join(dir, 'bag-info.txt'));
    const item = await expectRefused(t, req, [
      { code: 'symlink', path: 'data/passwd' },
      { code: 'symlink', path: 'data/etc' },
      { code: 'symlink', path: 'bag-info.txt' },
    ]);
    t.notOk(JSON.stringify(item).includes('root:x:0:0'), 'nothing of /etc/passwd is read');
  });

  await t.test('a hard link to a file outside the bag, placed in the landing folder', async (t) => {
    const outside = join(d.dataDir, 'outside-the-bag.txt');
    await writeFile(outside, 'hello\n');
    t.teardown(() => rmSync(outside, { force: true }));
    const { req, dir } = await prepare({}, 'landing');
    rmSync(join(dir, 'data', 'a.txt'));
    linkSync(outside, join(dir, 'data', 'a.txt'));
    // A second name inside the bag for the same file is not the problem; the name outside is.
    await expectRefused(t, req, [{ code: 'hard-link', path: 'data/a.txt' }]);
    await writeFile(outside, 'HELLO\n');
    t.equal(
      await readFile(join(landingDirOf(d, req), 'data', 'a.txt'), 'utf8'),
      'HELLO\n',
      '(the other name can change the file: why it is refused)',
    );
  });

  await t.test('FIFOs (and a device, where mknod works) do not hang the validator', async (t) => {
    const { req, dir } = await prepare({ extraTagFiles: { 'notes.txt': 'x' } }, 'landing');
    spawnSync('mkfifo', [join(dir, 'data', 'pipe')]);
    rmSync(join(dir, 'bag-info.txt'));
    spawnSync('mkfifo', [join(dir, 'bag-info.txt')]);
    rmSync(join(dir, 'manifest-md5.txt'));
    spawnSync('mkfifo', [join(dir, 'manifest-md5.txt')]);
    const expected = [
      { code: 'special-file', path: 'data/pipe' },
      { code: 'special-file', path: 'bag-info.txt' },
      { code: 'special-file', path: 'manifest-md5.txt' },
    ];
    if (spawnSync('mknod', [join(dir, 'data', 'null'), 'c', '1', '3']).status === 0)
      expected.push({ code: 'special-file', path: 'data/null' });
    const started = Date.now();
    await expectRefused(t, req, expected);
    // Opening a FIFO for reading would wait forever: the bound catches a hang, not slowness (a
    // loaded machine takes seconds).
    t.ok(Date.now() - started < 60_000, `refused in ${Date.now() - started} ms`);
  });

  await t.test('names and bytes that are not UTF-8, NUL bytes in a manifest', async (t) => {
    const { req, dir } = await prepare();
    const dataDir = Buffer.from(join(dir, 'data') + '/');
    await writeFile(
      Buffer.concat([dataDir, Buffer.from([0x66, 0xe9, 0x2e, 0x74, 0x78, 0x74])]),
      'latin-1 name',
    );
    await writeFile(
      join(dir, 'bag-info.txt'),
      Buffer.concat([
        Buffer.from('Bagging-Date: 2026-11-22\nContact-Name: Ren'),
        Buffer.from([0xe9, 0xff, 0x0a]),
      ]),
    );
    const manifest = await readFile(join(dir, 'manifest-sha256.txt'));
    await writeFile(
      join(dir, 'manifest-sha256.txt'),
      Buffer.concat([manifest, Buffer.from(`${sha256('hello\n')}  data/a\0.txt\n\0\0\0\0\n`)]),
    );
    await resealTagManifests(dir);
    upload(t, dir, req);
    await expectRefused(t, req, [
      { code: 'name-not-utf8' },
      { code: 'tag-file-undecodable', path: 'bag-info.txt' },
      { code: 'unsafe-path', path: 'data/a\0.txt' },
      { code: 'manifest-line-malformed', path: 'manifest-sha256.txt' },
    ]);
  });

  await t.test('a 100,000-line manifest and a 1 MiB line are refused in seconds', async (t) => {
    const { req, dir } = await prepare();
    const digest = sha256('hello\n');
    const lines: string[] = [];
    for (let i = 0; i < 100_000; i++) lines.push(`${digest}  data/missing/${i}.txt\n`);
    lines.push(`${digest}  data/${'a'.repeat(1 << 20)}\n`, `${'f'.repeat(1 << 20)}\n`);
    await writeFile(
      join(dir, 'manifest-sha256.txt'),
      (await readFile(join(dir, 'manifest-sha256.txt'), 'utf8')) + lines.join(''),
    );
    await resealTagManifests(dir);
    upload(t, dir, req);
    const started = Date.now();
    const item = await expectRefused(t, req, [
      { code: 'file-missing', path: 'data/missing/0.txt' },
      { code: 'manifest-line-malformed', path: 'manifest-sha256.txt' },
    ]);
    const seconds = (Date.now() - started) / 1000;
    // Well under a second per thousand lines even on a loaded machine; a check quadratic in the
    // lines would take many minutes. Speed itself is bench/'s business.
    t.ok(seconds < 90, `validated and answered in ${seconds} s`);
    t.ok(
      item.errors.length < 2_000,
      `the queue item stays small: ${item.errors.length} errors, ${item.error.length} characters`,
    );
    t.match(
      item.errors.find((e: any) => e.code === 'problems-omitted'),
      { message: '99001 more file-missing problems were found; they are not listed one by one.' },
    );
    const long = item.errors.find((e: any) => e.code === 'file-missing' && e.path.length > 1 << 20);
    t.ok(long.message.length < 2048, 'a 1 MiB path is cut in the sentence');
    const events = await d.request('GET', `/v1/packages/${req.bag_id}/events`, { token: alice });
    t.ok(events.text.length < 4 << 20, `events stay small: ${events.text.length} bytes`);
  });

  await t.test('empty uploads: an empty folder, and a bag of empty files', async (t) => {
    const req = await newRequest(d, alice);
    const empty = join(scratch, 'empty');
    mkdirSync(empty);
    upload(t, empty, req);
    const before = await snapshot(d);
    const complete = await d.request('POST', `/v1/requests/${req.bag_id}/complete`, { token: alice });
    const item = await d.waitForQueueItem(complete.json.id, alice);
    t.equal(item.status, 'FAILED');
    t.same(
      item.errors.map((e: any) => e.code),
      ['upload-empty'],
    );
    await followUploadLink(d, alice, req);
    t.ok(existsSync(landingDirOf(d, req)), 'the landing folder is still there to upload into');
    t.same(await snapshot(d), before);

    const zero = await prepare({ files: { 'a.txt': '' }, bagitTxt: '' });
    for (const name of [
      'bag-info.txt',
      'chipmunk-info.txt',
      'manifest-md5.txt',
      'manifest-sha256.txt',
      'tagmanifest-md5.txt',
      'tagmanifest-sha256.txt',
    ])
      await writeFile(join(zero.dir, name), '');
    upload(t, zero.dir, zero.req);
    await expectRefused(t, zero.req, [
      { code: 'bagit-txt-malformed', path: 'bagit.txt' },
      { code: 'file-not-in-manifest', path: 'data/a.txt' },
    ]);
  });

  await t.test('the upload cannot be changed behind the validator', async (t) => {
    const big = Buffer.alloc(4 << 20, 1);
    const { req, dir } = await prepare({ files: { 'a.txt': 'hello\n', 'big.bin': big } });
    upload(t, dir, req);
    // A writer with a descriptor open into the landing folder (only the daemon's own user can
    // have one: landing/ is 0700) keeps writing across complete; rsync is tried after complete.
    const fd = await open(join(landingDirOf(d, req), 'data', 'big.bin'), 'a');
    const before = await snapshot(d);
    const write = async (): Promise<void> => {
      await fd.write(Buffer.alloc(1024, 2));
      await new Promise((r) => setTimeout(r, 25));
    };
    for (let i = 0; i < 5; i++) await write();
    const complete = await d.request('POST', `/v1/requests/${req.bag_id}/complete`, { token: alice });
    await writeFile(join(dir, 'data', 'a.txt'), 'changed after complete\n');
    const again = rsyncUpload(dir, req.upload_link);
    t.not(again.code, 0, 'rsync after complete is refused');
    t.match(again.output, /this upload is complete|upload is finished/, 'and told why');
    for (let i = 0; i < 20; i++) await write();
    await fd.close();
    const item = await d.waitForQueueItem(complete.json.id, alice);
    t.equal(
      item.status,
      'FAILED',
      'the ingest waited for quiet, then found the bag no longer matching its manifests',
    );
    t.ok(
      item.errors.some((e: any) => e.path === 'data/big.bin'),
      JSON.stringify(item.errors.map((e: any) => [e.code, e.path])),
    );
    // Whether the check also sees the writer's last writes land under it depends on timing.
    const found: string[][] = item.errors.map((e: any) => [e.code, e.path]).sort();
    t.same(
      found.filter(([code]) => code !== 'file-changed-during-validation'),
      [
        ['manifest-mismatch', 'data/big.bin'],
        ['manifest-mismatch', 'data/big.bin'],
        ['payload-oxum-mismatch', 'bag-info.txt'],
      ],
      'big.bin differs from both manifests and the payload from its oxum, and nothing else',
    );
    t.ok(
      found.every(([code, path]) => code !== 'file-changed-during-validation' || path === 'data/big.bin'),
      'a change seen during the check is big.bin',
    );
    t.notOk(
      item.errors.some((e: any) => e.path === 'data/a.txt'),
      'the refused rsync changed nothing',
    );
    await followUploadLink(d, alice, req);
    t.equal(await readFile(join(landingDirOf(d, req), 'data', 'a.txt'), 'utf8'), 'hello\n');
    t.same(await snapshot(d), before);
  });

  await t.test(
    'preservd validate: a file that grows during validation is a mismatch, not a crash',
    async (t) => {
      const dir = await makeBag(join(scratch, 'growing'), {
        files: { 'big.bin': Buffer.alloc(64 << 20, 3) },
      });
      const child = spawn(...node([cliPath, 'validate', dir]), {
        env: d.env,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
      child.stderr.on('data', (c: Buffer) => (stdout += c.toString()));
      const exited = new Promise<number | null>((ok) => child.once('exit', ok));
      let running = true;
      void exited.then(() => (running = false));
      const fd = await open(join(dir, 'data', 'big.bin'), 'a');
      while (running) {
        await fd.write(Buffer.alloc(64 << 10, 4));
        await new Promise((r) => setTimeout(r, 5));
      }
      await fd.close();
      t.equal(await exited, 1, stdout);
      t.match(
        stdout,
        /^error {2}file-changed-during-validation {2}data\/big\.bin {2}data\/big\.bin changed while it was being validated/m,
      );
      t.match(stdout, /^invalid /m);
    },
  );

  await t.test('names that collide by case or normalization, and device names, are warnings', async (t) => {
    const files = {
      'café.txt': 'nfc',
      ['cafe\u0301.txt']: 'nfd',
      'README.txt': 'a',
      'readme.txt': 'b',
      CON: 'c',
      'aux.txt': 'd',
      'com1.log': 'e',
    };
    const { req, dir } = await prepare({ files });
    const validate = d.cli(['validate', dir]);
    t.equal(validate.code, 0, validate.stdout + validate.stderr);
    t.match(validate.stdout, /warning {2}normalization-collision {2}data\/café\.txt/);
    t.match(validate.stdout, /warning {2}case-collision {2}data\/readme\.txt/);
    for (const name of ['CON', 'aux.txt', 'com1.log'])
      t.match(validate.stdout, new RegExp(`warning {2}non-portable-name {2}data/${name}`));
    upload(t, dir, req);
    const complete = await d.request('POST', `/v1/requests/${req.bag_id}/complete`, { token: alice });
    const item = await d.waitForQueueItem(complete.json.id, alice);
    t.equal(item.status, 'DONE', 'warnings do not refuse a bag');
    const events = await d.request('GET', `/v1/packages/${req.bag_id}/events`, { token: alice });
    const validation = events.json.find((e: any) => e.type === 'validation');
    for (const warning of [
      /Unicode normalization/,
      /letter case/,
      /data\/CON uses a name Windows reserves for devices/,
    ])
      t.match(validation.detail, warning, 'the warnings are kept in the validation event');
    const pkg = await d.request('GET', `/v1/packages/${req.bag_id}`, { token: alice });
    t.same([...pkg.json.files].sort(), Object.keys(files).sort(), 'every spelling is stored, byte for byte');
  });

  await d.stop();
  await assertInvariants(t, d.dataDir);
  t.same(await listTree(join(d.dataDir, 'staging')), [], 'staging is empty');
}

t.test('hostile bags, hashed as files land', (t) => hostileBags(t, true));
t.test('hostile bags, hashed at complete', (t) => hostileBags(t, false));
