/**
 * The landing watcher: counts that stay right for a `cp -r` burst (scans, not filesystem
 * events), uploads followed only while our rsync receives them, and waiting for an upload to be
 * quiet.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, mkdir, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import t, { type Test } from 'tap';
import { newCapability } from '../../src/ingest/capability.js';
import { isRsyncTempFile, scanUpload } from '../../src/ingest/upload-scan.js';
import { LandingWatcher, type UploadProgress } from '../../src/ingest/watcher.js';
import { DataLayout } from '../../src/storage/layout.js';

const run = promisify(execFile);

async function tempRoot(t: Test): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'preservd-watcher-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function startWatcher(t: Test, layout: DataLayout): Promise<LandingWatcher> {
  const watcher = new LandingWatcher(layout, { minScanIntervalMs: 200 });
  t.teardown(() => watcher.stop());
  await watcher.start();
  return watcher;
}

async function waitForProgress(
  watcher: LandingWatcher,
  cap: string,
  wanted: (p: UploadProgress | undefined) => boolean,
  timeoutMs = 10_000,
): Promise<UploadProgress | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const p = await watcher.progress(cap);
    if (wanted(p)) return p;
    if (Date.now() > deadline) return p;
    await sleep(50);
  }
}

t.test('rsync temp-file names are recognised', async (t) => {
  t.ok(isRsyncTempFile('.f001.bin.tYpmdm'));
  t.ok(isRsyncTempFile('.a.txt.pJDK6L'));
  t.notOk(isRsyncTempFile('f001.bin'));
  t.notOk(isRsyncTempFile('.DS_Store'));
  t.notOk(isRsyncTempFile('.f001.bin.tYpm'));
});

t.test('scanUpload counts files, bytes, folders and temp files without following links', async (t) => {
  const root = await tempRoot(t);
  const upload = join(root, 'upload');
  await mkdir(join(upload, 'data', 'sub'), { recursive: true });
  await writeFile(join(upload, 'bagit.txt'), 'x'.repeat(10));
  await writeFile(join(upload, 'data', 'a.bin'), Buffer.alloc(1000));
  await writeFile(join(upload, 'data', 'sub', '.b.bin.AbC123'), Buffer.alloc(500));
  await symlink('/etc', join(upload, 'data', 'link'));
  const before = Date.now();
  const scan = await scanUpload(upload);
  t.equal(scan.files, 3, 'two files and a symlink');
  t.equal(scan.bytes, 1010, 'bytes of regular files only, temp files excluded');
  t.equal(scan.directories, 2);
  t.equal(scan.tempFiles, 1);
  t.ok(scan.lastWriteMs <= before + 1000 && scan.lastWriteMs > before - 60_000, 'last write is about now');
  t.ok(scan.lastTempWriteMs > 0);
  await t.rejects(scanUpload(join(root, 'missing')), { code: 'ENOENT' });
});

t.test('progress counts a cp -r burst of 300 files exactly', async (t) => {
  const root = await tempRoot(t);
  const layout = new DataLayout(root);
  const { landing } = layout;
  const cap = newCapability();
  await mkdir(join(landing, cap), { recursive: true });
  const source = join(root, 'source');
  let bytes = 0;
  for (let d = 0; d < 15; d++) {
    await mkdir(join(source, 'data', `dir${d}`), { recursive: true });
    for (let f = 0; f < 20; f++) {
      const size = 100 + d * 20 + f;
      bytes += size;
      await writeFile(join(source, 'data', `dir${d}`, `f${f}.bin`), Buffer.alloc(size, f));
    }
  }
  const watcher = await startWatcher(t, layout);
  t.match(await watcher.progress(cap), { files: 0, bytes: 0, tempFiles: 0 }, 'empty at first');

  await run('cp', ['-r', `${source}/.`, join(landing, cap)]);
  const p = await waitForProgress(watcher, cap, (p) => p?.files === 300 && p.bytes === bytes);
  t.equal(p?.files, 300, 'every file is counted');
  t.equal(p?.bytes, bytes, 'every byte is counted');
  t.equal(p?.tempFiles, 0);
  t.ok(p && Date.now() - p.lastWriteAt < 10_000, 'the last write is recent');
});

t.test('uploads in the landing zone are counted when asked; no folder, no progress', async (t) => {
  const root = await tempRoot(t);
  const layout = new DataLayout(root);
  const { landing } = layout;
  const cap = newCapability();
  await mkdir(join(landing, cap, 'data'), { recursive: true });
  await writeFile(join(landing, cap, 'data', 'a'), 'abc');
  await mkdir(join(landing, 'not-a-capability'));
  const watcher = await startWatcher(t, layout);
  t.match(await watcher.progress(cap), { files: 1, bytes: 3, tempFiles: 0 });
  t.equal(await watcher.progress(newCapability()), undefined, 'no folder, no progress');

  // A new upload folder is picked up; a folder that goes (staged) is forgotten.
  const fresh = newCapability();
  await mkdir(join(landing, fresh));
  await writeFile(join(landing, fresh, 'x'), 'xy');
  t.match(await waitForProgress(watcher, fresh, (p) => p?.files === 1), { files: 1, bytes: 2 });
  await rename(join(landing, cap), join(root, 'staged'));
  t.equal(await waitForProgress(watcher, cap, (p) => p === undefined), undefined);
});

t.test('waitForQuiet waits while files keep being written, then resolves', async (t) => {
  const root = await tempRoot(t);
  const layout = new DataLayout(root);
  const { landing } = layout;
  const cap = newCapability();
  await mkdir(join(landing, cap), { recursive: true });
  const watcher = await startWatcher(t, layout);

  // The invariant, whatever the machine's load: it resolves only after quietMs without a write.
  // (On a loaded machine the writer itself may pause longer than quietMs; that is quiet too.)
  // The first write lands before the wait begins: until then the folder may already have been
  // quiet for quietMs (the watcher's start can take that long under load), and resolving at
  // once would be right.
  await writeFile(join(landing, cap, 'f0'), Buffer.alloc(1000, 0));
  let lastWrite = Date.now();
  let writes = 1;
  const writer = (async () => {
    for (let i = 1; i < 15; i++) {
      await sleep(100);
      await writeFile(join(landing, cap, `f${i}`), Buffer.alloc(1000, i));
      lastWrite = Date.now();
      writes += 1;
    }
  })();
  const quietMs = 400;
  await watcher.waitForQuiet(cap, { quietMs, activeTransfers: async () => 0 });
  const resolvedAt = Date.now();
  const writesBefore = writes;
  t.ok(
    resolvedAt - lastWrite >= quietMs - 20,
    `resolved ${resolvedAt - lastWrite} ms after the last write (${writesBefore} of 15 written)`,
  );
  await writer;
  t.equal((await watcher.progress(cap))?.files, 15);
});

t.test('waitForQuiet waits for active transfers and temp files', async (t) => {
  const root = await tempRoot(t);
  const layout = new DataLayout(root);
  const { landing } = layout;
  const cap = newCapability();
  await mkdir(join(landing, cap, 'data'), { recursive: true });
  await writeFile(join(landing, cap, 'data', '.a.bin.Xy12Zw'), 'partial');
  const watcher = new LandingWatcher(layout); // not started: waitForQuiet scans on its own

  let active = 1;
  const started = Date.now();
  let resolvedAt = 0;
  const waiting = watcher
    .waitForQuiet(cap, { quietMs: 100, pollMs: 25, activeTransfers: async () => active })
    .then(() => (resolvedAt = Date.now()));
  await sleep(400);
  t.equal(resolvedAt, 0, 'not while a transfer is active');
  active = 0;
  await sleep(400);
  t.equal(resolvedAt, 0, 'not while a temp file is there');
  await rename(join(landing, cap, 'data', '.a.bin.Xy12Zw'), join(landing, cap, 'data', 'a.bin'));
  await waiting;
  t.ok(resolvedAt - started >= 800);
});

t.test('a temp-looking file that never changes does not block forever', async (t) => {
  const root = await tempRoot(t);
  const layout = new DataLayout(root);
  const { landing } = layout;
  const cap = newCapability();
  await mkdir(join(landing, cap), { recursive: true });
  await writeFile(join(landing, cap, '.notes.backup'), 'a real file with an unlucky name');
  const watcher = new LandingWatcher(layout);
  const started = Date.now();
  await watcher.waitForQuiet(cap, {
    quietMs: 50,
    pollMs: 25,
    tempFileTimeoutMs: 300,
    activeTransfers: async () => 0,
  });
  t.ok(Date.now() - started >= 250, 'it waited for the temp-file timeout');
});

t.test('waitForQuiet stops on abort and returns at once for a missing folder', async (t) => {
  const root = await tempRoot(t);
  const layout = new DataLayout(root);
  const { landing } = layout;
  const cap = newCapability();
  await mkdir(join(landing, cap), { recursive: true });
  const watcher = new LandingWatcher(layout);
  const controller = new AbortController();
  const waiting = watcher.waitForQuiet(cap, {
    quietMs: 60_000,
    signal: controller.signal,
    activeTransfers: async () => 0,
  });
  setTimeout(() => controller.abort(new Error('shutting down')), 100);
  await t.rejects(waiting, /shutting down|aborted/);

  const started = Date.now();
  await watcher.waitForQuiet(newCapability(), { quietMs: 60_000, activeTransfers: async () => 0 });
  t.ok(Date.now() - started < 1000, 'no folder: nothing can be written, nothing to wait for');
  t.throws(() => watcher.progress('nope'), /not an upload capability/);
});

t.test('only uploads the rsync daemon is receiving are followed, and only while it does', async (t) => {
  const root = await tempRoot(t);
  const layout = new DataLayout(root);
  const { landing } = layout;
  const active = join(root, 'active');
  await mkdir(active, { recursive: true });
  // A thousand open requests, one of them receiving data.
  const caps = Array.from({ length: 1000 }, () => newCapability());
  for (const cap of caps) await mkdir(join(landing, cap), { recursive: true });
  let live: string[] = [];
  const watcher = new LandingWatcher(layout, {
    minScanIntervalMs: 50,
    transfers: { dir: active, live: async () => live, pollMs: 50 },
  });
  t.teardown(() => watcher.stop());
  await watcher.start();
  t.same(watcher.following(), [], 'no transfer: nothing followed, however many open requests');

  const receiving = caps[500]!;
  live = [receiving];
  await writeFile(join(active, '1234'), receiving); // what the gate writes; the watch notices it
  const deadline = Date.now() + 5_000;
  while (watcher.following().length === 0 && Date.now() < deadline) await sleep(20);
  t.same(watcher.following(), [receiving], 'the upload receiving data is followed');
  await writeFile(join(landing, receiving, 'a.bin'), Buffer.alloc(100));
  t.match(await waitForProgress(watcher, receiving, (p) => p?.bytes === 100), { files: 1, bytes: 100 });

  live = [];
  while (watcher.following().length > 0 && Date.now() < deadline + 5_000) await sleep(20);
  t.same(watcher.following(), [], 'its transfer ended: a last scan, then no longer followed');
  t.match(await watcher.progress(receiving), { files: 1, bytes: 100 }, 'still counted when asked');
});
