/** The catalog's stores and their all-or-nothing rules, on a real LMDB environment. */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { Catalog, SCHEMA_VERSION } from '../../src/catalog/catalog.js';
import { DataLayout } from '../../src/storage/layout.js';
import { tokenDigest } from '../../src/catalog/users.js';

function openCatalog(t: { teardown(fn: () => unknown): void }): { catalog: Catalog; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'preservd-catalog-'));
  const catalog = Catalog.open(new DataLayout(dir));
  t.teardown(async () => {
    await catalog.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { catalog, dir };
}

const newPackage = (user = 'alice', externalId = `ext-${randomUUID()}`) => ({
  bagId: randomUUID(),
  externalId,
  contentType: 'audio',
  user,
  capability: randomUUID().replaceAll('-', ''),
});

t.test('users and tokens: digests only, revocation, validation', async (t) => {
  const { catalog, dir } = openCatalog(t);
  catalog.users.add('alice', false);
  t.throws(() => catalog.users.add('alice', true), /already exists/);
  t.throws(() => catalog.users.add('Alice Smith', false), /not a valid user name/);
  const { id, secret } = catalog.users.issueToken('alice');
  t.ok(Buffer.from(secret, 'base64url').length >= 32, '256 random bits');
  t.equal(catalog.users.authenticate(secret)?.name, 'alice');
  t.same(
    catalog.users.list().map((u) => [u.name, u.liveTokens]),
    [['alice', 1]],
  );
  const stored = readFileSync(join(dir, 'catalog', 'data.mdb'));
  t.ok(stored.includes(tokenDigest(secret)), 'its digest is stored');
  t.notOk(stored.includes(secret), 'the secret itself is stored nowhere in the catalog');
  t.equal(catalog.users.authenticate(secret + 'x'), undefined);
  t.equal(catalog.users.revokeToken(id), true);
  t.equal(catalog.users.authenticate(secret), undefined, 'revoked');
  t.equal(catalog.users.revokeToken(id), false, 'only once');
  t.equal(catalog.users.revokeToken('nonsense'), false);
  t.throws(() => catalog.users.issueToken('nobody'), /no user/);
  t.same(
    catalog.users.list().map((u) => [u.name, u.liveTokens]),
    [['alice', 0]],
  );
});

t.test(
  'the auth generation changes with every write to users, tokens and grants, and only then',
  async (t) => {
    const { catalog, dir } = openCatalog(t);
    const seen = [catalog.authGeneration()];
    const changes = (what: string, fn: () => unknown) => {
      fn();
      const now = catalog.authGeneration();
      t.not(now, seen.at(-1), `${what} changes it`);
      seen.push(now);
    };
    const keeps = (what: string, fn: () => unknown) => {
      t.throws(fn, `${what} is refused`);
      t.equal(catalog.authGeneration(), seen.at(-1), `${what} leaves it`);
    };
    changes('a user added', () => catalog.users.add('alice', false));
    keeps('a user added twice', () => catalog.users.add('alice', false));
    let id = '';
    changes('a token issued', () => (id = catalog.users.issueToken('alice').id));
    keeps('a token for nobody', () => catalog.users.issueToken('nobody'));
    changes('a token revoked', () => catalog.users.revokeToken(id));
    t.equal(catalog.users.revokeToken(id), false);
    t.equal(catalog.authGeneration(), seen.at(-1), 'a token revoked twice leaves it');
    changes('a grant given', () => catalog.grants.grant('alice', 'viewer', 'audio', ['audio']));
    keeps('a grant refused', () => catalog.grants.grant('alice', 'owner', 'audio', ['audio']));
    changes('a grant taken away', () => catalog.grants.revoke('alice', 'viewer', 'audio'));
    keeps('a grant not held taken away', () => catalog.grants.revoke('alice', 'viewer', 'audio'));
    catalog.packages.create(newPackage());
    t.equal(catalog.authGeneration(), seen.at(-1), 'other writes leave it');
    // Another process (the CLI beside the daemon) sees the same number.
    const other = Catalog.open(new DataLayout(dir), { readOnly: true });
    t.equal(other.authGeneration(), seen.at(-1));
    await other.close();
  },
);

t.test('packages: bag_id and external_id are unique; lookups by either', async (t) => {
  const { catalog } = openCatalog(t);
  const a = newPackage('alice', 'shared-ext');
  const created = catalog.packages.create({ ...a, bagId: a.bagId.toUpperCase() });
  t.ok('created' in created);
  t.equal(catalog.packages.get(a.bagId)?.bagId, a.bagId, 'stored lower-case');
  t.equal(catalog.packages.find('shared-ext')?.bagId, a.bagId);
  t.equal(catalog.packages.find(a.bagId.toUpperCase())?.bagId, a.bagId);
  t.equal(catalog.packages.byUploadCapability(a.capability)?.bagId, a.bagId);
  const sameId = catalog.packages.create({ ...newPackage('bob'), bagId: a.bagId });
  t.ok('existing' in sameId && sameId.existing.bagId === a.bagId);
  const sameExt = catalog.packages.create(newPackage('bob', 'shared-ext'));
  t.ok('existing' in sameExt);
  t.equal(catalog.packages.count(), 1, 'nothing created for duplicates');
  const b = newPackage('bob');
  catalog.packages.create(b);
  t.same(
    [...catalog.packages.list()].map((p) => p.bagId),
    [a.bagId, b.bagId],
    'oldest first',
  );
  t.same(
    [...catalog.packages.list({ scope: { kind: 'some', users: ['bob'], contentTypes: [] } })].map(
      (p) => p.bagId,
    ),
    [b.bagId],
  );
});

t.test('files and stored state', async (t) => {
  const { catalog } = openCatalog(t);
  const p = newPackage();
  catalog.packages.create(p);
  const file = (path: string, size: number) => ({
    path,
    size,
    crc32: '00000000',
    digests: { sha256: 'ab'.repeat(32) },
  });
  catalog.files.put(p.bagId, [
    file('bagit.txt', 10),
    file('data/z.txt', 1),
    file('data/a/b.txt', 2),
    file('manifest-sha256.txt', 5),
  ]);
  t.same(
    JSON.parse(catalog.files.payloadListJson(p.bagId).toString('utf8')),
    ['a/b.txt', 'z.txt'],
    'payload paths relative to data/, sorted',
  );
  t.equal(catalog.files.bytes(p.bagId), 18);
  t.equal(catalog.packages.get(p.bagId)?.stored, false);
  const stored = catalog.packages.markStored(p.bagId, 'ab/cd/ef/x');
  t.equal(stored.stored, true);
  t.equal(stored.storagePath, 'ab/cd/ef/x');
  catalog.files.put(p.bagId, [file('data/only.txt', 3)]);
  t.same(
    catalog.files.list(p.bagId).map((f) => f.path),
    ['data/only.txt'],
    'files.put replaces',
  );
});

t.test('queue: PENDING or DONE blocks a new attempt, FAILED does not', async (t) => {
  const { catalog } = openCatalog(t);
  const p = newPackage();
  catalog.packages.create(p);
  const first = catalog.queue.enqueue(p.bagId, 'alice');
  t.ok('created' in first);
  const id = 'created' in first ? first.created.id : 0;
  const again = catalog.queue.enqueue(p.bagId, 'alice');
  t.ok('existing' in again && again.existing.id === id, 'PENDING blocks');
  catalog.queue.finish(id, { status: 'FAILED', errors: [{ code: 'x', message: 'y', severity: 'error' }] });
  const retry = catalog.queue.enqueue(p.bagId, 'alice');
  t.ok('created' in retry, 'FAILED does not block');
  const retryId = 'created' in retry ? retry.created.id : 0;
  t.ok(retryId > id, 'ids grow');
  t.equal(catalog.queue.advance(retryId, 'staged').stage, 'staged');
  catalog.queue.finish(retryId, { status: 'DONE' });
  t.ok('existing' in catalog.queue.enqueue(p.bagId, 'alice'), 'DONE blocks');
  t.same(
    catalog.queue.forPackage(p.bagId).map((i) => i.status),
    ['FAILED', 'DONE'],
  );
  t.equal(catalog.queue.depth(), 0);
});

t.test('transactions are all or nothing', async (t) => {
  const { catalog } = openCatalog(t);
  const p = newPackage();
  t.throws(() =>
    catalog.transaction(() => {
      catalog.packages.create(p);
      catalog.events.add({
        bagId: p.bagId,
        type: 'transfer',
        executor: 'alice',
        outcome: 'success',
        detail: null,
      });
      throw new Error('crash in the middle');
    }),
  );
  t.equal(catalog.packages.get(p.bagId), undefined, 'the package was rolled back');
  t.same(catalog.events.everyRecord(0, 10), [], 'and the event');
});

t.test('a nested transaction joins the outer one, and its failure fails the whole', async (t) => {
  const { catalog } = openCatalog(t);
  const kept = newPackage();
  const both = catalog.transaction(() => {
    catalog.packages.create(kept);
    return catalog.transaction(() =>
      catalog.events.add({
        bagId: kept.bagId,
        type: 'transfer',
        executor: 'alice',
        outcome: 'success',
        detail: null,
      }),
    );
  });
  t.equal(
    catalog.events.latestOf(kept.bagId, 'transfer')?.id,
    both.id,
    'a nested write commits with the outer transaction',
  );

  const p = newPackage();
  t.throws(
    () =>
      catalog.transaction(() => {
        catalog.packages.create(p);
        try {
          catalog.transaction(() => {
            catalog.events.add({
              bagId: p.bagId,
              type: 'transfer',
              executor: 'alice',
              outcome: 'success',
              detail: null,
            });
            throw new Error('inner failure');
          });
        } catch {
          // swallowed by the outer code: the transaction must still not commit half of it
        }
        catalog.files.put(p.bagId, []);
      }),
    /inner failure/,
  );
  t.equal(catalog.packages.get(p.bagId), undefined, 'the outer writes were rolled back');
  t.same([...catalog.events.forPackage(p.bagId)], [], 'and the nested ones');

  const after = newPackage();
  catalog.transaction(() => catalog.packages.create(after));
  t.ok(catalog.packages.get(after.bagId), 'the next transaction starts clean');
});

t.test('audits: one in progress at a time; each package recorded once', async (t) => {
  const { catalog } = openCatalog(t);
  const packages = new Map([
    ['b1', 10],
    ['b2', 20],
    ['b3', 30],
  ]);
  const started = catalog.audits.start('admin', packages);
  t.ok('created' in started);
  const audit = 'created' in started ? started.created : undefined!;
  t.equal(audit.totalBytes, 60);
  t.ok('existing' in catalog.audits.start('admin', packages), 'a second start returns the running one');
  const event = (bagId: string, outcome: 'success' | 'failure') => () =>
    catalog.events.add({
      bagId,
      type: 'fixity check',
      executor: 'admin',
      outcome,
      detail: outcome === 'failure' ? 'bad' : null,
      auditId: audit.id,
    });
  t.ok(catalog.audits.record(audit.id, 'b1', event('b1', 'success')));
  t.equal(catalog.audits.record(audit.id, 'b1', event('b1', 'success')), undefined, 'never counted twice');
  t.same(
    catalog.audits.remaining(audit.id).map((r) => r.bagId),
    ['b2', 'b3'],
  );
  catalog.audits.record(audit.id, 'b2', event('b2', 'failure'));
  const last = catalog.audits.record(audit.id, 'b3', event('b3', 'success'))!;
  t.same([last.audit.successes, last.audit.failures, last.audit.bytes], [2, 1, 60]);
  t.type(last.audit.finishedAt, 'number', 'finished when every package is recorded');
  t.equal([...catalog.events.forAudit(audit.id)].length, 3, 'exactly one event per package');
  t.equal(catalog.audits.inProgress(), undefined);
  const empty = catalog.audits.start('admin', new Map());
  t.ok(
    'created' in empty && empty.created.finishedAt !== undefined,
    'an audit of nothing is finished at once',
  );

  const third = catalog.audits.start('admin', packages);
  const thirdId = 'created' in third ? third.created.id : -1;
  t.equal(catalog.audits.latest()?.id, thirdId, 'latest: the newest audit');
  t.equal(catalog.audits.inProgress()?.id, thirdId, 'in progress: the newest, unfinished');
  t.equal(
    catalog.audits.latestFinished()?.id,
    'created' in empty ? empty.created.id : -1,
    'latest finished: the one before it',
  );
});

t.test('the schema version is recorded, and a newer catalog is refused', async (t) => {
  const { catalog, dir } = openCatalog(t);
  t.equal(catalog.schemaVersion, SCHEMA_VERSION);
  const { open } = await import('lmdb');
  await catalog.close();
  const raw = open({ path: join(dir, 'catalog') });
  const meta = raw.openDB({ name: 'meta' });
  await meta.put('schemaVersion', SCHEMA_VERSION + 1);
  await raw.close();
  t.throws(() => Catalog.open(new DataLayout(dir)), /newer preservd/);
});

t.test("a stored package's payload list is kept as the JSON the API sends", async (t) => {
  const { catalog } = openCatalog(t);
  const pkg = newPackage();
  catalog.packages.create(pkg);
  const record = (path: string) => ({
    path,
    size: 1,
    crc32: '00000000',
    digests: { sha256: '0'.repeat(64) },
  });
  catalog.files.put(
    pkg.bagId,
    ['bagit.txt', 'data/z.txt', 'data/a/"q".txt', 'data/é.txt', 'manifest-sha256.txt'].map(record),
  );
  t.equal(
    catalog.files.payloadListJson(pkg.bagId).toString('utf8'),
    '["a/\\"q\\".txt","z.txt","é.txt"]',
    'payload only, sorted, escaped',
  );
  const payload = [...catalog.files.view(pkg.bagId)].map((f) => f.path).filter((p) => p.startsWith('data/'));
  t.same(
    JSON.parse(catalog.files.payloadListJson(pkg.bagId).toString('utf8')),
    payload.map((p) => p.slice('data/'.length)),
  );
  catalog.files.put(pkg.bagId, ['bagit.txt', 'data/only.txt'].map(record));
  t.equal(
    catalog.files.payloadListJson(pkg.bagId).toString('utf8'),
    '["only.txt"]',
    'written again with the files',
  );
  catalog.packages.markStored(pkg.bagId, 'x/y/z');
  t.same(
    catalog.fixity.get(pkg.bagId),
    { verifiedAt: catalog.packages.get(pkg.bagId)!.updatedAt },
    'scheduled for audits from its ingest',
  );
});
