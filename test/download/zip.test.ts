/**
 * The whole-bag zip over real HTTP: layout and Content-Length planned up front, every entry under
 * `<bag_id>/` with its bytes intact (checked by Python's zipfile and `unzip -t`), HEAD, a fixed
 * entry date, and the download aborted, never completed, when a stored file is missing,
 * truncated, a FIFO or cut short while streaming; a client that leaves stops the reading; small
 * files are sent while the thread pool is busy.
 */
import {
  constants,
  openSync,
  closeSync,
  readdirSync,
  readlinkSync,
  rmSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { open, stat, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import t, { type Test } from 'tap';
import type { FileRecord } from '../../src/catalog/types.js';
import { planZip } from '../../src/download/index.js';
import {
  makeStoredBag,
  pythonZipReport,
  rawGet,
  run,
  serveBag,
  sha256,
  unzipTest,
  type RawResponse,
} from './fixtures/stored-bag.js';
import { fileRecordOf } from '../helpers/stored-package.js';

const GiB = 2 ** 30;

function fake(path: string, size: number): FileRecord {
  return { path, size, crc32: '00000000', digests: {} };
}

function openDescriptorsUnder(dir: string): string[] {
  return readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return readlinkSync(join('/proc/self/fd', fd)).startsWith(dir);
    } catch {
      return false;
    }
  });
}

/** A GET that may also fail before any header arrives (the connection was cut at once). */
async function getOrCut(
  url: string,
  opts: Parameters<typeof rawGet>[1] = {},
): Promise<RawResponse | { cut: Error }> {
  try {
    return await rawGet(url, opts);
  } catch (err) {
    return { cut: err as Error };
  }
}

t.test('planZip', async (t) => {
  const small = planZip('top', [fake('bagit.txt', 55), fake('data/a.txt', 3)]);
  // Local: 30 + name + 9 (timestamp) + size; central: 46 + name + 9; end: 22.
  const names = ['top/bagit.txt'.length, 'top/data/a.txt'.length];
  t.equal(small.entries[1]!.offset, 30 + names[0]! + 9 + 55);
  t.equal(small.centralDirectoryOffset, 30 * 2 + names[0]! + names[1]! + 18 + 58);
  t.equal(small.centralDirectorySize, 46 * 2 + names[0]! + names[1]! + 18);
  t.equal(small.size, small.centralDirectoryOffset + small.centralDirectorySize + 22);
  t.equal(small.zip64End, false);
  t.notOk(small.entries.some((e) => e.zip64Size || e.zip64Offset));

  const big = planZip('top', [fake('a', 10), fake('b', 5 * GiB), fake('c', 10), fake('d', 0xffffffff - 1)]);
  t.same(
    big.entries.map((e) => [e.zip64Size, e.zip64Offset]),
    [
      [false, false],
      [true, false],
      [false, true],
      [false, true],
    ],
    'ZIP64 sizes for the giant, ZIP64 offsets for what follows it',
  );
  t.equal(big.entries[2]!.offset, 30 + 5 + 9 + 10 + (30 + 5 + 9 + 20 + 5 * GiB));
  t.equal(big.zip64End, true);
  t.equal(big.size, big.centralDirectoryOffset + big.centralDirectorySize + 56 + 20 + 22);

  const edge = planZip('top', [fake('a', 0xffffffff)]);
  t.equal(edge.entries[0]!.zip64Size, true, '0xffffffff itself needs ZIP64');

  const many = planZip(
    't',
    Array.from({ length: 70_000 }, (_, i) => fake(`f${i}`, 0)),
  );
  t.equal(many.zip64End, true, 'more than 65534 entries need the ZIP64 end records');

  t.throws(() => planZip('top', [fake('a', 1), fake('a', 1)]), /listed twice/);
  t.throws(() => planZip('top', [{ ...fake('a', 1), crc32: 'xyz' }]), /CRC-32/);
  t.throws(() => planZip('a/b', [fake('a', 1)]), /top folder/);
});

