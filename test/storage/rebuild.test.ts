/**
 * What keeps a rebuild near the cost of reading its root (bench/rebuild.ts; docs/performance.md,
 * "issue 25: rebuild"), on roots written by test/helpers/ocfl-root.ts and read through the real
 * folder target: a small package is one transaction (each commit is a sync to disk), objects are
 * read ahead of the one being written and still come out oldest first, and a file whose bytes
 * outgrow its listed size is still caught although it is read with a range.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { Catalog } from '../../src/catalog/catalog.js';
import { packageObjectPath } from '../../src/ocfl/layout.js';
import { targetsFor, type ReplicaTarget } from '../../src/replicas/index.js';
import { DataLayout } from '../../src/storage/layout.js';
import { rebuildCatalog } from '../../src/storage/rebuild.js';
import { RootReader } from '../../src/storage/root-reader.js';
import { testRepository, writeKeys } from '../helpers/ocfl-root.js';

const PACKAGES = 6;

/** A root of PACKAGES packages, an empty catalog beside it, and the root's folder target. */
async function world(t: Test): Promise<{
  catalog: Catalog;
  target: ReplicaTarget;
  externalIds: string[];
  firstBag: string;
}> {
  const dir = mkdtempSync(join(tmpdir(), 'preservd-rebuild-storage-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const root = join(dir, 'root');
  const { packages, keys } = testRepository(PACKAGES);
  writeKeys(root, keys);
  const catalog = Catalog.open(new DataLayout(join(dir, 'data')));
  t.teardown(() => catalog.close());
  const target = (await targetsFor([{ name: 'primary', kind: 'dir', path: root }]))[0]!;
  t.teardown(() => target.close());
  return { catalog, target, externalIds: packages.map((p) => p.externalId), firstBag: packages[0]!.bagId };
}

/** The target with `open` wrapped to count reads in flight (called, stream not yet ended), the highest kept. */
function countingOpens(target: ReplicaTarget): { target: ReplicaTarget; most: () => number } {
  let now = 0;
  let most = 0;
  const open: ReplicaTarget['open'] = async (key, range, signal) => {
    now++;
    most = Math.max(most, now);
    const stream = await target.open(key, range, signal).catch((err: unknown) => {
      now--;
      throw err;
    });
    if (stream === undefined) now--;
    else stream.once('close', () => now--);
    return stream;
  };
  return { target: Object.assign(Object.create(target) as ReplicaTarget, { open }), most: () => most };
}

t.test('a small package is written in one transaction, and objects are read ahead', async (t) => {
  const { catalog, target, externalIds } = await world(t);
  let depth = 0;
  let commits = 0;
  const transaction = catalog.transaction.bind(catalog);
  catalog.transaction = <T>(fn: () => T): T => {
    if (depth === 0) commits++;
    depth++;
    try {
      return transaction(fn);
    } finally {
      depth--;
    }
  };
  const counted = countingOpens(target);
  const result = await rebuildCatalog(new RootReader(counted.target), catalog, {
    from: 'primary',
    verify: true,
  });
  t.match(result, { rebuilt: PACKAGES, skipped: [] });
  // One for the repository's record, one per package, one that ends the rebuild (three per package before).
  t.ok(commits <= PACKAGES + 2, `${commits} commits for ${PACKAGES} packages`);
  t.ok(counted.most() > 1, `reads overlapped (${counted.most()} at most)`);
  t.same(
    [...catalog.packages.list()].map((p) => p.externalId),
    externalIds,
    'the packages oldest first, as the root orders them',
  );
  for (const p of catalog.packages.list())
    t.ok(catalog.files.list(p.bagId).length > 0, `${p.externalId} has its files`);
});

t.test('a file longer than its listed size is skipped, though read with a range', async (t) => {
  const { catalog, target, firstBag } = await world(t);
  const object = packageObjectPath(firstBag);
  // The listing says one byte less for the object's first payload file than it holds.
  const shorter: ReplicaTarget['list'] = async function* (prefix, signal) {
    for await (const entry of target.list(prefix, signal))
      yield entry.key.replace(/^\/+/, '').startsWith(`${object}/v1/content/data/`)
        ? { ...entry, size: entry.size - 1 }
        : entry;
  };
  const lying = Object.assign(Object.create(target) as ReplicaTarget, { list: shorter });
  for (const verify of [true, false]) {
    const result = await rebuildCatalog(new RootReader(lying), catalog, { from: 'primary', verify });
    t.equal(result.skipped.length, 1, `verify ${verify}: one object skipped`);
    t.match(result.skipped[0], { object, why: /read (\d+) bytes, the root lists \d+/ });
  }
});
