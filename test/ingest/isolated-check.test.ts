/**
 * The ingest checks an upload in a worker thread (src/ingest/isolated-check.ts): the verdict is
 * the one `checkUpload` gives in the daemon's own thread, problems, codes and files alike; every
 * file is hashed by the hasher the ingest hands over (the daemon's pool), a read failure
 * crossing back with its code; a stop ends the check at once, an external validator with it;
 * and the daemon's own heap does not carry the validator's work for a bag of many files.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import type { BagFile, FileHasher } from '../../src/bagit/index.js';
import { FixityError } from '../../src/fixity/index.js';
import { checkUpload } from '../../src/ingest/check-upload.js';
import { checkUploadIsolated, prepareCheck, type CheckedUpload } from '../../src/ingest/isolated-check.js';
import { SimpleHasher } from '../bagit/simple-hasher.js';
import { makeBag } from '../helpers/make-bag.js';
import { writeManyFilesBag } from '../helpers/many-files-bag.js';
import { node } from '../helpers/node.js';

const root = mkdtempSync(join(tmpdir(), 'preservd-isolated-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));

async function allFiles(checked: CheckedUpload): Promise<{ files: BagFile[]; batches: number }> {
  const files: BagFile[] = [];
  let batches = 0;
  for await (const batch of checked.files()) {
    files.push(...batch);
    batches++;
  }
  return { files, batches };
}

/** The in-thread verdict and the worker's, the worker's files read back in full. */
async function both(dir: string, hasher: () => FileHasher) {
  const inline = await checkUpload(dir, { hasher: hasher() });
  const checked = await checkUploadIsolated(dir, { hasher: hasher() });
  try {
    const { files, batches } = await allFiles(checked);
    return { inline, checked, files, batches };
  } finally {
    await checked.close();
  }
}

t.test(
  'a valid bag: the same verdict and files as in the daemon thread, hashed by the given hasher',
  async (t) => {
    const payload: Record<string, string> = {};
    for (let i = 0; i < 6_000; i++) payload[`d${Math.floor(i / 1000)}/f${i}.txt`] = `${i}\n`;
    const dir = await makeBag(join(root, 'valid'), { files: payload });
    const hashers: SimpleHasher[] = [];
    const { inline, checked, files, batches } = await both(dir, () => {
      const h = new SimpleHasher();
      hashers.push(h);
      return h;
    });
    t.equal(checked.valid, true);
    t.same(checked.problems, inline.problems);
    const { files: inlineFiles, ...summary } = inline.report;
    t.same(checked.report, { ...summary, fileCount: inlineFiles.length });
    t.same(files, inlineFiles, 'every file, in order, with the same digests and CRC-32');
    t.equal(batches, 2, '6,000 payload files and the tag files arrive in batches of 5,000');
    const [inThread, throughWorker] = hashers;
    t.equal(
      throughWorker!.calls.size,
      inThread!.calls.size,
      'the worker hashed nothing itself: every file went to the given hasher',
    );
    t.ok(
      [...throughWorker!.calls.values()].every((n) => n === 1),
      'each file once',
    );
  },
);

t.test('a broken bag: the same problems, each with its code and file', async (t) => {
  const dir = await makeBag(join(root, 'broken'), {
    files: { 'a.txt': 'a', 'b.txt': 'b', 'c.txt': 'c' },
    corrupt: ['data/a.txt'],
    unlisted: ['c.txt'],
  });
  const { inline, checked } = await both(dir, () => new SimpleHasher());
  t.equal(checked.valid, false);
  t.ok(checked.problems.length >= 2);
  t.same(checked.problems, inline.problems);
});

t.test('a file the hasher cannot read: its error code crosses the thread', async (t) => {
  const dir = await makeBag(join(root, 'unreadable'), { files: { 'a.txt': 'a', 'b.txt': 'b' } });
  const failing = (): FileHasher => {
    const simple = new SimpleHasher();
    return {
      hashFile: async (path, algorithms, opts) => {
        if (path.endsWith('b.txt')) throw new FixityError('EIO', `i/o error reading ${path}`, { path });
        return simple.hashFile(path, algorithms, opts);
      },
    };
  };
  const { inline, checked } = await both(dir, failing);
  t.equal(checked.valid, false);
  t.same(checked.problems, inline.problems);
  t.match(JSON.stringify(checked.problems), /EIO/, 'the problem names the code');
  t.match(JSON.stringify(checked.problems), /data\/b\.txt/, 'and the file');
});

t.test('a stop ends the check at once, with the stop as the reason', async (t) => {
  const dir = await makeBag(join(root, 'stopped'), { files: { 'a.txt': 'a' } });
  const stop = new AbortController();
  let asked = 0;
  const hanging: FileHasher = {
    hashFile: (_path, _algorithms, opts) => {
      asked++;
      setImmediate(() => stop.abort(new Error('shutting down')));
      return new Promise((_, reject) =>
        opts?.signal?.addEventListener('abort', () => reject(opts.signal!.reason as Error)),
      );
    },
  };
  const started = Date.now();
  await t.rejects(checkUploadIsolated(dir, { hasher: hanging, signal: stop.signal }), {
    message: 'shutting down',
  });
  t.ok(asked > 0, 'the check had begun hashing');
  t.ok(Date.now() - started < 5_000, 'and ended without waiting for it');
});