t.test('zip download', async (t) => {
  const bag = await makeStoredBag(t);
  const { base } = await serveBag(t, bag);
  const plan = planZip(bag.bagId, bag.files);

  t.test('the archive is complete, valid and holds every file under <bag_id>/', async (t) => {
    const res = await rawGet(`${base}/zip`);
    t.equal(res.status, 200);
    t.equal(res.complete, true);
    t.equal(res.headers['content-type'], 'application/zip');
    t.equal(res.headers['content-disposition'], `attachment; filename="${bag.bagId}.zip"`);
    t.equal(
      res.headers['content-length'],
      String(res.body.length),
      'Content-Length equals the bytes received',
    );
    t.equal(res.body.length, plan.size, 'as planned before the first byte');
    t.equal(res.headers['transfer-encoding'], undefined);

    const zipPath = join(bag.dataDir, 'download.zip');
    writeFileSync(zipPath, res.body);
    const report = await pythonZipReport(zipPath);
    if (!report.ok) throw new Error(report.error);
    t.equal(report.testzip, null, 'testzip() finds no bad entry');
    t.same(
      report.entries.map((e) => e.name),
      bag.files.map((f) => `${bag.bagId}/${f.path}`),
      'entry names are exactly <bag_id>/<path>, tag files and payload',
    );
    t.ok(
      bag.files.some((f) => f.path === 'bagit.txt') &&
        bag.files.some((f) => f.path === 'tagmanifest-sha256.txt'),
    );
    for (const [i, f] of bag.files.entries()) {
      t.equal(report.entries[i]!.size, f.size, `${f.path}: size`);
      t.equal(report.entries[i]!.sha256, f.digests.sha256, `${f.path}: bytes`);
    }
    const unzip = await unzipTest(zipPath);
    t.equal(unzip.code, 0, 'unzip -t passes');
    t.match(unzip.output, /No errors detected/);
  });

  t.test('HEAD gives the length without a body', async (t) => {
    const res = await fetch(`${base}/zip`, { method: 'HEAD' });
    t.equal(res.status, 200);
    t.equal(res.headers.get('content-length'), String(plan.size));
    t.equal(res.headers.get('content-type'), 'application/zip');
    t.equal((await res.arrayBuffer()).byteLength, 0);
    t.same(openDescriptorsUnder(bag.dir), [], 'HEAD opened nothing');
  });

  t.test('with a stored date every download is byte-for-byte the same', async (t) => {
    const storedAt = Date.UTC(2026, 10, 22, 9, 18, 27);
    const fixed = await serveBag(t, bag, { storedAt });
    const one = await rawGet(`${fixed.base}/zip`);
    const two = await rawGet(`${fixed.base}/zip`);
    t.equal(sha256(one.body), sha256(two.body));
    const zipPath = join(bag.dataDir, 'dated.zip');
    writeFileSync(zipPath, one.body);
    const { stdout } = await run('python3', [
      '-c',
      'import sys,zipfile; print({i.date_time for i in zipfile.ZipFile(sys.argv[1]).infolist()})',
      zipPath,
    ]);
    const d = new Date(storedAt);
    const expected = `(${d.getFullYear()}, ${d.getMonth() + 1}, ${d.getDate()}, ${d.getHours()}, ${d.getMinutes()}, ${d.getSeconds() - (d.getSeconds() % 2)})`;
    t.equal(stdout.trim(), `{${expected}}`, 'every entry carries the stored date');
  });
});

t.test('a client that leaves stops the reading', async (t) => {
  const big = Buffer.alloc(64 << 20, 7);
  const bag = await makeStoredBag(t, {
    payload: { 'a.txt': Buffer.from('a\n') },
    extra: async (dir) => {
      writeFileSync(join(dir, 'data/big.bin'), big);
      return [await fileRecordOf(dir, 'data/big.bin')];
    },
  });
  const { base } = await serveBag(t, bag);
  const res = await rawGet(`${base}/zip`, {
    onPause: async () => Promise.reject(new Error('client gives up')),
  });
  t.equal(res.complete, false);
  // rawGet stopped reading; close the socket for good and let the server notice.
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.equal(res.error?.message, 'client gives up');
  for (let i = 0; i < 50 && openDescriptorsUnder(bag.dir).length > 0; i++)
    await new Promise((resolve) => setTimeout(resolve, 20));
  t.same(openDescriptorsUnder(bag.dir), [], 'the stored file was closed');
});

