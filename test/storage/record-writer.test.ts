/**
 * The preservd record in storage follows the catalog: a stored package's `logs/` and the root's
 * `preservd-repository.json` are written from the committed catalog (an event rolled back never
 * reaches storage; tokens never do), fixity checks kept as the latest plus every failure, nothing
 * temporary under the root; and the set of records behind survives a kill -9 of the real daemon,
 * which writes them when it starts again, as it writes them at a graceful stop.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import t from 'tap';
import { Catalog } from '../../src/catalog/catalog.js';
import { packageObjectPath } from '../../src/ocfl/layout.js';
import { EVENTS_RECORD, LOGS, PACKAGE_RECORD, REPOSITORY_RECORD } from '../../src/ocfl/record.js';
import { DataLayout } from '../../src/storage/layout.js';
import { RecordWriter } from '../../src/storage/record-writer.js';
import { prepareStorageRoot } from '../../src/storage/ocfl-root.js';
import { Storage } from '../../src/storage/storage.js';
import { TestDaemon } from '../helpers/daemon.js';
import { objectKeys, writeKeys } from '../helpers/ocfl-root.js';

/** A data directory whose catalog holds a stored package (deposited by alice) and its OCFL object. */
async function repositoryWithPackage(
  dir: string,
): Promise<{ layout: DataLayout; bagId: string; adminToken: string }> {
  const layout = new DataLayout(join(dir, 'data'));
  await layout.ensure();
  await prepareStorageRoot(layout);
  const catalog = Catalog.open(layout);
  catalog.users.add('admin', true);
  const adminToken = catalog.users.issueToken('admin').secret;
  writeFileSync(layout.adminToken, `${adminToken}\n`, { mode: 0o600 });
  catalog.users.add('alice', false);
  const bagId = randomUUID();
  catalog.packages.create({
    bagId,
    externalId: 'ext-1',
    contentType: 'audio',
    user: 'alice',
    capability: 'c'.repeat(43),
  });
  const item = catalog.queue.enqueue(bagId, 'alice');
  if (!('created' in item)) throw new Error('no queue item');
  catalog.files.put(bagId, [{ path: 'data/a.txt', size: 2, crc32: '00000000', digests: { sha256: 'ab' } }]);
  catalog.transaction(() => {
    catalog.packages.markStored(bagId, packageObjectPath(bagId));
    catalog.events.add({ bagId, type: 'ingestion', executor: 'alice', outcome: 'success', detail: 'stored' });
    catalog.queue.finish(item.created.id, { status: 'DONE' });
  });
  await catalog.close();
  const keys = objectKeys({
    bagId,
    externalId: 'ext-1',
    contentType: 'audio',
    owner: 'alice',
    createdAt: Date.now(),
    payload: { 'a.txt': 'a\n' },
    queueItemId: 1,
    firstEventId: 1,
  });
  for (const key of keys.keys()) if (key.includes(`/${LOGS}/`)) keys.delete(key); // the writer's to write
  writeKeys(layout.storage, keys);
  return { layout, bagId, adminToken };
}

const readJson = (path: string) => JSON.parse(readFileSync(path, 'utf8'));

