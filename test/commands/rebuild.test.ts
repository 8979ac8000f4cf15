/**
 * `preservd rebuild --from NAME`, run as the command is run, on storage roots written in the
 * on-disk form of OCFL.md by test/helpers/ocfl-root.ts: every package, file, digest, owner,
 * event, queue item, user (no token) and grant comes back, oldest package first; a damaged object
 * is skipped and named (exit 1); it refuses a catalog in use or not empty and changes nothing;
 * killed (SIGKILL) part-way, the daemon refuses the half-rebuilt catalog and a second run finishes.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { Catalog } from '../../src/catalog/catalog.js';
import { packageObjectPath } from '../../src/ocfl/layout.js';
import { DataLayout } from '../../src/storage/layout.js';
import { cliPath, DAEMON_NODE_OPTIONS, TestDaemon } from '../helpers/daemon.js';
import {
  bagFiles,
  eventsRecordFor,
  expectedFile,
  objectKeys,
  packageRecordFor,
  testRepository,
  writeKeys,
  type TestPackage,
} from '../helpers/ocfl-root.js';
import { node } from '../helpers/node.js';

function scratch(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'preservd-rebuild-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function rebuild(dataDir: string, args: string[], env: Record<string, string> = {}) {
  const config = join(dataDir, '..', 'config.json');
  if (!existsSync(config)) writeFileSync(config, '{}');
  const r = spawnSync(...node([cliPath, 'rebuild', ...args]), {
    env: { ...process.env, PRESERVD_CONFIG: config, PRESERVD_DATA_DIR: dataDir, ...env },
    encoding: 'utf8',
    timeout: 120_000,
  });
  return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
}

/** What the catalog holds about one package, compared with what the root says. */
async function checkPackage(t: Test, catalog: Catalog, p: TestPackage): Promise<void> {
  const pkg = catalog.packages.get(p.bagId)!;
  const record = packageRecordFor(p);
  t.match(
    pkg,
    {
      bagId: p.bagId,
      externalId: p.externalId,
      contentType: p.contentType,
      user: p.owner,
      stored: true,
      createdAt: Date.parse(record.created_at),
      updatedAt: Date.parse(record.updated_at),
    },
    `package ${p.externalId}`,
  );
  const files = [...bagFiles(p.payload)].map(([path, bytes]) => {
    const f = expectedFile(path, bytes);
    return path.startsWith('data/') ? f : { ...f, digests: { sha256: f.digests.sha256 } };
  });
  t.same(
    catalog.files.list(p.bagId),
    files.sort((a, b) => (a.path < b.path ? -1 : 1)),
    'files, sizes, digests, crc32',
  );
  t.same(
    [...catalog.events.forPackage(p.bagId)].map((e) => ({ ...e, date: new Date(e.date).toISOString() })),
    eventsRecordFor(p).events.map((e) => ({ ...e, bagId: p.bagId })),
    'events with their ids and dates',
  );
  const version = record.versions[0]!;
  t.same(
    catalog.queue.forPackage(p.bagId).map((i) => [i.id, i.status, i.user, i.createdAt]),
    [[version.queue_item.id, 'DONE', p.owner, Date.parse(version.queue_item.created_at)]],
    'the queue item that produced the version',
  );
}

