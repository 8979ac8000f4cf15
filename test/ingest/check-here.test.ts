/**
 * A small upload is checked on the daemon's own thread (src/ingest/check-here.ts): the verdict,
 * the problems and the files, handed over in the same batches, are the worker's
 * (isolated-check.ts); `holdsAtMost` counts what the tree holds and stops past its limit.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { BagFile } from '../../src/bagit/index.js';
import { checkUploadHere, holdsAtMost } from '../../src/ingest/check-here.js';
import { checkUploadIsolated, type CheckedUpload } from '../../src/ingest/isolated-check.js';
import { SimpleHasher } from '../bagit/simple-hasher.js';
import { makeBag } from '../helpers/make-bag.js';

const root = mkdtempSync(join(tmpdir(), 'preservd-check-here-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));

async function batchesOf(checked: CheckedUpload): Promise<BagFile[][]> {
  const batches: BagFile[][] = [];
  for await (const batch of checked.files()) batches.push(batch);
  return batches;
}

/** The same upload checked here and in a worker, each read back in full. */
async function both(dir: string) {
  const here = await checkUploadHere(dir, { hasher: new SimpleHasher() });
  const worker = await checkUploadIsolated(dir, { hasher: new SimpleHasher() });
  try {
    return { here, worker, hereBatches: await batchesOf(here), workerBatches: await batchesOf(worker) };
  } finally {
    await here.close();
    await worker.close();
  }
}

t.test('a valid bag: the verdict, report and files of the worker, in the same batches', async (t) => {
  const payload: Record<string, string> = {};
  for (let i = 0; i < 6_000; i++) payload[`d${Math.floor(i / 1000)}/f${i}.txt`] = `${i}\n`;
  const dir = await makeBag(join(root, 'valid'), { files: payload });
  const { here, worker, hereBatches, workerBatches } = await both(dir);
  t.equal(here.valid, true);
  t.same(here.problems, worker.problems);
  t.same(here.report, worker.report);
  t.equal(here.report.fileCount, 6_006, 'every payload file and the six tag files');
  t.same(
    hereBatches.map((b) => b.length),
    [5_000, 1_006],
  );
  t.same(hereBatches, workerBatches, 'every file, in order, with the same digests and CRC-32');
  t.same(await batchesOf(here), [], 'the files are handed over once');
});

t.test('a broken bag: the same problems, each with its code and file', async (t) => {
  const dir = await makeBag(join(root, 'broken'), {
    files: { 'a.txt': 'a', 'b.txt': 'b', 'c.txt': 'c' },
    corrupt: ['data/a.txt'],
    unlisted: ['c.txt'],
  });
  const { here, worker } = await both(dir);
  t.equal(here.valid, false);
  t.same(here.problems, worker.problems);
  t.same(
    here.problems.map((p) => [p.code, p.path]),
    [
      ['manifest-mismatch', 'data/a.txt'],
      ['manifest-mismatch', 'data/a.txt'],
      ['file-not-in-manifest', 'data/c.txt'],
    ],
    'the corrupt file in each of its two manifests, the unlisted one',
  );
});

t.test('holdsAtMost counts files and folders at every depth, and stops past the limit', (t) => {
  const tree = join(root, 'tree');
  mkdirSync(join(tree, 'a', 'b'), { recursive: true });
  for (const path of ['one', 'a/two', 'a/b/three', 'a/b/four']) writeFileSync(join(tree, path), '');
  // 6 entries: one, a, a/two, a/b, a/b/three, a/b/four.
  t.equal(holdsAtMost(tree, 6), true);
  t.equal(holdsAtMost(tree, 5), false);
  t.equal(holdsAtMost(join(tree, 'a', 'b'), 2), true, 'a subtree counts its own entries');
  t.equal(
    holdsAtMost(join(root, 'missing'), 1_000),
    false,
    'a folder that cannot be read is no small upload',
  );
  t.end();
});