t.test('the writer writes what the catalog committed, and only that', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'preservd-records-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const { layout, bagId } = await repositoryWithPackage(dir);
  const catalog = Catalog.open(layout);
  t.teardown(() => catalog.close());
  const storage = new Storage(layout);
  const logs = join(storage.objectDir(bagId), LOGS);
  catalog.grants.grant('alice', 'viewer', 'audio', ['audio', 'video']);
  const check = (outcome: 'success' | 'failure', detail: string | null) =>
    catalog.events.add({ bagId, type: 'fixity check', executor: 'admin', outcome, detail });
  check('success', null);
  check('failure', 'data/a.txt differs');
  check('success', null);
  const latest = check('success', 'the latest');
  t.throws(() =>
    catalog.transaction(() => {
      catalog.events.add({
        bagId,
        type: 'recovery',
        executor: 'admin',
        outcome: 'success',
        detail: 'rolled back',
      });
      throw new Error('the change fails');
    }),
  );
  const writer = new RecordWriter({
    catalog,
    storage,
    contentTypes: ['audio', 'video'],
    delayMs: 60_000,
    logger: pino({ level: 'silent' }),
  });
  await writer.flush();

  const events = readJson(join(logs, EVENTS_RECORD));
  t.same(
    events.events.map((e: { type: string; outcome: string; detail: string | null }) => [
      e.type,
      e.outcome,
      e.detail,
    ]),
    [
      ['ingestion', 'success', 'stored'],
      ['fixity check', 'failure', 'data/a.txt differs'],
      ['fixity check', 'success', 'the latest'],
    ],
    'in order; fixity checks: every failure and the latest; nothing rolled back',
  );
  t.equal(events.events.at(-1).date, new Date(latest.date).toISOString(), 'dates with milliseconds');
  const record = readJson(join(logs, PACKAGE_RECORD));
  t.match(record, { bag_id: bagId, external_id: 'ext-1', content_type: 'audio', owner: 'alice' });
  t.match(record.versions, [{ version: 1, queue_item: { id: 1, user: 'alice' } }]);
  const repository = readJson(join(layout.storage, REPOSITORY_RECORD));
  t.same(
    repository.users.map((u: { name: string; admin: boolean }) => [u.name, u.admin]),
    [
      ['admin', true],
      ['alice', false],
    ],
  );
  t.same(
    repository.grants.map((g: { user: string; role: string }) => [g.user, g.role]),
    [['alice', 'viewer']],
  );
  t.same(repository.content_types, ['audio', 'video']);
  t.equal(repository.repository, catalog.records.repositoryId());
  t.notMatch(
    readFileSync(join(layout.storage, REPOSITORY_RECORD), 'utf8'),
    /token|digest|session/i,
    'no secret',
  );
  t.equal(catalog.records.count(), 0, 'nothing behind');
  t.same(readdirSync(logs).sort(), [EVENTS_RECORD, PACKAGE_RECORD], 'nothing temporary beside them');
  t.same(readdirSync(layout.staging), [], 'nor in staging');
});

t.test(
  'records behind survive a kill -9 and are written at the next start, and at a graceful stop',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'preservd-records-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const { layout, bagId, adminToken } = await repositoryWithPackage(dir);
    const logs = join(layout.storage, packageObjectPath(bagId), LOGS);
    const types = () => readJson(join(logs, EVENTS_RECORD)).events.map((e: { type: string }) => e.type);
    const granted = () =>
      readJson(join(layout.storage, REPOSITORY_RECORD)).grants.map((g: { user: string }) => g.user);
    // No timer fires in this test: what is written, is written at a start or at a stop.
    const config = { storage: { recordDelayMs: 3_600_000 } };

    let d = await TestDaemon.start(t, { dataDir: layout.dataDir, keepDataDir: true, config });
    await t.resolves(
      waitFor(() => existsSync(join(logs, EVENTS_RECORD))),
      'written at the start',
    );
    t.same(types(), ['ingestion']);
    const audit = await d.request('POST', '/v1/audits', { token: adminToken });
    t.equal(audit.status, 201, audit.text);
    await d.waitForAudit(audit.json.id);
    t.equal(d.cli(['grant', 'alice', 'viewer', 'audio']).code, 0);
    await d.kill9();

    t.same(types(), ['ingestion'], 'the audit is not in storage yet');
    t.same(granted(), [], 'nor the grant');
    const catalog = Catalog.open(layout, { readOnly: true });
    t.same(
      catalog.records.pending(10).map((p) => p.key),
      [{ kind: 'repository' }, { kind: 'package', bagId }],
      'both are still marked behind in the catalog',
    );
    await catalog.close();

    d = await TestDaemon.start(t, { dataDir: layout.dataDir, keepDataDir: true, config });
    await t.resolves(
      waitFor(() => types().includes('fixity check') && granted().includes('alice')),
      'written at the restart',
    );
    t.equal(d.cli(['grant', 'alice', 'viewer', 'video']).code, 0);
    t.equal(await d.stop(), 0);
    t.same(granted(), ['alice', 'alice'], 'written at the graceful stop');
  },
);

async function waitFor(condition: () => boolean, ms = 60_000): Promise<void> {
  for (const end = Date.now() + ms; !condition();) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 100));
  }
}
