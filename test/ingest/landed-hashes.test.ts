/**
 * Files hashed as they land, through the real daemon and its rsync: every file our rsync reports
 * received is hashed in the background and recorded; at complete a file whose identity is
 * unchanged is not read again, and one that changed (a second rsync run, a touch, a replacement
 * of the same size and mtime, an upload killed mid-file) is, and the verdict is right. A daemon
 * killed with SIGKILL while hashing loses nothing: after the restart every file is known.
 */
import { spawn } from 'node:child_process';
import { randomFillSync } from 'node:crypto';
import { mkdtempSync, readdirSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { get, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import { rsyncUpload, TestDaemon } from '../helpers/daemon.js';
import { makeBag } from '../helpers/make-bag.js';
import { landingDirOf, newRequest, type Request } from '../hostile/fixtures/attack.js';

const MiB = 1024 * 1024;
const scratch = mkdtempSync(join(tmpdir(), 'preservd-landed-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));

interface Counts {
  hashed: number;
  known: number;
  rehashed: number;
  unreported: number;
}

async function counts(d: TestDaemon): Promise<Counts> {
  const text = (await d.request('GET', '/metrics', { token: null })).text;
  const read = (name: string): number => {
    const match = new RegExp(`^${name} (\\d+)`, 'm').exec(text);
    if (match === null) throw new Error(`no ${name} in the metrics`);
    return Number(match[1]);
  };
  return {
    hashed: read('preservd_upload_files_hashed_on_arrival_total'),
    known: read('preservd_ingest_files_known_total'),
    rehashed: read('preservd_ingest_files_rehashed_total'),
    unreported: read('preservd_ingest_files_unreported_total'),
  };
}

const less = (a: Counts, b: Counts): Counts => ({
  hashed: a.hashed - b.hashed,
  known: a.known - b.known,
  rehashed: a.rehashed - b.rehashed,
  unreported: a.unreported - b.unreported,
});

/** Waits until `n` more files were hashed on arrival than in `from`. */
async function hashedOnArrival(d: TestDaemon, from: Counts, n: number, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((await counts(d)).hashed - from.hashed < n) {
    if (Date.now() > deadline) throw new Error(`fewer than ${n} files hashed on arrival in ${timeoutMs} ms`);
    await sleep(50);
  }
}

const random = (bytes: number): Buffer => randomFillSync(Buffer.alloc(bytes));

/** Files of the bags below: 3 payload files plus bagit.txt, bag-info.txt, chipmunk-info.txt, 2 manifests, 2 tag manifests. */
const FILES = 10;

async function prepare(
  d: TestDaemon,
  token: string,
  name: string,
  files: Record<string, string | Buffer>,
): Promise<{ req: Request; dir: string }> {
  const req = await newRequest(d, token);
  const dir = join(scratch, name);
  await makeBag(dir, {
    files,
    chipmunkInfo: { externalId: req.external_id, bagId: req.bag_id, contentType: req.content_type },
  });
  return { req, dir };
}

async function complete(d: TestDaemon, token: string, req: Request): Promise<any> {
  const res = await d.request('POST', `/v1/requests/${req.bag_id}/complete`, { token });
  if (res.status !== 201) throw new Error(`complete: ${res.status} ${res.text}`);
  return d.waitForQueueItem(res.json.id, token, 120_000);
}

const codes = (item: any): string[] =>
  [...new Set<string>(item.errors?.map((e: any) => `${e.code} ${e.path ?? ''}`) ?? [])].sort();

t.test('hashing as files land', async (t) => {
  const d = await TestDaemon.start(t);
  const alice = d.addUser('alice');
  const payload = () => ({ 'a.txt': 'hello\n', 'b.txt': 'world\n', 'big.bin': random(3 * MiB) });

  await t.test('one rsync run: no file is read again at complete', async (t) => {
    const { req, dir } = await prepare(d, alice, 'once', payload());
    const before = await counts(d);
    t.equal(rsyncUpload(dir, req.upload_link).code, 0);
    await hashedOnArrival(d, before, FILES);
    const item = await complete(d, alice, req);
    t.equal(item.status, 'DONE', JSON.stringify(item.errors));
    t.same(less(await counts(d), before), { hashed: FILES, known: FILES, rehashed: 0, unreported: 0 });
  });

  await t.test('a file rewritten by a second rsync run is hashed again; the verdict sees it', async (t) => {
    const { req, dir } = await prepare(d, alice, 'second-run', payload());
    const before = await counts(d);
    t.equal(rsyncUpload(dir, req.upload_link).code, 0);
    await hashedOnArrival(d, before, FILES);
    // New bytes, the manifests left as they were: the bag is now wrong, and must be found so.
    writeFileSync(join(dir, 'data/a.txt'), 'HELLO\n');
    utimesSync(join(dir, 'data/a.txt'), new Date(), new Date(Date.now() + 5_000));
    t.equal(rsyncUpload(dir, req.upload_link).code, 0);
    const item = await complete(d, alice, req);
    t.equal(item.status, 'FAILED');
    t.same(codes(item), ['manifest-mismatch data/a.txt']);
    // Run as root, rsync's fake super rewrites the attributes of a.txt's neighbours too (a new
    // ctime): they are read again as well. Without root, a.txt alone.
    const delta = less(await counts(d), before);
    t.ok(delta.hashed + delta.rehashed + delta.unreported >= FILES + 1, 'a.txt read twice', delta);
  });

  await t.test('a file touched after it was hashed is read again at complete', async (t) => {
    const { req, dir } = await prepare(d, alice, 'touched', payload());
    const before = await counts(d);
    t.equal(rsyncUpload(dir, req.upload_link).code, 0);
    await hashedOnArrival(d, before, FILES);
    const landed = join(landingDirOf(d, req), 'data/b.txt');
    utimesSync(landed, new Date(), statSync(landed).mtime);
    const item = await complete(d, alice, req);
    t.equal(item.status, 'DONE', JSON.stringify(item.errors));
    t.same(less(await counts(d), before), { hashed: FILES, known: FILES - 1, rehashed: 1, unreported: 0 });
  });

  await t.test('a file replaced by another of the same size and mtime is read again', async (t) => {
    const { req, dir } = await prepare(d, alice, 'replaced', payload());
    const before = await counts(d);
    t.equal(rsyncUpload(dir, req.upload_link).code, 0);
    await hashedOnArrival(d, before, FILES);
    const landed = join(landingDirOf(d, req), 'data/big.bin');
    const old = statSync(landed);
    const other = join(landingDirOf(d, req), 'data/.other');
    writeFileSync(other, random(old.size));
    utimesSync(other, old.atime, old.mtime);
    renameSync(other, landed);
    t.equal(statSync(landed).size, old.size);
    t.equal(statSync(landed).mtimeMs, old.mtimeMs, 'same size and mtime: only ctime and inode differ');
    const item = await complete(d, alice, req);
    t.equal(item.status, 'FAILED');
    t.same(codes(item), ['manifest-mismatch data/big.bin']);
    t.same(less(await counts(d), before), { hashed: FILES, known: FILES - 1, rehashed: 1, unreported: 0 });
  });

  await t.test('an upload killed mid-file: the partial file is read again', async (t) => {
    const { req, dir } = await prepare(d, alice, 'killed', payload());
    const before = await counts(d);
    t.equal(rsyncUpload(dir, req.upload_link).code, 0);
    await hashedOnArrival(d, before, FILES);
    // A second run of a new big.bin, slowed down and killed part-way; --partial keeps what came.
    writeFileSync(join(dir, 'data/big.bin'), random(3 * MiB));
    utimesSync(join(dir, 'data/big.bin'), new Date(), new Date(Date.now() + 10_000));
    const slow = spawn(
      'rsync',
      ['-rt', '--partial', '--bwlimit=500', '--no-perms', `${dir}/`, req.upload_link],
      { stdio: 'ignore' },
    );
    const landed = join(landingDirOf(d, req), 'data');
    const deadline = Date.now() + 30_000;
    // Until rsync's temporary file of big.bin has some bytes.
    while (
      !readdirSync(landed).some((n) => n.startsWith('.big.bin.') && statSync(join(landed, n)).size > 0)
    ) {
      if (Date.now() > deadline) throw new Error('the slow upload never started big.bin');
      await sleep(20);
    }
    slow.kill('SIGKILL');
    await new Promise((r) => slow.once('exit', r));
    const item = await complete(d, alice, req);
    t.equal(item.status, 'FAILED');
    t.ok(codes(item).includes('manifest-mismatch data/big.bin'), JSON.stringify(codes(item)));
    const delta = less(await counts(d), before);
    t.ok(delta.rehashed >= 1, 'the partial big.bin is read again', delta);
    t.equal(delta.known + delta.rehashed + delta.unreported, FILES, 'every file checked once at complete');
  });
});

t.test('nothing is hashed in the background while a download is being answered', async (t) => {
  const d = await TestDaemon.start(t);
  const alice = d.addUser('alice');
  // A file larger than loopback's socket buffers: its download stays open while the client reads nothing.
  const stored = await prepare(d, alice, 'stored', { 'big.bin': random(48 * MiB) });
  t.equal(rsyncUpload(stored.dir, stored.req.upload_link).code, 0);
  t.equal((await complete(d, alice, stored.req)).status, 'DONE');

  const download = await new Promise<IncomingMessage>((resolve, reject) =>
    get(
      `http://127.0.0.1:${d.httpPort}/v1/packages/${stored.req.bag_id}/big.bin`,
      { headers: { authorization: `Bearer ${alice}` } },
      resolve,
    ).once('error', reject),
  );
  t.equal(download.statusCode, 200);
  download.pause();
  const { req, dir } = await prepare(d, alice, 'held', { 'a.txt': 'a\n', 'b.bin': random(MiB) });
  const before = await counts(d);
  t.equal(rsyncUpload(dir, req.upload_link).code, 0);
  await sleep(1_500);
  t.equal((await counts(d)).hashed - before.hashed, 0, 'held while the download is open');

  download.destroy();
  await hashedOnArrival(d, before, FILES - 1);
  const item = await complete(d, alice, req);
  t.equal(item.status, 'DONE', JSON.stringify(item.errors));
  t.same(less(await counts(d), before), { hashed: FILES - 1, known: FILES - 1, rehashed: 0, unreported: 0 });
});

t.test('SIGKILL during background hashing loses nothing', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'preservd-landed-data-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const first = await TestDaemon.start(t, { dataDir, keepDataDir: true });
  const alice = first.addUser('alice');
  const files: Record<string, Buffer> = {};
  for (let i = 0; i < 12; i++) files[`reel-${i}.bin`] = random(6 * MiB);
  const { req, dir } = await prepare(first, alice, 'crash', files);
  t.equal(rsyncUpload(dir, req.upload_link).code, 0);
  // Killed in the middle: some files hashed and recorded, the rest not yet.
  await hashedOnArrival(first, { hashed: 0, known: 0, rehashed: 0, unreported: 0 }, 1);
  const atKill = await counts(first);
  first.proc.kill('SIGKILL');
  await first.waitForExit();
  const total = Object.keys(files).length + 7;
  t.ok(atKill.hashed > 0 && atKill.hashed < total, `killed with ${atKill.hashed} of ${total} files hashed`);

  const second = await TestDaemon.start(t, { dataDir, keepDataDir: true });
  // The logs left by the killed daemon are read again and their files hashed.
  const zero = { hashed: 0, known: 0, rehashed: 0, unreported: 0 };
  const landedLogs = join(dataDir, 'rsyncd', 'landed');
  const deadline = Date.now() + 120_000;
  while (readdirSync(landedLogs).length > 0) {
    if (Date.now() > deadline) throw new Error('the landed-file logs were never all read');
    await sleep(50);
  }
  const afterRestart = await counts(second);
  // Records committed after `atKill` was read and before the kill are skipped, not counted again:
  // the restart reads at most what was unrecorded when counted, and at least one file.
  t.ok(afterRestart.hashed > 0, `${afterRestart.hashed} files hashed after the restart`);
  t.ok(afterRestart.hashed <= total - atKill.hashed, 'no file recorded before the kill is read again');
  const item = await complete(second, alice, req);
  t.equal(item.status, 'DONE', JSON.stringify(item.errors));
  t.same(less(await counts(second), { ...zero, hashed: afterRestart.hashed }), {
    hashed: 0,
    known: total,
    rehashed: 0,
    unreported: 0,
  });
});
