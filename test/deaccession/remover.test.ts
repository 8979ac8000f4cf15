/**
 * The remover at start-up, in process on a real LMDB catalog and real folders, with the state a
 * kill -9 leaves: the primary's removal a crash left is finished, and its emptied layout folders
 * gone, by the time `start` resolves (before the daemon serves or audits); and the removals owed
 * to a replica no longer configured are abandoned in one transaction, with an event and a warning;
 * a dir replica whose folder is not there never counts its removal done; a package's replicas
 * are removed only once its primary copy is.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pino } from 'pino';
import t, { type Test } from 'tap';
import { Catalog } from '../../src/catalog/catalog.js';
import { NO_LONGER_CONFIGURED } from '../../src/catalog/deaccessions.js';
import {
  checkTargets,
  objectPrefix,
  PRIMARY,
  Remover,
  ReplicaDown,
  targetsFor,
} from '../../src/replicas/index.js';
import { DataLayout } from '../../src/storage/layout.js';
import { writeRootFiles } from '../../src/storage/ocfl-root.js';
import { RecordWriter } from '../../src/storage/record-writer.js';
import { Storage } from '../../src/storage/storage.js';

async function world(t: Test) {
  const dir = mkdtempSync(join(tmpdir(), 'preservd-remover-'));
  const layout = new DataLayout(dir);
  await layout.ensure();
  await writeRootFiles(layout);
  const catalog = Catalog.open(layout);
  const storage = new Storage(layout);
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
  const removers: Remover[] = [];
  t.teardown(async () => {
    for (const r of removers) await r.stop();
    await catalog.close();
    rmSync(dir, { recursive: true, force: true });
  });
  /** A stored package, deaccessioned with a removal owed to each of `copies`. */
  const tombstone = (copies: string[]): string => {
    const bagId = randomUUID();
    catalog.packages.create({
      bagId,
      externalId: `ext-${bagId}`,
      contentType: 'audio',
      user: 'alice',
      capability: randomUUID().replaceAll('-', ''),
    });
    catalog.packages.markStored(bagId, Storage.storagePath(bagId));
    const asked = catalog.deaccessions.request(bagId, 'carol', 'deposited in error');
    if (!('created' in asked)) throw new Error(JSON.stringify(asked));
    catalog.deaccessions.approve(asked.created.id, 'admin', undefined, copies);
    return bagId;
  };
  /** A remover with a dir replica for each name (its folder kept across starts, as a replica's). */
  const remover = async (replicas: string[] = [], writing: (bagId: string) => boolean = () => false) => {
    const targets = await targetsFor(
      replicas.map((name) => {
        mkdirSync(join(dir, `replica-${name}`), { recursive: true });
        return { name, kind: 'dir' as const, path: join(dir, `replica-${name}`) };
      }),
    );
    await checkTargets(targets);
    const records = new RecordWriter({
      catalog,
      storage,
      contentTypes: ['audio'],
      targets,
      delayMs: 100,
      logger,
    });
    const r = new Remover({
      catalog,
      storage,
      targets,
      logger,
      writeRecords: () => records.flush(),
      writing,
    });
    removers.push(r);
    return r;
  };
  return { dir, catalog, storage, lines, tombstone, remover };
}

t.test(
  'a primary removal killed after its rename is finished, its folders pruned, when start resolves',
  async (t) => {
    const { catalog, storage, tombstone, remover } = await world(t);
    const bagId = tombstone([PRIMARY]);
    // What `deaccession:primary-renamed` leaves: the object out of the root, its layout folders empty.
    const object = storage.objectDir(bagId);
    mkdirSync(dirname(object), { recursive: true });
    const removing = `${storage.stagingDir(bagId)}.removing`;
    mkdirSync(join(removing, 'v1', 'content'), { recursive: true });
    writeFileSync(join(removing, 'v1', 'content', 'a.txt'), 'to be removed\n');

    await (await remover()).start(new AbortController().signal);

    const top = join(storage.storageRoot, object.slice(storage.storageRoot.length + 1).split('/')[0]!);
    t.notOk(existsSync(top), 'no layout folder of it is left in the root');
    t.notOk(existsSync(removing), 'nothing of it is left half deleted in staging/');
    t.same(catalog.deaccessions.removalsOf(bagId), [], 'its removal is done');
  },
);