t.test('a check asked for after the stop does not start', async (t) => {
  const dir = await makeBag(join(root, 'late'), { files: { 'a.txt': 'a' } });
  const hasher = new SimpleHasher();
  const stop = new AbortController();
  stop.abort(new Error('already stopping'));
  await t.rejects(checkUploadIsolated(dir, { hasher, signal: stop.signal }), { message: 'already stopping' });
  t.equal(hasher.calls.size, 0, 'nothing was hashed');
});

t.test("a stop also ends the content type's external validator the check started", async (t) => {
  const request = {
    bagId: '3f1c2a9e-5b7d-4e8f-9a0b-1c2d3e4f5a6b',
    externalId: 'ex_stop',
    contentType: 'audio',
  };
  const dir = await makeBag(join(root, 'validator'), { files: { 'a.txt': 'a' }, chipmunkInfo: request });
  const pidFile = join(root, 'validator.pid');
  const stop = new AbortController();
  const check = checkUploadIsolated(dir, {
    hasher: new SimpleHasher(),
    request,
    rules: { validator: ['bash', '-c', `echo $$ > ${pidFile}; exec sleep 60`], timeoutMs: 120_000 },
    signal: stop.signal,
  });
  check.catch(() => undefined);
  let pid: number | undefined;
  for (let i = 0; i < 200 && pid === undefined; i++) {
    await new Promise((r) => setTimeout(r, 50));
    try {
      pid = Number(readFileSync(pidFile, 'utf8').trim()) || undefined;
    } catch {
      // not yet started
    }
  }
  t.ok(pid !== undefined, 'the external validator started');
  t.ok(alive(pid!), 'and runs');
  stop.abort(new Error('shutting down'));
  await t.rejects(check, { message: 'shutting down' });
  let gone = false;
  for (let i = 0; i < 100 && !gone; i++) {
    await new Promise((r) => setTimeout(r, 50));
    gone = !alive(pid!);
  }
  t.ok(gone, 'the validator is gone within 5 s of the stop');
});

/** Whether a process runs (a zombie, dead but not yet reaped by its parent, does not). */
function alive(pid: number): boolean {
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}

t.test("the validator's work stays out of the daemon thread's heap", async (t) => {
  // Each check in a child process of its own, sampling the main thread's heap throughout.
  const FILES = 100_000;
  const peak = async (mode: 'isolated' | 'inline', dir: string): Promise<number> => {
    const child = join(import.meta.dirname, 'fixtures', 'check-heap.js');
    const { stdout } = await promisify(execFile)(...node([child, mode, dir]), {
      maxBuffer: 1 << 20,
    });
    const result = JSON.parse(stdout) as { valid: boolean; files: number; growth: number };
    t.same(
      [result.valid, result.files],
      [true, FILES + 3],
      `${mode}: valid, every file and its three tag files read`,
    );
    return result.growth;
  };
  const dir = join(existsSync('/dev/shm') ? mkdtempSync('/dev/shm/preservd-isolated-') : root, 'many');
  t.teardown(() => rmSync(join(dir, '..'), { recursive: true, force: true }));
  writeManyFilesBag(dir, FILES);
  const isolated = await peak('isolated', dir);
  const inline = await peak('inline', dir);
  t.comment(
    `the main thread's old generation grew ${(isolated / 1e6).toFixed(1)} MB with the check in a worker, ${(inline / 1e6).toFixed(1)} MB with it in the thread (${FILES.toLocaleString('en')} files)`,
  );
  // Measured: 20–26 MB against 79–83 MB (and 23 against 175 MB at 200,000 files).
  t.ok(
    isolated * 2 < inline,
    "checked in a worker, the daemon thread's old generation grows by less than half of what the same check grows it by in the thread",
  );
});

t.test('a check worker started ahead checks the upload it is given later, as a new one does', async (t) => {
  const dir = await makeBag(join(root, 'prepared'), { files: { 'a.txt': 'a\n', 'b/c.txt': 'c\n' } });
  const inline = await checkUpload(dir, { hasher: new SimpleHasher() });
  const prepared = prepareCheck();
  await new Promise((resolve) => setTimeout(resolve, 200)); // idle a while, as during a wait for quiet
  const checked = await checkUploadIsolated(dir, { hasher: new SimpleHasher() }, prepared);
  try {
    t.equal(checked.valid, true);
    t.same(checked.problems, inline.problems);
    t.same((await allFiles(checked)).files, inline.report.files);
  } finally {
    await checked.close();
  }
  // One closed before its upload came (its worker gone): a new one checks instead.
  const closed = prepareCheck();
  await closed.close();
  const again = await checkUploadIsolated(dir, { hasher: new SimpleHasher() }, closed);
  try {
    t.equal(again.valid, true);
  } finally {
    await again.close();
  }
});

t.test('a check worker started ahead and never given an upload keeps no process alive', async (t) => {
  const module = new URL('../../src/ingest/isolated-check.js', import.meta.url).href;
  const started = Date.now();
  const { stdout } = await promisify(execFile)(
    ...node([
      '--input-type=module',
      '-e',
      `const m = await import(${JSON.stringify(module)}); m.prepareCheck(); console.log('prepared');`,
    ]),
    { timeout: 60_000 },
  );
  t.equal(stdout.trim(), 'prepared');
  t.ok(Date.now() - started < 60_000, 'the process ended by itself');
});
