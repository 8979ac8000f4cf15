/**
 * verifyPackage against real stored bags and the real fixity pool: an intact package has no
 * findings; each kind of damage gives exactly the finding that names it; a gone or unreadable
 * folder is one finding, never a throw; only an abort rejects.
 */
import { execFileSync } from 'node:child_process';
import { appendFile, chmod, mkdir, open, readFile, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import t from 'tap';
import { describeFinding, findingsDetail, type Finding } from '../../src/audit/findings.js';
import { verifyPackage, type PackageHasher } from '../../src/audit/verify.js';
import type { FileRecord } from '../../src/catalog/types.js';
import { FixityPool } from '../../src/fixity/index.js';
import { createStoredPackage } from '../helpers/stored-package.js';
import { failFor } from './fixtures/fail-for.js';
import { makeWorld } from './fixtures/world.js';

const payload = () => ({
  'a.txt': 'hello world\n',
  'audio/take1.wav': Buffer.alloc(300_000, 7),
  'nested/deep/notes.md': '# notes\n',
  'empty.bin': Buffer.alloc(0),
});

async function flipByte(path: string, at = 0): Promise<void> {
  const fh = await open(path, 'r+');
  const b = Buffer.alloc(1);
  await fh.read(b, 0, 1, at);
  b[0] = b[0]! ^ 0x01;
  await fh.write(b, 0, 1, at);
  await fh.close();
}

/** Whether this process can still read a file after chmod 000 (root, CAP_DAC_OVERRIDE). */
async function readsDespiteChmod(path: string): Promise<boolean> {
  try {
    await readFile(path);
    return true;
  } catch {
    return false;
  }
}

t.test('verifyPackage', async (t) => {
  const w = await makeWorld(t);
  const fresh = () => createStoredPackage(w.catalog, w.storage, { payload: payload() });
  const verify = (
    dir: string,
    files: FileRecord[],
    opts: Partial<Parameters<typeof verifyPackage>[3]> = {},
    hasher: PackageHasher = w.pool,
  ) => verifyPackage(dir, files, hasher, { algorithms: 'strongest', ...opts });

  await t.test('an intact package has no findings, tag files included', async (t) => {
    const p = await fresh();
    t.ok(
      p.files.some((f) => f.path === 'bag-info.txt') &&
        p.files.some((f) => f.path === 'tagmanifest-sha256.txt'),
      'tag files are recorded',
    );
    t.same(await verify(p.dir, p.files), []);
    t.same(await verify(p.dir, p.files, { algorithms: 'all' }), []);
  });

  await t.test('a flipped byte: file-changed with the strongest algorithm, expected and found', async (t) => {
    const p = await fresh();
    await flipByte(join(p.dir, 'data/audio/take1.wav'), 150_000);
    const findings = await verify(p.dir, p.files);
    t.equal(findings.length, 1);
    // The code is asserted on the next line; the cast only names which finding that is.
    const f = findings[0]! as Extract<Finding, { code: 'file-changed' }>;
    t.match(f, {
      code: 'file-changed',
      path: 'data/audio/take1.wav',
      algorithm: 'sha256',
      expected: p.files.find((x) => x.path === 'data/audio/take1.wav')!.digests.sha256,
    });
    t.match(f.actual, /^[0-9a-f]{64}$/);
    t.not(f.actual, f.expected);
    t.match(
      describeFinding(f),
      /^data\/audio\/take1\.wav: sha256 changed: expected [0-9a-f]{64}, found [0-9a-f]{64}$/,
    );
  });

  await t.test('a deleted file: file-missing', async (t) => {
    const p = await fresh();
    await unlink(join(p.dir, 'data/nested/deep/notes.md'));
    t.same(await verify(p.dir, p.files), [{ code: 'file-missing', path: 'data/nested/deep/notes.md' }]);
  });

  await t.test('a file that grew: size-changed with both sizes', async (t) => {
    const p = await fresh();
    await appendFile(join(p.dir, 'data/a.txt'), 'more');
    t.same(await verify(p.dir, p.files), [
      { code: 'size-changed', path: 'data/a.txt', expected: '12', actual: '16' },
    ]);
  });

  await t.test('an added file: file-extra', async (t) => {
    const p = await fresh();
    await writeFile(join(p.dir, 'data/nested/intruder.txt'), 'x');
    t.same(await verify(p.dir, p.files), [
      { code: 'file-extra', path: 'data/nested/intruder.txt', kind: 'file' },
    ]);
  });

  await t.test('a changed tag file counts like a payload file', async (t) => {
    const p = await fresh();
    await flipByte(join(p.dir, 'bag-info.txt'));
    const findings = await verify(p.dir, p.files);
    t.equal(findings.length, 1);
    t.match(findings[0], { code: 'file-changed', path: 'bag-info.txt', algorithm: 'sha256' });
  });

  await t.test('a removed package folder: one package-missing finding', async (t) => {
    const p = await fresh();
    await rm(p.dir, { recursive: true });
    t.same(await verify(p.dir, p.files), [{ code: 'package-missing' }]);
    await writeFile(p.dir, 'not a folder');
    t.same(await verify(p.dir, p.files), [{ code: 'package-missing', kind: 'file' }]);
    t.equal(describeFinding({ code: 'package-missing' }), 'the package folder is missing');
  });

  await t.test(
    'links and special files that appeared are extra; a recorded file turned link is not regular',
    async (t) => {
      const p = await fresh();
      await symlink('/etc/passwd', join(p.dir, 'data/link'));
      await mkdir(join(p.dir, 'data/empty-dir/inner'), { recursive: true });
      execFileSync('mkfifo', [join(p.dir, 'data/pipe')]);
      await unlink(join(p.dir, 'data/a.txt'));
      await symlink('nested/deep/notes.md', join(p.dir, 'data/a.txt'));
      const findings = await verify(p.dir, p.files);
      t.same(findings, [
        { code: 'file-not-regular', path: 'data/a.txt', kind: 'symlink' },
        { code: 'file-extra', path: 'data/empty-dir/', kind: 'directory' },
        { code: 'file-extra', path: 'data/link', kind: 'symlink' },
        { code: 'file-extra', path: 'data/pipe', kind: 'fifo' },
      ]);
      t.equal(findingsDetail(findings).split('\n').length, 4, 'one line per finding');
      t.match(findingsDetail(findings), /data\/a\.txt: is now a symbolic link, not a regular file/);
      t.match(findingsDetail(findings), /data\/pipe: extra FIFO not in the catalog/);
    },
  );

  await t.test('a recorded file replaced by a folder', async (t) => {
    const p = await fresh();
    await unlink(join(p.dir, 'data/a.txt'));
    await mkdir(join(p.dir, 'data/a.txt'));
    await writeFile(join(p.dir, 'data/a.txt/inside'), 'x');
    t.same(await verify(p.dir, p.files), [
      { code: 'file-not-regular', path: 'data/a.txt', kind: 'directory' },
      { code: 'file-extra', path: 'data/a.txt/inside', kind: 'file' },
    ]);
  });

  await t.test('an unreadable file: file-unreadable with the error code', async (t) => {
    const p = await fresh();
    const target = join(p.dir, 'data/a.txt');
    await chmod(target, 0o000);
    t.teardown(() => chmod(target, 0o644).catch(() => undefined));
    let hasher: PackageHasher = w.pool;
    if (await readsDespiteChmod(target)) {
      // Running as root: chmod 000 still reads. The real pool's EACCES cannot be provoked, so the
      // real pool is wrapped to fail this one file the way it does.
      t.comment('chmod 000 does not stop this user (root?): the pool fails data/a.txt with EACCES');
      hasher = failFor(w.pool, target, 'EACCES');
    }
    const findings = await verify(p.dir, p.files, {}, hasher);
    t.same(findings, [{ code: 'file-unreadable', path: 'data/a.txt', reason: 'EACCES' }]);
    t.equal(describeFinding(findings[0]!), 'data/a.txt: could not be read (EACCES)');
  });

  await t.test('an unlistable package folder: one package-unreadable finding', async (t) => {
    const p = await fresh();
    await chmod(p.dir, 0o000);
    t.teardown(() => chmod(p.dir, 0o755).catch(() => undefined));
    let listable = true;
    try {
      execFileSync('ls', [p.dir], { stdio: 'ignore' });
    } catch {
      listable = false;
    }
    // Running as root, chmod 000 does not stop the listing: the real pool is wrapped to fail it.
    if (listable)
      t.comment(
        'chmod 000 does not stop this user from listing a folder (root): the pool fails the listing with EACCES',
      );
    const hasher = listable ? failFor(w.pool, p.dir, 'EACCES') : w.pool;
    t.same(await verify(p.dir, p.files, {}, hasher), [{ code: 'package-unreadable', reason: 'EACCES' }]);
  });

  await t.test('an unlistable subfolder: one file-unreadable finding for it', async (t) => {
    const p = await fresh();
    t.same(await verify(p.dir, p.files, {}, failFor(w.pool, join(p.dir, 'data/nested'), 'EACCES')), [
      { code: 'file-unreadable', path: 'data/nested/', reason: 'EACCES' },
    ]);
  });

  await t.test("'all' checks every recorded digest, 'strongest' only the strongest", async (t) => {
    const p = await fresh();
    const files = p.files.map((f) =>
      f.path === 'data/a.txt' ? { ...f, digests: { ...f.digests, md5: '0'.repeat(32) } } : f,
    );
    t.same(await verify(p.dir, files), [], 'strongest (sha256) still matches');
    const all = await verify(p.dir, files, { algorithms: 'all' });
    t.match(all, [{ code: 'file-changed', path: 'data/a.txt', algorithm: 'md5', expected: '0'.repeat(32) }]);
  });

  await t.test('progress: onFileRead adds up to the recorded bytes', async (t) => {
    const p = await fresh();
    let bytes = 0;
    await verify(p.dir, p.files, { onFileRead: (n) => (bytes += n) });
    t.equal(bytes, p.bytes);
  });

  await t.test('an abort rejects (nothing to record), it is never a finding', async (t) => {
    const p = await fresh();
    const ac = new AbortController();
    ac.abort(new Error('stop'));
    await t.rejects(verify(p.dir, p.files, { signal: ac.signal }), { message: 'stop' });
    // A real pool reading audit jobs at 1 kB/s: the 300 kB file is still being read at the abort.
    const slow = new FixityPool({ workers: 1, auditRateLimitBytesPerSec: 1000 });
    t.teardown(() => slow.close());
    const ac2 = new AbortController();
    const pending = verify(p.dir, p.files, { signal: ac2.signal }, slow);
    setTimeout(() => ac2.abort(new Error('stop')), 20);
    await t.rejects(pending, { message: 'stop' });
  });

  await t.test('every finding code has a sentence without server paths', async (t) => {
    const all: Finding[] = [
      { code: 'package-missing' },
      { code: 'package-unreadable', reason: 'EIO' },
      { code: 'package-not-in-catalog' },
      { code: 'file-missing', path: 'data/x' },
      { code: 'file-changed', path: 'data/x', algorithm: 'sha512', expected: 'aa', actual: 'bb' },
      { code: 'size-changed', path: 'data/x', expected: '1', actual: '2' },
      { code: 'file-unreadable', path: 'data/x', reason: 'EIO' },
      { code: 'file-not-regular', path: 'data/x', kind: 'socket' },
      { code: 'file-extra', path: 'data/y', kind: 'file' },
      { code: 'digest-not-recorded', path: 'data/x' },
    ];
    for (const f of all) {
      const s = describeFinding(f);
      t.type(s, 'string');
      t.notMatch(s, /undefined|\/tmp|storage\//, f.code);
    }
  });
});