t.test(
  'removals owed to a replica no longer configured are abandoned at start, with an event and a warning',
  async (t) => {
    const { catalog, lines, tombstone, remover } = await world(t);
    const bagId = tombstone([PRIMARY, 'mirror', 'gone']);
    const first = await remover(['mirror']);
    await first.start(new AbortController().signal);

    t.same(
      catalog.deaccessions.removalsOf(bagId).filter((r) => r.copy !== 'mirror'),
      [],
      'the primary is removed, and the dropped replica is owed nothing',
    );
    t.match(catalog.deaccessions.abandonedOf(bagId), [{ bagId, copy: 'gone', reason: NO_LONGER_CONFIGURED }]);
    const deaccessionEvents = () =>
      [...catalog.events.forPackage(bagId)].filter((e) => e.type === 'deaccession');
    t.match(deaccessionEvents(), [
      { outcome: 'success' },
      { outcome: 'failure', executor: 'preservd', detail: /replica gone is no longer configured/ },
    ]);
    t.ok(
      lines.some((l) => JSON.parse(l).level === 40 && /replica gone is no longer configured/.test(l)),
      'a warning names the replica',
    );
    await first.flush();
    t.same(
      catalog.deaccessions.removalsOf(bagId),
      [],
      'the configured replica is removed: nothing is left to do',
    );
    t.match(
      catalog.deaccessions.abandonedOf(bagId),
      [{ copy: 'gone' }],
      'and the dropped copy stays abandoned',
    );
    await first.stop();

    // A second start changes nothing more; the replica configured again is owed its removal again.
    await (await remover(['mirror'])).start(new AbortController().signal);
    t.equal(deaccessionEvents().length, 2, 'no second event');
    const third = await remover(['mirror', 'gone']);
    await third.start(new AbortController().signal);
    await third.flush();
    t.same(catalog.deaccessions.abandonedOf(bagId), [], 'not abandoned once its replica is back');
    t.match(deaccessionEvents()[2], { outcome: 'success', detail: /replica gone is configured again/ });
    t.same(catalog.deaccessions.removalsOf(bagId), [], 'and removed there');
  },
);

t.test(
  'a dir replica whose folder is not there (not mounted) is down: its removal is not done',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'preservd-remover-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const root = join(dir, 'mirror');
    mkdirSync(root);
    const [target] = await targetsFor([{ name: 'mirror', kind: 'dir', path: root }]);
    await checkTargets([target!]);
    const bagId = randomUUID();
    const object = join(root, Storage.storagePath(bagId));
    mkdirSync(object, { recursive: true });
    writeFileSync(join(object, '0=ocfl_object_1.1'), 'ocfl_object_1.1\n');

    renameSync(root, `${root}-away`);
    await t.rejects(target!.removeObject(objectPrefix(bagId), new AbortController().signal), ReplicaDown);
    renameSync(`${root}-away`, root);
    t.ok(existsSync(object), 'the copy is still there');
    t.same(await target!.removeObject(objectPrefix(bagId), new AbortController().signal), {});
    t.same(
      readdirSync(root).sort(),
      ['0=ocfl_1.1', 'extensions', 'ocfl_layout.json'],
      'and then removed, folders and all',
    );
  },
);

t.test("a package's replicas are removed only once its primary copy is", async (t) => {
  const { catalog, tombstone, remover } = await world(t);
  const bagId = tombstone([PRIMARY, 'mirror']);
  // Being written (a copy or a repair under way) at the primary's turn, no longer at the replica's.
  let asked = 0;
  const r = await remover(['mirror'], () => asked++ === 0);
  await r.flush();
  t.same(
    catalog.deaccessions
      .removalsOf(bagId)
      .map((x) => x.copy)
      .sort(),
    ['mirror', PRIMARY],
    'neither removed in that pass: the replica waits for the primary',
  );
  await r.flush();
  t.same(catalog.deaccessions.removalsOf(bagId), [], 'both in the next');
});