t.test('a rebuild from the primary brings back every package, user and grant', async (t) => {
  const dir = scratch(t);
  const dataDir = join(dir, 'data');
  const { repository, packages, keys } = testRepository(6);
  packages[1]!.extraEvents = [
    {
      id: 18,
      type: 'fixity check',
      outcome: 'failure',
      executor: 'admin',
      detail: 'a.txt differs',
      date: '2024-03-02T00:00:00.123Z',
    },
    {
      id: 19,
      type: 'fixity check',
      outcome: 'success',
      executor: 'admin',
      detail: null,
      date: '2024-03-03T00:00:00.456Z',
    },
  ];
  for (const [k, v] of objectKeys(packages[1]!)) keys.set(k, v);
  writeKeys(join(dataDir, 'storage'), keys);

  const r = rebuild(dataDir, ['--from', 'primary']);
  t.equal(r.code, 0, r.stderr);
  t.match(
    r.stdout,
    /^rebuilt 6 packages from primary \(0 by an earlier run\), 0 skipped, 3 users, 1 grants, \d+ bytes read and verified/,
  );
  t.equal(r.stdout.trim().split('\n').length, 1, 'one summary line');

  const catalog = Catalog.open(new DataLayout(dataDir), { readOnly: true });
  t.teardown(() => catalog.close());
  t.same(
    [...catalog.packages.list()].map((p) => p.externalId),
    packages.map((p) => p.externalId),
    'packages listed oldest first, as they were',
  );
  for (const p of packages) await checkPackage(t, catalog, p);
  t.match(catalog.fixity.get(packages[1]!.bagId), {
    checkedAt: Date.parse('2024-03-03T00:00:00.456Z'),
    outcome: 'success',
  });
  t.same(
    catalog.users.list().map((u) => [u.name, u.admin, new Date(u.createdAt).toISOString(), u.liveTokens]),
    repository.users.map((u) => [u.name, u.admin, u.created_at, 0]),
    'users, with no token',
  );
  t.same(
    catalog.grants.list().map((g) => [g.user, g.role, g.scope]),
    [['bob', 'viewer', 'audio']],
  );
  t.equal(catalog.records.repositoryId(), repository.repository, "the root's identity");
  t.equal(catalog.records.rebuild(), undefined, 'no rebuild left in progress');
  t.equal(catalog.records.count(), 0, 'nothing to write back to storage');
  await catalog.close();

  // The daemon serves it: a new token for alice, her package and its events as the API shows them.
  const d = await TestDaemon.start(t, { dataDir, keepDataDir: true });
  const issued = d.cli(['token', 'issue', 'alice']);
  t.equal(issued.code, 0, issued.stderr);
  const token = issued.stdout.trim().split('\n').at(-1)!;
  const mine = packages[1]!;
  const shown = await d.request('GET', `/v1/packages/${mine.bagId}`, { token });
  t.equal(shown.status, 200);
  t.match(shown.json, {
    external_id: mine.externalId,
    user: 'alice',
    stored: true,
    files: ['file-1.txt', 'sub/two.bin'],
  });
  const events = await d.request('GET', `/v1/packages/${mine.bagId}/events`, { token });
  t.same(
    events.json.map((e: { id: number; date: string }) => [e.id, e.date]),
    eventsRecordFor(mine).events.map((e) => [e.id, e.date]),
  );
});

t.test('a damaged object is skipped and named; the rest are rebuilt', async (t) => {
  const dir = scratch(t);
  const { packages, keys } = testRepository(3);
  const damaged = packages[1]!;
  const key = `${packageObjectPath(damaged.bagId)}/v1/content/data/file-1.txt`;
  const bytes = Buffer.from(keys.get(key)!);
  bytes[0] = bytes[0]! ^ 1; // same size, other bytes
  keys.set(key, bytes);
  for (const name of ['verified', 'unverified']) writeKeys(join(dir, name, 'storage'), keys);

  const r = rebuild(join(dir, 'verified'), ['--from', 'primary']);
  t.equal(r.code, 1, 'exit 1: objects skipped');
  t.match(r.stdout, /rebuilt 2 packages from primary .*, 1 skipped/);
  t.match(r.stderr, `skipped ${packageObjectPath(damaged.bagId)}: v1/content/data/file-1.txt: sha256 is `);
  const catalog = Catalog.open(new DataLayout(join(dir, 'verified')), { readOnly: true });
  t.equal(catalog.packages.get(damaged.bagId), undefined, 'nothing of the damaged object');
  t.equal(catalog.packages.count(), 2);
  await catalog.close();

  const quick = rebuild(join(dir, 'unverified'), ['--from', 'primary', '--no-verify']);
  t.equal(quick.code, 0, `--no-verify takes the inventory's word: ${quick.stderr}`);
  t.match(quick.stdout, /rebuilt 3 packages .* bytes read;/);
});