t.test('a stored file that cannot be sent aborts the download', async (t) => {
  const big = Buffer.alloc(48 << 20);
  for (let i = 0; i < big.length; i += 4096) big[i] = (i >> 12) & 0xff;

  async function expectAborted(
    t: Test,
    bag: Awaited<ReturnType<typeof makeStoredBag>>,
    res: RawResponse | { cut: Error },
    name: string,
  ) {
    if ('cut' in res) {
      t.pass(`${name}: the connection was cut before any header`);
      return;
    }
    t.equal(res.status, 200, name);
    t.equal(res.complete, false, `${name}: the response did not end cleanly`);
    t.ok(
      res.body.length < Number(res.headers['content-length']),
      `${name}: ${res.body.length} of ${res.headers['content-length']} bytes`,
    );
    const zipPath = join(bag.dataDir, `${name}.zip`);
    writeFileSync(zipPath, res.body);
    const report = await pythonZipReport(zipPath);
    t.equal(report.ok, false, `${name}: Python's zipfile rejects what arrived`);
    t.not((await unzipTest(zipPath)).code, 0, `${name}: so does unzip -t`);
  }

  t.test('a deleted payload file', async (t) => {
    const bag = await makeStoredBag(t);
    const { base } = await serveBag(t, bag);
    rmSync(join(bag.dir, 'data/images/scan.tif'));
    await expectAborted(t, bag, await getOrCut(`${base}/zip`), 'deleted');
  });

  t.test('a truncated payload file', async (t) => {
    const bag = await makeStoredBag(t);
    const { base } = await serveBag(t, bag);
    truncateSync(join(bag.dir, 'data/nested/deep/dir/notes.md'), 3);
    await expectAborted(t, bag, await getOrCut(`${base}/zip`), 'truncated');
  });

  t.test('the first file missing', async (t) => {
    const bag = await makeStoredBag(t);
    const { base } = await serveBag(t, bag);
    rmSync(join(bag.dir, bag.files[0]!.path));
    await expectAborted(t, bag, await getOrCut(`${base}/zip`), 'first');
  });

  t.test('a small bag: the missing file is in the first buffer', async (t) => {
    const bag = await makeStoredBag(t, {
      payload: { 'a.txt': Buffer.from('a\n'), 'b.txt': Buffer.from('b\n') },
    });
    const { base } = await serveBag(t, bag);
    rmSync(join(bag.dir, 'data/b.txt'));
    await expectAborted(t, bag, await getOrCut(`${base}/zip`), 'small');
  });

  for (const [name, path] of [
    ['a FIFO in a small file’s place', 'data/a.txt'],
    ['a FIFO in a larger file’s place', 'data/images/scan.tif'],
  ] as const) {
    t.test(`${name} aborts the download at once`, async (t) => {
      const bag = await makeStoredBag(t);
      const { base } = await serveBag(t, bag);
      rmSync(join(bag.dir, path));
      await run('mkfifo', [join(bag.dir, path)]);
      const res = await Promise.race([
        getOrCut(`${base}/zip`),
        sleep(10_000).then(() => {
          throw new Error('the download waited on the FIFO');
        }),
      ]);
      await expectAborted(t, bag, res, name.replaceAll(/\W/g, '-'));
    });
  }

  t.test('a file cut short while streaming', async (t) => {
    const bag = await makeStoredBag(t, {
      payload: { 'a.txt': Buffer.from('a\n') },
      extra: async (dir) => {
        writeFileSync(join(dir, 'data/big.bin'), big);
        return [await fileRecordOf(dir, 'data/big.bin')];
      },
    });
    const { base } = await serveBag(t, bag);
    const res = await getOrCut(`${base}/zip`, {
      pauseAfter: 2 << 20,
      onPause: async () => truncateSync(join(bag.dir, 'data/big.bin'), 24 << 20),
    });
    t.notOk('cut' in res, 'headers arrived');
    await expectAborted(t, bag, res, 'shrunk');
  });
});

t.test('small files are sent while every thread of the pool is busy', async (t) => {
  const payload: Record<string, Buffer> = {};
  for (let i = 0; i < 40; i++) payload[`pages/page-${i}.txt`] = Buffer.alloc(1000 + i * 997, 65 + (i % 26));
  const bag = await makeStoredBag(t, { payload });
  const { base } = await serveBag(t, bag);
  // Each open of a FIFO no one writes to holds a thread of libuv's pool until a writer comes.
  const fifos = Array.from({ length: Number(process.env.UV_THREADPOOL_SIZE ?? 4) }, (_, i) =>
    join(bag.dataDir, `busy-${i}`),
  );
  for (const fifo of fifos) await run('mkfifo', [fifo]);
  const holders: Array<Promise<FileHandle>> = fifos.map((fifo) => open(fifo, 'r'));
  const release = async () => {
    for (const fifo of fifos) closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK));
    for (const held of await Promise.all(holders)) await held.close();
  };
  let released = false;
  t.teardown(async () => {
    if (!released) await release();
  });
  let probed = false;
  const probe = stat(bag.dir).then(() => (probed = true));
  await sleep(200);
  t.equal(probed, false, 'the thread pool is busy');

  const res = await Promise.race([
    rawGet(`${base}/zip`),
    sleep(10_000).then(() => {
      throw new Error('the zip waited for the thread pool');
    }),
  ]);
  t.equal(res.complete, true);
  t.equal(res.body.length, planZip(bag.bagId, bag.files).size);
  released = true;
  await release();
  await probe;
  const zipPath = join(bag.dataDir, 'busy.zip');
  writeFileSync(zipPath, res.body);
  const report = await pythonZipReport(zipPath);
  if (!report.ok) throw new Error(report.error);
  t.same(
    report.entries.map((e) => [e.name, e.sha256]),
    bag.files.map((f) => [`${bag.bagId}/${f.path}`, f.digests.sha256]),
    'every entry, byte for byte',
  );
  t.equal((await unzipTest(zipPath)).code, 0, 'unzip -t passes');
});