t.test('it refuses, changing nothing: unknown root, no root, a catalog in use or not empty', async (t) => {
  const dir = scratch(t);
  const dataDir = join(dir, 'data');
  t.match(rebuild(dataDir, []), { code: 2, stderr: /usage: preservd rebuild --from NAME/ });
  t.match(rebuild(dataDir, ['--from', 'ceph']), { code: 2, stderr: /no storage root named "ceph"/ });
  t.match(rebuild(dataDir, ['--from', 'primary']), { code: 2, stderr: /is not an OCFL storage root/ });

  const { keys } = testRepository(2);
  const d = await TestDaemon.start(t, { dataDir, keepDataDir: true });
  writeKeys(join(dataDir, 'storage'), keys);
  const digest = () =>
    createHash('sha256')
      .update(readFileSync(join(dataDir, 'catalog', 'data.mdb')))
      .digest('hex');
  const running = rebuild(dataDir, ['--from', 'primary']);
  t.equal(running.code, 2);
  t.match(
    running.stderr,
    /rebuild refused, nothing changed: the catalog is open in another process \(pid \d+\): stop the daemon first/,
  );
  await d.stop();
  const before = digest();
  const full = rebuild(dataDir, ['--from', 'primary']);
  t.equal(full.code, 2);
  t.match(full.stderr, /the catalog in .* is not empty \(0 packages, 1 users\)/);
  t.equal(digest(), before, 'the catalog is unchanged');
});

t.test('killed part-way, the daemon refuses the half catalog and a second run finishes it', async (t) => {
  const dir = scratch(t);
  const dataDir = join(dir, 'data');
  const { packages, keys } = testRepository(12);
  writeKeys(join(dataDir, 'storage'), keys);
  const killed = rebuild(dataDir, ['--from', 'primary'], { PRESERVD_FAILPOINT: 'rebuild:after-object@5' });
  t.equal(killed.signal, 'SIGKILL', 'killed with SIGKILL after the fifth object');

  let catalog = Catalog.open(new DataLayout(dataDir), { readOnly: true });
  t.equal(catalog.packages.count(), 5, 'five done');
  t.match(catalog.records.rebuild(), { from: 'primary' });
  await catalog.close();
  const serve = spawnSync(...node([...DAEMON_NODE_OPTIONS, cliPath, 'serve']), {
    env: {
      ...process.env,
      PRESERVD_CONFIG: join(dir, 'config.json'),
      PRESERVD_DATA_DIR: dataDir,
      PRESERVD_HTTP_PORT: '0',
    },
    encoding: 'utf8',
    timeout: 60_000,
  });
  t.equal(serve.status, 1, 'the daemon does not start');
  t.match(
    serve.stderr,
    /the catalog is half rebuilt \(from primary\); run "preservd rebuild --from primary" again/,
  );
  writeFileSync(
    join(dir, 'config.json'),
    JSON.stringify({ replicas: [{ name: 'mirror', kind: 'dir', path: join(dir, 'mirror') }] }),
  );
  t.match(rebuild(dataDir, ['--from', 'mirror']), {
    code: 2,
    stderr:
      /rebuild refused, nothing changed: the catalog is half rebuilt from primary: finish it with --from primary/,
  });

  const again = rebuild(dataDir, ['--from', 'primary']);
  t.equal(again.code, 0, again.stderr);
  t.match(again.stdout, /rebuilt 12 packages from primary \(5 by an earlier run\), 0 skipped/);
  catalog = Catalog.open(new DataLayout(dataDir), { readOnly: true });
  t.teardown(() => catalog.close());
  t.same(
    [...catalog.packages.list()].map((p) => p.externalId),
    packages.map((p) => p.externalId),
  );
  for (const p of packages) await checkPackage(t, catalog, p);
  t.equal(catalog.records.rebuild(), undefined);
});
